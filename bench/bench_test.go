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
	rep, err := Engine(cfg, 2, 32, 3, MachinePeak(0), []int{64})
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
}
