package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/rundir"
	"rlvr/train"
)

// TestRlvrConfigMatchesTRL loads the config written for each TRL loss type
// and checks what rlvr will run: the algorithm, no DAPO parts, TRL's clip
// range, optimizer and schedule, and the training file in its own order.
func TestRlvrConfigMatchesTRL(t *testing.T) {
	dir := t.TempDir()
	s := settings{Steps: 3, PromptsPerStep: 2, Group: 4, MaxTokens: 32, Temperature: 1, LR: 1e-6, Model: "model dir", System: "Solve it: '#### x'."}
	for loss, clipHigh := range map[string]float32{"grpo": 0.2, "dr_grpo": 0.2, "dapo": 0.28} {
		path := filepath.Join(dir, loss+".yaml")
		if err := os.WriteFile(path, []byte(rlvrConfig(&s, "train.jsonl", "test.jsonl", loss, 7)), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := train.LoadRLConfig(path, "")
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Resolve()
		if err != nil {
			t.Fatalf("%s: %v", loss, err)
		}
		if c.Algorithm != rlvrAlgorithm[loss] || len(r.Run.Parts) != 0 || r.Family.ClipLow != 0.2 || r.Family.ClipHigh != clipHigh {
			t.Errorf("%s: algorithm %s, parts %v, clip %v/%v", loss, c.Algorithm, r.Run.Parts, r.Family.ClipLow, r.Family.ClipHigh)
		}
		if c.Data.Order != train.OrderFile || c.Seed != 7 || c.Model != s.Model || c.Chat.System != s.System || c.Warmup != 0 || c.LR != s.LR {
			t.Errorf("%s: data %+v, seed %d, model %q, system %q, warmup %d, lr %v", loss, c.Data, c.Seed, c.Model, c.Chat.System, c.Warmup, c.LR)
		}
		if a := c.AdamW; a.Beta1 != 0.9 || a.Beta2 != 0.999 || a.Eps != 1e-8 || a.WeightDecay != 0 || c.GradClip != 1 || c.KL != 0 || c.Epochs != 1 || c.MiniBatches != 1 {
			t.Errorf("%s: adamw %+v, grad_clip %v, kl %v, epochs %d, mini_batches %d", loss, a, c.GradClip, c.KL, c.Epochs, c.MiniBatches)
		}
		// TRL steps its optimizer on an all-zero loss: so does rlvr here.
		if c.NoSignal != train.NoSignalStep {
			t.Errorf("%s: no_signal %q, want %q as TRL", loss, c.NoSignal, train.NoSignalStep)
		}
		if c.Steps != s.Steps || c.PromptsPerStep != s.PromptsPerStep || c.GroupSize != s.Group || c.MaxTokens != s.MaxTokens {
			t.Errorf("%s: steps %d, prompts %d, group %d, max_tokens %d", loss, c.Steps, c.PromptsPerStep, c.GroupSize, c.MaxTokens)
		}
	}
	if rlvrAlgorithm["dr_grpo"] != method.DrGRPO {
		t.Errorf("dr_grpo maps to %s", rlvrAlgorithm["dr_grpo"])
	}
}

// TestAgreementTable builds two seeds of both trainers and checks the
// differences: the mean reward by seed, and held-out accuracy by seed and
// by problem, with a problem that only one side scored refused.
func TestAgreementTable(t *testing.T) {
	dir := t.TempDir()
	evalFile := func(name string, right ...bool) string {
		path := filepath.Join(dir, name)
		var b strings.Builder
		for i, ok := range right {
			r := 0.0
			if ok {
				r = 1
			}
			fmt.Fprintf(&b, `{"ID":"gsm8k/%d","Pass":"greedy","Reward":%v}`+"\n", i, r)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	run := func(engine string, seed int, file string, rewards ...float64) finished {
		r := &rundir.Run{}
		for i, v := range rewards {
			r.Steps = append(r.Steps, rundir.Step{Step: i + 1, Values: map[string]float64{"reward_mean": v}})
		}
		return finished{rec: runRecord{Engine: engine, Loss: "grpo", Seed: seed, EvalFile: file}, run: r}
	}
	byKey := map[string][]finished{
		"rlvr/grpo": {run("rlvr", 1, evalFile("r1", true, true, false, false), 0.2, 0.4), run("rlvr", 2, evalFile("r2", true, false, false, false), 0.1, 0.1)},
		"trl/grpo":  {run("trl", 1, evalFile("t1", true, false, false, false), 0.1, 0.1), run("trl", 2, evalFile("t2", true, false, false, true), 0.3, 0.1)},
	}
	s := settings{Losses: []string{"grpo"}}
	got, err := agreementTable(&s, byKey)
	if err != nil {
		t.Fatal(err)
	}
	// Reward: seed 1 +0.2, seed 2 −0.1: mean +0.05, t(0.975, 1) = 12.706,
	// half-width 12.706·0.15 = 1.906. Held-out by seed: +25 pp and −25 pp,
	// half-width 12.706·25 = 317.7; by problem: d = 0,+1,0,0, 0,0,0,−1,
	// s = √(2/7), half-width t(0.975, 7)·s/√8 = 44.7, MDE (2.365 +
	// 0.896)·s/√8 = 61.6.
	for _, want := range []string{"| grpo | 1,2 | +0.050 [-1.856, +1.956] | - |", "| +0.0 pp [-317.7, +317.7] | - |", "| +0.0 pp [-44.7, +44.7] | 61.6 pp |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	byKey["trl/grpo"][1].rec.EvalFile = evalFile("t2short", true)
	byKey["trl/grpo"] = byKey["trl/grpo"][:2]
	byKey["rlvr/grpo"][1].rec.EvalFile = evalFile("r2", true, false)
	if _, err := agreementTable(&s, byKey); err == nil || !strings.Contains(err.Error(), "is not in") {
		t.Errorf("runs scored on other problems: err = %v", err)
	}
}
