package method

import (
	"math"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
)

// traj is a trajectory after a 3-token prompt: two policy tokens, one
// environment token, one policy token.
func traj() rollout.Trajectory {
	return rollout.Trajectory{Prompt: []int32{1, 2, 3}, Tokens: []int32{4, 5, 6, 7},
		Policy: []bool{true, true, false, true}, Logprobs: []float32{-0.1, -0.2, 0, -0.3}}
}

func group(rewards ...float64) Scored {
	g := Scored{Rewards: rewards}
	for range rewards {
		g.Trajectories = append(g.Trajectories, traj())
	}
	return g
}

func TestPolicyDatumAlignsTokens(t *testing.T) {
	tr := traj()
	d := PolicyDatum(&tr, 0.5)
	// Input 1 2 3 4 5 6, targets 2 3 4 5 6 7: positions 2, 3 and 5 predict
	// policy tokens 4, 5 and 7; position 4 predicts the environment's 6.
	wantW := []float32{0, 0, 1, 1, 0, 1}
	wantQ := []float32{0, 0, -0.1, -0.2, 0, -0.3}
	for i := range wantW {
		if d.Weights[i] != wantW[i] || d.SamplerLogprobs[i] != wantQ[i] || d.Advantages[i] != 0.5*wantW[i] {
			t.Fatalf("position %d: weight %v logprob %v advantage %v", i, d.Weights[i], d.SamplerLogprobs[i], d.Advantages[i])
		}
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFamilyAdvantagesAndLosses(t *testing.T) {
	groups := []Scored{group(1, 0, 0, 1), group(0, 0, 0, 0)}
	sd := math.Sqrt(1.0 / 3)
	for _, tc := range []struct {
		alg    Algorithm
		first  float64 // advantage of the first sample of group 0
		agg    backend.Aggregation
		clipHi float32
	}{
		{GRPO, 0.5 / (sd + 1e-4), backend.SeqMeanTokenMean, 0.2},
		{DrGRPO, 0.5, backend.SeqMeanTokenSumNorm, 0.2},
		{DAPO, 0.5 / (sd + 1e-4), backend.TokenMean, 0.28},
	} {
		f, err := NewFamily(tc.alg, 64)
		if err != nil {
			t.Fatal(err)
		}
		terms, st, err := f.Build(groups)
		if err != nil {
			t.Fatal(err)
		}
		term := terms[0]
		if len(term.Data) != 8 || st.ZeroVariance != 1 || st.Trained != 4 {
			t.Fatalf("%s: %d datums, %+v", tc.alg, len(term.Data), st)
		}
		if got := float64(term.Data[0].Advantages[2]); math.Abs(got-tc.first) > 1e-6 {
			t.Errorf("%s: advantage %v, want %v", tc.alg, got, tc.first)
		}
		if term.Aggregation != tc.agg || term.Loss.ClipHigh != tc.clipHi || term.Loss.PolicyGradient != backend.ClippedPG {
			t.Errorf("%s: %+v", tc.alg, term)
		}
		if tc.alg == DrGRPO && term.Norm != 64 {
			t.Errorf("Dr.GRPO normalizer %v", term.Norm)
		}
	}
}

func TestReinforcePPNormalizesOverTheBatch(t *testing.T) {
	f, _ := NewFamily(ReinforcePP, 64)
	terms, _, _ := f.Build([]Scored{group(1, 0), group(1, 1)})
	// Group-mean baselines give 0.5, −0.5, 0, 0; over the batch (mean 0,
	// unbiased std sqrt(1/6)) they become ±0.5/sqrt(1/6) and 0.
	want := 0.5 / (math.Sqrt(1.0/6) + 1e-4)
	var got []float64
	for _, d := range terms[0].Data {
		got = append(got, float64(d.Advantages[2]))
	}
	if math.Abs(got[0]-want) > 1e-6 || math.Abs(got[1]+want) > 1e-6 || got[2] != 0 || got[3] != 0 {
		t.Fatalf("advantages %v, want ±%v, 0, 0", got, want)
	}
}

func TestRFTTrainsOnCorrectSamples(t *testing.T) {
	f, _ := NewFamily(RFT, 64)
	terms, st, _ := f.Build([]Scored{group(1, 0, 1), group(0, 0)})
	if len(terms[0].Data) != 2 || st.Trained != 2 || terms[0].Loss.NLL != 1 || terms[0].Loss.PolicyGradient != "" {
		t.Fatalf("%+v %+v", terms[0].Loss, st)
	}
	if _, err := NewFamily("ppo", 64); err == nil {
		t.Fatal("unknown algorithm accepted")
	}
}

// TestPositiveReinforce is MEML-GRPO's eq. 6: REINFORCE with max(A, 0).
func TestPositiveReinforce(t *testing.T) {
	f, _ := NewFamily(GRPO, 64)
	f.PositiveReinforce = true
	terms, st, err := f.Build([]Scored{group(1, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if terms[0].Loss.PolicyGradient != backend.Reinforce || st.Trained != 2 {
		t.Fatalf("loss %+v, %d trained", terms[0].Loss, st.Trained)
	}
	for i, d := range terms[0].Data {
		a := d.Advantages[2]
		if (i == 0 || i == 3) != (a > 0) || a < 0 {
			t.Fatalf("sample %d: advantage %v", i, a)
		}
	}
	if err := terms[0].Loss.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestMaskTruncated leaves the answers the budget cut off out of the loss
// and its denominators, while their rewards still set their group's
// baseline; without the mask they train like the others.
func TestMaskTruncated(t *testing.T) {
	groups := []Scored{group(1, 0, 0, 0)}
	groups[0].Correct = []bool{true, false, false, false}
	groups[0].Trajectories[0].Finish = sample.FinishLength // the right one
	groups[0].Trajectories[2].Finish = sample.FinishLength
	for _, mask := range []bool{false, true} {
		f, _ := NewFamily(DrGRPO, 64)
		f.MaskTruncated = mask
		terms, st, err := f.Build(groups)
		if err != nil {
			t.Fatal(err)
		}
		var adv []float32
		for _, d := range terms[0].Data {
			adv = append(adv, d.Advantages[2])
		}
		// The baseline is the mean of all four rewards, 0.25, masked or not.
		want := []float32{0.75, -0.25, -0.25, -0.25}
		if mask {
			want = []float32{-0.25, -0.25} // answers 1 and 3
		}
		if !slices.Equal(adv, want) || st.Trained != len(want) {
			t.Errorf("mask %v: advantages %v, %d trained; want %v", mask, adv, st.Trained, want)
		}
		if err := backend.Aggregate(terms[0].Data, backend.SeqMeanTokenSumNorm, 64); err != nil {
			t.Fatal(err)
		}
		// One sequence of len(want) in each denominator: 1/(n·64) per token.
		if got, want := terms[0].Data[0].Weights[2], 1/float32(len(want)*64); got != want {
			t.Errorf("mask %v: weight %v, want %v", mask, got, want)
		}
	}
	m := Metrics{}
	scoreMetrics(m, groups, false)
	if m[rundir.MetricTruncatedFrac] != 0.5 {
		t.Errorf("truncated_frac %v, want 0.5", m[rundir.MetricTruncatedFrac])
	}
}

// TestBatchStd centers each group on its mean and divides every group by
// the std of the whole batch's rewards, as TRL's scale_rewards="batch".
func TestBatchStd(t *testing.T) {
	f, _ := NewFamily(GRPO, 64)
	f.Norm = NormBatchStd
	terms, _, err := f.Build([]Scored{group(1, 0), group(0.5, 0.5), group(1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sd := StdDev([]float64{1, 0, 0.5, 0.5, 1, 1}) + f.Eps
	want := []float64{0.5 / sd, -0.5 / sd, 0, 0, 0, 0}
	for i, d := range terms[0].Data {
		if got := float64(d.Advantages[2]); math.Abs(got-want[i]) > 1e-6 {
			t.Fatalf("answer %d: advantage %v, want %v", i, got, want[i])
		}
	}
}

// TestAdvantageNormErrors: a group without its verdicts under
// correctness_std, or an unknown normalization, is an error, not a panic.
func TestAdvantageNormErrors(t *testing.T) {
	f, _ := NewFamily(DAPO, 64)
	f.Norm = NormCorrectnessStd
	if _, _, err := f.Build([]Scored{group(1, 0)}); err == nil || !strings.Contains(err.Error(), "0 verdicts for 2 rewards") {
		t.Errorf("missing verdicts: %v", err)
	}
	f.Norm = "zscore"
	if _, _, err := f.Build([]Scored{group(1, 0)}); err == nil || !strings.Contains(err.Error(), `"zscore"`) {
		t.Errorf("unknown normalization: %v", err)
	}
}
