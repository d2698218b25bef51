// Command mathverify puts rlvr's verifier (package verify, through
// eval.Reward, the reward training uses) side by side with Hugging Face's
// Math-Verify (python/mathverify_ref.py). scripts/peers.sh runs it:
//
//	go run ./scripts/peers/mathverify pairs -data ../shared/data -samples DIR -out runs/peers/mathverify
//	python python/mathverify_ref.py runs/peers/mathverify
//	go run ./scripts/peers/mathverify compare -dir runs/peers/mathverify -judged verify/testdata/mathverify.jsonl -doc docs/peers.md
//
// pairs writes every (gold answer, text) pair both verifiers judge,
// pairs.jsonl, with rlvr's verdict, and rlvr's timing, rlvr.json. The pairs
// are each dataset's gold answer against its own reference solution; for
// sets without solutions, against "The final answer is $\boxed{gold}$.";
// and against sampled model completions (the calibration run's
// *.samples.jsonl). compare joins them with Math-Verify's verdicts
// (mathverify.jsonl), labels each disagreement with its judged class from
// the committed judgments, writes compare.json and replaces the tables
// between the markers of docs/peers.md.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"rlvr/eval"
	"rlvr/internal/atomicfile"
	"rlvr/internal/jsonl"
	"rlvr/internal/stats"
	"rlvr/scripts/peers/docblock"
	"rlvr/task"
	"rlvr/verify"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "pairs":
		err = pairsCmd(os.Args[2:])
	case "compare":
		err = compareCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mathverify:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mathverify pairs -data DIR [-samples DIR] -out DIR\n       mathverify compare -dir DIR [-judged FILE] [-doc FILE]")
	os.Exit(2)
}

// Pair is one (gold answer, text) pair both verifiers judge.
type Pair struct {
	Set  string `json:"set"`  // the row of the table it counts in
	ID   string `json:"id"`   // unique within Set
	Gold string `json:"gold"` // the gold answer as the dataset writes it
	Text string `json:"text"` // a reference solution or a completion
	// Kind is "solution", "boxed gold" or "sample".
	Kind string `json:"kind"`
	// rlvr's verdict: eval.Reward's reward, and the answer verify.Extract
	// reads from Text.
	Rlvr       int    `json:"rlvr"`
	RlvrAnswer string `json:"rlvr_answer"`
	// Recorded is a sample's reward as the calibration run recorded it,
	// which differs from Rlvr when verify has changed since.
	Recorded *int `json:"recorded,omitempty"`
}

// A source is a file of examples and how its pairs are made.
type source struct {
	set, dataset, file string
	boxed              bool // the text is the gold in a box (no solutions)
}

var sources = []source{
	{"gsm8k/test", "gsm8k", "gsm8k/test.jsonl", false},
	{"gsm8k/train", "gsm8k", "gsm8k/train.jsonl", false},
	{"math500", "math500", "math500/test.jsonl", false},
	{"aime24", "aime24", "aime24/test.jsonl", false},
	{"amc23", "amc23", "amc23/test.jsonl", true},
	{"deepscaler/test_aime", "deepscaler", "deepscaler/test_aime.json", false},
	{"deepscaler/train_aime", "deepscaler", "deepscaler/train_aime.json", false},
	{"deepscaler/test_amc", "deepscaler", "deepscaler/test_amc.json", true},
	{"deepscaler/test_math", "deepscaler", "deepscaler/test_math.json", true},
	{"deepscaler/train_math", "deepscaler", "deepscaler/train_math.json", true},
}

// sampleSets are the calibration run's sample files read, by task name.
var sampleSets = []string{"world", "gsm8k", "math500"}

// sampleModel is the model whose samples are read.
const sampleModel = "SmolLM2-135M-Instruct.Q4_1"

// BoxedText is the text a "boxed gold" pair judges against its gold.
func BoxedText(gold string) string { return `The final answer is $\boxed{` + gold + `}$.` }

// Timing is a verifier's speed over all pairs.
type Timing struct {
	Pairs    int     `json:"pairs"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"verdicts_per_second"`
	Repeats  int     `json:"repeats"`
	NotAppl  int     `json:"not_applicable"` // pairs left out: rlvr cannot read the gold
	Verifier string  `json:"verifier"`
}

func pairsCmd(args []string) error {
	fs := flag.NewFlagSet("pairs", flag.ExitOnError)
	data := fs.String("data", "../shared/data", "the shared data folder")
	samples := fs.String("samples", "", "the folder of the calibration run's *.samples.jsonl or .samples.jsonl.gz (none when empty)")
	out := fs.String("out", "runs/peers/mathverify", "the output folder")
	fs.Parse(args)
	var pairs []Pair
	var exs []task.Example
	skipped := 0
	for _, s := range sources {
		list, err := task.Load(s.dataset, filepath.Join(*data, s.file))
		if err != nil {
			return err
		}
		for _, e := range list {
			p := Pair{Set: s.set, ID: e.ID, Gold: e.Answer, Text: e.Solution, Kind: "solution"}
			if s.boxed {
				p.Text, p.Kind = BoxedText(e.Answer), "boxed gold"
			}
			if p.Text == "" {
				continue
			}
			if _, ok := eval.Reward(e, ""); !ok {
				skipped++
				continue
			}
			pairs = append(pairs, p)
			exs = append(exs, e)
		}
	}
	if *samples != "" {
		for _, name := range sampleSets {
			// The calibration writes a run in parts, MODEL.TASK.FROM-TO.
			paths, _ := filepath.Glob(filepath.Join(*samples, sampleModel+"."+name+".*samples.jsonl*"))
			if len(paths) == 0 {
				fmt.Fprintf(os.Stderr, "mathverify: no %s.%s samples in %s; they are left out\n", sampleModel, name, *samples)
				continue
			}
			var ss []eval.Sample
			for _, path := range paths {
				part, err := jsonl.Read[eval.Sample](path)
				if err != nil {
					return err
				}
				ss = append(ss, part...)
			}
			for _, s := range ss {
				e := task.Example{ID: s.ID, Answer: s.Gold, Kind: task.Math}
				if _, ok := eval.Reward(e, ""); !ok {
					skipped++
					continue
				}
				rec := int(s.Reward)
				pairs = append(pairs, Pair{Set: "SmolLM2 " + name, ID: fmt.Sprintf("%s/%s/%d", s.ID, s.Pass, s.Index),
					Gold: s.Gold, Text: s.Text, Kind: "sample", Recorded: &rec})
				exs = append(exs, e)
			}
		}
	}
	// rlvr's verdicts, timed over whole passes (at least one second).
	start := time.Now()
	repeats := 0
	for repeats == 0 || time.Since(start) < time.Second {
		for i := range pairs {
			r, _ := eval.Reward(exs[i], pairs[i].Text)
			pairs[i].Rlvr = int(r)
		}
		repeats++
	}
	secs := time.Since(start).Seconds()
	changed := 0
	for i := range pairs {
		pairs[i].RlvrAnswer, _ = verify.Extract(pairs[i].Text)
		if r := pairs[i].Recorded; r != nil && *r != pairs[i].Rlvr {
			changed++
		}
	}
	if changed > 0 {
		fmt.Fprintf(os.Stderr, "mathverify: %d samples' rewards differ from those the calibration run recorded (verify has changed since)\n", changed)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := jsonl.Write(filepath.Join(*out, "pairs.jsonl"), pairs); err != nil {
		return err
	}
	t := Timing{Pairs: len(pairs), Seconds: secs / float64(repeats), Repeats: repeats, NotAppl: skipped, Verifier: "rlvr"}
	t.PerSec = float64(t.Pairs) / t.Seconds
	fmt.Fprintf(os.Stderr, "mathverify: %d pairs (%d not applicable), rlvr %.0f verdicts/s\n", len(pairs), skipped, t.PerSec)
	return writeJSON(filepath.Join(*out, "rlvr.json"), t)
}

func writeJSON(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, b.Bytes())
}

// MVVerdict is Math-Verify's verdict on a pair (python/mathverify_ref.py).
type MVVerdict struct {
	Set        string `json:"set"`
	ID         string `json:"id"`
	MV         int    `json:"mv"`
	GoldParsed string `json:"gold_parsed"` // what Math-Verify read from the gold
	PredParsed string `json:"pred_parsed"` // what it read from the text
	Error      string `json:"error,omitempty"`
}

// Judged is a disagreement judged by hand: which verdict is right and why
// (verify/testdata/mathverify.jsonl). A judgment holds for the text whose
// hash is SHA; a pair whose text has changed since counts as not judged.
// Text, the pair's text or its tail, is kept for a few dozen cases, which
// verify's TestMathVerifyJudged checks; the others are only classified.
type Judged struct {
	Set     string `json:"set"`
	ID      string `json:"id"`
	Gold    string `json:"gold"`
	SHA     string `json:"sha"`            // TextHash of the pair's whole text
	Text    string `json:"text,omitempty"` // the text, or its tail
	Correct int    `json:"correct"`        // the right verdict: 1 accept, 0 reject
	Class   string `json:"class"`
	Note    string `json:"note,omitempty"`
	Open    bool   `json:"open,omitempty"` // rlvr is wrong and not fixed yet
}

// TextHash identifies a pair's text in a judgment: the first 12 hex digits
// of its SHA-256.
func TextHash(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:6])
}

// Disagreement is a pair the verifiers judge differently.
type Disagreement struct {
	Set, ID, Gold    string
	SHA              string
	Rlvr, MV         int
	RlvrAnswer       string
	MVGold, MVAnswer string
	Class            string // "" when not judged yet
	Correct          *int   `json:",omitempty"`
	Note             string `json:",omitempty"`
	Text             string
}

// Row is one line of the agreement table.
type Row struct {
	Set, Kind                     string
	Pairs, BothAccept, BothReject int
	OnlyRlvr, OnlyMV              int
	Agreement                     stats.Interval
	// RlvrRight and MVRight count the judged disagreements each verifier
	// got right; Unjudged those not judged yet.
	RlvrRight, MVRight, Unjudged int
}

func compareCmd(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	dir := fs.String("dir", "runs/peers/mathverify", "the folder pairs and mathverify_ref.py wrote")
	judgedPath := fs.String("judged", "verify/testdata/mathverify.jsonl", "the judged disagreements")
	doc := fs.String("doc", "", "a Markdown file whose generated tables to replace (none when empty)")
	fs.Parse(args)
	pairs, err := jsonl.Read[Pair](filepath.Join(*dir, "pairs.jsonl"))
	if err != nil {
		return err
	}
	mvs, err := jsonl.Read[MVVerdict](filepath.Join(*dir, "mathverify.jsonl"))
	if err != nil {
		return err
	}
	judged, err := jsonl.Read[Judged](*judgedPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	mv := make(map[string]MVVerdict, len(mvs))
	for _, v := range mvs {
		mv[v.Set+"\x00"+v.ID] = v
	}
	judge := make(map[string]Judged, len(judged))
	for _, j := range judged {
		judge[j.Set+"\x00"+j.ID] = j
	}
	var rows []Row
	var total Row
	total.Set, total.Kind = "all", ""
	var dis []Disagreement
	classes := map[string][2]int{} // class → count, rlvr right
	index := map[string]int{}
	for _, p := range pairs {
		v, ok := mv[p.Set+"\x00"+p.ID]
		if !ok {
			return fmt.Errorf("no Math-Verify verdict for %s %s", p.Set, p.ID)
		}
		i, ok := index[p.Set]
		if !ok {
			i = len(rows)
			index[p.Set] = i
			rows = append(rows, Row{Set: p.Set, Kind: p.Kind})
		}
		r := &rows[i]
		r.Pairs++
		switch {
		case p.Rlvr == 1 && v.MV == 1:
			r.BothAccept++
		case p.Rlvr == 0 && v.MV == 0:
			r.BothReject++
		case p.Rlvr == 1:
			r.OnlyRlvr++
		default:
			r.OnlyMV++
		}
		if p.Rlvr == v.MV {
			continue
		}
		d := Disagreement{Set: p.Set, ID: p.ID, Gold: p.Gold, Rlvr: p.Rlvr, MV: v.MV, RlvrAnswer: p.RlvrAnswer,
			MVGold: v.GoldParsed, MVAnswer: v.PredParsed, Text: p.Text, SHA: TextHash(p.Text)}
		j, ok := judge[p.Set+"\x00"+p.ID]
		if ok && j.SHA != TextHash(p.Text) {
			fmt.Fprintf(os.Stderr, "mathverify: %s %s: the text has changed since it was judged\n", p.Set, p.ID)
			ok = false
		}
		if ok {
			c := j.Correct
			d.Class, d.Correct, d.Note = j.Class, &c, j.Note
			n := classes[j.Class]
			n[0]++
			if c == p.Rlvr {
				n[1]++
				r.RlvrRight++
			} else {
				r.MVRight++
			}
			classes[j.Class] = n
		} else {
			r.Unjudged++
		}
		dis = append(dis, d)
	}
	for i := range rows {
		r := &rows[i]
		r.Agreement = stats.WilsonInterval(r.BothAccept+r.BothReject, r.Pairs)
		total.Pairs += r.Pairs
		total.BothAccept += r.BothAccept
		total.BothReject += r.BothReject
		total.OnlyRlvr += r.OnlyRlvr
		total.OnlyMV += r.OnlyMV
		total.RlvrRight += r.RlvrRight
		total.MVRight += r.MVRight
		total.Unjudged += r.Unjudged
	}
	total.Agreement = stats.WilsonInterval(total.BothAccept+total.BothReject, total.Pairs)
	var tr, tm Timing
	if err := readJSON(filepath.Join(*dir, "rlvr.json"), &tr); err != nil {
		return err
	}
	if err := readJSON(filepath.Join(*dir, "mathverify.json"), &tm); err != nil {
		return err
	}
	table := agreementTable(rows, total)
	ctable := classTable(classes)
	timing := fmt.Sprintf("| verifier | pairs | seconds | verdicts/s |\n| --- | ---: | ---: | ---: |\n"+
		"| rlvr `verify` (eval.Reward) | %d | %.3f | %.0f |\n| Math-Verify (parse gold, parse text, verify) | %d | %.1f | %.1f |\n",
		tr.Pairs, tr.Seconds, tr.PerSec, tm.Pairs, tm.Seconds, tm.PerSec)
	fmt.Print(table, "\n", ctable, "\n", timing)
	if total.Unjudged > 0 {
		fmt.Fprintf(os.Stderr, "mathverify: %d disagreements not judged yet (see %s)\n", total.Unjudged, filepath.Join(*dir, "compare.json"))
	}
	err = writeJSON(filepath.Join(*dir, "compare.json"), struct {
		Rows          []Row
		Total         Row
		Classes       map[string][2]int
		Timing        []Timing
		Disagreements []Disagreement
	}{rows, total, classes, []Timing{tr, tm}, dis})
	if err != nil {
		return err
	}
	if *doc == "" {
		return nil
	}
	return docblock.Replace(*doc, map[string]string{"mathverify-table": table, "mathverify-classes": ctable, "mathverify-timing": timing})
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func agreementTable(rows []Row, total Row) string {
	var b strings.Builder
	b.WriteString("| set | text | pairs | both accept | both reject | only rlvr | only Math-Verify | agreement (95% Wilson) | rlvr right / Math-Verify right |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, r := range append(slices.Clone(rows), total) {
		set := r.Set
		if r.Set == "all" {
			set = "**all**"
		}
		right := fmt.Sprintf("%d / %d", r.RlvrRight, r.MVRight)
		if r.Unjudged > 0 {
			right += fmt.Sprintf(" (%d unjudged)", r.Unjudged)
		}
		if r.OnlyRlvr+r.OnlyMV == 0 {
			right = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %.2f%% [%.2f, %.2f] | %s |\n", set, r.Kind, r.Pairs,
			r.BothAccept, r.BothReject, r.OnlyRlvr, r.OnlyMV,
			100*r.Agreement.Mean, 100*r.Agreement.Low, 100*r.Agreement.High, right)
	}
	return b.String()
}

func classTable(classes map[string][2]int) string {
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := classes[b][0] - classes[a][0]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("| class | disagreements | rlvr right | Math-Verify right |\n| --- | ---: | ---: | ---: |\n")
	for _, c := range names {
		n := classes[c]
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", c, n[0], n[1], n[0]-n[1])
	}
	return b.String()
}
