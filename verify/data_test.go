// Measurement of the verifier on the project's shared datasets, read in
// place from ../shared/data through rlvr/internal/shareddata (skipped when
// the data is missing, failing under CI=true). Each test logs a table row
//
//	| dataset | gold checks | verified | perturbed checks | false accepts | notes
//
// and fails below the targets. The measured table, with what the checks
// are, is in the package documentation (doc.go), "Measured rates":
//
//	gsm8k test/train    100.00% verified, 0.00% false accepts
//	math500             100.00% (boxed vs answer), 100.00% rewritten, 0.00%
//	aime24, amc23       100.00%, 0.00%
//	mathqa              100.00%, 0.00%
//	strategyqa dev/train 100.00%, 0.00%
package verify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"rlvr/internal/shareddata"
)

// tally counts the gold checks and the perturbation checks of a dataset.
type tally struct {
	name             string
	gold, goldOK     int
	pert, falseAcc   int
	info             string // an informational rate, not a target
	goldMiss, accept []string
}

func (c *tally) checkGold(ok bool, what string) {
	c.gold++
	if ok {
		c.goldOK++
	} else if len(c.goldMiss) < 20 {
		c.goldMiss = append(c.goldMiss, what)
	}
}

func (c *tally) checkPert(accepted bool, what string) {
	c.pert++
	if accepted {
		c.falseAcc++
		if len(c.accept) < 20 {
			c.accept = append(c.accept, what)
		}
	}
}

func (c *tally) goldRate() float64 { return pct(c.goldOK, c.gold) }
func (c *tally) accRate() float64  { return pct(c.falseAcc, c.pert) }

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func (c *tally) report(t *testing.T) {
	t.Helper()
	t.Logf("| %-18s | %6d | %7.2f%% | %6d | %6.2f%% | %s", c.name, c.gold, c.goldRate(), c.pert, c.accRate(), c.info)
	for _, m := range c.goldMiss {
		t.Logf("  %s gold miss: %s", c.name, m)
	}
	for _, m := range c.accept {
		t.Logf("  %s false accept: %s", c.name, m)
	}
}

// readJSONL decodes every line of a JSONL file into a map.
func readJSONL(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// str returns a JSON field as a string: a JSON string's value, or the raw
// text of a number (so 27.0 stays "27.0").
func str(t *testing.T, m map[string]json.RawMessage, key string) string {
	t.Helper()
	raw, ok := m[key]
	if !ok {
		t.Fatalf("missing field %q", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// withCommas writes an integer with thousands separators.
func withCommas(n *big.Int) string {
	s := new(big.Int).Abs(n).String()
	var b strings.Builder
	if n.Sign() < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// intPerturbations returns values really different from n.
func intPerturbations(n *big.Int) []*big.Int {
	one := big.NewInt(1)
	out := []*big.Int{new(big.Int).Add(n, one), new(big.Int).Sub(n, one)}
	if n.Sign() != 0 {
		out = append(out, new(big.Int).Mul(n, big.NewInt(2)), new(big.Int).Mul(n, big.NewInt(10)), new(big.Int).Neg(n))
	}
	return out
}

func TestDatasetGSM8K(t *testing.T) {
	for _, file := range []string{"gsm8k/test.jsonl", "gsm8k/train.jsonl"} {
		t.Run(file, func(t *testing.T) {
			c := gsm8k(t, shareddata.Path(t, file))
			c.name = file
			c.report(t)
			if c.goldRate() != 100 {
				t.Errorf("%s: gold verified %.2f%%, want 100%%", file, c.goldRate())
			}
			if c.falseAcc != 0 {
				t.Errorf("%s: %d false accepts, want 0", file, c.falseAcc)
			}
		})
	}
}

func gsm8k(t *testing.T, path string) *tally {
	c := &tally{}
	lastNum, lastN := 0, 0
	for _, m := range readJSONL(t, path) {
		sol := str(t, m, "answer")
		i := strings.LastIndex(sol, "####")
		if i < 0 {
			t.Fatalf("no #### in %q", sol)
		}
		goldRaw := strings.TrimSpace(sol[i+4:])
		gold := strings.ReplaceAll(goldRaw, ",", "")
		body := strings.TrimSpace(sol[:i])
		n, ok := new(big.Int).SetString(gold, 10)
		if !ok {
			t.Fatalf("gold %q is not an integer", gold)
		}

		// (a) The dataset's own solution, and the same answer written with the
		// other extraction rules, verify against the gold number.
		a, rule := Extract(sol)
		c.checkGold(rule == RuleHashes && Equal(a, gold), fmt.Sprintf("hashes %q %v vs %q", a, rule, gold))
		r, ok := Score(sol, gold, KindMath)
		c.checkGold(ok && r == 1, "score "+gold)
		r, ok = Score(sol, sol, KindMath) // gold given as the reference solution
		c.checkGold(ok && r == 1, "score-solution "+gold)
		for _, v := range []struct {
			text string
			rule Rule
		}{
			{body + "\nThe final answer is $\\boxed{" + goldRaw + "}$.", RuleBoxed},
			{body + "\nThe answer is " + goldRaw + ".", RuleAnswerPhrase},
			{body + "\nAnswer: $" + goldRaw + "$", RuleAnswerPhrase},
			{body + "\nSo the total is " + goldRaw + ".", RuleLastNumber},
		} {
			if _, r := ExtractWith(body, ExtractOptions{}); r != RuleNone && v.rule == RuleLastNumber {
				continue // the body has an answer phrase of its own, which takes priority
			}
			a, rule := Extract(v.text)
			c.checkGold(rule == v.rule && Equal(a, gold), fmt.Sprintf("%v: %q vs %q", v.rule, a, gold))
		}
		// Informational: does the last number of the solution's body carry the answer?
		if a, rule := Extract(body); rule == RuleLastNumber {
			lastN++
			if Equal(a, gold) {
				lastNum++
			}
		}

		// (b) Perturbed answers do not verify.
		for _, p := range intPerturbations(n) {
			for _, s := range []string{p.String(), withCommas(p)} {
				c.checkPert(Equal(s, gold), s+" vs "+gold)
				r, _ := Score(body+"\n#### "+s, gold, KindMath)
				c.checkPert(r != 0, "solution #### "+s+" vs "+gold)
			}
		}
	}
	c.info = fmt.Sprintf("last-number of the solution body = gold: %.1f%% (%d/%d)", pct(lastNum, lastN), lastNum, lastN)
	return c
}

// incLastInt increments the last run of digits of s: "\frac{3}{4}" becomes
// "\frac{3}{5}", "(-\infty, 0]" becomes "(-\infty, 1]".
func incLastInt(s string) (string, bool) {
	end := strings.LastIndexAny(s, "0123456789")
	if end < 0 {
		return "", false
	}
	start := end
	for start > 0 && isDigit(s[start-1]) {
		start--
	}
	n, _ := new(big.Int).SetString(s[start:end+1], 10)
	n.Add(n, big.NewInt(1))
	return s[:start] + n.String() + s[end+1:], true
}

// mathPerturbations builds answers that are really different from gold.
func mathPerturbations(gold string) []string {
	var out []string
	// The last integer of the normalized form (of the raw form, digits of a
	// unit such as "inches^2" would change).
	if p, ok := incLastInt(Normalize(gold)); ok {
		out = append(out, p)
	}
	v := analyze(gold)
	if v == nil {
		return out
	}
	v = single(v)
	switch {
	case v.kind == 's' && v.num != nil:
		out = append(out, `\left(`+gold+`\right)+1`)
		if f := v.num.float(); f != 0 {
			out = append(out, `-\left(`+gold+`\right)`, `2\cdot\left(`+gold+`\right)`)
		}
	case v.kind == 's' && v.ex != nil:
		out = append(out, `\left(`+gold+`\right)+1`, `2\left(`+gold+`\right)`)
	case v.kind == 's':
		out = append(out, gold+"x", `\text{none}`)
	case v.kind == 'b':
		// The other bracket on the left: an open end becomes closed.
		other := map[byte]byte{'(': '[', '[': '('}
		out = append(out, string(other[v.open])+strings.TrimSpace(canon(gold))[1:])
	}
	if v.kind != 's' && len(v.elems) > 1 {
		// One element fewer.
		w := *v
		w.elems = v.elems[:len(v.elems)-1]
		out = append(out, w.String())
	}
	return out
}

// mathRewrites writes gold in other ways that keep its value: without
// spaces, \left and \right, with \dfrac, as a plain number, with "x =" or
// a unit, with the elements of a list or set in reverse order.
func mathRewrites(gold string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(gold); i++ {
		if gold[i] == ' ' && (i == 0 || !isLetter(gold[i-1])) {
			continue
		}
		b.WriteByte(gold[i])
	}
	out = append(out, b.String(),
		strings.NewReplacer(`\left`, "", `\right`, "").Replace(gold),
		strings.ReplaceAll(gold, `\frac`, `\dfrac`),
		"$"+gold+"$")
	v := analyze(gold)
	if v == nil {
		return out
	}
	v = single(v)
	switch {
	case v.kind == 's' && v.num != nil:
		n := *v.num
		if n.r != nil {
			out = append(out, n.r.RatString())
			if f, exact := n.r.Float64(); exact {
				out = append(out, strconv.FormatFloat(f, 'f', -1, 64))
			}
		} else {
			out = append(out, strconv.FormatFloat(n.f, 'g', 12, 64))
		}
		out = append(out, "x = "+gold, gold+` \text{ units}`)
	case v.kind == 'L' || v.kind == 'S':
		w := *v
		w.elems = nil
		for i := len(v.elems) - 1; i >= 0; i-- {
			w.elems = append(w.elems, v.elems[i])
		}
		out = append(out, w.String())
	}
	return out
}

func TestDatasetMATH500(t *testing.T) {
	path := shareddata.Path(t, "math500/test.jsonl")
	c := &tally{name: "math500/test.jsonl"}
	rw := &tally{name: "math500 rewritten"}
	for _, m := range readJSONL(t, path) {
		sol, ans := str(t, m, "solution"), str(t, m, "answer")
		a, rule := Extract(sol)
		c.checkGold(rule == RuleBoxed && Equal(a, ans), fmt.Sprintf("%q vs %q", a, ans))
		for _, w := range mathRewrites(ans) {
			rw.checkGold(Equal(w, ans), fmt.Sprintf("%q vs %q", w, ans))
			s, ok := Score("The final answer is $\\boxed{"+w+"}$.", ans, KindMath)
			rw.checkGold(ok && s == 1, fmt.Sprintf("boxed %q vs %q", w, ans))
		}
		for _, p := range mathPerturbations(ans) {
			c.checkPert(Equal(p, ans), fmt.Sprintf("%q vs %q", p, ans))
		}
	}
	c.report(t)
	rw.report(t)
	if c.goldRate() < 98 {
		t.Errorf("gold verified %.2f%%, want >= 98%%", c.goldRate())
	}
	if rw.goldRate() < 98 {
		t.Errorf("rewritten gold verified %.2f%%, want >= 98%%", rw.goldRate())
	}
	if c.falseAcc != 0 {
		t.Errorf("%d false accepts, want 0", c.falseAcc)
	}
}

func TestDatasetAIMEAMC(t *testing.T) {
	for _, file := range []string{"aime24/test.jsonl", "amc23/test.jsonl"} {
		t.Run(file, func(t *testing.T) {
			path := shareddata.Path(t, file)
			c := &tally{name: file}
			solOK, solN := 0, 0
			for _, m := range readJSONL(t, path) {
				gold := str(t, m, "answer")
				r, ok := new(big.Rat).SetString(gold)
				if !ok {
					t.Fatalf("answer %q is not a number", gold)
				}
				written := []string{gold, r.RatString()}
				if r.IsInt() {
					written = append(written, r.Num().String()+".0", fmt.Sprintf("%03d", r.Num().Int64()))
				}
				for _, w := range written {
					c.checkGold(Equal(w, gold), w+" vs "+gold)
					for _, resp := range []string{
						"so the answer is $\\boxed{" + w + "}$.",
						"The answer is " + w + ".",
						"Thus we get " + w,
					} {
						s, ok := Score(resp, gold, KindMath)
						c.checkGold(ok && s == 1, resp+" vs "+gold)
					}
				}
				if _, has := m["solution"]; has {
					// Informational: AoPS solutions hold several write-ups; the
					// last box is not always the answer.
					solN++
					if s, _ := Score(str(t, m, "solution"), gold, KindMath); s == 1 {
						solOK++
					}
				}
				if !r.IsInt() {
					t.Fatalf("answer %q is not an integer", gold)
				}
				for _, p := range intPerturbations(r.Num()) {
					for _, s := range []string{p.String(), fmt.Sprintf("%03d", p.Int64()), p.String() + ".0"} {
						c.checkPert(Equal(s, gold), s+" vs "+gold)
						sc, _ := Score("The answer is $\\boxed{"+s+"}$", gold, KindMath)
						c.checkPert(sc != 0, "boxed "+s+" vs "+gold)
					}
				}
				c.checkPert(Equal(gold+".5", gold), gold+".5 vs "+gold)
			}
			if solN > 0 {
				c.info = fmt.Sprintf("last box of the AoPS solution text = gold: %.1f%% (%d/%d)", pct(solOK, solN), solOK, solN)
			}
			c.report(t)
			if c.goldRate() != 100 {
				t.Errorf("gold verified %.2f%%, want 100%%", c.goldRate())
			}
			if c.falseAcc != 0 {
				t.Errorf("%d false accepts, want 0", c.falseAcc)
			}
		})
	}
}

func TestDatasetMathQA(t *testing.T) {
	path := shareddata.Path(t, "mathqa/test.jsonl")
	c := &tally{name: "mathqa/test.jsonl"}
	ratOK, parseFail := 0, 0
	items := readJSONL(t, path)
	for _, m := range items {
		gold := str(t, m, "correct")
		opts, err := ParseOptions(str(t, m, "options"))
		if err != nil || len(opts) < 2 {
			parseFail++
			c.checkGold(false, "options "+str(t, m, "options"))
			continue
		}
		gi := int(gold[0] - 'a')
		if gi < 0 || gi >= len(opts) {
			t.Fatalf("gold %q outside options %q", gold, str(t, m, "options"))
		}
		up := strings.ToUpper(gold)
		for _, resp := range []string{gold, up, "(" + up + ")", "The answer is " + gold + ".", "answer : " + gold,
			"Therefore the answer is (" + up + ").", "$\\boxed{" + up + "}$", "Option " + up,
			gold + " ) " + opts[gi].Text} {
			s, ok := ScoreChoice(resp, gold, opts)
			c.checkGold(ok && s == 1, fmt.Sprintf("%q vs %q", resp, gold))
		}
		// The correct option's value, when no other option has the same value.
		unique := true
		for k, o := range opts {
			if k != gi && Equal(o.Text, opts[gi].Text) {
				unique = false
			}
		}
		if unique && opts[gi].Text != "" {
			for _, resp := range []string{opts[gi].Text, "The answer is " + opts[gi].Text + "."} {
				s, ok := ScoreChoice(resp, gold, opts)
				c.checkGold(ok && s == 1, fmt.Sprintf("value %q vs %q in %q", resp, gold, str(t, m, "options")))
			}
		}
		if l, ok := Choice(str(t, m, "rationale"), opts); ok && l == gold {
			ratOK++
		}
		for k, o := range opts {
			if k == gi {
				continue
			}
			L := o.Letter
			for _, resp := range []string{L, strings.ToUpper(L), "The answer is (" + strings.ToUpper(L) + ").", "answer : " + L} {
				s, _ := ScoreChoice(resp, gold, opts)
				c.checkPert(s != 0, fmt.Sprintf("%q vs %q", resp, gold))
			}
			if !Equal(o.Text, opts[gi].Text) && o.Text != "" {
				s, _ := ScoreChoice("The answer is "+o.Text+".", gold, opts)
				c.checkPert(s != 0, fmt.Sprintf("value %q vs %q in %q", o.Text, gold, str(t, m, "options")))
			}
		}
	}
	c.info = fmt.Sprintf("options unparsed: %d; letter read from the rationale = gold: %.1f%% (%d/%d)",
		parseFail, pct(ratOK, len(items)), ratOK, len(items))
	c.report(t)
	if c.goldRate() != 100 {
		t.Errorf("gold verified %.2f%%, want 100%%", c.goldRate())
	}
	if c.falseAcc != 0 {
		t.Errorf("%d false accepts, want 0", c.falseAcc)
	}
}

func TestDatasetStrategyQA(t *testing.T) {
	for _, file := range []string{"strategyqa/dev.json", "strategyqa/train.json"} {
		t.Run(file, func(t *testing.T) {
			raw, err := os.ReadFile(shareddata.Path(t, file))
			if err != nil {
				t.Fatal(err)
			}
			var items []struct {
				Question string   `json:"question"`
				Answer   bool     `json:"answer"`
				Facts    []string `json:"facts"`
			}
			if err := json.Unmarshal(raw, &items); err != nil {
				t.Fatal(err)
			}
			c := &tally{name: file}
			yn := map[bool]string{true: "yes", false: "no"}
			tf := map[bool]string{true: "true", false: "false"}
			for _, it := range items {
				facts := strings.Join(it.Facts, " ")
				for _, b := range []bool{it.Answer, !it.Answer} {
					w := yn[b]
					resps := []string{w, strings.ToUpper(w[:1]) + w[1:] + ".", tf[b],
						strings.ToUpper(w[:1]) + w[1:] + ", because " + facts,
						facts + " So the answer is " + w + ".", facts + "\nAnswer: " + w,
						"$\\boxed{\\text{" + w + "}}$"}
					for _, resp := range resps {
						s, ok := Score(resp, yn[it.Answer], KindYesNo)
						if b == it.Answer {
							c.checkGold(ok && s == 1, fmt.Sprintf("%q vs %v", resp, it.Answer))
						} else {
							c.checkPert(s != 0, fmt.Sprintf("%q vs %v", resp, it.Answer))
						}
					}
					s, ok := Score(w, strconv.FormatBool(it.Answer), KindYesNo)
					if b == it.Answer {
						c.checkGold(ok && s == 1, w+" vs gold "+strconv.FormatBool(it.Answer))
					} else {
						c.checkPert(s != 0, w+" vs gold "+strconv.FormatBool(it.Answer))
					}
				}
			}
			c.report(t)
			if c.goldRate() != 100 {
				t.Errorf("gold verified %.2f%%, want 100%%", c.goldRate())
			}
			if c.falseAcc != 0 {
				t.Errorf("%d false accepts, want 0", c.falseAcc)
			}
		})
	}
}
