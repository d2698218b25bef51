package local

import (
	"math"
	"math/rand/v2"
	"testing"

	"rlvr/backend"
	"rlvr/engine/gradcheck"
	"rlvr/engine/model"
	"rlvr/engine/optim"
)

// gradLearner is a learner over a small model with grouped-query
// attention, q/k/v biases and a tied head, every parameter moved off its
// initial value so that no gradient is trivially zero.
func gradLearner(t *testing.T) *Learner {
	t.Helper()
	cfg := model.Config{Vocab: 11, Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 24, MaxSeq: 16, NormEps: 1e-6,
		AttentionBias: true, TiedEmbeddings: true, RopeTheta: 1e6}
	m, err := model.New(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 9))
	for i := range m.Params {
		m.Params[i] += float32(r.NormFloat64() * 0.1)
	}
	l, err := NewLearner(m, optim.DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// policyBatch returns datums of random tokens of the given lengths with
// every per-token input: context-only positions among the weighted ones,
// advantages of both signs, reference logprobs near the model's, and
// sampler logprobs that put the importance ratio at each position at
// ratios[j mod len(ratios)] of the learner's.
func policyBatch(t *testing.T, l *Learner, r *rand.Rand, ratios []float64, lengths ...int) []backend.Datum {
	t.Helper()
	vocab := l.Model.Config.Vocab
	var batch []backend.Datum
	for _, n := range lengths {
		d := backend.Datum{Tokens: make([]int32, n), Targets: make([]int32, n), Weights: make([]float32, n),
			Advantages: make([]float32, n), RefLogprobs: make([]float32, n)}
		for j := range n {
			d.Tokens[j], d.Targets[j] = int32(r.IntN(vocab)), int32(r.IntN(vocab))
			d.Weights[j] = float32(r.IntN(3)) * 0.5
			d.Advantages[j] = float32(r.NormFloat64())
			d.RefLogprobs[j] = -2.4 + float32(r.NormFloat64())*0.3
		}
		batch = append(batch, d)
	}
	lps, err := l.Logprobs(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range lps {
		batch[i].SamplerLogprobs = make([]float32, len(lp))
		for j, v := range lp {
			batch[i].SamplerLogprobs[j] = v - float32(math.Log(ratios[j%len(ratios)]))
		}
	}
	return batch
}

// forwardBackward runs one ForwardBackward from zero gradients and returns
// its metrics and a copy of the gradients.
func forwardBackward(t *testing.T, l *Learner, batch []backend.Datum, loss backend.Loss) (backend.Metrics, []float32) {
	t.Helper()
	l.Model.ZeroGrad()
	res, err := l.ForwardBackward(ctx, batch, loss)
	if err != nil {
		t.Fatal(err)
	}
	return res.Metrics, append([]float32(nil), l.Model.Grads...)
}

// TestLossGradients checks the gradient of every kind of backend.Loss,
// through the engine, against finite differences of its summed value, with
// every importance ratio clearly inside or outside the clip range, away
// from the kinks finite differences cannot cross; a clipped loss must clip
// both ways.
func TestLossGradients(t *testing.T) {
	losses := map[string]backend.Loss{
		"nll+entropy+k3": {NLL: 1, Entropy: 0.1, RefKL: 0.5, RefKLEstimator: backend.K3},
		"clipped-pg":     {PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28, RefKL: 0.3, RefKLEstimator: backend.K2},
		"reinforce+k1":   {PolicyGradient: backend.Reinforce, RefKL: 0.2, RefKLEstimator: backend.K1},
		"importance":     {PolicyGradient: backend.Importance},
		"dro":            {PolicyGradient: backend.DRO, DROBeta: 0.5},
	}
	for name, loss := range losses {
		t.Run(name, func(t *testing.T) {
			l := gradLearner(t)
			batch := policyBatch(t, l, rand.New(rand.NewPCG(1, 2)), []float64{1, math.Exp(0.5), math.Exp(-0.5)}, 5, 3, 7)
			met, grads := forwardBackward(t, l, batch, loss)
			if loss.PolicyGradient == backend.ClippedPG && (met.ClipLow == 0 || met.ClipHigh == 0) {
				t.Fatalf("clipped %d low and %d high: the test must exercise both", met.ClipLow, met.ClipHigh)
			}
			eval := func() float64 {
				res, err := l.ForwardBackward(ctx, batch, loss)
				if err != nil {
					t.Fatal(err)
				}
				return res.Metrics.Loss
			}
			if err := l.Model.CheckGradients(grads, eval, gradcheck.Options{Coordinates: 6, Step: 5e-3, Atol: 3e-3, Rtol: 3e-2}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestImportanceIsUnclipped checks the importance-sampling term against
// −Σ w·ρ·A computed from the logprobs, with ratios far outside any clip
// range, and that it counts no clipping.
func TestImportanceIsUnclipped(t *testing.T) {
	l := gradLearner(t)
	batch := policyBatch(t, l, rand.New(rand.NewPCG(8, 3)), []float64{1, math.E, 1 / math.E}, 3, 6)
	lps, err := l.Logprobs(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	for i, d := range batch {
		for j, lp := range lps[i] {
			want -= float64(d.Weights[j]) * math.Exp(float64(lp)-float64(d.SamplerLogprobs[j])) * float64(d.Advantages[j])
		}
	}
	met, _ := forwardBackward(t, l, batch, backend.Loss{PolicyGradient: backend.Importance})
	if math.Abs(met.Loss-want) > 1e-5*math.Max(1, math.Abs(want)) || met.ClipLow != 0 || met.ClipHigh != 0 {
		t.Fatalf("loss %v (clipped %d low, %d high), want %v unclipped", met.Loss, met.ClipLow, met.ClipHigh, want)
	}
}

// TestCISPOGradient checks CISPO, whose gradient is by definition not the
// loss's (the clipped ratio is held constant): its loss and gradient must
// be REINFORCE's with each advantage scaled by clip(ρ, 1−ε_low, 1+ε_high),
// with ratios inside and outside the clip range.
func TestCISPOGradient(t *testing.T) {
	l := gradLearner(t)
	ratios := []float64{1, math.E, 1 / math.E, math.Exp(0.1)}
	batch := policyBatch(t, l, rand.New(rand.NewPCG(5, 9)), ratios, 3, 6)
	scaled := make([]backend.Datum, len(batch))
	for i, d := range batch {
		scaled[i] = d
		scaled[i].Advantages = make([]float32, len(d.Advantages))
		for j, a := range d.Advantages {
			scaled[i].Advantages[j] = a * float32(math.Max(0.8, math.Min(1.2, ratios[j%len(ratios)])))
		}
	}
	got, grads := forwardBackward(t, l, batch, backend.Loss{PolicyGradient: backend.CISPO, ClipLow: 0.2, ClipHigh: 0.2})
	want, wantGrads := forwardBackward(t, l, scaled, backend.Loss{PolicyGradient: backend.Reinforce})
	if math.Abs(got.Loss-want.Loss) > 1e-5*math.Max(1, math.Abs(want.Loss)) || got.ClipLow == 0 || got.ClipHigh == 0 {
		t.Fatalf("loss %v (clipped %d low, %d high), want REINFORCE's %v and clipping both ways", got.Loss, got.ClipLow, got.ClipHigh, want.Loss)
	}
	worst := 0.0
	for i, g := range grads {
		worst = math.Max(worst, math.Abs(float64(g-wantGrads[i])))
	}
	if worst > 1e-5 {
		t.Fatalf("gradients differ from REINFORCE's on clip-scaled advantages by up to %g", worst)
	}
}
