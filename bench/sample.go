package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/sample"
)

// SampleResult is one sampling measurement.
type SampleResult struct {
	Model        string
	Streams      int
	Tokens       int // generated
	Seconds      float64
	TokensPerSec float64
}

// SampleReport is what `rlvr bench sample` prints.
type SampleReport struct {
	Backend string
	Results []SampleResult
	// LogprobGap is the largest |sampler − learner| logprob over the
	// measured samples of each model.
	LogprobGap map[string]float64
	// PeakRSSBytes is the process's peak resident memory after the
	// measurements (weights, KV caches and logits of the largest batch).
	PeakRSSBytes int64
}

// Sample times generation of maxTokens tokens from a one-token prompt at
// temperature 1 for each stream count (all streams in one batch), best of
// reps runs, and measures the sampler–learner logprob gap on the samples.
func Sample(ctx context.Context, name string, m *model.Model, bos int32, streams []int, maxTokens, reps int, rep *SampleReport) error {
	s := sample.New(m, nil)
	if rep.LogprobGap == nil {
		rep.LogprobGap = map[string]float64{}
		rep.Backend = gemm.Backend()
	}
	for _, n := range streams {
		req := []sample.Request{{Prompt: []int32{bos}, Params: sample.Params{MaxTokens: maxTokens, Temperature: 1, N: n, Seed: 1}}}
		best := SampleResult{Model: name, Streams: n}
		var out [][]sample.Completion
		for range reps {
			t0 := time.Now()
			o, err := s.Sample(ctx, req)
			if err != nil {
				return err
			}
			sec := time.Since(t0).Seconds()
			tokens := 0
			for _, c := range o[0] {
				tokens += len(c.Tokens)
			}
			if tps := float64(tokens) / sec; tps > best.TokensPerSec {
				best.Tokens, best.Seconds, best.TokensPerSec = tokens, sec, tps
			}
			out = o
		}
		rep.Results = append(rep.Results, best)
		gap, err := sample.LogprobGap(m, req, out)
		if err != nil {
			return err
		}
		rep.LogprobGap[name] = math.Max(rep.LogprobGap[name], gap)
	}
	rep.PeakRSSBytes = PeakRSS()
	return nil
}

// Table renders the report for a person.
func (r *SampleReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "GEMM backend: %s\n\n%-16s %8s %8s %10s\n", r.Backend, "model", "streams", "tokens", "tokens/s")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "%-16s %8d %8d %10.0f\n", x.Model, x.Streams, x.Tokens, x.TokensPerSec)
	}
	b.WriteString("\nmax |sampler − learner| logprob gap:\n")
	for name, g := range r.LogprobGap {
		fmt.Fprintf(&b, "  %-14s %.2g\n", name, g)
	}
	fmt.Fprintf(&b, "\npeak memory: %.0f MiB resident (the process's peak)\n", mib(r.PeakRSSBytes))
	return b.String()
}
