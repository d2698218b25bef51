package train

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/optim"
)

// TestPretrainLearnsAndSaves runs a few seconds of pretraining on a small
// model: the loss must fall, every level must be evaluated, and the saved
// checkpoint must open with the byte tokenizer.
func TestPretrainLearnsAndSaves(t *testing.T) {
	cfg := DefaultPretrain()
	cfg.Model.Dim, cfg.Model.Layers, cfg.Model.Hidden = 64, 2, 128
	cfg.Steps, cfg.BatchTokens, cfg.EvalProblems = 40, 1024, 20
	cfg.Schedule = optim.Schedule{Kind: optim.Constant, PeakLR: 3e-3, TotalSteps: 40}
	cfg.Out = filepath.Join(t.TempDir(), "ckpt")
	var steps int
	res, err := Pretrain(context.Background(), cfg, func(p Progress) { steps = p.Step })
	if err != nil {
		t.Fatal(err)
	}
	if steps != cfg.Steps {
		t.Fatalf("progress reported %d steps, want %d", steps, cfg.Steps)
	}
	if !(res.LastLoss < res.FirstLoss*0.7) {
		t.Fatalf("loss %.3f -> %.3f did not fall", res.FirstLoss, res.LastLoss)
	}
	if len(res.Eval) != len(cfg.Levels) {
		t.Fatalf("%d levels evaluated, want %d", len(res.Eval), len(cfg.Levels))
	}
	l, err := checkpoint.Open(cfg.Out, "")
	if err != nil {
		t.Fatal(err)
	}
	if l.Model.NumParams() != res.Params {
		t.Fatalf("saved model has %d parameters, trained %d", l.Model.NumParams(), res.Params)
	}
}

func TestPretrainStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Pretrain(ctx, DefaultPretrain(), nil); err == nil {
		t.Fatal("no error from a cancelled run")
	}
}

// TestEnsurePretrainedCaches trains once and then finds the model in the
// cache; a changed knob trains anew.
func TestEnsurePretrainedCaches(t *testing.T) {
	t.Setenv("RLVR_CACHE", t.TempDir())
	cfg := DefaultPretrain()
	cfg.Model.Dim, cfg.Model.Layers, cfg.Model.Hidden = 32, 1, 64
	cfg.Steps, cfg.BatchTokens, cfg.EvalProblems = 3, 512, 5
	cfg.Schedule = optim.Schedule{Kind: optim.Constant, PeakLR: 1e-3, TotalSteps: 3}
	calls := 0
	dir, res, err := EnsurePretrained(context.Background(), cfg, func(Progress) { calls++ })
	if err != nil || calls != 3 {
		t.Fatalf("first run: %v, %d steps", err, calls)
	}
	dir2, res2, err := EnsurePretrained(context.Background(), cfg, func(Progress) { calls++ })
	if err != nil || dir2 != dir || calls != 3 || res2.LastLoss != res.LastLoss {
		t.Fatalf("second run trained again or differs: %v %q %q %d", err, dir, dir2, calls)
	}
	if _, err := checkpoint.Open(dir, ""); err != nil {
		t.Fatal(err)
	}
	cfg.Seed++
	if PretrainedPath(cfg) == dir {
		t.Fatal("another seed maps to the same cache entry")
	}
}

// TestPretrainStopAndResume stops a pretraining run after step 3 (its
// checkpoint goes to the state directory) and resumes it: the final
// weights equal an uninterrupted run's, bit for bit.
func TestPretrainStopAndResume(t *testing.T) {
	cfg := DefaultPretrain()
	cfg.Model.Dim, cfg.Model.Layers, cfg.Model.Hidden = 32, 1, 64
	cfg.Steps, cfg.BatchTokens, cfg.EvalProblems = 6, 512, 2
	cfg.Schedule = optim.Schedule{Kind: optim.Cosine, PeakLR: 1e-3, WarmupSteps: 2, TotalSteps: 6}
	straight := cfg
	straight.Out = filepath.Join(t.TempDir(), "straight")
	want, err := Pretrain(context.Background(), straight, nil)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	cfg.Out = state
	stop := make(chan struct{})
	_, err = PretrainWith(context.Background(), cfg, PretrainOptions{State: state, Stop: stop, Progress: func(p Progress) {
		if p.Step == 3 {
			close(stop)
		}
	}})
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "step 3 of 6") {
		t.Fatalf("stopped run: %v", err)
	}
	var resumedFrom int
	got, err := PretrainWith(context.Background(), cfg, PretrainOptions{State: state, Progress: func(p Progress) {
		if resumedFrom == 0 {
			resumedFrom = p.Step
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resumedFrom != 4 || got.FirstLoss != want.FirstLoss || got.LastLoss != want.LastLoss {
		t.Fatalf("resumed at step %d: loss %v -> %v, uninterrupted %v -> %v", resumedFrom, got.FirstLoss, got.LastLoss, want.FirstLoss, want.LastLoss)
	}
	a, _ := os.ReadFile(filepath.Join(straight.Out, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(state, "model.safetensors"))
	if !bytes.Equal(a, b) || exists(filepath.Join(state, PretrainStateFile)) {
		t.Fatal("the resumed run's weights differ from the uninterrupted run's, or its state file remains")
	}
}
