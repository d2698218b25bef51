package sample

import (
	"fmt"
	"testing"
)

// BenchmarkStories260K generates 256 tokens per stream from BOS at
// temperature 1, all streams in one batch; tokens/s is the aggregate.
func BenchmarkStories260K(b *testing.B) {
	m, _ := stories(b)
	s := New(m, nil)
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			req := []Request{{Prompt: []int32{1}, Params: Params{MaxTokens: 256, Temperature: 1, N: n, Seed: 1}}}
			tokens := 0
			for b.Loop() {
				out, err := s.Sample(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range out[0] {
					tokens += len(c.Tokens)
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
