package local

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/engine/lora"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/format/safetensors"
)

var everyMatrix = lora.Config{Rank: 4, Attention: true, MLP: true, Unembed: true, Seed: 9}

// newLoRA is a LoRA learner over a fresh tiny model of seed 3.
func newLoRA(t *testing.T, cfg lora.Config) *Learner {
	t.Helper()
	m, err := model.New(tinyConfig(10), 3)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoRALearner(m, optim.DefaultAdamW(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLoRALearns trains adapters on a small corpus until it is memorized;
// the adapted matrices move and nothing else does (on this random model
// the frozen output head alone holds the loss above 1.7, so the test
// adapts it too).
func TestLoRALearns(t *testing.T) {
	corpus := sft([][]int32{{1, 5, 9, 2, 7, 7, 3, 0}, {2, 4, 4, 8, 2, 6, 0}, {3, 9, 8, 7, 6, 5, 4, 3, 2, 0}})
	l := newLoRA(t, everyMatrix)
	base := slices.Clone(l.Model.Params)
	var first, last float64
	for step := range 200 {
		res, err := l.ForwardBackward(ctx, corpus, backend.Loss{NLL: 1})
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = res.Metrics.Loss
		}
		last = res.Metrics.Loss
		if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-3, GradClipNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if last > 0.05 {
		t.Errorf("loss %.3f -> %.3f: the adapters did not learn", first, last)
	}
	adapted := map[string]bool{}
	for _, tg := range l.LoRA.Targets {
		adapted[tg.Name] = true
	}
	for _, tn := range l.Model.Tensors {
		moved := !slices.Equal(base[tn.Offset:tn.Offset+tn.Len()], l.Model.Params[tn.Offset:tn.Offset+tn.Len()])
		if moved != adapted[tn.Name] {
			t.Errorf("%s: moved %v, adapted %v", tn.Name, moved, adapted[tn.Name])
		}
	}
	if slices.ContainsFunc(l.Model.Grads, func(g float32) bool { return g != 0 }) {
		t.Error("the model's gradients were not cleared by the step")
	}
}

// TestLoRASaveLoadContinuesExactly trains adapters straight, and others
// saved part-way and loaded over a fresh copy of the base model: both end
// bit for bit the same.
func TestLoRASaveLoadContinuesExactly(t *testing.T) {
	seqs := sft([][]int32{{1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}})
	train := func(l *Learner, steps int) {
		for range steps {
			if _, err := l.ForwardBackward(ctx, seqs, backend.Loss{NLL: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	straight := newLoRA(t, everyMatrix)
	train(straight, 6)
	first := newLoRA(t, everyMatrix)
	train(first, 3)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := first.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	resumed := newLoRA(t, everyMatrix)
	if err := resumed.LoadLoRA(dir); err != nil {
		t.Fatal(err)
	}
	if err := resumed.LoadOptimizer(dir); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resumed.Model.Params, first.Model.Params) {
		t.Fatal("the loaded adapters merge to other weights than the saved learner's")
	}
	train(resumed, 3)
	for i := range straight.Model.Params {
		if math.Float32bits(straight.Model.Params[i]) != math.Float32bits(resumed.Model.Params[i]) {
			t.Fatalf("parameter %d: %v straight, %v resumed", i, straight.Model.Params[i], resumed.Model.Params[i])
		}
	}
	// A learner of every parameter cannot continue the adapters' run.
	if _, err := Load(dir, optim.DefaultAdamW()); err == nil || !strings.Contains(err.Error(), "is the state of LoRA adapters") {
		t.Errorf("a full learner loading the adapters' optimizer state: %v", err)
	}
	other := newLoRA(t, lora.Config{Rank: 2, Attention: true, MLP: true, Unembed: true})
	if err := other.LoadLoRA(dir); err == nil || !strings.Contains(err.Error(), "r is 4, but the learner's adapters have 2") {
		t.Errorf("rank 2 adapters loading rank 4: %v", err)
	}
}

// TestLoRAFileFormat: the adapters are saved in Tinker's adapter format:
// PEFT's tensor names under base_model.model., the output head's (here
// the tied embedding's) as model.unembed_tokens, A (r × in) and B
// (out × r), and adapter_config.json's r, lora_alpha and target_modules;
// adapter settings rlvr cannot hold are refused naming the file.
func TestLoRAFileFormat(t *testing.T) {
	l := newLoRA(t, everyMatrix)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := l.Save(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := l.Model.Config
	for name, want := range map[string][]int{
		"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": {4, c.Dim},
		"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight":    {c.Dim, 4},
		"base_model.model.model.unembed_tokens.lora_B.weight":            {c.Vocab, 4},
	} {
		if _, shape, err := f.Float32(name); err != nil || !slices.Equal(shape, want) {
			t.Errorf("%s: shape %v, %v; want %v", name, shape, err, want)
		}
	}
	var ac map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil || json.Unmarshal(b, &ac) != nil {
		t.Fatalf("adapter_config.json: %s, %v", b, err)
	}
	if ac["r"] != 4.0 || ac["lora_alpha"] != 32.0 || ac["peft_type"] != "LORA" || len(ac["target_modules"].([]any)) != 8 {
		t.Errorf("adapter_config.json: %v", ac)
	}
	for _, tc := range []struct{ config, want string }{
		{`{"peft_type": "LORA", "r": 4, "lora_alpha": 32, "target_modules": ["q_proj"]}`, "part of the attention"},
		{`{"peft_type": "LORA", "r": 4, "lora_alpha": 32, "target_modules": ["fc1"]}`, `"fc1"`},
		{`{"peft_type": "IA3", "r": 4, "lora_alpha": 32, "target_modules": []}`, "peft_type"},
		{`{"peft_type": "LORA", "r": 0, "lora_alpha": 32, "target_modules": []}`, "r = 0"},
		{`{"peft_type": "LORA", "r": 4`, "adapter_config.json"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(tc.config), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadLoRAConfig(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "adapter_config.json") {
			t.Errorf("%s: err = %v, want it to name %q and the file", tc.config, err, tc.want)
		}
	}
}
