package method

import (
	"math"
	"testing"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/task"
)

// TestFamilyMembers pins what each algorithm's row trains on one group of
// four one-token answers, one right: the advantage of the right answer,
// the term's loss and aggregation, and the clip range.
func TestFamilyMembers(t *testing.T) {
	g := Scored{Example: task.Example{ID: "q"}}
	for i, ok := range []bool{true, false, false, false} {
		g.Trajectories = append(g.Trajectories, rollout.Trajectory{Prompt: []int32{1, 2}, Tokens: []int32{int32(3 + i)},
			Policy: []bool{true}, Logprobs: []float32{-1}})
		g.Correct = append(g.Correct, ok)
		g.Rewards = append(g.Rewards, map[bool]float64{true: 1}[ok])
	}
	sd := 0.5 // the sample std of 1, 0, 0, 0 (n − 1, as torch.std)
	for _, c := range []struct {
		a           Algorithm
		adv         float64 // the right answer's advantage; NaN: an NLL term
		aggregation backend.Aggregation
		norm        float32
		clipHigh    float32
	}{
		{GRPO, 0.75 / (sd + 1e-4), backend.SeqMeanTokenMean, 0, 0.2},
		{DrGRPO, 0.75, backend.SeqMeanTokenSumNorm, 64, 0.2},
		{DAPO, 0.75 / (sd + 1e-4), backend.TokenMean, 0, 0.28},
		// Over the batch (this one group): 0.75, −0.25 ×3 standardized.
		{ReinforcePP, 0.75 / (sd + 1e-4), backend.TokenMean, 0, 0.2},
		{RFT, math.NaN(), backend.TokenMean, 0, 0.2},
	} {
		f, err := NewFamily(c.a, 64)
		if err != nil {
			t.Fatal(err)
		}
		terms, _, err := f.Build([]Scored{g})
		if err != nil || len(terms) != 1 {
			t.Fatalf("%s: %d terms, %v", c.a, len(terms), err)
		}
		term := terms[0]
		if term.Aggregation != c.aggregation || term.Norm != c.norm || f.ClipLow != 0.2 || f.ClipHigh != c.clipHigh {
			t.Errorf("%s: aggregation %s norm %v clip %v/%v, want %s %v 0.2/%v", c.a, term.Aggregation, term.Norm,
				f.ClipLow, f.ClipHigh, c.aggregation, c.norm, c.clipHigh)
		}
		if math.IsNaN(c.adv) {
			if term.Loss.NLL != 1 || len(term.Data) != 1 {
				t.Errorf("%s: loss %+v on %d answers, want NLL on the right one", c.a, term.Loss, len(term.Data))
			}
			continue
		}
		last := len(term.Data[0].Advantages) - 1
		if got := float64(term.Data[0].Advantages[last]); math.Abs(got-c.adv) > 1e-3*c.adv {
			t.Errorf("%s: right answer's advantage %v, want %v", c.a, got, c.adv)
		}
	}
	if _, err := NewFamily(SFT, 64); err == nil {
		t.Error("sft has no advantages, yet NewFamily took it")
	}
}
