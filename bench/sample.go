package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"rlvr/backend/local"
	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/engine/parallel"
	"rlvr/engine/sampler"
	"rlvr/sample"
)

// DecodeShape is a model decoding is measured on.
type DecodeShape struct {
	Name   string
	Config model.Config
}

// DecodeShapes are the shapes `rlvr bench sample` measures besides
// stories260K, with random weights: the built-in world's model, the engine
// benchmark's model and a two-layer slice of Qwen2.5-0.5B at full width
// (its 151,936-token vocabulary makes the output head most of the work).
func DecodeShapes(maxSeq int) []DecodeShape {
	return []DecodeShape{
		{"world-d128", model.Config{Vocab: 259, Dim: 128, Layers: 4, Heads: 4, Hidden: 344, MaxSeq: maxSeq, NormEps: 1e-5}},
		{"llama-4L-d256", func() model.Config { c := model.BenchConfig(); c.MaxSeq = maxSeq; return c }()},
		{"qwen0.5B-2L", model.Config{Vocab: 151936, Dim: 896, Layers: 2, Heads: 14, KVHeads: 2, Hidden: 4864, MaxSeq: maxSeq,
			RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true, AttentionBias: true}},
	}
}

// SampleResult is one sampling measurement.
type SampleResult struct {
	Model        string
	Streams      int
	Tokens       int // generated
	Seconds      float64
	TokensPerSec float64
	GFLOPS       float64 // model.DecodeFLOPs over the generated tokens, per second
	PeakShare    float64 // GFLOPS over the machine's peak
	// OpShare is each op's share of the run's wall time (the best run's
	// profile), "sampling" being the drawing of tokens from the logits.
	OpShare map[string]float64
	// Kernel is the precision and kernel of the model's products
	// (model.Model.Kernel).
	Kernel string
}

// SampleReport is what `rlvr bench sample` prints.
type SampleReport struct {
	CPU     string // the processor and its bf16 features
	Backend string
	Threads int
	Peak    Peak
	Results []SampleResult
	// LogprobGap is the largest |sampler − learner| logprob over the
	// measured samples of each model.
	LogprobGap map[string]float64
	// RunC is llama2.c's run.c single-stream tokens/s on stories260K,
	// measured in the same run, when a run binary was given.
	RunC float64
	// PeakRSSBytes is the process's peak resident memory after the
	// measurements (the learner's pass for the logprob gap included).
	PeakRSSBytes int64
	// SamplingRSSBytes is, per model, the peak resident memory while it
	// was built and sampled from (weights, their packed copy, KV caches,
	// logits), where the system lets the peak be reset (Linux).
	SamplingRSSBytes map[string]int64
}

// NewSampleReport starts a report with the machine's description.
func NewSampleReport(peak Peak) *SampleReport {
	return &SampleReport{CPU: gemm.DetectCPU().String(), Backend: gemm.Backend(), Threads: parallel.Threads(), Peak: peak, LogprobGap: map[string]float64{}}
}

// Sample times generation of maxTokens tokens from a one-token prompt at
// temperature 1 for each stream count (all streams in one batch), best of
// reps runs, profiles the best run's ops, and measures the
// sampler–learner logprob gap on the samples.
func Sample(ctx context.Context, name string, m *model.Model, bos int32, streams []int, maxTokens, reps int, rep *SampleReport) error {
	s := local.NewSampler(m, nil)
	type sampled struct {
		req []sample.Request
		out [][]sample.Completion
	}
	var all []sampled
	for _, n := range streams {
		req := []sample.Request{{Prompt: []int32{bos}, Params: sample.Params{MaxTokens: maxTokens, Temperature: 1, N: n, Seed: 1}}}
		best := SampleResult{Model: name, Streams: n, Kernel: m.Kernel()}
		var out [][]sample.Completion
		for range reps {
			t0 := time.Now()
			o, err := s.Sample(ctx, req)
			if err != nil {
				return err
			}
			sec := time.Since(t0).Seconds()
			tokens, flops := 0, 0.0
			for _, c := range o[0] {
				tokens += len(c.Tokens)
				for i := range c.Tokens {
					flops += model.DecodeFLOPs(m.Config, 1+i+1) // the prompt, the tokens before, itself
				}
			}
			if tps := float64(tokens) / sec; tps > best.TokensPerSec {
				best.Tokens, best.Seconds, best.TokensPerSec = tokens, sec, tps
				best.GFLOPS = flops / sec / 1e9
			}
			out = o
		}
		if rep.Peak.GFLOPS > 0 {
			best.PeakShare = best.GFLOPS / rep.Peak.GFLOPS
		}
		// One more run with the profiler on, for the split by op.
		m.Profile = &model.Profile{}
		t0 := time.Now()
		if _, err := s.Sample(ctx, req); err != nil {
			m.Profile = nil
			return err
		}
		wall := time.Since(t0)
		best.OpShare = map[string]float64{}
		var inModel time.Duration
		for _, op := range model.Ops() {
			if d := m.Profile.Forward[op]; d > 0 {
				best.OpShare[op.String()] = d.Seconds() / wall.Seconds()
				inModel += d
			}
		}
		best.OpShare["sampling"] = (wall - inModel).Seconds() / wall.Seconds()
		m.Profile = nil
		rep.Results = append(rep.Results, best)
		all = append(all, sampled{req, out})
	}
	if rep.SamplingRSSBytes != nil {
		rep.SamplingRSSBytes[name] = PeakRSS() // before the learner's passes below
	}
	for _, x := range all {
		var prompts, continuations [][]int32
		var logprobs [][]float32
		for _, c := range x.out[0] {
			prompts, continuations, logprobs = append(prompts, x.req[0].Prompt), append(continuations, c.Tokens), append(logprobs, c.Logprobs)
		}
		gap, err := sampler.LogprobGap(m, prompts, continuations, logprobs)
		if err != nil {
			return err
		}
		rep.LogprobGap[name] = math.Max(rep.LogprobGap[name], gap)
	}
	rep.PeakRSSBytes = max(rep.PeakRSSBytes, PeakRSS())
	return nil
}

// StartModel marks the start of a model's measurements, so the report's
// SamplingRSSBytes covers that model alone; m is allocated after it.
func (r *SampleReport) StartModel() {
	r.PeakRSSBytes = max(r.PeakRSSBytes, PeakRSS())
	if ResetPeakRSS() && r.SamplingRSSBytes == nil {
		r.SamplingRSSBytes = map[string]int64{}
	}
}

var runCRate = regexp.MustCompile(`achieved tok/s: ([0-9.]+)`)

// RunC runs llama2.c's run.c binary on a checkpoint and tokenizer, at
// temperature 1 for steps tokens, best of reps runs, and returns the
// tokens/s it prints.
func RunC(ctx context.Context, bin, checkpoint, tokenizer string, steps, reps int) (float64, error) {
	best := 0.0
	for i := range reps {
		cmd := exec.CommandContext(ctx, bin, checkpoint, "-z", tokenizer, "-t", "1.0", "-n", strconv.Itoa(steps), "-s", strconv.Itoa(i+1))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("run.c %s: %w: %s", bin, err, strings.TrimSpace(out.String()))
		}
		m := runCRate.FindSubmatch(out.Bytes())
		if m == nil {
			return 0, fmt.Errorf("run.c %s printed no \"achieved tok/s\": %q", bin, strings.TrimSpace(out.String()))
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, fmt.Errorf("run.c %s: %w", bin, err)
		}
		best = max(best, v)
	}
	return best, nil
}

// Table renders the report for a person.
func (r *SampleReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "processor: %s\n", r.CPU)
	fmt.Fprintf(&b, "GEMM backend: %s; %d threads\n", r.Backend, r.Threads)
	fmt.Fprintf(&b, "peak: %.0f GFLOP/s (%s)\n\n", r.Peak.GFLOPS, r.Peak.Source)
	fmt.Fprintf(&b, "%-14s %7s %7s %9s %8s %6s  %s\n", "model", "streams", "tokens", "tokens/s", "GFLOP/s", "peak", "time by op")
	for _, x := range r.Results {
		fmt.Fprintf(&b, "%-14s %7d %7d %9.0f %8.1f %5.0f%%  %s\n", x.Model, x.Streams, x.Tokens, x.TokensPerSec, x.GFLOPS, 100*x.PeakShare, opShares(x.OpShare))
	}
	var named []string
	for _, x := range r.Results {
		if !slices.Contains(named, x.Model) {
			fmt.Fprintf(&b, "  %s: %s\n", x.Model, x.Kernel)
			named = append(named, x.Model)
		}
	}
	if r.RunC > 0 {
		fmt.Fprintf(&b, "\nllama2.c run.c, stories260K, one stream: %.0f tokens/s\n", r.RunC)
		for _, x := range r.Results {
			if x.Model == "stories260K" {
				fmt.Fprintf(&b, "  rlvr %3d streams: ×%.1f\n", x.Streams, x.TokensPerSec/r.RunC)
			}
		}
	}
	b.WriteString("\nmax |sampler − learner| logprob gap:\n")
	for name, g := range r.LogprobGap {
		fmt.Fprintf(&b, "  %-14s %.2g\n", name, g)
	}
	if len(r.SamplingRSSBytes) > 0 {
		b.WriteString("\npeak memory while sampling (weights, packed copy, KV caches, logits):\n")
		var done []string
		for _, x := range r.Results {
			if v, ok := r.SamplingRSSBytes[x.Model]; ok && !slices.Contains(done, x.Model) {
				fmt.Fprintf(&b, "  %-14s %6.0f MiB\n", x.Model, mib(v))
				done = append(done, x.Model)
			}
		}
	}
	fmt.Fprintf(&b, "\npeak memory: %.0f MiB resident (the process's peak, the logprob gap's learner pass included)\n", mib(r.PeakRSSBytes))
	return b.String()
}

// opShares lists the shares of a run's time of 2% or more, largest first.
func opShares(s map[string]float64) string {
	var ops []string
	for k, v := range s {
		if v >= 0.02 {
			ops = append(ops, k)
		}
	}
	slices.SortFunc(ops, func(a, b string) int { return cmp.Compare(s[b], s[a]) })
	for i, k := range ops {
		ops[i] = fmt.Sprintf("%s %.0f%%", k, 100*s[k])
	}
	return strings.Join(ops, ", ")
}
