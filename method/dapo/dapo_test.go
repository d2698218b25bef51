package dapo

import (
	"context"
	"math"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/method/part"
	"rlvr/task"
)

func TestOverlong(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64
	}{{100, 0}, {192, 0}, {224, -0.5}, {256, -1}, {300, -1}} {
		if got := Overlong(tc.n, 256, 64); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Overlong(%d, 256, 64) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestDynamicSamplingDrawsMore drops all-wrong groups and draws more
// questions until the batch is full or the rounds run out.
func TestDynamicSamplingDrawsMore(t *testing.T) {
	ro := &methodtest.ScriptedRollout{
		Policy: func(p string, k int) string {
			if strings.Contains(p, "good") && k == 0 {
				return "####1"
			}
			return "####0"
		},
		Env: func(string, int) string { return "" },
	}
	r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 2, Rollout: ro, Filter: DynamicSampling{MaxRounds: 3}}
	sc := methodtest.NewStepContext([]task.Example{methodtest.Example("bad3", "1"), methodtest.Example("good2", "1"), methodtest.Example("bad4", "1")})
	b, err := r.Step(context.Background(), sc, []task.Example{methodtest.Example("good1", "1"), methodtest.Example("bad1", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Calls != 3 || sc.Metrics["resampled"] != 2 || len(b.Terms[0].Data) != 4 {
		t.Fatalf("%d rollouts, %v resampled, %d datums", ro.Calls, sc.Metrics["resampled"], len(b.Terms[0].Data))
	}
}

func TestOverlongPenaltyConfig(t *testing.T) {
	o := &OverlongPenaltyConfig{}
	if err := methodtest.Resolve(o, &part.Run{MaxTokens: 256}); err != "" || o.Buffer != 64 {
		t.Errorf("default buffer %d, %s", o.Buffer, err)
	}
	o = &OverlongPenaltyConfig{Buffer: 256}
	if err := methodtest.Resolve(o, &part.Run{MaxTokens: 256}); !strings.Contains(err, "overlong_penalty.buffer = 256 must be in [0, max_tokens)") {
		t.Errorf("buffer at the budget: %q", err)
	}
}
