package bench

import (
	"strings"
	"testing"

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
