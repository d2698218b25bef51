package eval_test

import (
	"context"
	"testing"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task/world"
)

// TestRemoteAgainstServedExperts evaluates the world's scripted experts
// through the OpenAI API: the reference (E0) is always right, and E2's
// accuracy equals its known slip rate.
func TestRemoteAgainstServedExperts(t *testing.T) {
	base := servetest.Start(t, serve.Config{}, expert.WorldModels()...)
	examples := world.Examples(11, 60, []int{3, 4})
	problems := world.Mix(11, 60, []int{3, 4})
	for _, tc := range []struct {
		model string
		style int
	}{{"E0", 0}, {"E2", 2}} {
		gen := &eval.Remote{Client: client.New(client.Config{BaseURL: base, Model: tc.model})}
		rep, err := eval.Run(context.Background(), gen, examples, eval.Config{K: 2, Temperature: 1})
		if err != nil {
			t.Fatal(err)
		}
		right := 0
		for _, p := range problems {
			if _, ans := world.Solve(p, tc.style); ans == p.Answer {
				right++
			}
		}
		if want := float64(right) / float64(len(problems)); rep.Greedy.Mean != want || rep.AvgAtK != want {
			t.Errorf("%s: greedy %v avg@2 %v, want %v", tc.model, rep.Greedy.Mean, rep.AvgAtK, want)
		}
	}
}
