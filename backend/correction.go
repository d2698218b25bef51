package backend

import (
	"fmt"
	"math"
)

// SamplerCorrection is truncated importance sampling between the sampler
// and the learner (verl's rollout importance sampling; TRL's
// vllm_importance_sampling_correction): when the sampler computes in
// another precision than the learner, or is another engine altogether, the
// tokens it drew come from μ, not from the learner's π_old. Each sampled
// token's policy-gradient term is then weighed by
//
//	w = min(π_old(y) / μ(y), Cap) = min(exp(logp_old − sampler logp), Cap)
//
// held constant (no gradient flows through it), and the policy ratio is
// taken against π_old instead of μ.
type SamplerCorrection struct {
	// Cap truncates the weight (TRL's vllm_importance_sampling_cap, verl's
	// rollout_is_threshold); at least 1.
	Cap float64
}

// Validate checks the cap.
func (c SamplerCorrection) Validate() error {
	if !(c.Cap >= 1) || math.IsInf(c.Cap, 0) {
		return fmt.Errorf("sampler correction: cap %v must be finite and at least 1 (a cap below 1 truncates the tokens both sides agree on)", c.Cap)
	}
	return nil
}

// Weight is the truncated importance weight of a token the sampler drew
// with logprob sampler and the learner scores old.
func (c SamplerCorrection) Weight(old, sampler float64) float64 {
	return math.Min(math.Exp(old-sampler), c.Cap)
}

// CorrectionStats sum the weights Apply folded, over the positions it
// weighed, so that several calls add.
type CorrectionStats struct {
	Tokens int     // weighed positions
	Capped int     // positions whose weight the cap truncated
	Sum    float64 // Σ w
}

// Apply folds the correction into data, given old, the learner's logprobs
// of every datum's targets before the update (Logprober.Logprobs): at each
// position with a non-zero weight of a datum with sampler logprobs, the
// advantage is multiplied by w and the sampler logprob replaced by old's.
// Every policy-gradient term is linear in the advantage for a positive
// factor — the clipped surrogate's choice of branch depends only on its
// sign — so the learner's sum then weighs each token's term by w, with w
// held constant; the terms that do not read the advantage (NLL, the KLs,
// the entropy) are left as they were. It is the one statement of the
// correction, as Aggregate is of the aggregation, so that every backend
// trains the same corrected batch. A datum without sampler logprobs is
// left alone. The datums' slices are replaced, never written in place.
func (c SamplerCorrection) Apply(data []Datum, old [][]float32) (CorrectionStats, error) {
	var st CorrectionStats
	if len(old) != len(data) {
		return st, fmt.Errorf("sampler correction: %d datums but logprobs of %d", len(data), len(old))
	}
	for i := range data {
		d := &data[i]
		if d.SamplerLogprobs == nil {
			continue
		}
		if len(old[i]) != d.Len() {
			return st, fmt.Errorf("sampler correction: datum %d has %d tokens but %d logprobs", i, d.Len(), len(old[i]))
		}
		adv := make([]float32, d.Len())
		if d.Advantages != nil {
			copy(adv, d.Advantages)
		}
		q := append([]float32(nil), d.SamplerLogprobs...)
		for j, wt := range d.Weights {
			if wt == 0 {
				continue
			}
			w := c.Weight(float64(old[i][j]), float64(q[j]))
			adv[j] = float32(float64(adv[j]) * w)
			q[j] = old[i][j]
			st.Tokens++
			st.Sum += w
			if w == c.Cap {
				st.Capped++
			}
		}
		d.Advantages, d.SamplerLogprobs = adv, q
	}
	return st, nil
}
