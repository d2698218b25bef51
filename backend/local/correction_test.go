package local

import (
	"math"
	"math/rand/v2"
	"testing"

	"rlvr/backend"
	"rlvr/engine/gradcheck"
)

// TestSamplerCorrectionGradient checks the clipped policy gradient of a
// batch the sampler correction was folded into against finite differences
// of its statement written out: Σ weight · w · −min(ρA, clip(ρ)A), with
// ρ = exp(logp − old) and w = min(exp(old − sampler), cap) held constant.
// The old logprobs put ρ inside and outside the clip range, and the
// sampler's put w below 1, above it and past the cap.
func TestSamplerCorrectionGradient(t *testing.T) {
	l := gradLearner(t)
	c := backend.SamplerCorrection{Cap: 2}
	loss := backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28}
	batch := policyBatch(t, l, rand.New(rand.NewPCG(4, 6)), []float64{1}, 5, 3, 7)
	now, err := l.Logprobs(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	ratios := []float64{1, math.Exp(0.5), math.Exp(-0.5)}   // ρ at the current weights
	weights := []float64{1, math.Exp(0.3), 3, math.Exp(-1)} // π_old/μ before the cap
	old := make([][]float32, len(batch))
	for i := range batch {
		old[i] = make([]float32, len(now[i]))
		for j, lp := range now[i] {
			old[i][j] = lp - float32(math.Log(ratios[j%len(ratios)]))
			batch[i].SamplerLogprobs[j] = old[i][j] - float32(math.Log(weights[j%len(weights)]))
		}
	}
	orig := make([]backend.Datum, len(batch))
	copy(orig, batch)
	st, err := c.Apply(batch, old)
	if err != nil {
		t.Fatal(err)
	}
	if st.Capped == 0 || st.Capped == st.Tokens {
		t.Fatalf("%d of %d weights capped: the test must truncate some and not all", st.Capped, st.Tokens)
	}
	met, grads := forwardBackward(t, l, batch, loss)
	if met.ClipLow == 0 || met.ClipHigh == 0 {
		t.Fatalf("clipped %d low and %d high: the test must exercise both", met.ClipLow, met.ClipHigh)
	}
	// The objective written out, from the uncorrected datums.
	written := func() float64 {
		lps, err := l.Logprobs(ctx, orig)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		lo, hi := 1-float64(loss.ClipLow), 1+float64(loss.ClipHigh)
		for i, d := range orig {
			for j, lp := range lps[i] {
				if d.Weights[j] == 0 {
					continue
				}
				rho := math.Exp(float64(lp) - float64(old[i][j]))
				w := math.Min(math.Exp(float64(old[i][j])-float64(d.SamplerLogprobs[j])), c.Cap)
				a := float64(d.Advantages[j])
				sum -= float64(d.Weights[j]) * w * math.Min(rho*a, math.Max(lo, math.Min(hi, rho))*a)
			}
		}
		return sum
	}
	if got := written(); math.Abs(met.Loss-got) > 1e-5*math.Max(1, math.Abs(got)) {
		t.Fatalf("loss %v, want the written objective's %v", met.Loss, got)
	}
	if err := l.Model.CheckGradients(grads, written, gradcheck.Options{Coordinates: 6, Step: 5e-3, Atol: 3e-3, Rtol: 3e-2}); err != nil {
		t.Error(err)
	}
}
