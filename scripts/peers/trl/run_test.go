package main

import (
	"os"
	"path/filepath"
	"testing"

	"rlvr/method"
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
		if err := c.Resolve(); err != nil {
			t.Fatalf("%s: %v", loss, err)
		}
		if c.Algorithm != rlvrAlgorithm[loss] || len(c.Parts) != 0 || c.ClipLow != 0.2 || c.ClipHigh != clipHigh {
			t.Errorf("%s: algorithm %s, parts %v, clip %v/%v", loss, c.Algorithm, c.Parts, c.ClipLow, c.ClipHigh)
		}
		if c.Data.Order != train.OrderFile || c.Seed != 7 || c.Model != s.Model || c.Chat.System != s.System || c.Warmup != 0 || c.LR != s.LR {
			t.Errorf("%s: data %+v, seed %d, model %q, system %q, warmup %d, lr %v", loss, c.Data, c.Seed, c.Model, c.Chat.System, c.Warmup, c.LR)
		}
		if a := c.AdamW; a.Beta1 != 0.9 || a.Beta2 != 0.999 || a.Eps != 1e-8 || a.WeightDecay != 0 || c.GradClip != 1 || c.KL != 0 || c.Epochs != 1 || c.MiniBatches != 1 {
			t.Errorf("%s: adamw %+v, grad_clip %v, kl %v, epochs %d, mini_batches %d", loss, a, c.GradClip, c.KL, c.Epochs, c.MiniBatches)
		}
		if c.Steps != s.Steps || c.PromptsPerStep != s.PromptsPerStep || c.GroupSize != s.Group || c.MaxTokens != s.MaxTokens {
			t.Errorf("%s: steps %d, prompts %d, group %d, max_tokens %d", loss, c.Steps, c.PromptsPerStep, c.GroupSize, c.MaxTokens)
		}
	}
	if rlvrAlgorithm["dr_grpo"] != method.DrGRPO {
		t.Errorf("dr_grpo maps to %s", rlvrAlgorithm["dr_grpo"])
	}
}
