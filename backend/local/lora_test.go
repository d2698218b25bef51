package local

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/engine/lora"
	"rlvr/engine/model"
	"rlvr/engine/optim"
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
	if err := other.LoadLoRA(dir); err == nil || !strings.Contains(err.Error(), `rank is "4"`) {
		t.Errorf("rank 2 adapters loading rank 4: %v", err)
	}
}
