package sampler

import (
	"fmt"
	"testing"

	"rlvr/engine/model"
)

// BenchmarkStories260K generates 256 tokens per stream from BOS at
// temperature 1, all streams in one batch; tokens/s is the aggregate.
func BenchmarkStories260K(b *testing.B) {
	m, _ := stories(b)
	s := New(m)
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			tokens := 0
			req := []Request{{Prompt: []int32{1}, MaxNew: 256, Temperature: 1, N: n, Seed: 1,
				Accept: func(int, int32, float32, bool) bool { tokens++; return false }}}
			for b.Loop() {
				if err := s.Sample(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkMaxStreams draws 64 continuations of which one in 16 runs to
// 64 tokens and the others end after 8, at most 16 in flight: one call
// with MaxStreams (continuous batching) against four calls of 16, each
// waiting on its long continuation. The model (random, 29M parameters,
// 116 MB) does not fit in the L3 cache, so a step with few streams costs
// about a read of the weights, as a real model's does; stories260K fits
// in L2 and would show nothing. tokens/s is the aggregate.
func BenchmarkMaxStreams(b *testing.B) {
	m, err := model.New(model.Config{Vocab: 32000, Dim: 512, Layers: 4, Heads: 8, KVHeads: 8, Hidden: 1376, MaxSeq: 128, TiedEmbeddings: true}, 1)
	if err != nil {
		b.Fatal(err)
	}
	s := NewFixed(m)
	tokens := 0
	requests := func() []Request {
		reqs := make([]Request, 64)
		for i := range reqs {
			length := 8
			if i%16 == 0 {
				length = 64
			}
			drawn := 0
			reqs[i] = Request{Prompt: []int32{1, 2, 3}, MaxNew: 64, Temperature: 1, Seed: uint64(i),
				Accept: func(int, int32, float32, bool) bool { tokens++; drawn++; return drawn >= length }}
		}
		return reqs
	}
	b.Run("batches", func(b *testing.B) {
		tokens = 0
		for b.Loop() {
			reqs := requests()
			for lo := 0; lo < len(reqs); lo += 16 {
				if err := s.Sample(ctx, reqs[lo:lo+16]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
	})
	b.Run("continuous", func(b *testing.B) {
		tokens = 0
		s.MaxStreams = 16
		defer func() { s.MaxStreams = 0 }()
		for b.Loop() {
			if err := s.Sample(ctx, requests()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
	})
}

// BenchmarkDecodePrecision decodes 64 tokens per stream from a random
// 29M-parameter model (116 MB in float32, beyond the L3 cache, so a step
// with few streams costs about a read of the packed weights) in float32
// and in bf16, whose packed weights are half the bytes. bf16 needs a bf16
// kernel (RLVR_BF16_KERNEL=emulate forces one anywhere); without it the
// bf16 rows run in float32, and the log says so.
func BenchmarkDecodePrecision(b *testing.B) {
	for _, p := range []model.Precision{model.FP32, model.BF16} {
		m, err := model.New(model.Config{Vocab: 32000, Dim: 512, Layers: 4, Heads: 8, KVHeads: 8, Hidden: 1376, MaxSeq: 128, TiedEmbeddings: true}, 1)
		if err != nil {
			b.Fatal(err)
		}
		m.Precision = p
		s := NewFixed(m)
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("%v/streams=%d", p, n), func(b *testing.B) {
				b.Log(m.Kernel())
				tokens := 0
				req := []Request{{Prompt: []int32{1, 2, 3}, MaxNew: 64, Temperature: 1, N: n, Seed: 1,
					Accept: func(int, int32, float32, bool) bool { tokens++; return false }}}
				for b.Loop() {
					if err := s.Sample(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
