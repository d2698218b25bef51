package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/train"
)

// TestPrintEvalSummary: before and after come from the validation lines,
// and the test line, when there is one, is reported on its own with the
// expert chosen on validation and the majority vote.
func TestPrintEvalSummary(t *testing.T) {
	dir := t.TempDir()
	lines := `{"step":0,"split":"val","greedy":0.1,"greedy_low":0.05,"greedy_high":0.15,"experts":{"E0":0.1,"E1":0.2}}
{"step":50,"split":"val","greedy":0.3,"greedy_low":0.25,"greedy_high":0.35,"experts":{"E0":0.3,"E1":0.4}}
{"step":50,"split":"test","greedy":0.5,"greedy_low":0.45,"greedy_high":0.55,"problems":200,"experts":{"E0":0.5,"E1":0.6},"expert_majority":0.55,"best_expert":"E1","best":0.6,"best_low":0.5,"best_high":0.7,"delta":-0.05}
`
	if err := os.WriteFile(filepath.Join(dir, "eval.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := printEvalSummary(&b, dir); err != nil {
		t.Fatal(err)
	}
	want := "held-out greedy accuracy: step 0 10.0% [5.0, 15.0] -> step 50 30.0% [25.0, 35.0]\n" +
		"test (200 problems): greedy 50.0% [45.0, 55.0]; E1, best on validation, 60.0% [50.0, 70.0]; majority vote 55.0% (-5.0 points)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestRunSummary: the line a run starts with names the recipe, the model,
// the data and the budget; an sft run samples nothing, so it has no
// questions × samples.
func TestRunSummary(t *testing.T) {
	rl := train.DefaultRL()
	if _, err := rl.Resolve(); err != nil {
		t.Fatal(err)
	}
	rl.Steps = 1
	if got, want := runSummary(rl), "grpo from the world model (version 1) on world levels [6]: 1 step of 16 questions × 8 samples, lr 5e-05, seed 1"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	sft := rl
	sft.Algorithm, sft.Preset, sft.Model, sft.Steps, sft.Data.Name = method.SFT, "sft", "runs/m", 38, "gsm8k"
	if got, want := runSummary(sft), "sft from runs/m on gsm8k: 38 steps, lr 5e-05, seed 1"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
