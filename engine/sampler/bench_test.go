package sampler

import (
	"fmt"
	"testing"
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
