package model

import (
	"math/rand/v2"
	"testing"

	"rlvr/backend"
	"rlvr/engine/optim"
)

// BenchmarkTrainStep times one forward+backward+AdamW step on the engine
// benchmark's shape (BenchConfig, 8 sequences of 128 tokens), the step
// ../shared/tools/torch_llama_bench.py times in PyTorch. allocs/op shows
// whether a steady loop allocates.
func BenchmarkTrainStep(b *testing.B) {
	cfg := BenchConfig()
	m, err := New(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	batch := Pack(randomSeqs(r, cfg.Vocab, 128, 128, 128, 128, 128, 128, 128, 128))
	N := len(batch.Tokens)
	tg := Targets{Targets: make([]int32, N), Weights: make([]float32, N)}
	for n := range N {
		tg.Targets[n], tg.Weights[n] = int32(r.IntN(cfg.Vocab)), r.Float32()/float32(N)
	}
	segs := make([]optim.Segment, len(m.Tensors))
	for i, t := range m.Tensors {
		segs[i] = optim.Segment{Name: t.Name, Offset: t.Offset, Len: t.Len(), Decay: t.Decay}
	}
	opt, err := optim.NewAdamW(optim.DefaultAdamW(), m.NumParams(), segs)
	if err != nil {
		b.Fatal(err)
	}
	step := func() {
		if _, err := m.ForwardBackward(batch, tg, backend.Loss{NLL: 1}, nil, nil); err != nil {
			b.Fatal(err)
		}
		if err := opt.Step(m.Params, m.Grads, 1e-4); err != nil {
			b.Fatal(err)
		}
	}
	step() // size the activations
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	flops := TrainFLOPs(cfg, batch)
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(N*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
