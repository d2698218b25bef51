package tinkerserver

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rlvr/api/tinker"
	"rlvr/backend"
)

// gspoValue is Tinker's statement of GSPO's loss as a function of a
// perturbation δ of the logprobs, with its stop-gradients frozen at δ = 0:
// each position's ratio is sg(s)·exp(δ_t), where s is the sequence ratio
// over the masked positions; the loss is −Σ w·min(ratio·A, clip(ratio)·A).
// Its derivative in δ_t at 0 is the loss's gradient with respect to
// logp_t.
func gspoValue(lps, q, w, a, mask []float64, low, high float64, delta []float64) float64 {
	sum, n := 0.0, 0.0
	for t := range lps {
		if mask[t] != 0 {
			sum += lps[t] - q[t]
			n++
		}
	}
	s := math.Exp(sum / n)
	loss := 0.0
	for t := range lps {
		ratio := s * math.Exp(delta[t])
		clipped := math.Min(math.Max(ratio, low), high)
		loss -= w[t] * math.Min(ratio*a[t], clipped*a[t])
	}
	return loss
}

// TestGSPOTerms checks gspoLoss against gspoValue: the losses at δ = 0,
// and each derivative against a central finite difference; and that a
// position the mask leaves out changes no position's loss.
func TestGSPOTerms(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 8))
	const low, high = 0.8, 1.2
	g := gspoLoss{low: low, high: high}
	clipped, unclipped := 0, 0
	for trial := range 200 {
		n := 2 + r.IntN(10)
		d := backend.Datum{Weights: make([]float32, n), Advantages: make([]float32, n), SamplerLogprobs: make([]float32, n)}
		lps, mask := make([]float32, n), make([]float32, n)
		f := func(xs []float32) []float64 {
			out := make([]float64, len(xs))
			for i, x := range xs {
				out[i] = float64(x)
			}
			return out
		}
		// A shift common to the sequence moves s around the clip bounds.
		shift := r.NormFloat64() * 0.3
		for j := range n {
			lps[j] = float32(-1 - 3*r.Float64())
			d.SamplerLogprobs[j] = lps[j] - float32(shift+0.05*r.NormFloat64())
			d.Advantages[j] = float32(r.NormFloat64())
			d.Weights[j] = []float32{0, 1, 0.5}[r.IntN(3)]
			mask[j] = float32(r.IntN(2))
		}
		mask[r.IntN(n)] = 1
		loss, dlogp := g.terms(&d, mask, lps)
		zero := make([]float64, n)
		args := func() ([]float64, []float64, []float64, []float64, []float64) {
			return f(lps), f(d.SamplerLogprobs), f(d.Weights), f(d.Advantages), f(mask)
		}
		lp, q, w, a, m := args()
		total := 0.0
		for _, v := range loss {
			total += v
		}
		if want := gspoValue(lp, q, w, a, m, low, high, zero); math.Abs(total-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("trial %d: loss %v, reference %v", trial, total, want)
		}
		s := 0.0
		for j := range n {
			if mask[j] != 0 {
				s += lp[j] - q[j]
			}
		}
		const h = 1e-6
		for j := range n {
			// Skip a ratio within h of a bound, where the loss has a kink.
			ratio := math.Exp(s / sumOf(m))
			if math.Abs(ratio-low) < 1e-4 || math.Abs(ratio-high) < 1e-4 {
				continue
			}
			plus, minus := make([]float64, n), make([]float64, n)
			plus[j], minus[j] = h, -h
			fd := (gspoValue(lp, q, w, a, m, low, high, plus) - gspoValue(lp, q, w, a, m, low, high, minus)) / (2 * h)
			if math.Abs(fd-dlogp[j]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Fatalf("trial %d position %d: derivative %v, finite difference %v", trial, j, dlogp[j], fd)
			}
			if dlogp[j] == 0 && w[j] != 0 && a[j] != 0 {
				clipped++
			} else if dlogp[j] != 0 {
				unclipped++
			}
		}
		// A position outside the mask moves no loss.
		for j := range n {
			if mask[j] != 0 {
				continue
			}
			moved := append([]float32(nil), lps...)
			moved[j] += 0.7
			after, _ := g.terms(&d, mask, moved)
			for k := range loss {
				if after[k] != loss[k] {
					t.Fatalf("trial %d: moving unmasked position %d changed position %d's loss from %v to %v", trial, j, k, loss[k], after[k])
				}
			}
		}
	}
	if clipped == 0 || unclipped == 0 {
		t.Fatalf("%d clipped and %d unclipped positions: the trials miss a branch", clipped, unclipped)
	}
}

func sumOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// TestGSPOMatchesPPO trains with gspo over HTTP and, on a second copy of
// the model, with the engine's own ppo whose sampler logprobs are shifted
// so that every position's token ratio is its sequence's ratio s: the
// two objectives then have the same gradient (−w·A·s inside the clip, 0
// outside), so the weights after a step agree. The batch has sequences
// inside the clip and beyond it on both sides.
func TestGSPOMatchesPPO(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	learner := localLearner(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 9))
	data, batch := makeBatch(t, r, tinker.PPO, learner)
	lps, err := learner.Logprobs(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	ref := make([]backend.Datum, len(batch))
	for i := range batch {
		d := &batch[i]
		n := len(d.Tokens)
		mask := make([]float32, n)
		for j := range mask {
			mask[j] = float32(j % 2)
		}
		// Datum i's sequence log-ratio: 0.05 (inside), 0.5 and −0.5
		// (beyond either bound).
		c := []float32{0.05, 0.5, -0.5}[i%3]
		sum, cnt := 0.0, 0.0
		for j := range n {
			d.SamplerLogprobs[j] = lps[i][j] - c + float32(0.02*r.NormFloat64())
			if mask[j] != 0 {
				sum += float64(lps[i][j] - d.SamplerLogprobs[j])
				cnt++
			}
		}
		data[i].LossFnInputs["logprobs"] = tinker.Floats(d.SamplerLogprobs)
		data[i].LossFnInputs[tinker.SequenceRatioMask] = tinker.Floats(mask)
		shifted := make([]float32, n)
		for j := range n {
			shifted[j] = lps[i][j] - float32(sum/cnt)
		}
		ref[i] = backend.Datum{Tokens: d.Tokens, Targets: d.Targets, Weights: d.Weights, Advantages: d.Advantages, SamplerLogprobs: shifted}
	}
	var out tinker.ForwardBackwardOutput
	h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id,
		Input: tinker.ForwardBackwardInput{Data: data, LossFn: tinker.GSPO}}, &out)
	loss := backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2}
	res, err := learner.ForwardBackward(ctx, ref, loss)
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Metrics["loss:sum"] - res.Metrics.Loss; math.Abs(d) > 1e-4*math.Max(1, math.Abs(res.Metrics.Loss)) {
		t.Errorf("loss:sum %v, ppo's %v", out.Metrics["loss:sum"], res.Metrics.Loss)
	}
	adam := tinker.AdamParams{LearningRate: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
	var step tinker.OptimStepResponse
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: adam}, &step)
	want, err := learner.OptimStep(ctx, backend.OptimParams{LearningRate: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if got := step.Metrics["grad_norm"]; want.GradNorm == 0 || math.Abs(got-want.GradNorm) > 1e-4*want.GradNorm {
		t.Fatalf("grad norm %v, ppo's %v", got, want.GradNorm)
	}
	got := h.params(id)
	worst := 0.0
	for i, p := range learner.Model.Params {
		worst = max(worst, math.Abs(float64(got[i]-p)))
	}
	if worst > 1e-5 {
		t.Fatalf("weights differ from ppo's by up to %g", worst)
	}
}

// TestGSPOInputs checks that gspo's sequence_ratio_mask is required and
// must mark a position, each refusal naming the datum and the field.
func TestGSPOInputs(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	d := func(mask []float32) tinker.Datum {
		in := map[string]tinker.TensorData{
			"target_tokens": tinker.Ints([]int32{2, 3, 4}),
			"logprobs":      tinker.Floats([]float32{-1, -1, -1}),
			"advantages":    tinker.Floats([]float32{1, 1, 1}),
		}
		if mask != nil {
			in[tinker.SequenceRatioMask] = tinker.Floats(mask)
		}
		return tinker.Datum{ModelInput: tinker.Text([]int32{1, 2, 3}), LossFnInputs: in}
	}
	for _, tc := range []struct {
		data tinker.Datum
		want string
	}{
		{d(nil), "data[1]: loss_fn_inputs.sequence_ratio_mask is missing (loss_fn gspo needs target_tokens, logprobs, advantages, sequence_ratio_mask)"},
		{d([]float32{0, 0, 0}), "data[1]: loss_fn_inputs.sequence_ratio_mask marks no position"},
		{d([]float32{1, 1}), "data[1]: loss_fn_inputs.sequence_ratio_mask has 2 values, model_input 3"},
	} {
		f := h.failure(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id,
			Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{d([]float32{1, 0, 1}), tc.data}, LossFn: tinker.GSPO}})
		if f.Category != "user" || !strings.Contains(f.Message, tc.want) {
			t.Errorf("failure %+v, want %q", f, tc.want)
		}
	}
}
