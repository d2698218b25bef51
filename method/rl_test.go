package method_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/task"
)

// TestVerifierReadsOnlyThePolicy gives the policy a wrong answer and the
// environment (an expert's reply) the right one: no reward.
func TestVerifierReadsOnlyThePolicy(t *testing.T) {
	ro := &methodtest.ScriptedRollout{
		Policy: func(_ string, k int) string { return fmt.Sprintf("####%d", 3+k%2*4) }, // ####3, ####7, …
		Env:    func(string, int) string { return "!E1:####7" },
	}
	r := &method.RL{Objective: methodtest.Family(t, method.GRPO), GroupSize: 4, Rollout: ro}
	sc := methodtest.NewStepContext(nil)
	b, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("a", "7")})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Metrics["accuracy"] != 0.5 {
		t.Fatalf("accuracy %v, want 0.5: the expert's ####7 must not count", sc.Metrics["accuracy"])
	}
	if len(b.Terms) != 1 || len(b.Terms[0].Data) != 4 {
		t.Fatalf("terms %+v", b.Terms)
	}
}

// TestShowAnswers keeps the step's first group for reading: the question,
// then the asked number of answers with their rewards and verdicts; none
// without ShowAnswers.
func TestShowAnswers(t *testing.T) {
	ro := &methodtest.ScriptedRollout{
		Policy: func(_ string, k int) string { return fmt.Sprintf("####%d", 3+k%2*4) }, // ####3, ####7, …
		Env:    func(string, int) string { return "" },
	}
	for _, show := range []int{0, 3} {
		r := &method.RL{Objective: methodtest.Family(t, method.DrGRPO), GroupSize: 4, Rollout: ro, ShowAnswers: show}
		if _, err := r.Step(context.Background(), methodtest.NewStepContext(nil), []task.Example{methodtest.Example("what is 3 + 4?", "7")}); err != nil {
			t.Fatal(err)
		}
		ex := r.Exhibits()
		if show == 0 {
			if len(ex) != 0 {
				t.Fatalf("exhibits %+v without ShowAnswers", ex)
			}
			continue
		}
		want := "step 0\nquestion:\nQ:what is 3 + 4?\n\nanswer 1, reward 0 (wrong):\n####3\n\nanswer 2, reward 1 (right):\n####7\n\nanswer 3, reward 0 (wrong):\n####3\n"
		if len(ex) != 1 || ex[0].Title != "answers" || ex[0].Text != want {
			t.Fatalf("exhibits %+v, want one of answers:\n%s", ex, want)
		}
	}
}

// TestVariantsGroupAndSkip asks each question under two variants: groups
// and advantages stay per variant, per-variant metrics are logged, and a
// prompt too long for the context is skipped and counted.
func TestVariantsGroupAndSkip(t *testing.T) {
	ro := &methodtest.ScriptedRollout{
		// Under E1 the first two samples are right; under E2 none.
		Policy: func(p string, k int) string {
			if strings.HasSuffix(p, "@E1\n") && k < 2 {
				return "####5"
			}
			return "####0"
		},
		Env: func(string, int) string { return "" },
	}
	r := &method.RL{Objective: methodtest.Family(t, method.DrGRPO), GroupSize: 4, Rollout: ro,
		Variants: []method.Variant{{Name: "E1", Suffix: "@E1\n"}, {Name: "E2", Suffix: "@E2\n"}}}
	sc := methodtest.NewStepContext(nil)
	long := methodtest.Example(strings.Repeat("x", 70), "5")
	b, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("a", "5"), long})
	if err != nil {
		t.Fatal(err)
	}
	m := sc.Metrics
	if m["data/skipped_long_prompts"] != 2 || m["variant/E1/accuracy"] != 0.5 || m["variant/E2/accuracy"] != 0 ||
		m["variant/E2/zero_variance_frac"] != 1 || m["zero_variance_frac"] != 0.5 {
		t.Fatalf("metrics %v", m)
	}
	// Dr.GRPO advantages inside E1's group: ±0.5; E2's group: 0.
	data := b.Terms[0].Data
	got := []float32{adv(data[0]), adv(data[2]), adv(data[4])}
	if got[0] != 0.5 || got[1] != -0.5 || got[2] != 0 {
		t.Fatalf("advantages %v", got)
	}
}

// TestNoSignalNoTerm: all groups uniform and no entropy or KL term, so the
// objective returns nothing and the loop takes no optimizer step.
func TestNoSignalNoTerm(t *testing.T) {
	ro := &methodtest.ScriptedRollout{Policy: func(string, int) string { return "####0" }, Env: func(string, int) string { return "" }}
	r := &method.RL{Objective: methodtest.Family(t, method.GRPO), GroupSize: 3, Rollout: ro}
	b, err := r.Step(context.Background(), methodtest.NewStepContext(nil), []task.Example{methodtest.Example("a", "1")})
	if err != nil || len(b.Terms) != 0 {
		t.Fatalf("terms %+v, %v", b, err)
	}
}

// counter is a stateful part.
type counter struct{ n int }

func (c *counter) Terms(context.Context, *method.StepContext, []method.Scored) ([]method.Term, error) {
	c.n++
	return nil, nil
}
func (c *counter) State() (json.RawMessage, error) { return json.Marshal(c.n) }
func (c *counter) Restore(b json.RawMessage) error { return json.Unmarshal(b, &c.n) }

func TestRLStateCollectsParts(t *testing.T) {
	ro := &methodtest.ScriptedRollout{Policy: func(string, int) string { return "####0" }, Env: func(string, int) string { return "" }}
	a := &method.RL{Objective: methodtest.Family(t, method.GRPO), GroupSize: 2, Rollout: ro, Extras: []method.Extra{&counter{}}}
	for range 3 {
		if _, err := a.Step(context.Background(), methodtest.NewStepContext(nil), []task.Example{methodtest.Example("a", "1")}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	b := &method.RL{Objective: methodtest.Family(t, method.GRPO), Extras: []method.Extra{&counter{}}}
	if err := b.Restore(st); err != nil || b.Extras[0].(*counter).n != 3 {
		t.Fatalf("restored %+v, %v (state %s)", b.Extras[0], err, st)
	}
	if err := b.Restore(json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "no state for *method_test.counter") {
		t.Fatalf("missing state: %v", err)
	}
}

func TestSupervisedSkipsAndCounts(t *testing.T) {
	s := &method.Supervised{Variants: []method.Variant{{Name: "E1", Suffix: "@E1\n"}}, MaxLen: 40}
	sc := methodtest.NewStepContext(nil)
	exs := []task.Example{
		{ID: "ok", Prompt: "Q:1+1\n", Solution: "1+1=2", Answer: "2"},
		{ID: "none", Prompt: "Q:2+2\n", Answer: "4"},
		{ID: "long", Prompt: "Q:1\n", Solution: strings.Repeat("9", 50), Answer: "9"},
	}
	b, err := s.Step(context.Background(), sc, exs)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Terms) != 1 || len(b.Terms[0].Data) != 1 || sc.Metrics["data/skipped_no_solution"] != 1 || sc.Metrics["data/skipped_long_prompts"] != 1 {
		t.Fatalf("terms %+v metrics %v", b.Terms, sc.Metrics)
	}
	d := b.Terms[0].Data[0]
	// Prompt "Q:1+1\n@E1\n" (10 tokens) is context; the 11 response tokens
	// ("1+1=2\n#### 2\n" is 13 bytes) and the end token carry weight.
	var weighted int
	for _, w := range d.Weights {
		if w != 0 {
			weighted++
		}
	}
	if weighted != 14 || d.Weights[8] != 0 || d.Weights[9] != 1 {
		t.Fatalf("%d weighted positions: %v", weighted, d.Weights)
	}
}

// TestSupervisedTrainsAnswersBehindTheirExpert: an example tagged with a
// variant (an expert's answer from D_ME) is trained under that variant
// only; an untagged one under every variant.
func TestSupervisedTrainsAnswersBehindTheirExpert(t *testing.T) {
	s := &method.Supervised{Variants: []method.Variant{{Name: "E1", Suffix: "@E1\n"}, {Name: "E2", Suffix: "@E2\n"}}}
	sc := methodtest.NewStepContext(nil)
	exs := []task.Example{
		{ID: "e2", Prompt: "Q:1+1\n", Solution: "1+1=2\n####2", Answer: "2", Meta: map[string]string{method.VariantKey: "E2"}},
		{ID: "both", Prompt: "Q:2+2\n", Solution: "2+2=4\n####4", Answer: "4"},
		{ID: "nobody", Prompt: "Q:3+3\n", Solution: "####6", Answer: "6", Meta: map[string]string{method.VariantKey: "E5"}},
	}
	b, err := s.Step(context.Background(), sc, exs)
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, d := range b.Terms[0].Data {
		// The prompt is every input token up to the first weighted
		// target's input, which is the prompt's last token.
		first := slices.IndexFunc(d.Weights, func(w float32) bool { return w != 0 })
		var text []byte
		for _, tok := range d.Tokens[:first+1] {
			text = append(text, byte(tok))
		}
		prompts = append(prompts, string(text))
	}
	want := []string{"Q:1+1\n@E2\n", "Q:2+2\n@E1\n", "Q:2+2\n@E2\n"}
	if !slices.Equal(prompts, want) {
		t.Fatalf("trained prompts %q, want %q", prompts, want)
	}
}

// adv is the advantage a datum's first policy position carries.
func adv(d backend.Datum) float32 {
	for i, w := range d.Weights {
		if w != 0 {
			return d.Advantages[i]
		}
	}
	return 0
}
