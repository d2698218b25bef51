package eval_test

import (
	"context"
	"net"
	"testing"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/serve"
	"rlvr/task/world"
)

// TestRemoteAgainstServedExperts evaluates the world's scripted experts
// through the OpenAI API: the reference (E0) is always right, and E2's
// accuracy equals its known slip rate.
func TestRemoteAgainstServedExperts(t *testing.T) {
	srv, err := serve.New(serve.Config{}, expert.WorldModels()...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	examples := world.Examples(11, 60, []int{3, 4})
	problems := world.Mix(11, 60, []int{3, 4})
	for _, tc := range []struct {
		model string
		style int
	}{{"E0", 0}, {"E2", 2}} {
		gen := &eval.Remote{Client: client.New(client.Config{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: tc.model})}
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
