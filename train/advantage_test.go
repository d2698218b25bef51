package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/task"
)

// scoredGroup is a group of one-token answers with the given verdicts;
// calls[i] consult actions were taken in answer i (nil: none).
func scoredGroup(correct []bool, calls []float64) method.Scored {
	g := method.Scored{Example: task.Example{ID: "q", Prompt: "Q:1+1\n", Answer: "2"}}
	for i, ok := range correct {
		t := rollout.Trajectory{Prompt: []int32{1, 2}, Tokens: []int32{3}, Policy: []bool{true}, Logprobs: []float32{-1},
			Counts: map[string]float64{}}
		if calls != nil {
			t.Counts["calls"] = calls[i]
		}
		g.Trajectories = append(g.Trajectories, t)
		g.Correct = append(g.Correct, ok)
		g.Rewards = append(g.Rewards, map[bool]float64{true: 1}[ok])
	}
	return g
}

// trainedAdvantages builds the method a config describes, runs its reward
// shapers and its objective over groups, and returns each answer's
// advantage as the loss term carries it.
func trainedAdvantages(t *testing.T, c RLConfig, groups []method.Scored) []float64 {
	t.Helper()
	if _, err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	m, _ := newMethod(t, &c, part.Setup{MaxLen: 512})
	rl := m.(*method.RL)
	sc := &method.StepContext{Metrics: method.Metrics{}}
	for _, s := range rl.Shapers {
		if err := s.Shape(context.Background(), sc, groups); err != nil {
			t.Fatal(err)
		}
	}
	terms, _, err := rl.Objective.(*method.Family).Build(groups)
	if err != nil || len(terms) != 1 {
		t.Fatalf("terms %+v, %v", terms, err)
	}
	var out []float64
	for _, d := range terms[0].Data {
		for i, w := range d.Weights {
			if w != 0 {
				out = append(out, float64(d.Advantages[i]))
				break
			}
		}
	}
	return out
}

func oneRightOfEight() []bool { return []bool{true, false, false, false, false, false, false, false} }

// TestMEMLGRPOAdvantageIsEq5: MEML-GRPO's advantage is eq. 5, r minus the
// mean of the expert's group, undivided: one right answer of eight gets
// 1 − 1/8 = 0.875 (divided by the group's std it would be 2.47), in the
// preset and in every shipped MEML-GRPO config.
func TestMEMLGRPOAdvantageIsEq5(t *testing.T) {
	preset := DefaultRL()
	if err := preset.ApplyPreset("meml-grpo"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]RLConfig{"preset": preset}
	for _, f := range []string{"world-meml-grpo.yaml", "world-meml-grpo-hsft.yaml", "world-meml-grpo-iml.yaml",
		"world-sparse-meml-grpo.yaml", "world-meml-eapo-mel.yaml"} {
		c, err := LoadRLConfig(filepath.Join("..", "configs", f), "")
		if err != nil {
			t.Fatal(err)
		}
		cases[f] = c
	}
	for name, c := range cases {
		a := trainedAdvantages(t, c, []method.Scored{scoredGroup(oneRightOfEight(), nil)})
		if math.Abs(a[0]-0.875) > 1e-6 {
			t.Errorf("%s: the right answer's advantage is %.4f, want eq. 5's 0.875", name, a[0])
		}
	}
}

// TestConsultPenaltyKeepsItsScale: in EAPO's runs (DAPO with
// consultation), an all-wrong group in which one episode consulted gives
// that episode an advantage of the penalty's own size, −0.05·(1 − 1/8),
// not a full-strength −2.46 from dividing by the std of the penalty alone;
// in a group whose correctness varies the penalty stays 0.05 of a right
// answer's worth.
func TestConsultPenaltyKeepsItsScale(t *testing.T) {
	for _, f := range []string{"world-eapo.yaml", "world-sparse-eapo.yaml", "world-meml-eapo-mel.yaml"} {
		c, err := LoadRLConfig(filepath.Join("..", "configs", f), "")
		if err != nil {
			t.Fatal(err)
		}
		// Eq. 6's max(A, 0) (the combined run's loss) keeps only the
		// positive side.
		positive := func(a float64) float64 {
			if c.PolicyLoss == "reinforce_positive" {
				return max(a, 0)
			}
			return a
		}
		calls := []float64{1, 0, 0, 0, 0, 0, 0, 0}
		a := trainedAdvantages(t, c, []method.Scored{scoredGroup(make([]bool, 8), calls)})
		if want := positive(-0.05 * 7 / 8); math.Abs(a[0]-want) > 1e-6 || math.Abs(a[1]-0.05/8) > 1e-6 {
			t.Errorf("%s: all wrong, one consulted: advantages %.4f (consulted), %.4f, want %.5f, %.5f", f, a[0], a[1], want, 0.05/8)
		}
		if c.PolicyLoss == "reinforce_positive" {
			continue
		}
		// One right answer, one wrong answer that consulted: the penalty's
		// share of the advantage gap is its share of the reward gap.
		a = trainedAdvantages(t, c, []method.Scored{scoredGroup(oneRightOfEight(), []float64{0, 1, 0, 0, 0, 0, 0, 0})})
		if ratio := (a[2] - a[1]) / (a[0] - a[2]); math.Abs(ratio-0.05) > 1e-4 {
			t.Errorf("%s: penalty gap / correctness gap = %.4f, want 0.05", f, ratio)
		}
	}
}

// TestStdNormalizationStaysAvailable: GRPO keeps the group-std
// normalization, and advantage_norm: group_std gives it to MEML-GRPO.
func TestStdNormalizationStaysAvailable(t *testing.T) {
	grpo := DefaultRL()
	meml := DefaultRL()
	if err := meml.ApplyPreset("meml-grpo"); err != nil {
		t.Fatal(err)
	}
	meml.AdvantageNorm = method.NormGroupStd
	for name, c := range map[string]RLConfig{"grpo": grpo, "meml-grpo with group_std": meml} {
		a := trainedAdvantages(t, c, []method.Scored{scoredGroup(oneRightOfEight(), nil)})
		if want := 0.875 / (math.Sqrt(0.125) + 1e-4); math.Abs(a[0]-want) > 1e-5 {
			t.Errorf("%s: advantage %.4f, want %.4f", name, a[0], want)
		}
	}
}

// TestAdvantageNormResolves: unset takes the algorithm's (correctness_std
// with consultation), a wrong value or one for rft names the field.
func TestAdvantageNormResolves(t *testing.T) {
	for _, tc := range []struct {
		alg   method.Algorithm
		parts []string
		set   method.AdvantageNorm
		want  method.AdvantageNorm
		err   string
	}{
		{alg: method.GRPO, want: method.NormGroupStd},
		{alg: method.DrGRPO, want: method.NormNone},
		{alg: method.DAPO, parts: []string{eapo.PartConsultation}, want: method.NormCorrectnessStd},
		{alg: method.DrGRPO, parts: []string{eapo.PartConsultation}, want: method.NormNone},
		{alg: method.DAPO, parts: []string{eapo.PartConsultation}, set: method.NormGroupStd, want: method.NormGroupStd},
		{alg: method.GRPO, set: "zscore", err: `advantage_norm "zscore" is not one of`},
		{alg: method.RFT, set: method.NormNone, err: `advantage_norm "none": rft trains without advantages`},
	} {
		c := DefaultRL()
		c.Algorithm, c.Parts, c.AdvantageNorm = tc.alg, tc.parts, tc.set
		r, err := c.Resolve()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want %q", tc, err, tc.err)
			}
			continue
		}
		if err != nil || r.Family.Norm != tc.want {
			t.Errorf("%+v: advantage_norm %q, %v", tc, r.Family.Norm, err)
		}
	}
}
