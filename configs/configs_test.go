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
	"slices"
	"strings"
	"testing"

	"rlvr/checkpoint/modeltest"
	"rlvr/expert"
	"rlvr/expert/collect/dmetest"
	"rlvr/internal/shareddata"
	"rlvr/method"
	"rlvr/method/dapo"
	"rlvr/method/eapo"
	"rlvr/method/meml"
	"rlvr/method/part"
	_ "rlvr/method/part/all"
	"rlvr/rundir"
	"rlvr/serve/tinkerserver"
	"rlvr/task"
	"rlvr/train"
	"rlvr/worldmodel"
)

// TestRecipesRun loads every recipe in this directory, checks it resolves
// as written, and runs it for two small steps. A world recipe runs on the
// world's pretrained model, which answers some questions right: every part
// it lists must act at some step (part.Part.Acted) and the weights must
// move. A chat recipe runs on a random model of Qwen3's tokenizer, which
// never answers a GSM8K question right: no RL step has a policy-gradient
// signal, so each must skip its update and leave the weights as they were,
// while an sft recipe's steps, and the steps of MEML-GRPO's hard-example
// buffer, train on the answers given and move them.
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
			recipe, err := resolved.Resolve()
			if err != nil {
				t.Fatalf("%s does not resolve: %v", f, err)
			}
			// The sections the recipe writes keep what they resolve to at
			// its own sizes (the consultation's episode budget, the
			// reflection budget): the runs below shrink the run, not them.
			sections := part.Sections{}
			for name := range cfg.Sections {
				sections[name] = recipe.Sections[name]
			}
			cfg.Sections = sections
			world := cfg.Data.IsWorld()
			if world {
				cfg.Model = worldModel(t)
				if cfg.Data.DME != "" {
					cfg.Data.DME, _ = dmetest.World(t, 1, 60, cfg.Data.Levels)
				}
			} else {
				// Paths in recipes are relative to the repository root.
				shareddata.Path(t, strings.TrimPrefix(filepath.Dir(cfg.Data.Train), "../shared/data/"))
				cfg.Data.Train, cfg.Data.Test = filepath.Join("..", cfg.Data.Train), filepath.Join("..", cfg.Data.Test)
				if f := cfg.Data.ValidationFile(); f != "" {
					cfg.Data.Validation = filepath.Join("..", f)
				}
				cfg.Model = chatModel(t)
				if cfg.Data.DME != "" {
					// The experts answer the first training questions
					// (some on the warm-up side of the split) as the
					// reference does.
					examples, err := task.Load(cfg.Data.Name, cfg.Data.Train)
					if err != nil {
						t.Fatal(err)
					}
					cfg.Data.DME = dmetest.Dataset(t, examples[:min(len(examples), 100)], 2)
				}
			}
			if k := part.Get[*eapo.ConsultationConfig](cfg.Sections); k != nil {
				// No expert servers here: a recipe's remote experts become
				// copies of the policy, served on loopback as a
				// homogeneous pool is.
				for i := range k.Experts {
					if k.Experts[i].URL != "" || k.Experts[i].Model != "" {
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
			// Room for a world solution, and a penalty over the last half.
			// Level 3, which the model solves about half the time, gives
			// groups with right and wrong answers in two steps; the
			// hardest levels, which the recipes train on, seldom do.
			cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 2, 4, 4, 192
			if world {
				cfg.Data.Levels = []int{3}
			}
			if !world {
				cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 2, 2, 16
			}
			cfg.EvalProblems, cfg.EvalEvery, cfg.CheckpointEvery = 2, 0, 0
			cfg.TestProblems, cfg.EvalSamples = min(cfg.TestProblems, 2), min(cfg.EvalSamples, 2)
			if cfg.Data.Validation != "" {
				cfg.TestProblems = 2 // not 0, the whole test file
			}
			if o := part.Get[*dapo.OverlongPenaltyConfig](cfg.Sections); o != nil {
				o.Buffer = cfg.MaxTokens - 16 // lowers the reward of every answer past 16 tokens
			}
			if cs := cfg.ColdStart; cs != nil {
				cs.Examples, cs.Epochs, cs.Batch, cs.Probe = 4, 1, 4, 2
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
			if !world {
				// A dataset recipe ends with its test split's line.
				r, err := rundir.Load(run)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(r.Evals); n == 0 || r.Evals[n-1].Split != "test" {
					t.Errorf("the run's evaluations end without a test line: %+v", r.Evals)
				}
			}
			var steps []method.Metrics
			for line := range strings.Lines(string(b)) {
				var m method.Metrics
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatal(err)
				}
				steps = append(steps, m)
			}
			// A chat model never answers right, but an sft run learns
			// from the answers it is given, MEML-GRPO's hard-example
			// buffer from the reference solutions of questions every
			// answer got wrong, and a cold start from its demonstrations.
			learns := world || resolved.Algorithm == method.SFT || recipe.Run.Has(meml.PartHardBuffer) || cfg.ColdStart != nil
			if !learns {
				for _, m := range steps {
					if m[rundir.MetricSkippedUpdate] != 1 {
						t.Errorf("step %v trained without a right answer: %v", m["step"], m)
					}
				}
			}
			// An sft run's parts shape its data (expert prompts), which no
			// step's metrics show.
			for _, name := range recipe.Run.Parts {
				p, _ := part.Lookup(name)
				if !world || resolved.Algorithm == method.SFT || p.Acted == nil {
					continue
				}
				acted := slices.ContainsFunc(steps, p.Acted)
				why, idle := idleParts[strings.TrimSuffix(f, ".yaml")+" "+name]
				switch {
				case !acted && !idle:
					t.Errorf("part %s did not act in %d steps: %v", name, len(steps), steps)
				case acted && idle:
					t.Errorf("part %s acted, though the world model is known not to: %s", name, why)
				}
			}
			if cfg.Backend == nil { // a Tinker run's weights stay on its server
				if moved := weightsMoved(t, cfg.Model, run); moved != learns {
					t.Errorf("weights moved: %v, want %v", moved, learns)
				}
			}
		})
	}
}

// TestDatasetRecipesSplits: every dataset recipe makes its choices on
// validation problems held out of its training file and reports on its
// whole test file, which no choice sees; MEML-GRPO's warm-up recipe and its
// RL recipe hold out the same validation problems (the same seed, file,
// count and prompt) from the two sides of the same split.
func TestDatasetRecipesSplits(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	datasets := 0
	recipes := map[string]train.RLConfig{}
	for _, f := range files {
		cfg, err := train.LoadRLConfig(f, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Resolve(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		recipes[f] = cfg
		d := cfg.Data
		if d.IsWorld() {
			continue
		}
		datasets++
		if d.Validation != train.ValidationTrain || d.Test == "" || cfg.TestProblems != 0 || cfg.EvalProblems == 0 {
			t.Errorf("%s: validation %q, test %q, test_problems %d, eval_problems %d: want validation held out of the training file and the whole test file as the test split",
				f, d.Validation, d.Test, cfg.TestProblems, cfg.EvalProblems)
		}
	}
	if datasets < 8 {
		t.Errorf("%d dataset recipes, want the 8 chat and Tinker ones at least", datasets)
	}
	for _, pair := range [][2]string{{"gsm8k-moe-sft-chat", "gsm8k-meml-grpo-chat"}, {"strategyqa-moe-sft-chat", "strategyqa-meml-grpo-chat"},
		{"gsm8k-moe-sft-smollm2", "gsm8k-meml-grpo-smollm2"}} {
		name := pair[0]
		mef, rl := recipes[pair[0]+".yaml"], recipes[pair[1]+".yaml"]
		if mef.Seed != rl.Seed || mef.EvalProblems != rl.EvalProblems || mef.Chat != rl.Chat || mef.Data.Train != rl.Data.Train ||
			mef.Data.Validation != rl.Data.Validation || mef.Data.WarmupFraction != rl.Data.WarmupFraction || mef.Data.Part != "warmup" || rl.Data.Part != "rl" {
			show := func(c train.RLConfig) string {
				return fmt.Sprintf("seed %d, eval_problems %d, chat %+v, data %s, validation %q, warm-up fraction %v, part %q",
					c.Seed, c.EvalProblems, c.Chat, c.Data.Train, c.Data.Validation, c.Data.WarmupFraction, c.Data.Part)
			}
			t.Errorf("%s: the warm-up and RL recipes hold out different validation problems or train on overlapping sides:\n%s\n%s", name, show(mef), show(rl))
		}
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

// idleParts are the parts of world recipes that do not act on the world
// model, and why: "recipe part" → reason.
var idleParts = map[string]string{
	// The world's corpus consults only under the plain prompt: no
	// document asks an expert after an expert prompt's suffix.
	"world-meml-eapo-mel consultation": "it never consults under an expert prompt",
}

// weightsMoved says whether the run's last checkpoint holds other weights
// than the model it started from.
func weightsMoved(t *testing.T, start, run string) bool {
	t.Helper()
	ckpts, err := rundir.Checkpoints(run)
	if err != nil || len(ckpts) == 0 {
		t.Fatalf("no checkpoint in %s: %v", run, err)
	}
	before, err := os.ReadFile(filepath.Join(start, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join(ckpts[len(ckpts)-1], "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return !bytes.Equal(before, after)
}

// worldModel is the world's pretrained model, installed from the copy
// embedded in the binary.
func worldModel(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "world")
	if err := worldmodel.Install(worldmodel.FS(1), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func chatModel(t *testing.T) string {
	return modeltest.Random(t, shareddata.Path(t, "tokenizers/qwen3"), "qwen3-tiny")
}
