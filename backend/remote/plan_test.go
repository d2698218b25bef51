package remote

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"rlvr/api/tinker"
	"rlvr/backend"
)

// impliedGradient is dloss/dlogp at every position that the recorded
// forward_backward calls ask of a server reducing by red, the server's
// logprob being lp everywhere: Tinker's loss functions, differentiated.
func impliedGradient(t *testing.T, calls []recorded, red Reduction, lp float64) [][]float64 {
	t.Helper()
	var out [][]float64
	for _, c := range calls {
		if c.Path != tinker.PathForwardBackward {
			continue
		}
		in := c.Body["forward_backward_input"].(map[string]any)
		fn := in["loss_fn"].(string)
		cfg, _ := in["loss_fn_config"].(map[string]any)
		for i, d := range in["data"].([]any) {
			inputs := d.(map[string]any)["loss_fn_inputs"].(map[string]any)
			get := func(k string) []float64 {
				v, ok := inputs[k].(map[string]any)
				if !ok {
					return nil
				}
				var xs []float64
				for _, x := range v["data"].([]any) {
					xs = append(xs, x.(float64))
				}
				return xs
			}
			w, adv, q := get("weights"), get("advantages"), get("logprobs")
			n := len(get("target_tokens"))
			if len(out) <= i {
				out = append(out, make([]float64, n))
			}
			norm := 1.0
			if red == DatumMean {
				norm = 0
				for _, x := range w {
					norm += x
				}
			}
			for j := range n {
				var g float64
				switch fn {
				case tinker.CrossEntropy:
					g = -w[j]
				case tinker.ImportanceSampling:
					g = -w[j] * adv[j] * math.Exp(lp-q[j])
				case tinker.PPO:
					r := math.Exp(lp - q[j])
					lo, hi := cfg[tinker.ClipLowThreshold].(float64), cfg[tinker.ClipHighThreshold].(float64)
					if !(adv[j] > 0 && r > hi || adv[j] < 0 && r < lo) {
						g = -w[j] * adv[j] * r
					}
				default:
					t.Fatalf("unexpected loss_fn %q", fn)
				}
				out[i][j] += g / norm
			}
		}
	}
	return out
}

// wantGradient is dloss/dlogp of the summed backend.Loss at logp lp.
func wantGradient(batch []backend.Datum, l backend.Loss, lp float64) [][]float64 {
	out := make([][]float64, len(batch))
	for i, d := range batch {
		out[i] = make([]float64, d.Len())
		for j, w32 := range d.Weights {
			w := float64(w32)
			g := -w * float64(l.NLL)
			switch l.PolicyGradient {
			case backend.ClippedPG:
				adv, r := float64(d.Advantages[j]), math.Exp(lp-float64(d.SamplerLogprobs[j]))
				if !(adv > 0 && r > 1+float64(l.ClipHigh) || adv < 0 && r < 1-float64(l.ClipLow)) {
					g -= w * adv * r
				}
			case backend.Importance:
				g -= w * float64(d.Advantages[j]) * math.Exp(lp-float64(d.SamplerLogprobs[j]))
			case backend.Reinforce:
				g -= w * float64(d.Advantages[j])
			}
			if l.RefKL != 0 {
				_, dk := l.RefKLEstimator.Estimate(lp - float64(d.RefLogprobs[j]))
				g += w * float64(l.RefKL) * dk
			}
			out[i][j] = g
		}
	}
	return out
}

// callNames names the forward and forward_backward calls among calls, in
// order.
func callNames(calls []recorded) []string {
	var names []string
	for _, c := range calls {
		switch c.Path {
		case tinker.PathForward:
			names = append(names, "forward")
		case tinker.PathForwardBackward:
			names = append(names, "forward_backward")
		}
	}
	return names
}

func policyBatch() []backend.Datum {
	return []backend.Datum{
		{Tokens: []int32{1, 2, 3, 4}, Targets: []int32{2, 3, 4, 5}, Weights: []float32{0, 0.5, 0.5, 0.25},
			Advantages: []float32{0, 1.5, 1.5, -0.7}, SamplerLogprobs: []float32{0, -0.6, -0.1, -0.9}, RefLogprobs: []float32{0, -0.4, -0.8, -0.5}},
		{Tokens: []int32{7, 8}, Targets: []int32{8, 9}, Weights: []float32{1, 2},
			Advantages: []float32{-1, -1}, SamplerLogprobs: []float32{-0.5, -2}, RefLogprobs: []float32{-0.5, -0.2}},
	}
}

// TestLossMapping checks, for every remote-capable combination of terms
// and both reductions, that the calls sent ask the server for exactly the
// gradient of the local loss, and how many calls that takes.
func TestLossMapping(t *testing.T) {
	const lp = -0.5 // the fake server's logprob of every target
	for _, tc := range []struct {
		name  string
		loss  backend.Loss
		calls map[Reduction][]string
	}{
		{"nll", backend.Loss{NLL: 1},
			map[Reduction][]string{Sum: {"forward_backward"}, DatumMean: {"forward", "forward_backward"}}},
		{"reinforce with nll", backend.Loss{NLL: 0.3, PolicyGradient: backend.Reinforce},
			map[Reduction][]string{Sum: {"forward_backward"}, DatumMean: {"forward", "forward_backward"}}},
		{"clipped", backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28},
			map[Reduction][]string{Sum: {"forward_backward"}, DatumMean: {"forward_backward"}}},
		{"importance with nll", backend.Loss{NLL: 0.5, PolicyGradient: backend.Importance},
			map[Reduction][]string{Sum: {"forward_backward", "forward_backward"}, DatumMean: {"forward_backward", "forward_backward"}}},
		{"clipped with nll", backend.Loss{NLL: 0.5, PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2},
			map[Reduction][]string{Sum: {"forward_backward", "forward_backward"}, DatumMean: {"forward_backward", "forward_backward"}}},
		{"clipped with k3 reference KL", backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2, RefKL: 0.04, RefKLEstimator: backend.K3},
			map[Reduction][]string{Sum: {"forward_backward", "forward_backward"}, DatumMean: {"forward_backward", "forward_backward"}}},
		{"k2 reference KL alone", backend.Loss{RefKL: 0.1, RefKLEstimator: backend.K2},
			map[Reduction][]string{Sum: {"forward", "forward_backward"}, DatumMean: {"forward", "forward_backward"}}},
	} {
		for _, red := range []Reduction{Sum, DatumMean} {
			t.Run(tc.name+"/"+string(red), func(t *testing.T) {
				f, srv := newFake(t)
				f.result = normal
				m := openFake(t, srv, red)
				batch := policyBatch()
				res, err := m.ForwardBackward(context.Background(), batch, tc.loss)
				if err != nil {
					t.Fatal(err)
				}
				names := callNames(f.calls)
				if want := tc.calls[red]; !slices.Equal(names, want) {
					t.Errorf("calls %v, want %v", names, want)
				}
				got, want := impliedGradient(t, f.calls, red, lp), wantGradient(batch, tc.loss, lp)
				for i := range want {
					for j := range want[i] {
						if math.Abs(got[i][j]-want[i][j]) > 1e-6 {
							t.Errorf("datum %d position %d: the server is asked for gradient %v, the loss has %v", i, j, got[i][j], want[i][j])
						}
					}
				}
				if len(res.Logprobs) != 2 || res.Logprobs[1][1] != lp {
					t.Errorf("logprobs %v", res.Logprobs)
				}
				if res.Metrics.Tokens != 5 {
					t.Errorf("metrics count %d tokens, want 5", res.Metrics.Tokens)
				}
			})
		}
	}
}

// TestInertDatumsSkipTheBackward checks that on a "sum" server a datum
// with zero advantages goes through forward only, while the others still
// ask for exactly the loss's gradient; a "datum-mean" server, which divides
// by the datums it saw, gets them all.
func TestInertDatumsSkipTheBackward(t *testing.T) {
	const lp = -0.5
	loss := backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28}
	live := policyBatch()
	inert := backend.Datum{Tokens: []int32{3, 4, 5}, Targets: []int32{4, 5, 6}, Weights: []float32{1, 1, 0},
		Advantages: []float32{0, 0, 0}, SamplerLogprobs: []float32{-0.3, -0.2, -0.1}}
	batch := []backend.Datum{live[0], inert, live[1]}
	for _, tc := range []struct {
		red     Reduction
		calls   []string
		backwds int // datums sent to forward_backward
	}{
		{Sum, []string{"forward", "forward_backward"}, 2},
		{DatumMean, []string{"forward_backward"}, 3},
	} {
		t.Run(string(tc.red), func(t *testing.T) {
			f, srv := newFake(t)
			f.result = normal
			m := openFake(t, srv, tc.red)
			res, err := m.ForwardBackward(context.Background(), batch, loss)
			if err != nil {
				t.Fatal(err)
			}
			names, sent := callNames(f.calls), 0
			for _, c := range f.calls {
				if c.Path == tinker.PathForwardBackward {
					sent += len(c.Body["forward_backward_input"].(map[string]any)["data"].([]any))
				}
			}
			if !slices.Equal(names, tc.calls) || sent != tc.backwds {
				t.Fatalf("calls %v with %d datums to forward_backward, want %v with %d", names, sent, tc.calls, tc.backwds)
			}
			want := wantGradient(live, loss, lp)
			if tc.red == DatumMean {
				want = wantGradient(batch, loss, lp)
			}
			got := impliedGradient(t, f.calls, tc.red, lp)
			for i := range want {
				for j := range want[i] {
					if math.Abs(got[i][j]-want[i][j]) > 1e-6 {
						t.Errorf("datum %d position %d: the server is asked for gradient %v, the loss has %v", i, j, got[i][j], want[i][j])
					}
				}
			}
			if len(res.Logprobs) != 3 || len(res.Logprobs[1]) != 3 || res.Logprobs[1][0] != lp || len(res.Logprobs[2]) != 2 {
				t.Errorf("logprobs %v, want three datums' in the batch's order", res.Logprobs)
			}
			if res.Metrics.Tokens != 7 {
				t.Errorf("metrics count %d tokens, want 7 (the inert datum's 2 included)", res.Metrics.Tokens)
			}
		})
	}
}

func TestTermsWithoutARemoteFormAreRefused(t *testing.T) {
	for _, l := range []backend.Loss{{TeacherKL: 1}, {NLL: 1, Entropy: 0.01}} {
		f, srv := newFake(t)
		f.result = normal
		m := openFake(t, srv, Sum)
		_, err := m.ForwardBackward(context.Background(), policyBatch(), l)
		if !errors.Is(err, ErrNotRemote) {
			t.Errorf("loss %+v: error %v, want ErrNotRemote", l, err)
		}
		if len(f.calls) != 0 {
			t.Errorf("loss %+v: %d calls reached the server", l, len(f.calls))
		}
		if _, err := m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1}); err != nil {
			t.Errorf("a refused loss broke the model: %v", err)
		}
	}
}

// TestStepIsPipelined: a step's forward_backward and its optim_step are
// both at the server before the client polls for the first result, as
// the Tinker SDK pipelines them, for a loss of one call (the clipped
// policy gradient) and of two (the ratio term, then the reference KL's
// cross_entropy pass, which reads the first call's logprobs); and the
// results awaited are ForwardBackward's.
func TestStepIsPipelined(t *testing.T) {
	for _, tc := range []struct {
		name string
		loss backend.Loss
	}{
		{"one call", backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28}},
		{"two calls", backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28, RefKL: 0.1, RefKLEstimator: backend.K3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t)
			var polledFirst []string // the calls submitted when the step's last forward_backward was first polled
			f.result = func(path string, req map[string]any, poll int) (int, string) {
				if path == tinker.PathForwardBackward && poll == 0 {
					polledFirst = nil
					for _, c := range f.calls {
						polledFirst = append(polledFirst, c.Path)
					}
				}
				return normal(path, req, poll)
			}
			m := openFake(t, srv, Sum)
			ctx := context.Background()
			want, err := m.ForwardBackward(ctx, policyBatch(), tc.loss)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-3}); err != nil {
				t.Fatal(err)
			}
			// Unpipelined, the last forward_backward is polled before
			// optim_step is sent.
			if slices.Contains(polledFirst, tinker.PathOptimStep) {
				t.Fatalf("ForwardBackward awaited after optim_step was sent: %v", polledFirst)
			}
			fb, err := m.SubmitForwardBackward(ctx, policyBatch(), tc.loss)
			if err != nil {
				t.Fatal(err)
			}
			opt, err := m.SubmitOptimStep(ctx, backend.OptimParams{LearningRate: 1e-3})
			if err != nil {
				t.Fatal(err)
			}
			got, err := fb.Await(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := opt.Await(ctx); err != nil {
				t.Fatal(err)
			}
			if n := len(polledFirst); n == 0 || polledFirst[n-1] != tinker.PathOptimStep {
				t.Errorf("calls at the server when the step's last forward_backward was first polled: %v, want optim_step last", polledFirst)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("pipelined result %+v, ForwardBackward's %+v", got, want)
			}
		})
	}
}
