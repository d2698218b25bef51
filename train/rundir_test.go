package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"rlvr/backend/local"
	"rlvr/method"
	"rlvr/rundir"
)

// TestRunDirectoryBelongsToOneRun reproduces a reused run directory: three
// steps with seed 1, then a fresh run with seed 2 into the same directory
// (refused, then allowed with Overwrite), then a resume that changes the
// algorithm (refused) or only the step count (allowed).
func TestRunDirectoryBelongsToOneRun(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.CheckpointEvery = 3, 1
	dir := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Seed, other.Steps = 2, 2
	err := RL(context.Background(), other, dir, false, nil)
	if err == nil || !strings.Contains(err.Error(), "holds another run") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("fresh run into a used directory: %v", err)
	}
	if n := len(stable(t, filepath.Join(dir, "metrics.jsonl"))); n != 3 {
		t.Fatalf("the refused run touched the metrics: %d lines", n)
	}
	changed := cfg
	changed.Algorithm, changed.Steps = method.DrGRPO, 4
	err = RL(context.Background(), changed, dir, true, nil)
	if err == nil || !strings.Contains(err.Error(), "algorithm grpo -> dr-grpo") {
		t.Fatalf("resume with another algorithm: %v", err)
	}
	longer := cfg
	longer.Steps = 4
	if err := RL(context.Background(), longer, dir, true, nil); err != nil {
		t.Fatalf("resume with more steps: %v", err)
	}
	if n := len(stable(t, filepath.Join(dir, "metrics.jsonl"))); n != 4 {
		t.Fatalf("%d steps after resuming to 4", n)
	}
	if err := Run(context.Background(), other, dir, Options{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(dir, "metrics.jsonl"))
	ckpts, _ := rundir.Checkpoints(dir)
	// The new run's checkpoints only: steps 3 and 4 of the old run are gone.
	if len(ms) != 2 || len(ckpts) != 2 || filepath.Base(ckpts[1]) != "ckpt-000002" {
		t.Fatalf("after overwriting: %d metrics lines, checkpoints %v", len(ms), ckpts)
	}
}

// TestStopCheckpointsAndResumes closes Stop during step 2: the run ends
// after that step with a checkpoint, and resuming gives the uninterrupted
// run's metrics.
func TestStopCheckpointsAndResumes(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.CheckpointEvery = 4, 0
	straight := filepath.Join(t.TempDir(), "straight")
	if err := RL(context.Background(), cfg, straight, false, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "stopped")
	stop := make(chan struct{})
	err := Run(context.Background(), cfg, dir, Options{Stop: stop, Progress: func(m method.Metrics) {
		if m["step"] == 2 {
			close(stop)
		}
	}})
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("stopped run: %v", err)
	}
	if !exists(filepath.Join(dir, "ckpt-000002", "state.json")) {
		t.Fatal("no checkpoint of the last step")
	}
	if err := RL(context.Background(), cfg, dir, true, nil); err != nil {
		t.Fatal(err)
	}
	if a, b := stable(t, filepath.Join(straight, "metrics.jsonl")), stable(t, filepath.Join(dir, "metrics.jsonl")); !reflect.DeepEqual(a, b) {
		t.Fatalf("metrics differ:\n%v\n%v", a, b)
	}
}

// TestResumeFallsBackPastDamagedCheckpoint damages the newest checkpoint's
// weights: resuming says so and continues from the one before.
func TestResumeFallsBackPastDamagedCheckpoint(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.CheckpointEvery, cfg.KeepLast = 4, 2, 2
	straight := filepath.Join(t.TempDir(), "straight")
	if err := RL(context.Background(), cfg, straight, false, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	cut := cfg
	cut.Steps = 3 // checkpoints at 2 and 3 (the last step)
	if err := RL(context.Background(), cut, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ckpt-000003", "model.safetensors"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	var notes []string
	err := Run(context.Background(), cfg, dir, Options{Resume: true, Log: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) < 1 || !strings.Contains(notes[0], "skipping damaged checkpoint ckpt-000003") {
		t.Fatalf("notices %q", notes)
	}
	if a, b := stable(t, filepath.Join(straight, "metrics.jsonl")), stable(t, filepath.Join(dir, "metrics.jsonl")); !reflect.DeepEqual(a, b) {
		t.Fatalf("metrics differ:\n%v\n%v", a, b)
	}
}

// TestKeepOptimizerLast checkpoints every step with keep_optimizer: last:
// only the newest checkpoint holds the optimizer state, the others the
// whole model; resuming from it gives the uninterrupted run's metrics, and
// a resume that would have to fall back to a model-only checkpoint fails
// rather than restart the optimizer.
func TestKeepOptimizerLast(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.CheckpointEvery, cfg.KeepLast, cfg.KeepOptimizer = 5, 1, 3, KeepOptimizerLast
	straight := filepath.Join(t.TempDir(), "straight")
	if err := RL(context.Background(), cfg, straight, false, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	cut := cfg
	cut.Steps = 3 // steps 4 and 5 take the optimizer state of step 3
	if err := RL(context.Background(), cut, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	holds := func(ckpt, file string) bool { return exists(filepath.Join(dir, ckpt, file)) }
	for _, ckpt := range []string{"ckpt-000001", "ckpt-000002", "ckpt-000003"} {
		if !holds(ckpt, "model.safetensors") {
			t.Errorf("%s holds no model", ckpt)
		}
		if got, want := holds(ckpt, local.OptimizerFile), ckpt == "ckpt-000003"; got != want {
			t.Errorf("%s holds the optimizer state: %v, want %v", ckpt, got, want)
		}
	}
	if err := RL(context.Background(), cfg, dir, true, nil); err != nil {
		t.Fatal(err)
	}
	if a, b := stable(t, filepath.Join(straight, "metrics.jsonl")), stable(t, filepath.Join(dir, "metrics.jsonl")); !reflect.DeepEqual(a, b) {
		t.Fatalf("metrics differ:\n%v\n%v", a, b)
	}
	ckpts, _ := rundir.Checkpoints(dir)
	for _, ckpt := range ckpts {
		if got, want := exists(filepath.Join(ckpt, local.OptimizerFile)), filepath.Base(ckpt) == "ckpt-000005"; got != want {
			t.Errorf("after resuming, %s holds the optimizer state: %v, want %v", filepath.Base(ckpt), got, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ckpt-000005", "model.safetensors"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	longer := cfg
	longer.Steps = 6
	if err := RL(context.Background(), longer, dir, true, nil); err == nil || !strings.Contains(err.Error(), "no optimizer state") {
		t.Fatalf("resume past a damaged newest checkpoint to model-only ones: %v", err)
	}
}

// TestResumeFinishesTheLastEvaluationWithoutOptimizer: a run whose last
// checkpoint is its last step has only its final evaluation left, and
// resumes it with the optimizer state pruned; the evaluation made again
// is the one made the first time, problem by problem.
func TestResumeFinishesTheLastEvaluationWithoutOptimizer(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.TestProblems = 2, 12
	dir := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	evalPath := filepath.Join(dir, rundir.EvalFile)
	first, err := os.ReadFile(evalPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(first), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], `"split":"test"`) || !strings.Contains(lines[2], `"outcomes":"`) {
		t.Fatalf("eval.jsonl:\n%s", first)
	}
	if err := os.Remove(filepath.Join(dir, "ckpt-000002", local.OptimizerFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evalPath, []byte(lines[0]+lines[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RL(context.Background(), cfg, dir, true, nil); err != nil {
		t.Fatal(err)
	}
	if again := evalText(evalPath); again != evalSeconds.ReplaceAllString(string(first), "") {
		t.Errorf("the test evaluation made again:\n%s\nthe first:\n%s", again, first)
	}
	// With a step left to train, the optimizer state is needed.
	longer := cfg
	longer.Steps = 3
	if err := RL(context.Background(), longer, dir, true, nil); err == nil || !strings.Contains(err.Error(), "no optimizer state") {
		t.Fatalf("resume with a step left and no optimizer state: %v", err)
	}
}

// TestHostileConfigsFailBeforeTheRunDirectory: sizes that would allocate
// without bound, paths that do not exist and budgets larger than the
// context are refused before the run directory is made.
func TestHostileConfigsFailBeforeTheRunDirectory(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*RLConfig)
		want string
	}{
		{func(c *RLConfig) { c.GroupSize = 100_000_000 }, "group_size = 100000000 must be in"},
		{func(c *RLConfig) { c.PromptsPerStep = 100_000_000 }, "prompts_per_step"},
		{func(c *RLConfig) { c.Epochs = 100_000_000 }, "epochs"},
		{func(c *RLConfig) { c.LR = 1e30 }, "lr = 1e+30"},
		{func(c *RLConfig) { c.EvalProblems = 0 }, "eval_problems = 0"},
		{func(c *RLConfig) { c.KeepOptimizer = "none" }, `keep_optimizer "none" is not all or last`},
		{func(c *RLConfig) { c.Model = "nosuch" }, "model: stat nosuch"},
		{func(c *RLConfig) { c.Data = DataConfig{Name: "gsm8k", Train: "nosuch.jsonl"} }, "data.train: stat nosuch.jsonl"},
		{func(c *RLConfig) { c.MaxTokens = 100_000 }, "leaves no room for a prompt"},
	} {
		cfg := smallRL(t)
		tc.mod(&cfg)
		dir := filepath.Join(t.TempDir(), "run")
		err := RL(context.Background(), cfg, dir, false, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
		if tc.want != "leaves no room for a prompt" && exists(dir) {
			t.Errorf("%q: the run directory was made", tc.want)
		}
	}
}

// TestResumeAcceptsKnobsAddedSince: a run saved before a knob existed
// resumes when the knob takes the default it resolves to, and not when it
// is set to something else.
func TestResumeAcceptsKnobsAddedSince(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultRL()
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.recorded(r)
	if err := writeConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := regexp.MustCompile(`(?m)^eval_temperature: .*\n`).ReplaceAll(b, nil)
	if bytes.Equal(old, b) {
		t.Fatalf("config.yaml has no eval_temperature line:\n%s", b)
	}
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkResumeConfig(dir, &cfg); err != nil {
		t.Fatalf("a knob added since, at its default: %v", err)
	}
	cfg.EvalTemperature = 0.5
	if err := checkResumeConfig(dir, &cfg); err == nil || !strings.Contains(err.Error(), "eval_temperature") {
		t.Fatalf("a knob added since, changed: %v", err)
	}
}

// TestSecondWriterIsRefused resumes a run while it is still going, and
// starts a fresh run into it: both are refused naming the running
// process, which then finishes with its steps in order.
func TestSecondWriterIsRefused(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.CheckpointEvery = 2, 1
	dir := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	longer := cfg
	longer.Steps = 4
	atStep3, resumeTried := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- RL(context.Background(), longer, dir, true, func(m method.Metrics) {
			if m[rundir.StepField] == 3 {
				close(atStep3)
				<-resumeTried
			}
		})
	}()
	<-atStep3
	pid := fmt.Sprintf("PID %d", os.Getpid())
	errResume := RL(context.Background(), longer, dir, true, nil)
	errFresh := Run(context.Background(), longer, dir, Options{Overwrite: true})
	close(resumeTried)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"resume": errResume, "fresh run with overwrite": errFresh} {
		if err == nil || !strings.Contains(err.Error(), dir+" is in use") || !strings.Contains(err.Error(), pid) {
			t.Errorf("%s while the run goes on: %v", name, err)
		}
	}
	var steps []float64
	for _, m := range stable(t, filepath.Join(dir, rundir.MetricsFile)) {
		steps = append(steps, m[rundir.StepField])
	}
	if !reflect.DeepEqual(steps, []float64{1, 2, 3, 4}) {
		t.Fatalf("metrics steps %v", steps)
	}
	if err := RL(context.Background(), longer, dir, true, nil); err != nil {
		t.Fatalf("resume after the run ended: %v", err)
	}
}
