package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gonum.org/v1/plot"

	"rlvr/internal/located"
	"rlvr/rundir"
)

// synth describes a synthetic run directory.
type synth struct {
	algorithm string
	seed      int
	steps     int
	evalEvery int  // 0: no eval.jsonl
	config    bool // write config.yaml
}

// writeRun writes a run directory with plausible training curves.
func writeRun(t *testing.T, dir string, s synth) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(s.seed), 7))
	speed := map[string]float64{"dr-grpo": 1.3, "dapo": 1.8}[s.algorithm] + 1 + 0.1*float64(s.seed)
	if s.config {
		cfg := fmt.Sprintf("algorithm: %s\nseed: %d\nmodel: runs/base-<tiny>\nsteps: %d\nlr: 1.0e-6\nclip_low: 0.2\nclip_high: 0.28\nnote: \"<script>alert(1)</script>\"\nadamw:\n  beta1: 0.9\n  beta2: 0.99\n", s.algorithm, s.seed, s.steps)
		writeFile(t, filepath.Join(dir, rundir.ConfigFile), cfg)
	}
	var metrics bytes.Buffer
	enc := json.NewEncoder(&metrics)
	for step := 1; step <= s.steps; step++ {
		p := float64(step) / float64(s.steps)
		acc := 0.25 + 0.4*(1-math.Exp(-1.5*speed*p)) + 0.05*rng.NormFloat64()
		acc = math.Min(math.Max(acc, 0), 1)
		rollout := 6 + 2*p + 0.4*rng.NormFloat64()
		verify := 0.8 + 0.1*rng.NormFloat64()
		learn := 3 + 0.3*rng.NormFloat64()
		rec := map[string]any{
			"step":               step,
			"reward_mean":        acc - 0.1 + 0.02*rng.NormFloat64(),
			"reward_std":         0.45 - 0.1*p + 0.02*rng.NormFloat64(),
			"accuracy":           acc,
			"zero_variance_frac": 0.3 + 0.2*p + 0.05*rng.NormFloat64(),
			"response_len_mean":  180 - 20*speed*p + 8*rng.NormFloat64(),
			"clip_low_frac":      0.002 + 0.001*rng.Float64(),
			"clip_high_frac":     0.004 + 0.002*rng.Float64(),
			"kl":                 0.02 * p * speed * (1 + 0.2*rng.NormFloat64()),
			"entropy":            1.2 - 0.2*speed*p + 0.05*rng.NormFloat64(),
			"grad_norm":          0.8 + 0.3*rng.Float64(),
			"lr":                 1e-6 * math.Min(1, float64(step)/5),
			"tokens_per_sec":     2400 + 200*rng.NormFloat64(),
			"time_rollout_s":     rollout,
			"time_verify_s":      verify,
			"time_learn_s":       learn,
			"step_s":             rollout + verify + learn + 0.3,
			"resampled":          rng.IntN(3),
		}
		if step == 7 {
			rec["kl"] = nil // a value a step did not measure
		}
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), metrics.String())
	if s.evalEvery > 0 {
		var evals bytes.Buffer
		for step := 0; step <= s.steps; step += s.evalEvery {
			g := evalAt(s, step)
			fmt.Fprintf(&evals, `{"step":%d,"split":"val","greedy":%g,"greedy_low":%g,"greedy_high":%g}`+"\n", step, g, g-0.06, g+0.06)
		}
		writeFile(t, filepath.Join(dir, rundir.EvalFile), evals.String())
	}
}

// evalAt is the synthetic greedy accuracy at a step: 25% at the start, rising
// to 40% + 1% per seed (+5% for Dr.GRPO, +10% for DAPO) at the end.
func evalAt(s synth, step int) float64 {
	end := 0.40 + 0.01*float64(s.seed)
	switch s.algorithm {
	case "dr-grpo":
		end += 0.05
	case "dapo":
		end += 0.10
	}
	return 0.25 + (end-0.25)*float64(step)/float64(s.steps)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

var standardCharts = []string{"reward.png", "accuracy.png", "eval.png", "clip.png", "kl_entropy.png", "length.png", "grad_norm.png", "throughput.png", "time_split.png"}

func TestRenderTwoRuns(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "grpo-s1"), filepath.Join(root, "dapo-s2")
	writeRun(t, a, synth{algorithm: "grpo", seed: 1, steps: 50, evalEvery: 10, config: true})
	writeRun(t, b, synth{algorithm: "dapo", seed: 2, steps: 50, evalEvery: 10, config: true})
	machine := rundir.Machine{CPU: "AMD EPYC family 25 model 17", Features: "AVX-512, AVX512-BF16, no AMX", Threads: 2, Learner: "fp32: Go", Sampler: "fp32: Go", Revision: "abc123"}
	if err := rundir.AppendMachine(a, machine); err != nil {
		t.Fatal(err)
	}
	var runs []*rundir.Run
	for _, dir := range []string{a, b} {
		r, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	r := runs[0]
	if r.Name != "grpo-s1" || r.Algorithm != "grpo" || r.Seed != "1" || r.Model != "runs/base-<tiny>" {
		t.Errorf("run = %q %q %q %q, want grpo-s1 grpo 1 runs/base-<tiny>", r.Name, r.Algorithm, r.Seed, r.Model)
	}
	if len(r.Steps) != 50 || len(r.Evals) != 6 {
		t.Fatalf("loaded %d steps, %d evals", len(r.Steps), len(r.Evals))
	}
	if _, ok := r.Steps[6].Value("kl"); ok {
		t.Error("step 7 has a kl, want null to be absent")
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings: %q", r.Warnings)
	}

	out := filepath.Join(root, "out")
	if err := Render(out, runs...); err != nil {
		t.Fatal(err)
	}
	b2, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b2)
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
		t.Error("report.html is not a whole HTML document")
	}
	for _, tag := range []string{"table", "section", "figure", "details", "pre", "tr", "td", "div"} {
		if o, c := strings.Count(page, "<"+tag+">")+strings.Count(page, "<"+tag+" "), strings.Count(page, "</"+tag+">"); o != c {
			t.Errorf("<%s>: %d opened, %d closed", tag, o, c)
		}
	}
	want := []string{
		"grpo-s1", "dapo-s2", // run names
		"41.0%", "95% CI 35.0–47.0%", "val, step 50", // grpo's final eval
		"52.0%", "95% CI 46.0–58.0%", // dapo's
		"25.0% → 41.0%", "&#43;16.0 pp", "25.0% → 52.0%", "&#43;27.0 pp", // before → after
		"rollout", "verify", "learn",
		"&lt;script&gt;alert(1)&lt;/script&gt;", // config, escaped
		"runs/base-&lt;tiny&gt;",
		"grpo vs dapo",
		"from step 0: AMD EPYC family 25 model 17 (AVX-512, AVX512-BF16, no AMX); fp32: Go, 2 threads, rlvr abc123", // what it computed on
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("report.html lacks %q", w)
		}
	}
	if !regexp.MustCompile(`<td class="num">2,\d{3}</td>`).MatchString(page) {
		t.Error("report.html lacks tokens/s with a thousands separator")
	}
	if strings.Contains(page, "<script>") {
		t.Error("report.html holds an unescaped <script>")
	}
	files := append(standardCharts, "metrics_other.png") // resampled
	for _, f := range files {
		if !strings.Contains(page, `src="`+f+`"`) {
			t.Errorf("report.html does not show %s", f)
		}
		checkPNG(t, filepath.Join(out, f))
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files)+1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("out holds %q, want report.html and %q", names, files)
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	b := img.Bounds()
	if b.Dx() < 800 || b.Dx() > 4000 || b.Dy() < 400 || b.Dy() > 4000 {
		t.Errorf("%s is %dx%d", path, b.Dx(), b.Dy())
	}
}

func TestRenderMissingOptionalFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "bare")
	writeRun(t, dir, synth{algorithm: "grpo", seed: 1, steps: 3})
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Config != "" || r.Algorithm != "" || r.Evals != nil || len(r.Steps) != 3 {
		t.Fatalf("loaded %+v", r)
	}
	if err := Render(dir, r); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("(no config.yaml)")) || !bytes.Contains(page, []byte(`src="reward.png"`)) {
		t.Error("report.html lacks the missing config's note or the reward chart")
	}
	if bytes.Contains(page, []byte("eval.png")) {
		t.Error("report.html shows an eval chart without evaluations")
	}
	if _, err := os.Stat(filepath.Join(dir, "eval.png")); err == nil {
		t.Error("eval.png written without evaluations")
	}
	checkPNG(t, filepath.Join(dir, "time_split.png"))

	// Before and after come from eval.jsonl.
	dir = filepath.Join(root, "noresult")
	writeRun(t, dir, synth{algorithm: "grpo", seed: 1, steps: 50, evalEvery: 25})
	if r, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if err := Render(dir, r); err != nil {
		t.Fatal(err)
	}
	if page, err = os.ReadFile(filepath.Join(dir, HTMLFile)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("25.0% → 41.0%")) || !bytes.Contains(page, []byte("eval.jsonl, step 0 → 50")) {
		t.Error("report.html lacks before → after from eval.jsonl")
	}

	// Only an eval.jsonl, with one evaluation.
	dir = filepath.Join(root, "evalonly")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, rundir.EvalFile), `{"step":0,"greedy":0.5}`+"\n")
	if r, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if err := Render(dir, r); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, filepath.Join(dir, "eval.png"))
}

// TestLoadCharted checks that a charted metric must be a number, which
// other metrics need not.
func TestLoadCharted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, rundir.MetricsFile)
	writeFile(t, path, `{"step":1,"phase":"warmup","kl":0.1}`+"\n"+`{"step":2,"kl":"high"}`+"\n")
	_, err := Load(dir)
	var pe *located.Error
	if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(err.Error(), `"kl": want a number, found a string`) {
		t.Errorf("err = %v, want %s:2: \"kl\": want a number…", err, path)
	}
}

// TestRenderWarnings renders a run that loading tolerated, with its
// warnings shown.
func TestRenderWarnings(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), `{"step":1,"kl":0.1}`+"\n"+`{"step":2,"kl":0.`)
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := Render(out, r); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("skipped the incomplete last line")) {
		t.Error("report.html does not show the warnings")
	}
}

func TestRunLabelsAndColors(t *testing.T) {
	runs := []*rundir.Run{
		{Name: "out", Algorithm: "grpo", Seed: "1"},
		{Name: "out", Algorithm: "grpo", Seed: "2"},
		{Name: "x"},
		{Name: "x"},
		{},
	}
	if got := fmt.Sprint(runLabels(runs)); got != "[grpo seed 1 grpo seed 2 x x (2) run 5]" {
		t.Errorf("labels %s", got)
	}
	same := []*rundir.Run{{Algorithm: "grpo"}, {Algorithm: "grpo"}, {Algorithm: "dapo"}, {Algorithm: "dapo"}}
	c := runColors(same)
	if c[0] != palette[0] || c[2] != palette[1] || c[1] == c[0] || c[3] == c[2] {
		t.Errorf("colors by algorithm %v", c)
	}
	if err := Render(t.TempDir()); err == nil {
		t.Error("Render of no runs succeeded")
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		f      tickFormat
		want   string
	}{
		{0, 50, plainTicks, "[0 10 20 30 40 50]"},
		{0, 1, percentTicks, "[0% 20% 40% 60% 80% 100%]"},
		{0, 0.01, percentTicks, "[0.0% 0.2% 0.4% 0.6% 0.8% 1.0%]"},
		{2000, 3000, plainTicks, "[2000 2200 2400 2600 2800 3000]"},
		{0, 30000, plainTicks, "[0 5k 10k 15k 20k 25k 30k]"},
		{0, 1e-6, plainTicks, "[0 2e-7 4e-7 6e-7 8e-7 1e-6]"},
		{2e-5, 1e-4, plainTicks, "[2e-5 4e-5 6e-5 8e-5 1e-4]"},
		{1e-4, 1.5e-4, plainTicks, "[1e-4 1.1e-4 1.2e-4 1.3e-4 1.4e-4 1.5e-4]"},
		{-0.5, 0.5, plainTicks, "[-0.4 -0.2 0.0 0.2 0.4]"},
	} {
		var labels []string
		for _, tk := range (ticker{c.f}).Ticks(c.lo, c.hi) {
			labels = append(labels, tk.Label)
		}
		if got := fmt.Sprint(labels); got != c.want {
			t.Errorf("ticks(%g, %g) = %s, want %s", c.lo, c.hi, got, c.want)
		}
	}
	for _, c := range []struct{ lo, hi, min, max float64 }{
		{0, 0, 0, 1},       // a metric that stays 0
		{5, 5, 4.4, 5.6},   // a constant, ±10%
		{0.03, 0.97, 0, 1}, // widened to round ticks
		{1, 50, 0, 50},
	} {
		var a plot.Axis
		setRange(&a, c.lo, c.hi)
		if math.Abs(a.Min-c.min) > 1e-9 || math.Abs(a.Max-c.max) > 1e-9 {
			t.Errorf("setRange(%g, %g) = [%g, %g], want [%g, %g]", c.lo, c.hi, a.Min, a.Max, c.min, c.max)
		}
	}
	if got := ema([]float64{1, 1, 1}, 5); fmt.Sprint(got) != "[1 1 1]" {
		t.Errorf("ema of a constant = %v", got)
	}
}

func TestRenderExtremeValues(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), `{"step":1,"kl":1e308,"entropy":5e-324,"lr":0,"reward_mean":-1e308,"time_rollout_s":1e308,"time_learn_s":1e308}
{"step":2,"kl":-1e308,"entropy":0,"lr":1e-300,"reward_mean":1e308,"time_rollout_s":-5,"step_s":1e308}
{"step":2147483647,"kl":1,"accuracy":1e200}
`)
	writeFile(t, filepath.Join(dir, rundir.EvalFile), `{"step":1,"greedy":1e308,"greedy_low":-1e308,"greedy_high":1e308}`+"\n")
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := Render(dir, r); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, filepath.Join(dir, "kl_entropy.png"))
}
