package mel

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/method/part"
	"rlvr/sample"
	"rlvr/task"
)

// wideRender is methodtest.ByteRender with its prompt limit at limit
// bytes.
type wideRender struct {
	methodtest.ByteRender
	limit int
}

func (w wideRender) Prompt(e task.Example, v method.Variant) ([]int32, error) {
	s := e.Prompt + v.Suffix
	if len(s) > w.limit {
		return nil, fmt.Errorf("%s: %w", e.ID, method.ErrPromptTooLong)
	}
	return w.Encode(s), nil
}

// reflector is a policy that writes a reflection for every "R:" prompt
// (reflect, given the prompt) and answers every other prompt with
// answer(prompt), recording the prompts of each pass; every token's
// logprob is −0.25 and a sample ends in the stop token 0.
type reflector struct {
	reflect  func(prompt string) string
	answer   func(prompt string) string
	prompts  []string
	requests []sample.Request
}

func (r *reflector) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	for i, q := range reqs {
		p := methodtest.ByteRender{}.Decode(q.Prompt)
		r.prompts, r.requests = append(r.prompts, p), append(r.requests, q)
		text := r.answer(p)
		if strings.HasPrefix(p, "R:") {
			text = r.reflect(p)
		}
		toks := append(methodtest.ByteRender{}.Encode(text), 0)
		lps := make([]float32, len(toks))
		for j := range lps {
			lps[j] = -0.25
		}
		out[i] = []sample.Completion{{Tokens: toks, Logprobs: lps, Text: text}}
	}
	return out, nil
}

// worldGroup is a group of world answers to q: right[k] says whether
// answer k ends in the right final answer.
func worldGroup(r method.Renderer, q task.Example, right ...bool) method.Scored {
	g := methodtest.Group(r, q, method.Variant{}, right...)
	for i := range g.Trajectories {
		g.Trajectories[i].Text = g.Trajectories[i].PolicyText
	}
	return g
}

func TestMetaExperiencePairsReflectsValidatesAndTrains(t *testing.T) {
	q, solved, failed := methodtest.Example("1+2", "3"), methodtest.Example("5+5", "10"), methodtest.Example("9*9", "81")
	groups := []method.Scored{
		worldGroup(methodtest.ByteRender{}, q, true, false, false), // 1·2 pairs
		worldGroup(methodtest.ByteRender{}, solved, true, true),    // all right: no pair
		worldGroup(methodtest.ByteRender{}, failed, false, false),  // all wrong: no pair
	}
	pol := &reflector{
		reflect: func(p string) string { return "S:1+2=3\nC:1+2=4 is wrong\nH:add carefully\n" },
		// The replay, with M before the question, is right.
		answer: func(p string) string {
			if strings.HasPrefix(p, "M:") {
				return "####3"
			}
			return "####0"
		},
	}
	sc := methodtest.NewStepContext(nil)
	sc.Render, sc.Policy, sc.Seed = wideRender{limit: 1 << 10}, pol, 7
	sc.Sampling = sample.Params{MaxTokens: 32, Temperature: 1, StopTokens: []int32{0}}
	// Pooled leaves each M's token weights at 1 (eq. 10's nesting is
	// TestMetaExperienceAveragesPerQuestion's).
	me := &MetaExperience{Format: World{}, Weight: 0.5, Pooled: true, Temperature: 0.7, MaxTokens: 48}
	terms, err := me.Terms(context.Background(), sc, groups)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"mel/pairs": 2, "mel/parsed": 2, "mel/parse_failures": 0, "mel/validated": 2, "mel/retention": 1, "mel/nll": 0.25,
		"mel/replay_accuracy": 1, "mel/group_accuracy": 1.0 / 3} {
		if sc.Metrics[k] != want {
			t.Errorf("%s = %v, want %v", k, sc.Metrics[k], want)
		}
	}
	// The reflection pass asks both pairs, with the shown answers; the
	// replay pass puts M before the question.
	if len(pol.prompts) != 4 {
		t.Fatalf("prompts %q", pol.prompts)
	}
	if want := "R:1+2\n+####3\n-####0\n"; pol.prompts[0] != want || pol.prompts[1] != want {
		t.Fatalf("reflection requests %q, want %q", pol.prompts[:2], want)
	}
	if want := "M:S:1+2=3|C:1+2=4 is wrong|H:add carefully\nQ:1+2\n"; pol.prompts[2] != want {
		t.Fatalf("replay %q, want %q", pol.prompts[2], want)
	}
	if r := pol.requests[0].Params; r.Temperature != 0.7 || r.MaxTokens != 48 {
		t.Fatalf("reflection sampling %+v", r)
	}
	if r := pol.requests[2].Params; r.Temperature != 1 || r.MaxTokens != 32 || r.Seed == pol.requests[0].Params.Seed {
		t.Fatalf("replay sampling %+v", r)
	}
	if len(terms) != 1 || len(terms[0].Data) != 2 {
		t.Fatalf("terms %+v", terms)
	}
	term := terms[0]
	if term.Name != "mel" || term.Loss.NLL != 0.5 || term.Loss.PolicyGradient != "" || term.Aggregation != "seq-mean-token-mean" {
		t.Fatalf("term %+v", term)
	}
	// Only M's tokens carry weight: the positions predicting the
	// reflection and its stop token, none of the context [I, x, y+, y−].
	d := term.Data[0]
	request := len("R:1+2\n+####3\n-####0\n")
	m := len("S:1+2=3\nC:1+2=4 is wrong\nH:add carefully\n") + 1
	if len(d.Tokens) != request+m-1 {
		t.Fatalf("%d positions, want %d", len(d.Tokens), request+m-1)
	}
	for i, w := range d.Weights {
		ofM := i >= request-1
		if ofM && w != 1 || !ofM && w != 0 {
			t.Fatalf("position %d (of M: %v) has weight %v", i, ofM, w)
		}
	}
	if got := (methodtest.ByteRender{}).Decode(d.Targets[request-1:]); got != "S:1+2=3\nC:1+2=4 is wrong\nH:add carefully\n\x00" {
		t.Fatalf("trained targets %q", got)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	ex := me.Exhibits()
	if len(ex) != 1 || ex[0].Title != "meta-experience" {
		t.Fatalf("exhibits %+v", ex)
	}
	if got := *me.last; got.Correct != "####3" || got.Wrong != "####0" || got.Replay != "####3" || got.Question != "Q:1+2\n" || got.Step != 1 {
		t.Fatalf("exhibit %+v", got)
	}
	if want := "step 1\nquestion:\nQ:1+2\n\ncorrect answer (y+):\n####3\n\nwrong answer (y−):\n####0\n\nmeta-experience M:\nS:1+2=3\nC:1+2=4 is wrong\nH:add carefully\n\nreplay with M (verified):\n####3"; ex[0].Text != want {
		t.Fatalf("exhibit text %q, want %q", ex[0].Text, want)
	}
}

// TestMetaExperienceAveragesPerQuestion: after the learner's aggregation,
// each kept M weighs 1/(questions · its question's Ms), as eq. 10 nests
// R_MEL inside the expectation over questions (one without a kept M adds
// 0); pooled, every M weighs 1/Ms.
func TestMetaExperienceAveragesPerQuestion(t *testing.T) {
	two, one := methodtest.Example("1+2", "3"), methodtest.Example("2+2", "4")
	groups := []method.Scored{
		worldGroup(methodtest.ByteRender{}, two, true, false, false), // 2 pairs
		worldGroup(methodtest.ByteRender{}, one, false, true),        // 1 pair
		worldGroup(methodtest.ByteRender{}, methodtest.Example("5+5", "10"), true, true),
		worldGroup(methodtest.ByteRender{}, methodtest.Example("9*9", "81"), false, false),
	}
	for _, tc := range []struct {
		pooled bool
		want   map[string]float64 // the weight of each kept M, by its question
	}{
		{false, map[string]float64{"R:1+2": 1.0 / 8, "R:2+2": 1.0 / 4}},
		{true, map[string]float64{"R:1+2": 1.0 / 3, "R:2+2": 1.0 / 3}},
	} {
		pol := &reflector{
			reflect: func(p string) string { return "S:x\nC:y\nH:z\n" },
			answer: func(p string) string {
				if strings.HasPrefix(p, "M:") { // every replay verifies
					return "####" + map[bool]string{true: "3", false: "4"}[strings.Contains(p, "1+2")]
				}
				return "####0"
			},
		}
		sc := methodtest.NewStepContext(nil)
		sc.Render, sc.Policy, sc.Seed = wideRender{limit: 1 << 10}, pol, 7
		sc.Sampling = sample.Params{MaxTokens: 32, Temperature: 1, StopTokens: []int32{0}}
		me := &MetaExperience{Format: World{}, Weight: 1, Pooled: tc.pooled}
		terms, err := me.Terms(context.Background(), sc, groups)
		if err != nil {
			t.Fatal(err)
		}
		if len(terms) != 1 || len(terms[0].Data) != 3 {
			t.Fatalf("pooled %v: terms %+v", tc.pooled, terms)
		}
		data := terms[0].Data
		if err := backend.Aggregate(data, terms[0].Aggregation, terms[0].Norm); err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, d := range data {
			sum := 0.0
			for _, w := range d.Weights {
				sum += float64(w)
			}
			question, _, _ := strings.Cut(methodtest.ByteRender{}.Decode(d.Tokens), "\n")
			if want := tc.want[question]; math.Abs(sum-want) > 1e-6 {
				t.Errorf("pooled %v: an M of %q weighs %v, want %v", tc.pooled, question, sum, want)
			}
			total += sum
		}
		if want := map[bool]float64{false: 2.0 / 4, true: 1}[tc.pooled]; math.Abs(total-want) > 1e-6 {
			t.Errorf("pooled %v: the term weighs %v in all, want %v", tc.pooled, total, want)
		}
	}
}

// TestMetaExperienceGates: a reply that does not parse is counted and
// dropped, never fatal; a parsed one is kept only if its replay verifies;
// nothing kept gives no term.
func TestMetaExperienceGates(t *testing.T) {
	q := methodtest.Example("1+2", "3")
	groups := []method.Scored{worldGroup(methodtest.ByteRender{}, q, true, false, false, false)}
	n := 0
	pol := &reflector{
		reflect: func(string) string {
			n++
			if n%2 == 0 {
				return "no reflection here"
			}
			return fmt.Sprintf("S:s\nC:c\nH:h%d\n", n)
		},
		answer: func(p string) string {
			if strings.Contains(p, "H:h1\n") { // only the first M's replay is right
				return "####3"
			}
			return "####1"
		},
	}
	sc := methodtest.NewStepContext(nil)
	sc.Render, sc.Policy = wideRender{limit: 1 << 10}, pol
	me := &MetaExperience{Format: World{}, Weight: 1}
	terms, err := me.Terms(context.Background(), sc, groups)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"mel/pairs": 3, "mel/parsed": 2, "mel/parse_failures": 1, "mel/validated": 1, "mel/retention": 0.5,
		"mel/replay_accuracy": 0.5, "mel/group_accuracy": 0.25} {
		if sc.Metrics[k] != want {
			t.Errorf("%s = %v, want %v", k, sc.Metrics[k], want)
		}
	}
	if len(terms) != 1 || len(terms[0].Data) != 1 {
		t.Fatalf("terms %+v", terms)
	}
	pol.answer = func(string) string { return "####1" }
	sc = methodtest.NewStepContext(nil)
	sc.Render, sc.Policy = wideRender{limit: 1 << 10}, pol
	if terms, err := me.Terms(context.Background(), sc, groups); err != nil || terms != nil || sc.Metrics["mel/validated"] != 0 {
		t.Fatalf("no replay verified: terms %+v, %v, metrics %v", terms, err, sc.Metrics)
	}
	// A request too long for the context is skipped and counted.
	sc = methodtest.NewStepContext(nil)
	sc.Render, sc.Policy = wideRender{limit: 10}, pol
	if terms, err := me.Terms(context.Background(), sc, groups); err != nil || terms != nil || sc.Metrics["mel/skipped_long"] != 3 || sc.Metrics["mel/pairs"] != 3 {
		t.Fatalf("long requests: terms %+v, %v, metrics %v", terms, err, sc.Metrics)
	}
}

// TestMetaExperiencePairSampling: Pairs draws that many distinct pairs per
// group, the same ones for the same seed; 0 takes every pair.
func TestMetaExperiencePairSampling(t *testing.T) {
	var right []bool
	for k := range 8 {
		right = append(right, k < 3) // 3 right, 5 wrong: 15 pairs
	}
	groups := []method.Scored{worldGroup(methodtest.ByteRender{}, methodtest.Example("q", "7"), right...)}
	for k := range groups[0].Trajectories { // tell the answers apart
		tr := &groups[0].Trajectories[k]
		tr.Tokens = append(tr.Tokens, int32('a'+k))
		tr.Text += string(rune('a' + k))
	}
	pairsOf := func(pairs int, seed uint64) []string {
		sc := methodtest.NewStepContext(nil)
		sc.Render, sc.Seed = wideRender{limit: 1 << 10}, seed
		ps, err := (&MetaExperience{Format: World{}, Pairs: pairs}).pairs(sc, groups)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		seen := map[string]bool{}
		for _, p := range ps {
			s := p.correct + "/" + p.wrong
			if seen[s] {
				t.Fatalf("pair %s drawn twice", s)
			}
			seen[s] = true
			if !strings.HasPrefix(p.correct, "####7") {
				t.Fatalf("y+ %q is not a right answer", p.correct)
			}
			if strings.HasPrefix(p.wrong, "####7") {
				t.Fatalf("y− %q is a right answer", p.wrong)
			}
			out = append(out, s)
		}
		return out
	}
	if all := pairsOf(0, 1); len(all) != 15 {
		t.Fatalf("every pair: %d, want 15", len(all))
	}
	a, b, c := pairsOf(4, 1), pairsOf(4, 1), pairsOf(4, 2)
	if len(a) != 4 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("seed 1 drew %v then %v", a, b)
	}
	if strings.Join(a, ",") == strings.Join(c, ",") {
		t.Fatalf("seeds 1 and 2 drew the same pairs %v", a)
	}
}

// TestMetaExperienceReferencePositive: with ReferencePositive, a group
// with no right answer pairs its wrong ones against the reference
// solution (counted in mel/reference_pairs); a mixed group still pairs the
// policy's own answers, a group without a solution forms no pair, and
// without the setting an all-wrong group forms none.
func TestMetaExperienceReferencePositive(t *testing.T) {
	solved := methodtest.Example("q1", "7")
	solved.Solution = "3+4 = 7"
	unsolved := methodtest.Example("q2", "5")
	mixed := methodtest.Example("q3", "9")
	mixed.Solution = "4+5 = 9"
	groups := []method.Scored{
		worldGroup(methodtest.ByteRender{}, solved, false, false, false),
		worldGroup(methodtest.ByteRender{}, unsolved, false, false),
		worldGroup(methodtest.ByteRender{}, mixed, true, false),
	}
	for _, on := range []bool{false, true} {
		sc := methodtest.NewStepContext(nil)
		sc.Render = wideRender{limit: 1 << 10}
		ps, err := (&MetaExperience{Format: World{}, Pairs: 4, ReferencePositive: on}).pairs(sc, groups)
		if err != nil {
			t.Fatal(err)
		}
		byQuestion := map[string][]metaPair{}
		for _, p := range ps {
			byQuestion[p.group.Example.ID] = append(byQuestion[p.group.Example.ID], p)
		}
		if n := len(byQuestion["q3"]); n != 1 || !strings.HasPrefix(byQuestion["q3"][0].correct, "####9") {
			t.Errorf("reference_positive %v: the mixed group's pairs %+v, want its own right answer as y+", on, byQuestion["q3"])
		}
		if n := len(byQuestion["q2"]); n != 0 {
			t.Errorf("reference_positive %v: %d pairs for a question without a solution", on, n)
		}
		want := 0
		if on {
			want = 3
		}
		if n := len(byQuestion["q1"]); n != want {
			t.Fatalf("reference_positive %v: %d pairs for the all-wrong solved question, want %d", on, n, want)
		}
		for _, p := range byQuestion["q1"] {
			if p.correct != "3+4 = 7\n#### 7" || strings.HasPrefix(p.wrong, "####7") {
				t.Errorf("pair (%q, %q): want the reference solution against a wrong answer", p.correct, p.wrong)
			}
		}
		if got := sc.Metrics[MetricMELReferencePairs]; got != float64(want) {
			t.Errorf("reference_positive %v: mel/reference_pairs %v, want %d", on, got, want)
		}
		if got := sc.Metrics[MetricMELPairs]; got != float64(want+1) {
			t.Errorf("reference_positive %v: mel/pairs %v, want %d", on, got, want+1)
		}
	}
}

func TestMetaExperienceStateRoundTrip(t *testing.T) {
	me := &MetaExperience{last: &metaExample{Step: 3, Question: "Q:1+2\n", Reflection: "S:a\nC:b\nH:c\n"}}
	b, err := me.State()
	if err != nil {
		t.Fatal(err)
	}
	var back MetaExperience
	if err := back.Restore(b); err != nil || back.last == nil || *back.last != *me.last {
		t.Fatalf("restored %+v, %v", back.last, err)
	}
	empty, _ := (&MetaExperience{}).State()
	if err := back.Restore(empty); err != nil || back.last != nil || back.Exhibits() != nil {
		t.Fatalf("empty state restored to %+v, %v", back.last, err)
	}
	if err := back.Restore(json.RawMessage(`{"step":"x"}`)); err == nil {
		t.Fatal("a malformed state restored")
	}
}

// TestMetaExperienceReadsTheReplyWithoutItsStop: the sampler's text of a
// reply keeps its stop token's text (a chat model's end of turn); MEL
// parses the reply without it, so the replay prompt never carries it.
func TestMetaExperienceReadsTheReplyWithoutItsStop(t *testing.T) {
	const reply = "1. Failure\nFailure Point: 1+2=4\n2. Success\nok\n3. Reflective summary\nI rushed.\n4. Heuristics\n- add carefully"
	pol := &reflector{answer: func(string) string { return "####3" }}
	sc := methodtest.NewStepContext(nil)
	sc.Render, sc.Seed = wideRender{limit: 1 << 13}, 1
	sc.Sampling = sample.Params{MaxTokens: 32, Temperature: 1, StopTokens: []int32{0}}
	sc.Policy = stopTextPolicy{pol, "<|im_end|>", reply}
	terms, err := (&MetaExperience{Format: Chat{}, Weight: 1}).Terms(context.Background(), sc,
		[]method.Scored{worldGroup(methodtest.ByteRender{}, methodtest.Example("1+2", "3"), true, false)})
	if err != nil || len(terms) != 1 || sc.Metrics["mel/parsed"] != 1 {
		t.Fatalf("terms %+v, %v, metrics %v", terms, err, sc.Metrics)
	}
	for _, p := range pol.prompts {
		if strings.Contains(p, "<|im_end|>") {
			t.Fatalf("a prompt carries the reply's stop text: %q", p)
		}
	}
}

// stopTextPolicy answers reflection requests with reply, whose sampled
// text ends in the stop token's text, and everything else as inner does.
type stopTextPolicy struct {
	inner       *reflector
	stop, reply string
}

func (s stopTextPolicy) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out, err := s.inner.Sample(ctx, reqs)
	for i, q := range reqs {
		if strings.Contains(methodtest.ByteRender{}.Decode(q.Prompt), "Meta-Cognitive") {
			toks := append(methodtest.ByteRender{}.Encode(s.reply), 0)
			out[i] = []sample.Completion{{Tokens: toks, Logprobs: make([]float32, len(toks)), Text: s.reply + s.stop}}
		}
	}
	return out, err
}

func TestMetaExperienceConfig(t *testing.T) {
	run := &part.Run{MaxTokens: 256, Temperature: 0.7, Parts: []string{PartMetaExperience}}
	m := &MetaExperienceConfig{}
	if err := methodtest.Resolve(m, run); err != "" || m.Pairs != 4 || m.Weight != 1 || m.MaxTokens != 256 || m.Temperature != 0.7 {
		t.Fatalf("defaults %+v, %s", m, err)
	}
	bad := &MetaExperienceConfig{Pairs: -1, AllPairs: true, Weight: float32(math.Inf(1)),
		Instruction: "compare {correct_ans}", Validation: "no memory here"}
	err := methodtest.Resolve(bad, run)
	for _, want := range []string{"pairs = -1 and all_pairs are both set", "meta_experience.pairs = -1", "meta_experience.weight = +Inf",
		"instruction must hold {correct_ans} and {error_ans}", "validation must hold {experience}"} {
		if !strings.Contains(err, want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	all := &MetaExperienceConfig{AllPairs: true}
	if err := methodtest.Resolve(all, run); err != "" || all.Pairs != 0 {
		t.Fatalf("all_pairs: %+v, %s", all, err)
	}
	b := &part.Build{Run: run, Chat: true}
	if err := all.Join(b); err != nil || len(b.Extras) != 1 {
		t.Fatalf("extras %+v, %v", b.Extras, err)
	}
	if me := b.Extras[0].(*MetaExperience); me.Pairs != 0 || me.Format != (Chat{}) {
		t.Fatalf("a chat model's part %+v", me)
	}
}
