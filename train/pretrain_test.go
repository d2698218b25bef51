package train

import (
	"context"
	"path/filepath"
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
