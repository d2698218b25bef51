// Package bench measures the engine the way `rlvr bench` reports it: GEMM
// rates, the training step's tokens/s and share of the machine's peak, and
// where the step's time goes. The same code backs the go test benchmarks.
package bench

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/engine/parallel"
)

// Step is a ready training step: a model, its optimizer and a fixed batch.
type Step struct {
	Model   *model.Model
	Opt     *optim.AdamW
	Batch   model.Batch
	Targets model.Targets
}

// NewStep builds the benchmark step for cfg with seqs sequences of seqLen
// tokens and random targets, the loss torch_llama_bench.py uses
// (−Σ w·logp / numel with w uniform in [0, 1)).
func NewStep(cfg model.Config, seqs, seqLen int) (*Step, error) {
	m, err := model.New(cfg, 1)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]int32, seqs)
	for i := range rows {
		rows[i] = make([]int32, seqLen)
		for j := range rows[i] {
			rows[i][j] = int32(r.IntN(cfg.Vocab))
		}
	}
	b := model.Pack(rows)
	N := len(b.Tokens)
	t := model.Targets{Targets: make([]int32, N), Weights: make([]float32, N)}
	for n := range N {
		t.Targets[n], t.Weights[n] = int32(r.IntN(cfg.Vocab)), r.Float32()/float32(N)
	}
	segs := make([]optim.Segment, len(m.Tensors))
	for i, ts := range m.Tensors {
		segs[i] = optim.Segment{Name: ts.Name, Offset: ts.Offset, Len: ts.Len(), Decay: ts.Decay}
	}
	opt, err := optim.NewAdamW(optim.DefaultAdamW(), m.NumParams(), segs)
	if err != nil {
		return nil, err
	}
	return &Step{Model: m, Opt: opt, Batch: b, Targets: t}, nil
}

// Run does one forward, backward and AdamW update.
func (s *Step) Run() error {
	if _, err := s.Model.ForwardBackward(s.Batch, s.Targets, model.Loss{Logp: model.NLL{}}, nil, nil); err != nil {
		return err
	}
	return s.Opt.Step(s.Model.Params, s.Model.Gradients(), 1e-4)
}

// FLOPs is the step's floating-point work (see model.TrainFLOPs).
func (s *Step) FLOPs() float64 { return model.TrainFLOPs(s.Model.Config, s.Batch) }

// Peak is the machine's float32 peak as rlvr estimates it.
type Peak struct {
	GFLOPS      float64
	Cores       int
	GHz         float64
	FlopsPerCyc int
	Source      string // how the figure was obtained
}

// MachinePeak is the machine's float32 peak: measured with a loop of
// independent FMAs on every core where that loop is built (cgo on amd64
// with AVX2 and FMA), else estimated from /proc/cpuinfo as cores × clock ×
// FLOP per cycle (32 with AVX2/AVX-512 and FMA: two 8-wide FMA pipes; 16
// without FMA). override > 0 replaces either.
func MachinePeak(override float64) Peak {
	p := Peak{Cores: runtime.NumCPU(), FlopsPerCyc: 16, GHz: 3.0, Source: "default clock 3.0 GHz"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		var mhz []float64
		fma := false
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "cpu MHz":
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					mhz = append(mhz, x)
				}
			case "flags":
				fl := " " + v + " "
				fma = strings.Contains(fl, " fma ") && strings.Contains(fl, " avx2 ")
			}
		}
		if len(mhz) > 0 {
			p.GHz = slices.Max(mhz) / 1000
			p.Source = "/proc/cpuinfo"
		}
		if fma {
			p.FlopsPerCyc = 32
		}
	}
	p.GFLOPS = float64(p.Cores) * p.GHz * float64(p.FlopsPerCyc)
	if override > 0 {
		p.GFLOPS, p.Source = override, "--peak"
	} else if g, ok := measuredPeak(); ok {
		p.GFLOPS, p.FlopsPerCyc, p.Source = g, 32, "measured: independent FMAs on every core"
		p.GHz = g / float64(p.Cores*p.FlopsPerCyc) // the effective clock
	}
	return p
}

// GEMMResult is one measured product.
type GEMMResult struct {
	M, N, K int
	GFLOPS  float64
}

// GEMM times square products of the given sizes with the loaded backend.
func GEMM(sizes []int, minTime time.Duration) []GEMMResult { return GEMMIn(model.FP32, sizes, minTime) }

// GEMMIn times square products in precision p: Sgemm, or Bgemm on the
// bf16 kernel (see gemm.KernelFor) in BF16.
func GEMMIn(p model.Precision, sizes []int, minTime time.Duration) []GEMMResult {
	var out []GEMMResult
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range sizes {
		a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
		for i := range a {
			a[i], b[i] = r.Float32(), r.Float32()
		}
		p.Gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
		reps, start := 0, time.Now()
		for time.Since(start) < minTime || reps < 3 {
			p.Gemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
			reps++
		}
		out = append(out, GEMMResult{n, n, n, 2 * float64(n) * float64(n) * float64(n) * float64(reps) / time.Since(start).Seconds() / 1e9})
	}
	return out
}

// OpTime is one op's share of the step.
type OpTime struct {
	Op                string
	ForwardMs, BackMs float64
	Share             float64 // of the step's wall time
}

// EngineOptions are what an engine benchmark runs besides the model's
// shape.
type EngineOptions struct {
	Sequences, SeqLen int // the step's batch: Sequences sequences of SeqLen tokens
	Reps              int // timed steps, after one warm-up; as many are profiled
	Peak              Peak
	// GEMMSizes are the square products timed before the step; none skips
	// them (and their matrices, 12·n² bytes, from the peak memory).
	GEMMSizes []int
	// Recompute sets model.Model.Recompute: each block's activations are
	// recomputed in the backward instead of kept from the forward.
	Recompute bool
	// Precision sets model.Model.Precision (and the GEMM section's
	// products): FP32, or BF16 on the bf16 kernel gemm chooses (falling
	// back to FP32, and saying so, where there is none).
	Precision model.Precision
}

// EngineReport is what `rlvr bench engine` prints.
type EngineReport struct {
	// CPU is the processor and its bf16 features; Precision what was asked
	// for, Effective what ran, Kernel what ran the products.
	CPU                          string
	Precision, Effective, Kernel string
	Backend                      string
	Threads                      int
	Peak                         Peak
	GEMM                         []GEMMResult
	Config                       model.Config
	Sequences                    int
	SeqLen                       int
	Recompute                    bool
	Params                       int
	StepMs                       float64 // median
	StepMinMs                    float64
	TokensPerSec                 float64
	GFLOPS                       float64
	PeakShare                    float64
	Ops                          []OpTime
	AllocsPerStep                float64
	BytesPerStep                 float64
	// The memory the step holds by design, in bytes: the weights, their
	// gradients, AdamW's two moments, and the activations after the step
	// (model.Model.ActivationBytes: the saved tensors, the backward's
	// scratch, the loss head's logits chunk).
	WeightBytes, GradBytes, OptimizerBytes, ActivationBytes int64
	// PeakRSSBytes is the process's peak resident memory after the
	// measurements (GEMM matrices, model, gradients, optimizer state and
	// activations included).
	PeakRSSBytes int64
	// BF16WeightBytes is the weights' bf16 copy the products read in BF16
	// (beside the float32 master copy in WeightBytes).
	BF16WeightBytes int64
}

// Engine measures a training step of cfg over o.Reps repetitions after one
// warm-up, then a profiled pass for the per-op split.
func Engine(cfg model.Config, o EngineOptions) (*EngineReport, error) {
	st, err := NewStep(cfg, o.Sequences, o.SeqLen)
	if err != nil {
		return nil, err
	}
	st.Model.Recompute = o.Recompute
	st.Model.Precision = o.Precision
	reps, peak := o.Reps, o.Peak
	eff := st.Model.EffectivePrecision()
	rep := &EngineReport{CPU: gemm.DetectCPU().String(), Precision: o.Precision.String(), Effective: eff.String(), Kernel: st.Model.Kernel(),
		Backend: gemm.Backend(), Threads: parallel.Threads(), Peak: peak, Config: st.Model.Config,
		Sequences: o.Sequences, SeqLen: o.SeqLen, Recompute: o.Recompute, Params: st.Model.NumParams()}
	rep.GEMM = GEMMIn(eff, o.GEMMSizes, 300*time.Millisecond)
	if err := st.Run(); err != nil {
		return nil, err
	}
	p := int64(st.Model.NumParams())
	rep.WeightBytes, rep.GradBytes, rep.OptimizerBytes = 4*p, 4*p, 8*p
	rep.ActivationBytes = st.Model.ActivationBytes()
	rep.BF16WeightBytes = st.Model.BF16WeightBytes()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	times := make([]float64, reps)
	for i := range times {
		t0 := time.Now()
		if err := st.Run(); err != nil {
			return nil, err
		}
		times[i] = time.Since(t0).Seconds() * 1000
	}
	runtime.ReadMemStats(&ms1)
	rep.AllocsPerStep = float64(ms1.Mallocs-ms0.Mallocs) / float64(reps)
	rep.BytesPerStep = float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(reps)
	slices.Sort(times)
	rep.StepMs, rep.StepMinMs = times[len(times)/2], times[0]
	rep.TokensPerSec = float64(len(st.Batch.Tokens)) / (rep.StepMs / 1000)
	rep.GFLOPS = st.FLOPs() / (rep.StepMs / 1000) / 1e9
	rep.PeakShare = rep.GFLOPS / peak.GFLOPS
	// A profiled pass: per-op wall time, the optimizer, and the rest.
	prof := &model.Profile{}
	st.Model.Profile = prof
	var optTime time.Duration
	var total time.Duration
	for range reps {
		t0 := time.Now()
		if _, err := st.Model.ForwardBackward(st.Batch, st.Targets, model.Loss{Logp: model.NLL{}}, nil, nil); err != nil {
			return nil, err
		}
		t1 := time.Now()
		if err := st.Opt.Step(st.Model.Params, st.Model.Gradients(), 1e-4); err != nil {
			return nil, err
		}
		optTime += time.Since(t1)
		total += time.Since(t0)
	}
	st.Model.Profile = nil
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(reps) }
	var accounted time.Duration
	for _, op := range model.Ops() {
		f, b := prof.Forward[op], prof.Backward[op]
		accounted += f + b
		rep.Ops = append(rep.Ops, OpTime{Op: op.String(), ForwardMs: per(f), BackMs: per(b), Share: (f + b).Seconds() / total.Seconds()})
	}
	rep.Ops = append(rep.Ops, OpTime{Op: "adamw", BackMs: per(optTime), Share: optTime.Seconds() / total.Seconds()})
	other := total - accounted - optTime
	rep.Ops = append(rep.Ops, OpTime{Op: "other", BackMs: per(other), Share: other.Seconds() / total.Seconds()})
	rep.PeakRSSBytes = PeakRSS()
	return rep, nil
}

// Table renders the report for a person.
func (r *EngineReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "processor: %s\n", r.CPU)
	fmt.Fprintf(&b, "precision: %s, products on %s\n", r.Precision, r.Kernel)
	fmt.Fprintf(&b, "GEMM backend: %s, %d threads\n", r.Backend, r.Threads)
	fmt.Fprintf(&b, "peak: %.0f GFLOP/s (%d cores × %.2f GHz × %d FLOP/cycle, from %s)\n", r.Peak.GFLOPS, r.Peak.Cores, r.Peak.GHz, r.Peak.FlopsPerCyc, r.Peak.Source)
	if len(r.GEMM) > 0 {
		fmt.Fprintf(&b, "\n%-22s %10s %8s\n", "GEMM (square) "+r.Effective, "GFLOP/s", "of peak")
	}
	above := false
	for _, g := range r.GEMM {
		fmt.Fprintf(&b, "%-22s %10.1f %7.0f%%\n", fmt.Sprintf("%d×%d×%d", g.M, g.N, g.K), g.GFLOPS, 100*g.GFLOPS/r.Peak.GFLOPS)
		above = above || g.GFLOPS > 0.95*r.Peak.GFLOPS
	}
	if above && r.Peak.Source != "--peak" {
		fmt.Fprintf(&b, "(GEMM came within 5%% of the estimated peak or above it: /proc/cpuinfo likely reports the base clock, not the boost clock; pass --peak)\n")
	}
	c := r.Config
	var extras string
	if c.TiedEmbeddings {
		extras += ", tied head"
	}
	if c.AttentionBias {
		extras += ", q/k/v biases"
	}
	if c.QKNorm {
		extras += ", q/k norms"
	}
	fmt.Fprintf(&b, "\ntraining step: %d layers, d_model %d, %d heads (%d KV), SwiGLU %d, vocab %d%s, %d×%d tokens, %.2fM params\n",
		c.Layers, c.Dim, c.Heads, c.KVHeads, c.Hidden, c.Vocab, extras, r.Sequences, r.SeqLen, float64(r.Params)/1e6)
	if r.Recompute {
		fmt.Fprintf(&b, "  (each block's activations recomputed in the backward)\n")
	}
	fmt.Fprintf(&b, "  step        %8.1f ms (median; min %.1f)\n", r.StepMs, r.StepMinMs)
	fmt.Fprintf(&b, "  throughput  %8.0f tokens/s\n", r.TokensPerSec)
	fmt.Fprintf(&b, "  compute     %8.1f GFLOP/s = %.0f%% of peak\n", r.GFLOPS, 100*r.PeakShare)
	fmt.Fprintf(&b, "  allocations %8.0f per step, %.1f KB per step\n", r.AllocsPerStep, r.BytesPerStep/1024)
	held := r.WeightBytes + r.GradBytes + r.OptimizerBytes + r.ActivationBytes + r.BF16WeightBytes
	fmt.Fprintf(&b, "  memory held %8.0f MiB: weights %.0f, gradients %.0f, AdamW moments %.0f, activations %.0f",
		mib(held), mib(r.WeightBytes), mib(r.GradBytes), mib(r.OptimizerBytes), mib(r.ActivationBytes))
	if r.BF16WeightBytes > 0 {
		fmt.Fprintf(&b, ", the weights' bf16 copy %.0f", mib(r.BF16WeightBytes))
	}
	fmt.Fprintf(&b, "\n")
	fmt.Fprintf(&b, "  peak memory %8.0f MiB resident (the process's peak)\n\n", mib(r.PeakRSSBytes))
	fmt.Fprintf(&b, "%-14s %12s %12s %8s\n", "op", "forward ms", "backward ms", "share")
	for _, o := range r.Ops {
		fmt.Fprintf(&b, "%-14s %12.2f %12.2f %7.1f%%\n", o.Op, o.ForwardMs, o.BackMs, 100*o.Share)
	}
	return b.String()
}
