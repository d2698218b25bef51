package train

import (
	"context"
	"path/filepath"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/task"
	"rlvr/task/world"
)

func TestResponse(t *testing.T) {
	for _, tc := range []struct {
		e    task.Example
		want string
	}{
		{task.Example{Solution: "3 + 4 = 7", Answer: "7"}, "3 + 4 = 7\n#### 7\n"},
		{task.Example{Solution: "12+7=19\n####19\n", Answer: "19"}, "12+7=19\n####19\n"},
		{task.Example{Solution: `so \boxed{5}`, Answer: "5"}, "so \\boxed{5}\n"},
		{task.Example{Answer: "5"}, ""},
	} {
		if got := Response(tc.e); got != tc.want {
			t.Errorf("Response(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}

// TestSFTLowersLoss fine-tunes a small fresh world model on world examples.
func TestSFTLowersLoss(t *testing.T) {
	cfgM := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	cfgM.Dim, cfgM.Layers, cfgM.Hidden = 64, 2, 128
	m, _ := model.New(cfgM, 1)
	dir := filepath.Join(t.TempDir(), "base")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultSFT()
	cfg.Steps, cfg.BatchTokens = 30, 1024
	cfg.Schedule = optim.Schedule{Kind: optim.Constant, PeakLR: 3e-3, TotalSteps: 30}
	cfg.Out = filepath.Join(t.TempDir(), "sft")
	examples := append(world.Examples(1, 200, []int{0, 1}), task.Example{ID: "no-solution", Answer: "3"})
	res, err := SFT(context.Background(), l, examples, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 1 || res.Examples != 200 {
		t.Fatalf("used %d examples, skipped %d", res.Examples, res.Skipped)
	}
	if !(res.LastLoss < 0.7*res.FirstLoss) {
		t.Fatalf("loss %.3f -> %.3f", res.FirstLoss, res.LastLoss)
	}
	if _, err := checkpoint.Open(cfg.Out, ""); err != nil {
		t.Fatal(err)
	}
}
