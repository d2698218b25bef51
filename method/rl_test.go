package method

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/task"
)

// byteRender renders prompts as their bytes plus the variant's suffix;
// prompts longer than 64 bytes are too long.
type byteRender struct{}

func (byteRender) Prompt(e task.Example, v Variant) ([]int32, error) {
	s := e.Prompt + v.Suffix
	if len(s) > 64 {
		return nil, fmt.Errorf("%s: %w", e.ID, ErrPromptTooLong)
	}
	return byteRender{}.Encode(s), nil
}
func (byteRender) Response(text string) []int32         { return append(byteRender{}.Encode(text), 0) }
func (byteRender) EnvTurn(text string) ([]int32, error) { return byteRender{}.Encode(text), nil }
func (byteRender) Encode(text string) []int32 {
	out := make([]int32, len(text))
	for i := range len(text) {
		out[i] = int32(text[i])
	}
	return out
}
func (byteRender) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

// scriptedRollout answers every prompt with g two-part episodes: the
// policy writes policy(prompt, k), then the environment env(prompt, k).
type scriptedRollout struct {
	policy, env func(prompt string, k int) string
	calls       int
}

func (s *scriptedRollout) Rollout(_ context.Context, env *Env, prompts [][]int32, g int, seed uint64) ([]rollout.Group, error) {
	s.calls++
	groups := make([]rollout.Group, len(prompts))
	for i, p := range prompts {
		groups[i].Prompt = p
		for k := range g {
			pt, et := env.Render.Encode(s.policy(env.Render.Decode(p), k)), env.Render.Encode(s.env(env.Render.Decode(p), k))
			t := rollout.Trajectory{Prompt: p, Tokens: append(append([]int32(nil), pt...), et...)}
			for range pt {
				t.Policy, t.Logprobs = append(t.Policy, true), append(t.Logprobs, -1)
			}
			for range et {
				t.Policy, t.Logprobs = append(t.Policy, false), append(t.Logprobs, 0)
			}
			t.Text, t.PolicyText = env.Render.Decode(t.Tokens), env.Render.Decode(pt)
			groups[i].Trajectories = append(groups[i].Trajectories, t)
		}
	}
	return groups, nil
}

func testEnv(more []task.Example) *Env {
	return &Env{Render: byteRender{}, Metrics: Metrics{},
		Reward: func(e task.Example, response string) (float64, bool) {
			if strings.Contains(response, "####"+e.Answer) {
				return 1, true
			}
			return 0, true
		},
		More: func(n int) ([]task.Example, error) {
			if n > len(more) {
				return nil, errors.New("no more")
			}
			out := more[:n]
			more = more[n:]
			return out, nil
		}}
}

func ex(id, answer string) task.Example {
	return task.Example{ID: id, Prompt: "Q:" + id + "\n", Answer: answer}
}

// TestVerifierReadsOnlyThePolicy gives the policy a wrong answer and the
// environment (an expert's reply) the right one: no reward.
func TestVerifierReadsOnlyThePolicy(t *testing.T) {
	ro := &scriptedRollout{
		policy: func(_ string, k int) string { return fmt.Sprintf("####%d", 3+k%2*4) }, // ####3, ####7, …
		env:    func(string, int) string { return "!E1:####7" },
	}
	r := &RL{Objective: mustFamily(t, GRPO), GroupSize: 4, Rollout: ro}
	env := testEnv(nil)
	b, err := r.Step(context.Background(), env, []task.Example{ex("a", "7")})
	if err != nil {
		t.Fatal(err)
	}
	if env.Metrics["accuracy"] != 0.5 {
		t.Fatalf("accuracy %v, want 0.5: the expert's ####7 must not count", env.Metrics["accuracy"])
	}
	if len(b.Terms) != 1 || len(b.Terms[0].Data) != 4 {
		t.Fatalf("terms %+v", b.Terms)
	}
}

// TestVariantsGroupAndSkip asks each question under two variants: groups
// and advantages stay per variant, per-variant metrics are logged, and a
// prompt too long for the context is skipped and counted.
func TestVariantsGroupAndSkip(t *testing.T) {
	ro := &scriptedRollout{
		// Under E1 the first two samples are right; under E2 none.
		policy: func(p string, k int) string {
			if strings.HasSuffix(p, "@E1\n") && k < 2 {
				return "####5"
			}
			return "####0"
		},
		env: func(string, int) string { return "" },
	}
	r := &RL{Objective: mustFamily(t, DrGRPO), GroupSize: 4, Rollout: ro,
		Variants: []Variant{{Name: "E1", Suffix: "@E1\n"}, {Name: "E2", Suffix: "@E2\n"}}}
	env := testEnv(nil)
	long := ex(strings.Repeat("x", 70), "5")
	b, err := r.Step(context.Background(), env, []task.Example{ex("a", "5"), long})
	if err != nil {
		t.Fatal(err)
	}
	m := env.Metrics
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

// TestDynamicSamplingDrawsMore drops all-wrong groups and draws more
// questions until the batch is full or the rounds run out.
func TestDynamicSamplingDrawsMore(t *testing.T) {
	ro := &scriptedRollout{
		policy: func(p string, k int) string {
			if strings.Contains(p, "good") && k == 0 {
				return "####1"
			}
			return "####0"
		},
		env: func(string, int) string { return "" },
	}
	r := &RL{Objective: mustFamily(t, DAPO), GroupSize: 2, Rollout: ro, Filter: &DynamicSampling{MaxRounds: 3}}
	env := testEnv([]task.Example{ex("bad3", "1"), ex("good2", "1"), ex("bad4", "1")})
	b, err := r.Step(context.Background(), env, []task.Example{ex("good1", "1"), ex("bad1", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if ro.calls != 3 || env.Metrics["resampled"] != 2 || len(b.Terms[0].Data) != 4 {
		t.Fatalf("%d rollouts, %v resampled, %d datums", ro.calls, env.Metrics["resampled"], len(b.Terms[0].Data))
	}
}

// TestNoSignalNoTerm: all groups uniform and no entropy or KL term, so the
// objective returns nothing and the loop takes no optimizer step.
func TestNoSignalNoTerm(t *testing.T) {
	ro := &scriptedRollout{policy: func(string, int) string { return "####0" }, env: func(string, int) string { return "" }}
	r := &RL{Objective: mustFamily(t, GRPO), GroupSize: 3, Rollout: ro}
	b, err := r.Step(context.Background(), testEnv(nil), []task.Example{ex("a", "1")})
	if err != nil || len(b.Terms) != 0 {
		t.Fatalf("terms %+v, %v", b, err)
	}
}

// counter is a stateful part.
type counter struct{ n int }

func (c *counter) Terms(context.Context, *Env, []Scored) ([]Term, error) { c.n++; return nil, nil }
func (c *counter) State() (json.RawMessage, error)                       { return json.Marshal(c.n) }
func (c *counter) Restore(b json.RawMessage) error                       { return json.Unmarshal(b, &c.n) }

func TestRLStateCollectsParts(t *testing.T) {
	ro := &scriptedRollout{policy: func(string, int) string { return "####0" }, env: func(string, int) string { return "" }}
	a := &RL{Objective: mustFamily(t, GRPO), GroupSize: 2, Rollout: ro, Extras: []Extra{&counter{}}}
	for range 3 {
		if _, err := a.Step(context.Background(), testEnv(nil), []task.Example{ex("a", "1")}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	b := &RL{Objective: mustFamily(t, GRPO), Extras: []Extra{&counter{}}}
	if err := b.Restore(st); err != nil || b.Extras[0].(*counter).n != 3 {
		t.Fatalf("restored %+v, %v (state %s)", b.Extras[0], err, st)
	}
	if err := b.Restore(json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "no state for *method.counter") {
		t.Fatalf("missing state: %v", err)
	}
}

func TestSupervisedSkipsAndCounts(t *testing.T) {
	s := &Supervised{Variants: []Variant{{Name: "E1", Suffix: "@E1\n"}}, MaxLen: 40}
	env := testEnv(nil)
	exs := []task.Example{
		{ID: "ok", Prompt: "Q:1+1\n", Solution: "1+1=2", Answer: "2"},
		{ID: "none", Prompt: "Q:2+2\n", Answer: "4"},
		{ID: "long", Prompt: "Q:1\n", Solution: strings.Repeat("9", 50), Answer: "9"},
	}
	b, err := s.Step(context.Background(), env, exs)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Terms) != 1 || len(b.Terms[0].Data) != 1 || env.Metrics["data/skipped_no_solution"] != 1 || env.Metrics["data/skipped_long_prompts"] != 1 {
		t.Fatalf("terms %+v metrics %v", b.Terms, env.Metrics)
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
	s := &Supervised{Variants: []Variant{{Name: "E1", Suffix: "@E1\n"}, {Name: "E2", Suffix: "@E2\n"}}}
	env := testEnv(nil)
	exs := []task.Example{
		{ID: "e2", Prompt: "Q:1+1\n", Solution: "1+1=2\n####2", Answer: "2", Meta: map[string]string{VariantKey: "E2"}},
		{ID: "both", Prompt: "Q:2+2\n", Solution: "2+2=4\n####4", Answer: "4"},
		{ID: "nobody", Prompt: "Q:3+3\n", Solution: "####6", Answer: "6", Meta: map[string]string{VariantKey: "E5"}},
	}
	b, err := s.Step(context.Background(), env, exs)
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

func TestReferenceResponse(t *testing.T) {
	for _, tc := range []struct {
		e    task.Example
		want string
	}{
		{task.Example{Solution: "3 + 4 = 7", Answer: "7"}, "3 + 4 = 7\n#### 7\n"},
		{task.Example{Solution: "12+7=19\n####19\n", Answer: "19"}, "12+7=19\n####19\n"},
		{task.Example{Solution: `so \boxed{5}`, Answer: "5"}, "so \\boxed{5}\n"},
		{task.Example{Answer: "5"}, ""},
	} {
		if got := ReferenceResponse(tc.e); got != tc.want {
			t.Errorf("ReferenceResponse(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}

func mustFamily(t *testing.T, a Algorithm) *Family {
	t.Helper()
	f, err := NewFamily(a, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
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

// TestExtrasSeeTheGroupsDynamicSamplingDrops: DAPO's filter keeps groups
// all wrong out of the policy-gradient batch, but the hard-example buffer
// still buffers them and mutual learning still pairs a question's expert
// whose answers were all wrong with the expert that got one right.
func TestExtrasSeeTheGroupsDynamicSamplingDrops(t *testing.T) {
	ro := &scriptedRollout{
		// Under E1 the first answer of question "a" is right; every other
		// answer is wrong.
		policy: func(p string, k int) string {
			if strings.HasPrefix(p, "Q:a\n") && strings.HasSuffix(p, "@E1\n") && k == 0 {
				return "####1"
			}
			return "####0"
		},
		env: func(string, int) string { return "" },
	}
	buffer := &HardBuffer{K: 3, Capacity: 100, LR: 1e-5, Weight: 1}
	r := &RL{Objective: mustFamily(t, DAPO), GroupSize: 4, Rollout: ro, Filter: &DynamicSampling{MaxRounds: 0},
		Variants: []Variant{e1, e2}, Extras: []Extra{&MutualLearning{Weight: 1}, buffer}}
	env := testEnv(nil)
	env.Seed = 1
	exs := []task.Example{ex("a", "1")}
	for i := range 6 {
		exs = append(exs, task.Example{ID: fmt.Sprint(i), Prompt: fmt.Sprintf("Q:%d\n", i), Answer: "1", Solution: "1"})
	}
	b, err := r.Step(context.Background(), env, exs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, term := range b.Terms {
		names = append(names, term.Name)
		if term.Name == "pg" && len(term.Data) != 4 {
			t.Errorf("the policy-gradient batch has %d answers, want E1's 4 on question a", len(term.Data))
		}
	}
	if !slices.Contains(names, "mutual") || env.Metrics["mutual/pair/E1>E2"] != 1 {
		t.Errorf("terms %v, metrics %v: E1 should teach E2 on question a", names, env.Metrics)
	}
	// Twelve all-wrong groups with a reference solution (six questions,
	// two experts), each buffered with probability 3/4.
	if len(buffer.Entries) < 4 || env.Metrics["buffer/added"] != float64(len(buffer.Entries)) {
		t.Errorf("the buffer holds %d entries (metrics %v), want most of the 12 all-wrong groups", len(buffer.Entries), env.Metrics)
	}
}
