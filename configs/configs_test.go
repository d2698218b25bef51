package configs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/engine/model"
	"rlvr/expert"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/internal/dmetest"
	"rlvr/internal/modeltest"
	"rlvr/internal/shareddata"
	"rlvr/method/dapo"
	"rlvr/method/eapo"
	"rlvr/method/meml"
	"rlvr/method/part"
	_ "rlvr/method/part/all"
	"rlvr/serve/tinkerserver"
	"rlvr/train"
)

// TestRecipesRun loads every recipe in this directory, checks it resolves
// as written, and runs it for two small steps on a tiny model of the right
// tokenizer (the world's bytes, or Qwen3's for chat recipes).
func TestRecipesRun(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("recipes %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(f, ".yaml"), func(t *testing.T) {
			cfg, err := train.LoadRLConfig(f, "")
			if err != nil {
				t.Fatal(err)
			}
			resolved := cfg
			if err := resolved.Resolve(); err != nil {
				t.Fatalf("%s does not resolve: %v", f, err)
			}
			if cfg.Data.DME != "" {
				cfg.Data.DME, _ = dmetest.World(t, 1, 60, cfg.Data.Levels)
			}
			if cfg.Data.IsWorld() {
				cfg.Model = worldModel(t)
			} else {
				// Paths in recipes are relative to the repository root.
				shareddata.Path(t, strings.TrimPrefix(filepath.Dir(cfg.Data.Train), "../shared/data/"))
				cfg.Data.Train, cfg.Data.Test = filepath.Join("..", cfg.Data.Train), filepath.Join("..", cfg.Data.Test)
				cfg.Model = chatModel(t)
			}
			if k := part.Get[*eapo.ConsultationConfig](cfg.Sections); k != nil {
				// No expert servers here: a recipe's remote experts become
				// copies of the policy, served on loopback as a
				// homogeneous pool is.
				for i := range k.Experts {
					if k.Experts[i].URL != "" {
						k.Experts[i] = expert.Config{Name: k.Experts[i].Name, Policy: true, API: k.Experts[i].API, MaxTokens: 8}
					}
				}
			}
			if b := cfg.Backend; b != nil && b.Kind == train.BackendTinker {
				// The recipe's server becomes one over the local engine
				// on loopback, serving the test model under the recipe's
				// base model name; it trains every parameter (rank 0).
				srv, err := tinkerserver.New(tinkerserver.Config{Models: map[string]string{b.BaseModel: cfg.Model}, StateDir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				hs := httptest.NewServer(srv)
				defer func() { hs.Close(); srv.Close() }()
				b.URL, b.LoraRank = hs.URL, 0
			}
			cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 2, 2, 2, 16
			cfg.EvalProblems, cfg.EvalEvery, cfg.CheckpointEvery = 2, 0, 0
			if o := part.Get[*dapo.OverlongPenaltyConfig](cfg.Sections); o != nil {
				o.Buffer = 4
			}
			if h := part.Get[*meml.HardBufferConfig](cfg.Sections); h != nil {
				h.K, h.Capacity = 1, 2
			}
			run := filepath.Join(t.TempDir(), "run")
			if err := train.RL(context.Background(), cfg, run, false, nil); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
			if err != nil || strings.Count(string(b), "\n") != 2 {
				t.Fatalf("metrics %q, %v", b, err)
			}
			if dir := os.Getenv("RLVR_RECIPE_METRICS"); dir != "" {
				writeUntimed(t, run, filepath.Join(dir, strings.TrimSuffix(f, ".yaml")))
			}
		})
	}
}

// writeUntimed writes the run's metrics and eval lines to dst.jsonl without
// the keys that measure time, so that two trees can be compared seed for
// seed: RLVR_RECIPE_METRICS=DIR go test ./configs -run TestRecipesRun, once
// per tree, then diff the two directories (scripts/recipes-diff.sh).
func writeUntimed(t *testing.T, run, dst string) {
	var out bytes.Buffer
	for _, name := range []string{"metrics.jsonl", "eval.jsonl"} {
		b, err := os.ReadFile(filepath.Join(run, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for k := range rec {
				if strings.HasPrefix(k, "time_") || strings.HasSuffix(k, "_s") || strings.HasSuffix(k, "per_sec") {
					delete(rec, k)
				}
			}
			j, err := json.Marshal(rec) // keys sorted
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s %s\n", name, j)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".jsonl", out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func worldModel(t *testing.T) string {
	mc := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	mc.Dim, mc.Layers, mc.Hidden = 32, 1, 64
	m, err := model.New(mc, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "world")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	return dir
}

func chatModel(t *testing.T) string {
	return modeltest.Random(t, shareddata.Path(t, "tokenizers/qwen3"), "qwen3-tiny")
}
