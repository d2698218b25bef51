package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/backend/local"
	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/engine/parallel"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

func init() {
	// bf16 products on any CPU: inputs rounded to bf16, the float32 GEMM
	// after (the hardware kernels' numbers up to summation order).
	if os.Getenv("RLVR_BF16_KERNEL") == "" {
		os.Setenv("RLVR_BF16_KERNEL", "emulate")
	}
}

// skewedSampler draws what the run's sampler draws and reports every
// logprob shifted by delta: a sampler that computes otherwise than the
// learner, by a known amount.
type skewedSampler struct {
	s     rollout.Sampler
	delta float32
}

func (k skewedSampler) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out, err := k.s.Sample(ctx, reqs)
	for _, cs := range out {
		for _, c := range cs {
			for j := range c.Logprobs {
				c.Logprobs[j] += k.delta
			}
		}
	}
	return out, err
}

// skewedMethod is the run's method, rolling out through a skewedSampler.
type skewedMethod struct {
	inner method.Method
	delta float32
}

func (m skewedMethod) Step(ctx context.Context, sc *method.StepContext, ex []task.Example) (*method.Batch, error) {
	sc.Policy = skewedSampler{sc.Policy, m.delta}
	return m.inner.Step(ctx, sc, ex)
}

// runMetrics runs c, with the method's rollouts skewed by delta unless it
// is 0, and returns its metrics without the timing ones.
func runMetrics(t *testing.T, c RLConfig, delta float32) []map[string]float64 {
	t.Helper()
	var opts Options
	if delta != 0 {
		r := c
		if _, err := r.Resolve(); err != nil {
			t.Fatal(err)
		}
		inner, _ := newMethod(t, &r, part.Setup{MaxLen: 512})
		opts.Method = skewedMethod{inner, delta}
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), c, dir, opts); err != nil {
		t.Fatal(err)
	}
	return stable(t, filepath.Join(dir, "metrics.jsonl"))
}

// TestLogprobGapFloat32: with sampler and learner both in float32, the
// learner's logprobs of the sampled tokens are the sampler's up to float32
// rounding (decoding and the learner's pass multiply matrices of other
// shapes, whose sums may round apart by an ulp), over the first
// mini-batch and, under the correction, over every token; the
// correction's weights are then 1 to that rounding, and the run trains as
// the run without it.
func TestLogprobGapFloat32(t *testing.T) {
	c := smallRL(t)
	c.Steps, c.CheckpointEvery, c.MiniBatches, c.MicroBatchTokens = 2, 0, 2, 100
	plain := runMetrics(t, c, 0)
	c.SamplerCorrection = &SamplerCorrectionConfig{Cap: 2}
	corrected := runMetrics(t, c, 0)
	const rounding = 2e-6 // a few ulps of a logprob near −8
	for i, m := range corrected {
		for k, want := range map[string]float64{MetricLogprobGapMean: 0, MetricLogprobGapMax: 0, MetricISWeightMean: 1, MetricISCappedFrac: 0} {
			if got, ok := m[k]; !ok || math.Abs(got-want) > rounding {
				t.Errorf("step %d: %s = %v (logged: %v), want %v to float32 rounding", i+1, k, got, ok, want)
			}
		}
	}
	for i, m := range plain {
		if got, ok := m[MetricLogprobGapMax]; !ok || got > rounding {
			t.Errorf("step %d without the correction: %s = %v (logged: %v), want 0 to float32 rounding", i+1, MetricLogprobGapMax, got, ok)
		}
		for k, want := range m {
			if strings.HasPrefix(k, "logprob_gap/") {
				continue // measured over other tokens
			}
			if got := corrected[i][k]; math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Errorf("step %d: %s = %v with the correction, %v without", i+1, k, got, want)
			}
		}
	}
}

// TestLogprobGapOfAnotherSampler: a sampler whose logprobs differ from the
// learner's by δ logs a gap of |δ|; under the correction each token's
// weight is min(exp(−δ), cap): every one truncated when exp(−δ) passes the
// cap, none when it is below.
func TestLogprobGapOfAnotherSampler(t *testing.T) {
	c := smallRL(t)
	c.Steps, c.CheckpointEvery = 2, 0
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-5 }
	for _, m := range runMetrics(t, c, 0.25) {
		if !near(m[MetricLogprobGapMean], 0.25) || !near(m[MetricLogprobGapMax], 0.25) {
			t.Errorf("δ 0.25: gap mean %v, max %v; want 0.25 both", m[MetricLogprobGapMean], m[MetricLogprobGapMax])
		}
	}
	c.SamplerCorrection = &SamplerCorrectionConfig{Cap: 2}
	for _, tc := range []struct {
		delta        float32
		mean, capped float64
	}{{-1, 2, 1}, {0.5, math.Exp(-0.5), 0}} {
		for _, m := range runMetrics(t, c, tc.delta) {
			if !near(m[MetricISWeightMean], tc.mean) || m[MetricISCappedFrac] != tc.capped || !near(m[MetricLogprobGapMean], math.Abs(float64(tc.delta))) {
				t.Errorf("δ %v: weight mean %v, capped %v, gap %v; want %v, %v, %v", tc.delta, m[MetricISWeightMean], m[MetricISCappedFrac], m[MetricLogprobGapMean],
					tc.mean, tc.capped, math.Abs(float64(tc.delta)))
			}
		}
	}
}

// TestLogprobGapAcrossPrecisions: a learner in bf16 beside a float32
// sampler, or a sampler in bf16 or int8 beside a float32 learner, scores the
// sampled tokens otherwise than its counterpart by far more than float32
// rounding, and the correction's weights move off 1 with it.
func TestLogprobGapAcrossPrecisions(t *testing.T) {
	for _, tc := range []struct{ learner, sampler string }{{"bf16", "fp32"}, {"fp32", "bf16"}, {"fp32", "int8"}} {
		c := smallRL(t)
		c.Steps, c.CheckpointEvery = 2, 0
		c.Precision, c.SamplerPrecision = tc.learner, tc.sampler
		c.SamplerCorrection = &SamplerCorrectionConfig{Cap: 2}
		for i, m := range runMetrics(t, c, 0) {
			if m[MetricLogprobGapMax] < 1e-4 || m[MetricLogprobGapMean] < 1e-6 || math.Abs(m[MetricISWeightMean]-1) < 1e-7 {
				t.Errorf("learner %s, sampler %s, step %d: gap mean %v, max %v, weight mean %v: want a gap beyond float32 rounding (does the precision reach the engine?)",
					tc.learner, tc.sampler, i+1, m[MetricLogprobGapMean], m[MetricLogprobGapMax], m[MetricISWeightMean])
			}
			t.Logf("learner %s, sampler %s, step %d: gap mean %.3g, max %.3g; weight mean %.6f, capped %.3g", tc.learner, tc.sampler,
				i+1, m[MetricLogprobGapMean], m[MetricLogprobGapMax], m[MetricISWeightMean], m[MetricISCappedFrac])
		}
	}
}

// TestPrecisionReachesTheEngine: precision sets the learner's model and the
// reference's, sampler_precision the sampler's alone, which still reads
// the learner's weights.
func TestPrecisionReachesTheEngine(t *testing.T) {
	c := smallRL(t)
	c.Precision, c.SamplerPrecision, c.KL = "fp32", "bf16", 0.1
	if _, err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	p, err := openPolicy(context.Background(), c.Model, "", &c)
	if err != nil {
		t.Fatal(err)
	}
	s := p.learner.(*local.Session)
	sm := s.Sampler.Engine.Model
	if s.Model.Precision != model.FP32 || sm.Precision != model.BF16 {
		t.Errorf("learner %v, sampler %v; want fp32, bf16", s.Model.Precision, sm.Precision)
	}
	if &sm.Params[0] != &s.Model.Params[0] {
		t.Error("the sampler does not read the learner's weights")
	}
	c.Precision, c.SamplerPrecision = "bfloat16", ""
	if _, err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if c.Precision != "bf16" || c.SamplerPrecision != "bf16" {
		t.Errorf("precision bfloat16 resolved to %q, sampler_precision to %q; want bf16 both", c.Precision, c.SamplerPrecision)
	}
	ref, err := openReference(c.Model, &c)
	if err != nil {
		t.Fatal(err)
	}
	if got := ref.(*local.Frozen).Model.Precision; got != model.BF16 {
		t.Errorf("reference in %v, want the learner's bf16", got)
	}
}

// TestPrecisionConfigErrors: an unknown precision, an int8 learner, a
// bad cap, a correction without a policy gradient and a precision the
// Tinker backend cannot set are refused, naming the field.
func TestPrecisionConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*RLConfig)
		want string
	}{
		{"precision", func(c *RLConfig) { c.Precision = "fp16" }, "precision \"fp16\": want fp32"},
		{"sampler precision", func(c *RLConfig) { c.SamplerPrecision = "int4" }, "sampler_precision \"int4\": want fp32"},
		{"int8 learner", func(c *RLConfig) { c.Precision = "int8" }, "precision int8 is for sampling (sampler_precision: int8)"},
		{"cap", func(c *RLConfig) { c.SamplerCorrection = &SamplerCorrectionConfig{Cap: 0.5} }, "sampler_correction.cap = 0.5"},
		{"no cap", func(c *RLConfig) { c.SamplerCorrection = &SamplerCorrectionConfig{} }, "sampler_correction.cap = 0"},
		{"sft", func(c *RLConfig) {
			c.Algorithm, c.SamplerCorrection = method.SFT, &SamplerCorrectionConfig{Cap: 2}
		}, "sampler_correction weighs a policy gradient"},
		{"tinker", func(c *RLConfig) {
			c.Backend, c.Precision = &BackendConfig{Kind: BackendTinker, URL: "http://127.0.0.1:1"}, "bf16"
		}, "backend tinker: precision bf16"},
	} {
		c := DefaultRL()
		tc.edit(&c)
		if _, err := c.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestResumeMayChangePrecision: a resumed run may change precision and
// sampler_precision, not the sampler correction.
func TestResumeMayChangePrecision(t *testing.T) {
	c := smallRL(t)
	c.Steps, c.CheckpointEvery = 1, 1
	dir := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), c, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	c.Steps, c.Precision, c.SamplerPrecision = 2, "bf16", "fp32"
	if err := Run(context.Background(), c, dir, Options{Resume: true}); err != nil {
		t.Fatalf("resume in bf16: %v", err)
	}
	c.Steps, c.SamplerCorrection = 3, &SamplerCorrectionConfig{Cap: 2}
	if err := Run(context.Background(), c, dir, Options{Resume: true}); err == nil || !strings.Contains(err.Error(), "sampler_correction") {
		t.Errorf("resume with a sampler correction: error %v, want one naming sampler_correction", err)
	}
	// Each start recorded what it computed with, from the step it started
	// at; the refused resume recorded nothing.
	r, err := rundir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cpu := gemm.DetectCPU()
	want := []rundir.Machine{
		{Step: 0, CPU: cpu.Identity(), Features: cpu.Features(), Threads: parallel.Threads(), Learner: gemm.KernelFor(model.FP32), Sampler: gemm.KernelFor(model.FP32)},
		{Step: 1, CPU: cpu.Identity(), Features: cpu.Features(), Threads: parallel.Threads(), Learner: gemm.KernelFor(model.BF16), Sampler: gemm.KernelFor(model.FP32)},
	}
	if len(r.Machines) != len(want) {
		t.Fatalf("machine.jsonl holds %d lines, want %d: %+v", len(r.Machines), len(want), r.Machines)
	}
	for i, m := range r.Machines {
		m.Revision = "" // go test records none; a built binary does
		if m != want[i] {
			t.Errorf("machine line %d = %+v, want %+v", i+1, m, want[i])
		}
	}
}

// TestSamplerCorrectionRemoteMatchesLocal: the correction is folded into
// the batch before it reaches a backend, so a run through the Tinker API
// trains what the local engine trains: the same metrics, the correction's
// included, and the same weights, with a sampler whose logprobs sit 0.5
// below the learner's (every weight e^0.5).
func TestSamplerCorrectionRemoteMatchesLocal(t *testing.T) {
	cfg := remoteRL(t)
	cfg.SamplerCorrection = &SamplerCorrectionConfig{Cap: 2}
	run := func(c RLConfig) (string, []map[string]float64) {
		r := c
		if _, err := r.Resolve(); err != nil {
			t.Fatal(err)
		}
		inner, _ := newMethod(t, &r, part.Setup{MaxLen: 512})
		dir := filepath.Join(t.TempDir(), "run")
		if err := Run(context.Background(), c, dir, Options{Method: skewedMethod{inner, -0.5}}); err != nil {
			t.Fatal(err)
		}
		return dir, stable(t, filepath.Join(dir, "metrics.jsonl"))
	}
	localDir, a := run(cfg)
	addr, state := tinkerServer(t, cfg.Model)
	onTinker(&cfg, addr)
	remoteDir, b := run(cfg)
	for i := range a {
		if a[i]["grad_norm"] == 0 || math.Abs(a[i][MetricISWeightMean]-math.Exp(0.5)) > 1e-4 {
			t.Fatalf("step %d: grad norm %v, weight mean %v: want a gradient and weights e^0.5", i+1, a[i]["grad_norm"], a[i][MetricISWeightMean])
		}
		delete(a[i], "entropy") // unknown remotely
	}
	if ok, diff := metricsWithin(a, b, 1e-4); !ok {
		t.Errorf("local and remote runs differ: %s", diff)
	}
	worst := weightsDiff(t, readWeights(t, filepath.Join(localDir, "ckpt-000002", "model.safetensors")), remoteWeights(t, remoteDir, state, "ckpt-000002"))
	if worst > 1e-5 {
		t.Errorf("weights differ by up to %g", worst)
	}
}
