package train

import (
	"context"
	"path/filepath"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
)

// TestSFTLowersLoss fine-tunes a small fresh world model on world examples
// through the training loop, and exports the final model.
func TestSFTLowersLoss(t *testing.T) {
	cfgM := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	cfgM.Dim, cfgM.Layers, cfgM.Hidden = 64, 2, 128
	m, _ := model.New(cfgM, 1)
	dir := filepath.Join(t.TempDir(), "base")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultRL()
	if err := cfg.ApplyPreset("sft"); err != nil {
		t.Fatal(err)
	}
	cfg.Model, cfg.Data.Levels, cfg.Steps, cfg.PromptsPerStep = dir, []int{0, 1}, 30, 32
	cfg.LR, cfg.Warmup, cfg.EvalProblems, cfg.CheckpointEvery = 3e-3, 0, 8, 0
	run := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(run, "metrics.jsonl"))
	first, last := ms[0]["loss/sft"], ms[len(ms)-1]["loss/sft"]
	if len(ms) != 30 || !(last < 0.7*first) || ms[0]["grad_norm"] == 0 {
		t.Fatalf("loss %.3f -> %.3f over %d steps", first, last, len(ms))
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := ExportModel(run, out); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(out, ""); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(out, "state.json")) || exists(filepath.Join(out, "optimizer.safetensors")) {
		t.Fatal("the exported model carries the run's state")
	}
}
