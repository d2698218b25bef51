package bench

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"rlvr/engine/gemm"
	"rlvr/engine/model"
)

// BenchmarkTrainStep times one forward+backward+AdamW step on the engine
// benchmark's shape (model.BenchConfig, 8 sequences of 128 tokens), the
// step ../shared/tools/torch_llama_bench.py times in PyTorch. allocs/op
// shows whether a steady loop allocates.
func BenchmarkTrainStep(b *testing.B) {
	st, err := NewStep(model.BenchConfig(), 8, 128)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Run(); err != nil { // size the activations
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := st.Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(st.FLOPs()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(len(st.Batch.Tokens)*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func TestEngineReportAccountsForTheStep(t *testing.T) {
	cfg := model.Config{Vocab: 64, Dim: 32, Layers: 2, Heads: 2, Hidden: 64, MaxSeq: 32}
	rep, err := Engine(cfg, EngineOptions{Sequences: 2, SeqLen: 32, Reps: 3, Peak: MachinePeak(0), GEMMSizes: []int{64}})
	if err != nil {
		t.Fatal(err)
	}
	var share float64
	for _, o := range rep.Ops {
		share += o.Share
	}
	if share < 0.99 || share > 1.01 || rep.StepMs <= 0 || rep.GFLOPS <= 0 || len(rep.GEMM) != 1 {
		t.Fatalf("shares sum to %v; report %+v", share, rep)
	}
	if rep.Peak.GFLOPS <= 0 {
		t.Fatalf("peak %+v", rep.Peak)
	}
	// The step's own weights, gradients and AdamW moments are resident.
	if min := int64(4 * 4 * rep.Params); rep.PeakRSSBytes < min || !strings.Contains(rep.Table(), "peak memory") {
		t.Fatalf("peak resident memory %d bytes, below the %d the step holds; table:\n%s", rep.PeakRSSBytes, min, rep.Table())
	}
	if held := rep.WeightBytes + rep.GradBytes + rep.OptimizerBytes; held != int64(16*rep.Params) || rep.ActivationBytes <= 0 {
		t.Fatalf("memory held: weights %d, gradients %d, AdamW %d, activations %d bytes for %d parameters",
			rep.WeightBytes, rep.GradBytes, rep.OptimizerBytes, rep.ActivationBytes, rep.Params)
	}
}

// TestEngineRecomputeHoldsLessActivations runs the 0.5B-width benchmark's
// options (tied head, q/k/v biases, no GEMM section) on a small shape, with
// and without recomputation: the activations shrink, the report says which
// it ran.
func TestEngineRecomputeHoldsLessActivations(t *testing.T) {
	cfg := model.Config{Vocab: 64, Dim: 32, Layers: 4, Heads: 4, KVHeads: 2, Hidden: 64, MaxSeq: 32, TiedEmbeddings: true, AttentionBias: true}
	run := func(recompute bool) *EngineReport {
		rep, err := Engine(cfg, EngineOptions{Sequences: 2, SeqLen: 32, Reps: 1, Peak: MachinePeak(0), Recompute: recompute})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.GEMM) != 0 || strings.Contains(rep.Table(), "GEMM (square)") {
			t.Fatalf("GEMM timed with no sizes:\n%s", rep.Table())
		}
		return rep
	}
	plain, rec := run(false), run(true)
	if rec.ActivationBytes >= plain.ActivationBytes || !rec.Recompute || plain.Recompute {
		t.Fatalf("activations %d bytes recomputing, %d not", rec.ActivationBytes, plain.ActivationBytes)
	}
	for _, want := range []string{"recomputed", "tied head", "q/k/v biases"} {
		if !strings.Contains(rec.Table(), want) {
			t.Errorf("table does not mention %q:\n%s", want, rec.Table())
		}
	}
}

// TestEngineReportNamesPrecision: the report names the processor, the
// precision asked for and the kernel that ran, in bf16 (emulated here) and
// in its float32 fallback, and counts the weights' bf16 copy.
func TestEngineReportNamesPrecision(t *testing.T) {
	cfg := model.Config{Vocab: 64, Dim: 32, Layers: 1, Heads: 2, Hidden: 64, MaxSeq: 16}
	defer gemm.SetBF16Kernel(os.Getenv("RLVR_BF16_KERNEL"))
	for _, k := range []struct{ kernel, want string }{{"emulate", "products on bf16: emulated"}, {"none", "products on fp32 (bf16 unavailable"}} {
		gemm.SetBF16Kernel(k.kernel)
		rep, err := Engine(cfg, EngineOptions{Sequences: 1, SeqLen: 16, Reps: 1, Peak: MachinePeak(0), GEMMSizes: []int{32}, Precision: model.BF16})
		if err != nil {
			t.Fatal(err)
		}
		tab := rep.Table()
		for _, want := range []string{"processor: " + gemm.DetectCPU().Name, "AVX512-BF16", "precision: bf16", k.want} {
			if !strings.Contains(tab, want) {
				t.Errorf("%s: the table does not say %q:\n%s", k.kernel, want, tab)
			}
		}
		if bf := rep.BF16WeightBytes > 0; bf != (k.kernel == "emulate") {
			t.Errorf("%s: the weights' bf16 copy holds %d bytes", k.kernel, rep.BF16WeightBytes)
		}
	}
}

// BenchmarkPolicyGradientStep times the learner's forward and backward of
// one GRPO group on SmolLM2-135M's shape (random weights): 8 answers of
// 128 tokens to one 80-token prompt (GSM8K's in SmolLM2's chat template with a system prompt), the prompt weighing 0 (the
// decoder's and the head's work of a policy gradient; its per-token terms
// cost nothing beside them). "copies"
// packs each answer after its own copy of the prompt; "shared" packs the
// prompt once as every answer's parent, as the local learner does.
func BenchmarkPolicyGradientStep(b *testing.B) {
	cfg := model.Config{Vocab: 49152, Dim: 576, Layers: 30, Heads: 9, KVHeads: 3, Hidden: 1536, MaxSeq: 2048,
		RopeTheta: 100000, NormEps: 1e-5, TiedEmbeddings: true}
	const G, prompt, answer = 8, 80, 128
	r := rand.New(rand.NewPCG(3, 4))
	tokens := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(r.IntN(cfg.Vocab))
		}
		return s
	}
	p := tokens(prompt)
	answers := make([][]int32, G)
	for i := range answers {
		answers[i] = tokens(answer)
	}
	// targets appends n positions of weight w.
	targets := func(t *model.Targets, n int, w float32) {
		for range n {
			t.Targets = append(t.Targets, int32(r.IntN(cfg.Vocab)))
			t.Weights = append(t.Weights, w)
		}
	}
	var copies, shared model.Batch
	var ct, st model.Targets
	copies.Offsets, shared.Offsets = []int{0}, []int{0}
	shared.Tokens = append(shared.Tokens, p[:prompt-1]...)
	shared.Offsets = append(shared.Offsets, len(shared.Tokens))
	shared.Parents = []int{-1}
	targets(&st, prompt-1, 0)
	for _, a := range answers {
		copies.Tokens = append(append(copies.Tokens, p...), a...)
		copies.Offsets = append(copies.Offsets, len(copies.Tokens))
		targets(&ct, prompt-1, 0)
		targets(&ct, answer+1, 1.0/(G*answer))
		shared.Tokens = append(append(shared.Tokens, p[prompt-1]), a...)
		shared.Offsets = append(shared.Offsets, len(shared.Tokens))
		shared.Parents = append(shared.Parents, 0)
		targets(&st, answer+1, 1.0/(G*answer))
	}
	m, err := model.New(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	loss := model.Loss{Logp: model.NLL{}}
	for _, c := range []struct {
		name string
		b    model.Batch
		t    model.Targets
	}{{"copies", copies, ct}, {"shared", shared, st}} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := m.ForwardBackward(c.b, c.t, loss, nil, nil); err != nil { // size the activations
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m.ZeroGrad()
				if _, err := m.ForwardBackward(c.b, c.t, loss, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(G*answer*b.N)/b.Elapsed().Seconds(), "answer-tokens/s")
		})
	}
}
