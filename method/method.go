package method

import (
	"fmt"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/task"
)

// Scored is a group of trajectories for one example with their rewards.
type Scored struct {
	Example task.Example
	rollout.Group
	Rewards []float64 // shaped rewards (penalties, KL) the method trains on
	Correct []bool    // whether each answer verified, before shaping
}

// Term is one loss the learner applies to some datums: the loop splits
// Data into mini-batches, folds Aggregation into their weights, and sums
// Loss over them.
type Term struct {
	Name        string
	Data        []backend.Datum
	Loss        backend.Loss
	Aggregation backend.Aggregation
	Norm        float32 // Dr.GRPO's constant, for seq-mean-token-sum-norm
}

// Stats are what a method reports about the batch it built.
type Stats struct {
	Groups, ZeroVariance int
	Trained              int // trajectories with a non-zero training signal
}

// Method turns scored groups into loss terms. Build is called once per
// step; it may keep state across steps (buffers, schedules), which it
// then saves with the checkpoint.
type Method interface {
	Name() string
	Build(groups []Scored) ([]Term, Stats, error)
}

// policyDatum makes the datum of a trajectory: the prompt is context, and
// the policy's tokens carry weight 1 (environment tokens 0), the given
// per-token advantage, and the sampler's logprobs.
func policyDatum(t *rollout.Trajectory, adv float32) backend.Datum {
	full := append(append([]int32(nil), t.Prompt...), t.Tokens...)
	n := len(full) - 1
	d := backend.Datum{Tokens: full[:n], Targets: full[1:], Weights: make([]float32, n),
		Advantages: make([]float32, n), SamplerLogprobs: make([]float32, n)}
	off := len(t.Prompt) - 1 // position predicting the first response token
	for i := range t.Tokens {
		if t.Policy[i] {
			d.Weights[off+i] = 1
			d.Advantages[off+i] = adv
			d.SamplerLogprobs[off+i] = t.Logprobs[i]
		}
	}
	return d
}

// Algorithm names a member of the GRPO family.
type Algorithm string

const (
	GRPO        Algorithm = "grpo"
	DrGRPO      Algorithm = "dr-grpo"
	DAPO        Algorithm = "dapo"
	ReinforcePP Algorithm = "reinforce++"
	RFT         Algorithm = "rft"
	// SFT trains on reference solutions with NLL and samples nothing; the
	// training loop builds its batches from the examples themselves.
	SFT Algorithm = "sft"
)

// Algorithms lists the algorithms the training loop runs.
var Algorithms = []Algorithm{GRPO, DrGRPO, DAPO, ReinforcePP, RFT, SFT}

// Family is GRPO and its variants, which differ only in how advantages
// are computed and which loss and aggregation apply:
//
//	grpo         A = (r − mean)/std per group; clipped ratio; seq-mean-token-mean
//	dr-grpo      A = r − mean (no std); clipped ratio; seq-mean-token-sum-norm
//	dapo         as grpo, clip-higher (ε_high 0.28), token-mean; the loop drops
//	             zero-variance groups and resamples, and penalizes overlong answers
//	reinforce++  A = r − group mean, then normalized over the whole batch;
//	             clipped ratio; token-mean
//	rft          NLL on the verified-correct samples; token-mean
type Family struct {
	Algorithm         Algorithm
	ClipLow, ClipHigh float32
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
}

// NewFamily returns the algorithm's published defaults.
func NewFamily(a Algorithm, maxTokens int) (*Family, error) {
	f := &Family{Algorithm: a, ClipLow: 0.2, ClipHigh: 0.2, MaxTokens: maxTokens, Eps: 1e-4, RefKLEstimator: backend.K3}
	switch a {
	case GRPO, DrGRPO, ReinforcePP, RFT, SFT:
	case DAPO:
		f.ClipHigh = 0.28
	default:
		return nil, fmt.Errorf("method: unknown algorithm %q (want one of %v)", a, Algorithms)
	}
	return f, nil
}

// Name implements Method.
func (f *Family) Name() string { return string(f.Algorithm) }

// Build implements Method.
func (f *Family) Build(groups []Scored) ([]Term, Stats, error) {
	st := Stats{Groups: len(groups)}
	if f.Algorithm == SFT {
		return nil, st, fmt.Errorf("method: sft trains on reference solutions, not on groups")
	}
	if f.Algorithm == RFT {
		var data []backend.Datum
		for _, g := range groups {
			for i := range g.Trajectories {
				if g.Rewards[i] > 0 {
					data = append(data, policyDatum(&g.Trajectories[i], 0))
				}
			}
		}
		st.Trained = len(data)
		return []Term{{Name: "rft", Data: data, Loss: backend.Loss{NLL: 1, Entropy: f.Entropy}, Aggregation: backend.TokenMean}}, st, nil
	}
	var adv [][]float64
	for _, g := range groups {
		if ZeroVariance(g.Rewards) {
			st.ZeroVariance++
		}
		adv = append(adv, GroupAdvantages(g.Rewards, f.Algorithm == GRPO || f.Algorithm == DAPO, f.Eps))
	}
	if f.Algorithm == ReinforcePP {
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
	// Zero-advantage samples stay: they count in the aggregation's
	// denominators as in TRL and verl, though their gradient is zero.
	var data []backend.Datum
	for gi, g := range groups {
		for i := range g.Trajectories {
			data = append(data, policyDatum(&g.Trajectories[i], float32(adv[gi][i])))
			if adv[gi][i] != 0 {
				st.Trained++
			}
		}
	}
	loss := backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: f.ClipLow, ClipHigh: f.ClipHigh,
		RefKL: f.RefKL, RefKLEstimator: f.RefKLEstimator, Entropy: f.Entropy}
	t := Term{Name: "pg", Data: data, Loss: loss}
	switch f.Algorithm {
	case GRPO:
		t.Aggregation = backend.SeqMeanTokenMean
	case DrGRPO:
		t.Aggregation, t.Norm = backend.SeqMeanTokenSumNorm, float32(f.MaxTokens)
	default:
		t.Aggregation = backend.TokenMean
	}
	return []Term{t}, st, nil
}
