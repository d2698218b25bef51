package eapo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/task"
)

// referencePool is the world format's consultation over a pool whose E1
// is the reference-solution expert.
func referencePool() *Consultation {
	pool := &expert.Pool{Members: []expert.Member{{Name: "E1", API: expert.APICompletion, Model: expert.KindReference, Answerer: expert.Reference{}}}}
	return &Consultation{Format: World{}, Pool: pool, Accept: Schedule{Kind: optim.Constant, Start: 1},
		Turns: Schedule{Kind: optim.Constant, Start: 3}, RunSteps: 10, MaxQueries: 3, MaxTokens: 200}
}

// solved are n examples, each with its own answer and worked solution.
func solved(n int) []task.Example {
	var out []task.Example
	for i := range n {
		e := methodtest.Example(fmt.Sprint("q", i), fmt.Sprint(100+i))
		e.Solution = fmt.Sprintf("%d+%d = %d", 100, i, 100+i)
		out = append(out, e)
	}
	return out
}

// TestConsultationReferenceExpert: during a training step each episode's
// consult action reaches the reference expert with the example its
// prompt came from, so a policy that copies the reply answers every
// question right; an example without a solution is answered no-solution.
func TestConsultationReferenceExpert(t *testing.T) {
	c := referencePool()
	r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 3, Rollout: c, Shapers: []method.Shaper{c}}
	sc := policyStepContext(&consulter{Action: "?E1:what is the answer?\n", Own: "0"})
	examples := append(solved(5), methodtest.Example("bare", "9"))
	var groups []method.Scored
	r.Shapers = append(r.Shapers, shaperFunc(func(g []method.Scored) { groups = g }))
	if _, err := r.Step(context.Background(), sc, examples); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for k, tr := range g.Trajectories {
			bare := g.Example.ID == "bare"
			if g.Correct[k] == bare {
				t.Errorf("%s, episode %d: correct %v: %q", g.Example.ID, k, g.Correct[k], tr.Text)
			}
			if bare && (!strings.Contains(tr.Text, "!E1:-") || tr.Counts[EnvFail+expert.FailNoSolution] != 1) {
				t.Errorf("%s, episode %d: %q, counts %v", g.Example.ID, k, tr.Text, tr.Counts)
			}
		}
	}
	if got := sc.Metrics[MetricFail+expert.FailNoSolution]; got != 3 {
		t.Errorf("%v no-solution failures, want 3", got)
	}
}

// TestConsultationExamplesAligned: episodes and openings take one
// example per prompt or none; without examples the reference expert has
// nothing to answer from, a failure rather than a crash.
func TestConsultationExamplesAligned(t *testing.T) {
	c := referencePool()
	pol := &consulter{Action: "?E1:x?\n", Own: "0"}
	prompts := [][]int32{methodtest.ByteRender{}.Encode("Q:a\n"), methodtest.ByteRender{}.Encode("Q:b\n")}
	p := policyStepContext(pol).Sampling
	if _, _, err := c.Episodes(context.Background(), pol, methodtest.ByteRender{}, prompts, solved(1), 2, p, 0); err == nil ||
		!strings.Contains(err.Error(), "1 examples for 2 prompts") {
		t.Errorf("misaligned examples: %v", err)
	}
	groups, _, err := c.Episodes(context.Background(), pol, methodtest.ByteRender{}, prompts, nil, 2, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, tr := range g.Trajectories {
			if tr.Counts[EnvFail+expert.FailNoSolution] != 1 {
				t.Errorf("without examples: %q, counts %v", tr.Text, tr.Counts)
			}
		}
	}
	queries := [][]Query{{{Expert: "E1", Question: "a"}}, {{Expert: "E1", Question: "b"}}}
	opening, err := c.Opening(context.Background(), methodtest.ByteRender{}, queries, solved(2), 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"?E1:a?\n!E1:100\n", "?E1:b?\n!E1:101\n"} {
		if got := (methodtest.ByteRender{}).Decode(opening[i]); got != want {
			t.Errorf("opening %d: %q, want %q", i, got, want)
		}
	}
	if _, err := c.Opening(context.Background(), methodtest.ByteRender{}, queries, solved(3), 1); err == nil {
		t.Error("an opening with 3 examples for 2 prompts")
	}
}
