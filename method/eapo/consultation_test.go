package eapo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// consulter is a policy of the world's consultation format: on its first
// turn it writes Action (if not empty), and once replies are in its
// history (or when it does not consult) it answers: the answer an
// accepted reply gave ("!E1:7" → "####7"), else Own. Its tokens have
// logprob −0.25.
type consulter struct {
	Action string
	Own    string
	mu     sync.Mutex
	turns  int
}

func (c *consulter) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	c.mu.Lock()
	c.turns++
	c.mu.Unlock()
	out := make([][]sample.Completion, len(reqs))
	for i, r := range reqs {
		hist := methodtest.ByteRender{}.Decode(r.Prompt)
		text := "####" + c.Own + "\n"
		if c.Action != "" && !strings.Contains(hist, "!E") && !strings.HasSuffix(hist, "?\n") {
			text = c.Action
		}
		for _, line := range strings.Split(hist, "\n") {
			if a, ok := strings.CutPrefix(line, "!"); ok {
				if _, v, _ := strings.Cut(a, ":"); v != "-" {
					text = "####" + v + "\n"
				}
			}
		}
		if strings.HasSuffix(hist, "?\n") { // a consult answered by no one (the last turn)
			text = "####" + c.Own + "\n"
		}
		comp := sample.Completion{Finish: sample.FinishStop}
		for _, st := range r.Params.Stop {
			if k := strings.Index(text, st); k >= 0 && r.Params.IncludeStop {
				text, comp.StopString = text[:k+len(st)], st
				break
			}
		}
		comp.Text, comp.Tokens = text, methodtest.ByteRender{}.Encode(text)
		for range comp.Tokens {
			comp.Logprobs = append(comp.Logprobs, -0.25)
		}
		out[i] = []sample.Completion{comp}
	}
	return out, nil
}

// answerFunc is an expert answering through a function, counting its
// questions.
type answerFunc struct {
	mu    sync.Mutex
	asked int
	seeds []uint64 // of the requests, in the order asked
	f     func(q string) (string, error)
}

func (a *answerFunc) Answer(_ context.Context, reqs []expert.Request, done func(int, string, error)) {
	for i, r := range reqs {
		a.mu.Lock()
		a.asked++
		a.seeds = append(a.seeds, r.Seed)
		a.mu.Unlock()
		text, err := a.f(r.Prompt)
		done(i, text, err)
	}
}

// consultation is a Consultation of the world's format with experts E1
// and E2 answering "####7", accepting with a constant p.
func consultation(p float64, experts ...*answerFunc) *Consultation {
	pool := &expert.Pool{}
	for i, a := range experts {
		pool.Members = append(pool.Members, expert.Member{Name: fmt.Sprintf("E%d", i+1), Answerer: a})
	}
	return &Consultation{Format: World{}, Pool: pool, Accept: Schedule{Kind: optim.Constant, Start: p},
		Turns: Schedule{Kind: optim.Constant, Start: 3}, RunSteps: 10, MaxQueries: 3, Penalty: 0.1, MaxTokens: 200}
}

func seven() *answerFunc {
	return &answerFunc{f: func(string) (string, error) { return "19*3=57\n####7\n", nil }}
}

func policyStepContext(pol *consulter) *method.StepContext {
	sc := methodtest.NewStepContext(nil)
	sc.Policy = pol
	sc.Sampling = sample.Params{MaxTokens: 40}
	sc.Seed = 11
	return sc
}

// TestConsultationAcceptsWithProbabilityP: each query's reply is written
// with probability p, declined ones cost no call, and the accepted share
// over 1,200 queries is within five standard deviations of p.
func TestConsultationAcceptsWithProbabilityP(t *testing.T) {
	for _, p := range []float64{0, 0.3, 1} {
		e1, e2 := seven(), seven()
		c := consultation(p, e1, e2)
		r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 8, Rollout: c, Shapers: []method.Shaper{c}}
		sc := policyStepContext(&consulter{Action: "?E1:1+2;E2:3+4?\n", Own: "0"})
		var examples []task.Example
		for i := range 75 {
			examples = append(examples, methodtest.Example(fmt.Sprint("q", i), "7"))
		}
		if _, err := r.Step(context.Background(), sc, examples); err != nil {
			t.Fatal(err)
		}
		m := sc.Metrics
		const queries = 75 * 8 * 2
		accepted := m[MetricAcceptanceRate] * queries
		if asked := e1.asked + e2.asked; math.Abs(float64(asked)-accepted) > 1e-6 || m[MetricDeclined] != float64(queries-asked) {
			t.Fatalf("p=%v: %d asked, %v accepted, %v declined", p, asked, accepted, m[MetricDeclined])
		}
		sd := math.Sqrt(p * (1 - p) / queries)
		if got := m[MetricAcceptanceRate]; math.Abs(got-p) > 5*sd+1e-12 {
			t.Fatalf("p=%v: accepted %.3f of queries", p, got)
		}
		if m[MetricCallRate] != 1 || m[MetricQueriesPerEpisode] != 2 || m[MetricAcceptance] != p {
			t.Fatalf("p=%v: metrics %v", p, m)
		}
		// An episode is right when a reply was accepted (the policy copies
		// it), and pays 0.1 for its one consultation either way.
		if want := 1 - math.Pow(1-p, 2); math.Abs(m["accuracy"]-want) > 5*math.Sqrt(want*(1-want)/600)+1e-12 {
			t.Fatalf("p=%v: accuracy %v, want about %v", p, m["accuracy"], want)
		}
		if math.Abs(m["reward_mean"]-(m["accuracy"]-0.1)) > 1e-9 {
			t.Fatalf("p=%v: mean reward %v, accuracy %v: the penalty is not 0.1 per consultation", p, m["reward_mean"], m["accuracy"])
		}
	}
}

// TestConsultationSeedsEachAsk: 600 episodes ask one expert one
// question; each ask carries its own seed, so that a sampled expert
// answers each afresh, and the same step draws the same seeds again.
func TestConsultationSeedsEachAsk(t *testing.T) {
	var runs [2][]uint64
	for k := range runs {
		e1 := seven()
		c := consultation(1, e1)
		r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 8, Rollout: c, Shapers: []method.Shaper{c}}
		var examples []task.Example
		for i := range 75 {
			examples = append(examples, methodtest.Example(fmt.Sprint("q", i), "7"))
		}
		if _, err := r.Step(context.Background(), policyStepContext(&consulter{Action: "?E1:1+2?\n", Own: "0"}), examples); err != nil {
			t.Fatal(err)
		}
		runs[k] = slices.Clone(e1.seeds)
		slices.Sort(runs[k])
	}
	if len(runs[0]) != 600 || len(slices.Compact(slices.Clone(runs[0]))) != 600 {
		t.Fatalf("%d asks, %d distinct seeds", len(runs[0]), len(slices.Compact(slices.Clone(runs[0]))))
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Errorf("the same step drew other seeds")
	}
}

// TestConsultationMasksExpertTokens: replies are environment tokens, out
// of the loss, and the policy's tokens keep the sampler's logprobs.
func TestConsultationMasksExpertTokens(t *testing.T) {
	c := consultation(1, seven(), seven())
	r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 2, Rollout: c, Shapers: []method.Shaper{c}}
	sc := policyStepContext(&consulter{Action: "?E1:1+2?\n", Own: "0"})
	var groups []method.Scored
	r.Shapers = append(r.Shapers, shaperFunc(func(g []method.Scored) { groups = g }))
	if _, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("a", "7")}); err != nil {
		t.Fatal(err)
	}
	tr := groups[0].Trajectories[0]
	want := "?E1:1+2?\n!E1:7\n####7\n"
	if tr.Text != want || tr.PolicyText != "?E1:1+2?\n####7\n" || tr.Turns != 2 {
		t.Fatalf("episode %q (policy %q) in %d turns", tr.Text, tr.PolicyText, tr.Turns)
	}
	reply := strings.Index(want, "!E1")
	for i := range tr.Tokens {
		env := i >= reply && i < reply+len("!E1:7\n")
		if tr.Policy[i] == env || (tr.Logprobs[i] == -0.25) == env {
			t.Fatalf("token %d (%q): policy %v logprob %v", i, want[i], tr.Policy[i], tr.Logprobs[i])
		}
	}
	d := method.PolicyDatum(&tr, 1) // what every policy-gradient term trains on
	off := len(tr.Prompt) - 1
	for i := range tr.Tokens {
		if w := d.Weights[off+i]; (w == 0) != !tr.Policy[i] {
			t.Fatalf("token %d: weight %v, policy %v", i, w, tr.Policy[i])
		}
	}
}

type shaperFunc func([]method.Scored)

func (f shaperFunc) Shape(_ context.Context, _ *method.StepContext, g []method.Scored) error {
	f(g)
	return nil
}

// TestConsultationBudgets: the turn budget anneals (3 turns at the start,
// 1 at the end, where a consultation goes unanswered), queries beyond k are
// unavailable, a malformed action ends its episode, and an unknown expert
// is a failure of its own.
func TestConsultationBudgets(t *testing.T) {
	cases := []struct {
		name   string
		step   int
		action string
		check  func(m method.Metrics, asked int) error
	}{
		{"start", 0, "?E1:1+2?\n", func(m method.Metrics, asked int) error {
			if m[MetricTurnBudget] != 3 || m[MetricTurns] != 2 || asked != 4 || m["accuracy"] != 1 {
				return fmt.Errorf("budget %v, %v turns, %d asked, accuracy %v", m[MetricTurnBudget], m[MetricTurns], asked, m["accuracy"])
			}
			return nil
		}},
		{"end", 10, "?E1:1+2?\n", func(m method.Metrics, asked int) error {
			if m[MetricTurnBudget] != 1 || m[MetricTurns] != 1 || asked != 0 || m["accuracy"] != 0 {
				return fmt.Errorf("budget %v, %v turns, %d asked, accuracy %v", m[MetricTurnBudget], m[MetricTurns], asked, m["accuracy"])
			}
			// Unanswered, the actions still count and cost the penalty.
			if m[MetricUnanswered] != 4 || m[MetricCallRate] != 1 || math.Abs(m["reward_mean"]+0.1) > 1e-9 {
				return fmt.Errorf("%v unanswered, call rate %v, mean reward %v", m[MetricUnanswered], m[MetricCallRate], m["reward_mean"])
			}
			return nil
		}},
		{"over k", 0, "?E1:1;E2:2;E1:3;E2:4;E1:5?\n", func(m method.Metrics, asked int) error {
			if m[MetricOverLimit] != 8 || asked != 12 {
				return fmt.Errorf("%v over the limit, %d asked", m[MetricOverLimit], asked)
			}
			return nil
		}},
		{"malformed", 0, "?E1 1+2?\n", func(m method.Metrics, asked int) error {
			if m[MetricMalformed] != 4 || asked != 0 || m[MetricTurns] != 1 {
				return fmt.Errorf("%v malformed, %d asked, %v turns", m[MetricMalformed], asked, m[MetricTurns])
			}
			return nil
		}},
		{"unknown expert", 0, "?E9:1+2?\n", func(m method.Metrics, asked int) error {
			if m[MetricFail+FailUnknownExpert] != 4 || asked != 0 || m["accuracy"] != 0 {
				return fmt.Errorf("%v unknown, %d asked", m[MetricFail+FailUnknownExpert], asked)
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e1, e2 := seven(), seven()
			c := consultation(1, e1, e2)
			c.Turns = Schedule{Kind: optim.Linear, Start: 3, End: 1}
			r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 2, Rollout: c, Shapers: []method.Shaper{c}}
			sc := policyStepContext(&consulter{Action: tc.action, Own: "0"})
			sc.Step = tc.step
			if _, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("a", "7"), methodtest.Example("b", "7")}); err != nil {
				t.Fatal(err)
			}
			if err := tc.check(sc.Metrics, e1.asked+e2.asked); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestConsultationFailuresAreReplies: an expert that fails or answers
// nothing usable costs the policy its reply, not the step, and each
// failure is counted by kind.
func TestConsultationFailuresAreReplies(t *testing.T) {
	failing := &answerFunc{f: func(string) (string, error) { return "", fmt.Errorf("down: %w", expert.ErrRefused) }}
	// A reply that quotes numbers but gives no answer is no answer.
	garbage := &answerFunc{f: func(string) (string, error) { return "I cannot read the question \"Q:(12+7\".", nil }}
	c := consultation(1, failing, garbage)
	r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 4, Rollout: c, Shapers: []method.Shaper{c}}
	sc := policyStepContext(&consulter{Action: "?E1:1+2;E2:1+2?\n", Own: "0"})
	if _, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("a", "7")}); err != nil {
		t.Fatal(err)
	}
	m := sc.Metrics
	if m[MetricFail+expert.FailRefused] != 4 || m[MetricFail+FailUnreadable] != 4 || m[MetricAcceptanceRate] != 0 || m["accuracy"] != 0 {
		t.Fatalf("metrics %v", m)
	}
}

// TestConsultationStateAndSchedule: the totals survive State/Restore, and
// p(t) depends only on the step, so a resumed part continues the
// schedule where it was.
func TestConsultationStateAndSchedule(t *testing.T) {
	run := func(c *Consultation, step int) method.Metrics {
		r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 2, Rollout: c, Shapers: []method.Shaper{c}}
		sc := policyStepContext(&consulter{Action: "?E1:1+2?\n", Own: "0"})
		sc.Step, sc.Seed = step, uint64(100+step)
		if _, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("a", "7"), methodtest.Example("b", "7")}); err != nil {
			t.Fatal(err)
		}
		return sc.Metrics
	}
	annealed := func() *Consultation {
		c := consultation(1, seven())
		c.Accept = Schedule{Kind: optim.Cosine, Start: 1, End: 0}
		return c
	}
	a := annealed()
	var want []method.Metrics
	for step := range 6 {
		want = append(want, run(a, step))
	}
	b := annealed()
	for step := range 3 {
		run(b, step)
	}
	st, err := b.State()
	if err != nil {
		t.Fatal(err)
	}
	resumed := annealed()
	if err := resumed.Restore(st); err != nil {
		t.Fatal(err)
	}
	for step := 3; step < 6; step++ {
		got := run(resumed, step)
		for _, k := range []string{MetricAcceptance, MetricAcceptanceRate, MetricTotalCalls, MetricTotalAccepted, rundir.MetricRewardMean} {
			if got[k] != want[step][k] {
				t.Fatalf("step %d: %s %v after resume, %v without", step, k, got[k], want[step][k])
			}
		}
	}
	if want[5][MetricAcceptance] >= want[0][MetricAcceptance] || want[0][MetricAcceptance] != 1 {
		t.Fatalf("p(t) %v … %v does not fall from 1", want[0][MetricAcceptance], want[5][MetricAcceptance])
	}
	var totals struct{ Calls int64 }
	if err := json.Unmarshal(st, &totals); err != nil || totals.Calls != 12 {
		t.Fatalf("state %s: %v", st, err)
	}
}
