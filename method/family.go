package method

import (
	"fmt"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/sample"
)

// Algorithm names the objective of a run: a member of the GRPO family, or
// SFT.
type Algorithm string

const (
	GRPO        Algorithm = "grpo"
	DrGRPO      Algorithm = "dr-grpo"
	DAPO        Algorithm = "dapo"
	ReinforcePP Algorithm = "reinforce++"
	RFT         Algorithm = "rft"
	// SFT trains on reference solutions with NLL and samples nothing (see
	// SFT, the method).
	SFT Algorithm = "sft"
)

// Algorithms lists the algorithms a run may name.
var Algorithms = []Algorithm{GRPO, DrGRPO, DAPO, ReinforcePP, RFT, SFT}

// Objective turns scored groups into the base loss terms of an RL method.
type Objective interface {
	Terms(groups []Scored) ([]Term, Stats, error)
}

// Stats are what an objective reports about the batch it built.
type Stats struct {
	Groups, ZeroVariance int
	Trained              int // trajectories with a non-zero training signal
}

// AdvantageNorm says what a group's centered rewards r − mean(r) are
// divided by.
type AdvantageNorm string

const (
	// NormNone divides by nothing: Dr.GRPO, REINFORCE++ before its batch
	// normalization, and MEML-GRPO's eq. 5.
	NormNone AdvantageNorm = "none"
	// NormGroupStd divides by the standard deviation of the group's
	// rewards (GRPO, DAPO).
	NormGroupStd AdvantageNorm = "group_std"
	// NormCorrectnessStd divides by the standard deviation of the group's
	// verdicts, and a group whose verdicts all agree by nothing: a reward
	// shaping term (EAPO's consult penalty) then keeps its size relative
	// to a right answer's 1, where the group's own std would blow a 0.05
	// penalty up to a full-strength advantage in groups all right or all
	// wrong.
	NormCorrectnessStd AdvantageNorm = "correctness_std"
	// NormBatchStd divides by the standard deviation of every reward of
	// the step's batch, one scale for all groups (TRL's
	// scale_rewards="batch"; "Tricks or Traps"' group mean with batch std),
	// so a group of near-equal rewards keeps its small advantages.
	NormBatchStd AdvantageNorm = "batch_std"
)

// AdvantageNorms lists the advantage normalizations.
var AdvantageNorms = []AdvantageNorm{NormNone, NormGroupStd, NormCorrectnessStd, NormBatchStd}

// Family is GRPO and its variants. They differ only in the row of
// Members they take: how a group's advantages are computed, which
// aggregation sums the loss, and the upper clip bound. Norm overrides the
// row's division (MEML-GRPO is grpo with NormNone, eq. 5). Groups are
// whatever the rollout made: one per question, or one per question and
// expert prompt (MEML-GRPO), so advantages are always taken inside a
// group.
type Family struct {
	Algorithm Algorithm
	Member
	ClipLow float32
	// MaxTokens is Dr.GRPO's normalizer: the generation budget.
	MaxTokens int
	// RefKL and RefKLEstimator add a KL penalty to a frozen reference in
	// the loss (the loop supplies the reference logprobs); Entropy adds an
	// entropy bonus.
	RefKL          float32
	RefKLEstimator backend.KLEstimator
	Entropy        float32
	// Eps keeps the std division finite for near-uniform groups.
	Eps float64
	// PositiveReinforce replaces the clipped surrogate by REINFORCE on
	// max(A, 0) (MEML-GRPO's eq. 6): only better-than-average answers are
	// pushed up.
	PositiveReinforce bool
	// MaskTruncated leaves out of the loss every answer the token budget
	// cut off (DAPO's overlong filtering, TRL's mask_truncated_completions):
	// its reward still counts in its group's mean and std, but it is not
	// trained on and counts in no aggregation's denominator.
	MaskTruncated bool
}

// Member is what sets one algorithm of the family apart.
type Member struct {
	// Norm is what a group's centered rewards are divided by.
	Norm AdvantageNorm
	// BatchNorm normalizes the advantages over the whole batch after
	// they are centered in their group (REINFORCE++).
	BatchNorm bool
	// Rejection trains NLL on the verified answers instead of a policy
	// gradient (RFT): no advantages.
	Rejection   bool
	Aggregation backend.Aggregation
	// ClipHigh is the upper clip bound ε_high (the lower is 0.2 for all).
	ClipHigh float32
}

// Members are the family's published defaults, one row per algorithm
// (DAPO's dynamic sampling and overlong penalty are parts of the RL
// method, not of its objective):
//
//	grpo         A = (r − mean)/std per group; seq-mean-token-mean
//	dr-grpo      A = r − mean (no std); seq-mean-token-sum-norm (÷ max_tokens)
//	dapo         as grpo, clip-higher (ε_high 0.28), token-mean
//	reinforce++  A = r − group mean, then normalized over the batch; token-mean
//	rft          NLL on the verified-correct samples; token-mean
var Members = map[Algorithm]Member{
	GRPO:        {Norm: NormGroupStd, Aggregation: backend.SeqMeanTokenMean, ClipHigh: 0.2},
	DrGRPO:      {Norm: NormNone, Aggregation: backend.SeqMeanTokenSumNorm, ClipHigh: 0.2},
	DAPO:        {Norm: NormGroupStd, Aggregation: backend.TokenMean, ClipHigh: 0.28},
	ReinforcePP: {Norm: NormNone, BatchNorm: true, Aggregation: backend.TokenMean, ClipHigh: 0.2},
	RFT:         {Norm: NormNone, Rejection: true, Aggregation: backend.TokenMean, ClipHigh: 0.2},
}

// NewFamily returns the algorithm's published defaults.
func NewFamily(a Algorithm, maxTokens int) (*Family, error) {
	m, ok := Members[a]
	if !ok {
		return nil, fmt.Errorf("method: %q is not an RL objective (want one of %v)", a, []Algorithm{GRPO, DrGRPO, DAPO, ReinforcePP, RFT})
	}
	return &Family{Algorithm: a, Member: m, ClipLow: 0.2, MaxTokens: maxTokens, Eps: 1e-4, RefKLEstimator: backend.K3}, nil
}

// Terms implements Objective. With no trajectory carrying a signal (every
// group all right or all wrong) and no entropy or KL term, it returns no
// term at all: the step then changes no weight, rather than letting Adam's
// momentum move them on a zero gradient.
func (f *Family) Terms(groups []Scored) ([]Term, Stats, error) {
	terms, st, err := f.Build(groups)
	if err != nil || st.Trained > 0 || f.Entropy != 0 || f.RefKL != 0 {
		return terms, st, err
	}
	return nil, st, nil
}

// Build computes the advantages and the loss term of the groups,
// including samples with zero advantage: they count in the aggregation's
// denominators as in TRL and verl, though their gradient is zero.
func (f *Family) Build(groups []Scored) ([]Term, Stats, error) {
	st := Stats{Groups: len(groups)}
	for _, g := range groups {
		if ZeroVariance(g.Rewards) {
			st.ZeroVariance++
		}
	}
	if f.Rejection {
		var data []backend.Datum
		for _, g := range groups {
			for i := range g.Trajectories {
				if g.Rewards[i] > 0 && !f.masked(&g.Trajectories[i]) {
					data = append(data, PolicyDatum(&g.Trajectories[i], 0))
				}
			}
		}
		st.Trained = len(data)
		return []Term{{Name: "rft", Data: data, Loss: backend.Loss{NLL: 1, Entropy: f.Entropy}, Aggregation: f.Aggregation}}, st, nil
	}
	var adv [][]float64
	for gi := range groups {
		a, err := f.advantages(&groups[gi])
		if err != nil {
			return nil, st, err
		}
		adv = append(adv, a)
	}
	if f.Norm == NormBatchStd {
		var rewards []float64
		for _, g := range groups {
			rewards = append(rewards, g.Rewards...)
		}
		sd := StdDev(rewards) + f.Eps
		for _, a := range adv {
			for i := range a {
				a[i] /= sd
			}
		}
	}
	if f.BatchNorm {
		var flat []float64
		for _, a := range adv {
			flat = append(flat, a...)
		}
		BatchNormalize(flat, f.Eps)
		k := 0
		for _, a := range adv {
			k += copy(a, flat[k:])
		}
	}
	var data []backend.Datum
	for gi, g := range groups {
		for i := range g.Trajectories {
			if f.masked(&g.Trajectories[i]) {
				continue
			}
			a := adv[gi][i]
			if f.PositiveReinforce {
				a = max(a, 0)
			}
			data = append(data, PolicyDatum(&g.Trajectories[i], float32(a)))
			if a != 0 {
				st.Trained++
			}
		}
	}
	loss := backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: f.ClipLow, ClipHigh: f.ClipHigh,
		RefKL: f.RefKL, RefKLEstimator: f.RefKLEstimator, Entropy: f.Entropy}
	if f.PositiveReinforce {
		loss.PolicyGradient, loss.ClipLow, loss.ClipHigh = backend.Reinforce, 0, 0
	}
	t := Term{Name: "pg", Data: data, Loss: loss, Aggregation: f.Aggregation}
	if f.Aggregation == backend.SeqMeanTokenSumNorm {
		t.Norm = float32(f.MaxTokens)
	}
	return []Term{t}, st, nil
}

// masked reports whether t is left out of the loss: cut off by the token
// budget under MaskTruncated.
func (f *Family) masked(t *rollout.Trajectory) bool {
	return f.MaskTruncated && t.Finish == sample.FinishLength
}

// advantages are one group's advantages before any batch normalization.
func (f *Family) advantages(g *Scored) ([]float64, error) {
	switch f.Norm {
	case NormNone, NormBatchStd: // the batch's std divides in Build
		return GroupAdvantages(g.Rewards, false, 0), nil
	case NormGroupStd:
		return GroupAdvantages(g.Rewards, true, f.Eps), nil
	case NormCorrectnessStd:
		if len(g.Correct) != len(g.Rewards) {
			return nil, fmt.Errorf("method: a group has %d verdicts for %d rewards", len(g.Correct), len(g.Rewards))
		}
		verdicts := make([]float64, len(g.Correct))
		for i, c := range g.Correct {
			if c {
				verdicts[i] = 1
			}
		}
		a := GroupAdvantages(g.Rewards, false, 0)
		if sd := StdDev(verdicts); sd > 0 {
			for i := range a {
				a[i] /= sd + f.Eps
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("method: advantage normalization %q is not one of %v", f.Norm, AdvantageNorms)
}
