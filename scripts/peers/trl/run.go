package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rlvr/checkpoint"
	"rlvr/eval"
	"rlvr/internal/jsonl"
	"rlvr/method"
	"rlvr/rundir"
	"rlvr/task"
	"rlvr/train"
)

// settings are what both trainers are given; settings.json in the output
// folder records them for table.
type settings struct {
	Steps          int     `json:"steps"`
	PromptsPerStep int     `json:"prompts_per_step"`
	Group          int     `json:"group"`
	MaxTokens      int     `json:"max_tokens"`
	Temperature    float64 `json:"temperature"`
	LR             float64 `json:"lr"`
	Seeds          []int   `json:"seeds"`
	Losses         []string
	EvalProblems   int    `json:"eval_problems"`
	EvalMaxTokens  int    `json:"eval_max_tokens"`
	System         string `json:"system"`
	Threads        int    `json:"threads"`
	Model          string `json:"model"`
	// Precision is both trainers': fp32, or bf16 (TRL's bf16=True, its
	// default, mixed precision under autocast; rlvr's precision: bf16).
	Precision string `json:"precision,omitempty"`
}

// rlvrAlgorithm maps TRL's loss_type to the rlvr algorithm that computes
// the same advantages and aggregation (see docs/peers.md for the rest of
// the mapping).
var rlvrAlgorithm = map[string]method.Algorithm{"grpo": method.GRPO, "dr_grpo": method.DrGRPO, "dapo": method.DAPO}

// engines are the two trainers, in the order of the tables.
var engines = []string{"rlvr", "trl"}

// runRecord is what a finished run leaves in run.json beside its metrics.
type runRecord struct {
	Engine    string  `json:"engine"`
	Loss      string  `json:"loss"`
	Seed      int     `json:"seed"`
	WallS     float64 `json:"wall_s"`
	PeakRSS   int64   `json:"peak_rss_bytes"`
	Model     string  `json:"model"`      // the trained model's directory
	EvalFile  string  `json:"eval_file"`  // its rlvr eval samples
	Correct   int     `json:"correct"`    // held-out problems answered right
	Problems  int     `json:"problems"`   // held-out problems scored
	StartedAt string  `json:"started_at"` // RFC 3339
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	rlvrBin := fs.String("rlvr", "", "the rlvr binary")
	python := fs.String("python", "", "the Python of TRL's virtual environment")
	script := fs.String("script", "python/trl_grpo.py", "the TRL side")
	data := fs.String("data", "../shared/data", "the shared data folder (gsm8k/train.jsonl, gsm8k/test.jsonl)")
	out := fs.String("out", "runs/peers/trl", "output folder")
	doc := fs.String("doc", "docs/peers.md", "the page whose trl blocks are rewritten")
	var s settings
	var seeds, losses string
	fs.StringVar(&s.Model, "model", "", "the Hugging Face model directory both train")
	fs.IntVar(&s.Steps, "steps", 20, "optimizer steps of every run")
	fs.IntVar(&s.PromptsPerStep, "prompts", 8, "questions per step")
	fs.IntVar(&s.Group, "group", 8, "answers per question (G)")
	fs.IntVar(&s.MaxTokens, "max-tokens", 256, "completion budget of a rollout")
	fs.Float64Var(&s.Temperature, "temperature", 1, "rollout temperature")
	fs.Float64Var(&s.LR, "lr", 1e-6, "constant learning rate")
	fs.StringVar(&seeds, "seeds", "1,2,3", "comma-separated seeds")
	fs.StringVar(&losses, "losses", "grpo,dr_grpo,dapo", "TRL loss types (each run against its rlvr algorithm)")
	fs.IntVar(&s.EvalProblems, "eval-problems", 200, "held-out GSM8K test problems scored greedily at the start and end")
	fs.IntVar(&s.EvalMaxTokens, "eval-max-tokens", 256, "completion budget of the held-out evaluation")
	fs.StringVar(&s.System, "system", "Solve the math problem step by step. End with a line '#### <answer>'.", "system prompt of every chat")
	fs.IntVar(&s.Threads, "threads", 2, "threads of each trainer")
	fs.StringVar(&s.Precision, "precision", "fp32", "both trainers' precision: fp32, or bf16 (TRL's bf16=True, rlvr's precision: bf16)")
	blocks := fs.String("blocks", "trl", "the prefix of the doc's blocks the tables go to (PREFIX-timing, …)")
	phase := fs.String("phase", "all", "train (the runs, timed: on a quiet machine), score (the trained models, on held-out problems: any time), or all")
	fs.Parse(args)
	switch *phase {
	case "train", "score", "all":
	default:
		return fmt.Errorf("-phase %q: want train, score or all", *phase)
	}
	if s.Precision != "fp32" && s.Precision != "bf16" {
		return fmt.Errorf("-precision %q: want fp32 or bf16", s.Precision)
	}
	var err error
	if s.Seeds, err = ints(seeds); err != nil {
		return fmt.Errorf("-seeds: %w", err)
	}
	s.Losses = strings.Split(losses, ",")
	for _, l := range s.Losses {
		if _, ok := rlvrAlgorithm[l]; !ok {
			return fmt.Errorf("-losses: %q is not grpo, dr_grpo or dapo", l)
		}
	}
	switch {
	case *rlvrBin == "" || *python == "" || s.Model == "":
		return fmt.Errorf("-rlvr, -python and -model are required")
	case s.Steps < 1 || s.PromptsPerStep < 1 || s.Group < 2 || s.MaxTokens < 1 || s.EvalProblems < 1 || len(s.Seeds) == 0:
		return fmt.Errorf("steps, prompts, eval-problems and seeds must be at least 1, group at least 2")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(*out, "settings.json"), s); err != nil {
		return err
	}
	test := filepath.Join(*data, "gsm8k", "test.jsonl")
	if *phase == "train" || *phase == "all" {
		if err := trainAll(&s, *rlvrBin, *python, *script, self, *data, test, *out); err != nil {
			return err
		}
	}
	if *phase == "score" || *phase == "all" {
		if err := scoreAll(&s, evaluator{rlvr: *rlvrBin, test: test, s: &s}, *out); err != nil {
			return err
		}
	}
	return table(*out, *doc, *blocks)
}

// trainAll trains every run not trained yet, rlvr and TRL in turn, and
// records each in run.json, unscored: the timings want a quiet machine,
// the scoring does not.
func trainAll(s *settings, rlvrBin, python, script, self, data, test, out string) error {
	for _, seed := range s.Seeds {
		dir := filepath.Join(out, fmt.Sprintf("seed%d", seed))
		if err := writePrompts(s, filepath.Join(data, "gsm8k", "train.jsonl"), dir, seed); err != nil {
			return err
		}
		for li, loss := range s.Losses {
			order := engines
			if (seed+li)%2 == 1 { // who goes first alternates, so that drift in the machine's load hits both
				order = []string{engines[1], engines[0]}
			}
			for _, engine := range order {
				run := filepath.Join(out, "runs", fmt.Sprintf("%s-%s-seed%d", engine, loss, seed))
				if _, err := os.Stat(filepath.Join(run, "run.json")); err == nil {
					fmt.Fprintf(os.Stderr, "trl: %s done already\n", run)
					continue
				}
				// A run stopped part-way is redone whole: its timings are
				// of whole runs.
				if err := os.RemoveAll(run); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "trl: %s %s seed %d\n", engine, loss, seed)
				rec := runRecord{Engine: engine, Loss: loss, Seed: seed, StartedAt: time.Now().UTC().Format(time.RFC3339)}
				t0 := time.Now()
				var err error
				if engine == "rlvr" {
					rec.Model, rec.PeakRSS, err = trainRlvr(rlvrBin, s, dir, test, run, loss, seed)
				} else {
					rec.Model, rec.PeakRSS, err = trainTRL(python, script, self, s, dir, run, loss, seed)
				}
				if err != nil {
					return err
				}
				rec.WallS = time.Since(t0).Seconds()
				if err := writeJSON(filepath.Join(run, "run.json"), rec); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// scoreAll scores the starting model and every trained run not scored
// yet on the held-out problems, and records each run's score in its
// run.json.
func scoreAll(s *settings, ev evaluator, out string) error {
	start := filepath.Join(out, "start.samples.jsonl")
	if _, err := os.Stat(start); err != nil {
		fmt.Fprintln(os.Stderr, "trl: scoring the starting model")
		if err := ev.score(s.Model, start); err != nil {
			return err
		}
	}
	recs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "run.json"))
	for _, path := range recs {
		var rec runRecord
		if err := readJSON(path, &rec); err != nil {
			return err
		}
		if rec.EvalFile != "" {
			continue
		}
		fmt.Fprintf(os.Stderr, "trl: scoring %s\n", filepath.Dir(path))
		file := filepath.Join(filepath.Dir(path), "eval.samples.jsonl")
		if err := ev.score(rec.Model, file); err != nil {
			return err
		}
		var err error
		if rec.Correct, rec.Problems, err = greedyScore(file); err != nil {
			return err
		}
		rec.EvalFile = file
		if err := writeJSON(path, rec); err != nil {
			return err
		}
	}
	return nil
}

// writePrompts draws a seed's training questions, steps × prompts of them
// in a seeded order, and writes them twice: train.jsonl in GSM8K's format
// for rlvr (read with data.order file) and the reward helper, and
// prompts.jsonl, each question rendered through the model's chat template
// by rlvr with its tokens, for TRL.
func writePrompts(s *settings, trainFile, dir string, seed int) error {
	all, err := task.Load("gsm8k", trainFile)
	if err != nil {
		return err
	}
	l, err := checkpoint.Open(s.Model, "")
	if err != nil {
		return err
	}
	r, err := train.NewRenderer(l, train.ChatConfig{Template: "on", System: s.System}, l.Model.Config.MaxSeq)
	if err != nil {
		return err
	}
	task.Shuffle(all, uint64(seed))
	type gsm8kLine struct {
		Question string `json:"question"`
		Answer   string `json:"answer"`
	}
	type promptLine struct {
		Index     int     `json:"index"`
		Prompt    string  `json:"prompt"`
		PromptIDs []int32 `json:"prompt_ids"`
	}
	var lines []gsm8kLine
	var prompts []promptLine
	for _, e := range all {
		if len(lines) == s.Steps*s.PromptsPerStep {
			break
		}
		if _, ok := eval.Reward(e, ""); !ok {
			continue // rlvr would set it aside; neither trainer gets it
		}
		text, err := eval.ChatPrompt(l.Chat, e, s.System) // the text r.Prompt encodes
		if err != nil {
			return err
		}
		ids, err := r.Prompt(e, method.Variant{})
		if err != nil {
			continue // longer than the context: set aside, as rlvr does
		}
		prompts = append(prompts, promptLine{Index: len(lines), Prompt: text, PromptIDs: ids})
		lines = append(lines, gsm8kLine{Question: e.Prompt, Answer: e.Meta["raw_solution"] + "\n#### " + e.Answer})
	}
	if len(lines) < s.Steps*s.PromptsPerStep {
		return fmt.Errorf("%s: %d usable questions, %d steps of %d need more", trainFile, len(lines), s.Steps, s.PromptsPerStep)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := jsonl.Write(filepath.Join(dir, "train.jsonl"), lines); err != nil {
		return err
	}
	return jsonl.Write(filepath.Join(dir, "prompts.jsonl"), prompts)
}

// rlvrConfig is the `rlvr train` config equal to TRL's settings for one
// loss type; docs/peers.md gives the reason for each line.
// microBatchTokens is rlvr's pass budget matching TRL's micro-batch of one
// question's group: G answers at their token budget, with a prompt of about
// as many tokens (GSM8K's chat prompts run 100–180).
func microBatchTokens(s *settings) int { return s.Group * 2 * s.MaxTokens }

func rlvrConfig(s *settings, trainFile, testFile, loss string, seed int) string {
	alg := rlvrAlgorithm[loss]
	clipHigh := 0.2
	if alg == method.DAPO {
		clipHigh = 0.28
	}
	q := strconv.Quote
	return fmt.Sprintf(`algorithm: %s
model: %s
seed: %d
data:
  name: gsm8k
  train: %s
  test: %s
  order: file
chat:
  template: "on"
  system: %s
steps: %d
prompts_per_step: %d
group_size: %d
max_tokens: %d
temperature: %g
lr: %g
warmup: 0
adamw: {beta1: 0.9, beta2: 0.999, eps: 1.0e-8, weight_decay: 0}
grad_clip: 1
epochs: 1
mini_batches: 1
micro_batch_tokens: %d
no_signal: step
clip_low: 0.2
clip_high: %g
kl: 0
entropy: 0
parts: []
eval_every: 0
eval_problems: 1
checkpoint_every: 0
keep_last: 1
precision: %s
`, alg, q(s.Model), seed, q(trainFile), q(testFile), q(s.System), s.Steps, s.PromptsPerStep, s.Group, s.MaxTokens,
		s.Temperature, s.LR, microBatchTokens(s), clipHigh, cmp.Or(s.Precision, "fp32"))
}

// trainRlvr runs `rlvr train` and returns the final checkpoint and the
// process's peak resident memory.
func trainRlvr(bin string, s *settings, dir, test, run, loss string, seed int) (string, int64, error) {
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", 0, err
	}
	cfg := filepath.Join(run, "rlvr.yaml")
	if err := os.WriteFile(cfg, []byte(rlvrConfig(s, filepath.Join(dir, "train.jsonl"), test, loss, seed)), 0o644); err != nil {
		return "", 0, err
	}
	rss, err := runLogged(exec.Command(bin, "train", "--config", cfg, "--run", run, "--threads", strconv.Itoa(s.Threads)), filepath.Join(run, "train.log"))
	return rundir.CheckpointDir(run, s.Steps), rss, err
}

// trainTRL runs python/trl_grpo.py with this program's reward subcommand
// as its verifier, and returns the saved model and the peak resident
// memory of the Python process (the verifier's few megabytes apart).
func trainTRL(python, script, self string, s *settings, dir, run, loss string, seed int) (string, int64, error) {
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", 0, err
	}
	// config.yaml names the run's algorithm and seed for the report.
	if err := os.WriteFile(filepath.Join(run, rundir.ConfigFile), []byte(fmt.Sprintf("algorithm: trl-%s\nseed: %d\nmodel: %s\n", loss, seed, strconv.Quote(s.Model))), 0o644); err != nil {
		return "", 0, err
	}
	reward, err := json.Marshal([]string{self, "reward", "-examples", filepath.Join(dir, "train.jsonl")})
	if err != nil {
		return "", 0, err
	}
	cmd := exec.Command(python, script, "--model", s.Model, "--prompts", filepath.Join(dir, "prompts.jsonl"), "--out", run,
		"--reward-cmd", string(reward), "--loss-type", loss, "--seed", strconv.Itoa(seed), "--steps", strconv.Itoa(s.Steps),
		"--prompts-per-step", strconv.Itoa(s.PromptsPerStep), "--group", strconv.Itoa(s.Group), "--max-tokens", strconv.Itoa(s.MaxTokens),
		"--temperature", strconv.FormatFloat(s.Temperature, 'g', -1, 64), "--lr", strconv.FormatFloat(s.LR, 'g', -1, 64),
		"--threads", strconv.Itoa(s.Threads))
	if s.Precision == "bf16" {
		cmd.Args = append(cmd.Args, "--bf16")
	}
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(s.Threads), "TOKENIZERS_PARALLELISM=false", "HF_HUB_OFFLINE=1")
	rss, err := runLogged(cmd, filepath.Join(run, "train.log"))
	return filepath.Join(run, "model"), rss, err
}

// runLogged runs cmd with its output in logPath and returns its peak
// resident memory in bytes; a failure quotes the log's end.
func runLogged(cmd *exec.Cmd, logPath string) (int64, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(logPath)
		return 0, fmt.Errorf("%s: %v (log %s):\n%s", cmd.Args[0], err, logPath, tail(string(b), 3000))
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024 // kilobytes on Linux
	}
	return rss, nil
}

// evaluator scores models with `rlvr eval`, greedy, on the same held-out
// problems and prompts for every model.
type evaluator struct {
	rlvr, test string
	s          *settings
}

func (e evaluator) score(model, samples string) error {
	cmd := exec.Command(e.rlvr, "eval", "--model", model, "--data", "gsm8k="+e.test, "--problems", strconv.Itoa(e.s.EvalProblems),
		"--seed", "0", "--chat", "on", "--system", e.s.System, "--max-tokens", strconv.Itoa(e.s.EvalMaxTokens),
		"--threads", strconv.Itoa(e.s.Threads), "--samples", samples)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("rlvr eval %s: %v\n%s", model, err, tail(stderr.String(), 2000))
	}
	return nil
}

// greedyScore counts the greedy answers of an eval samples file that were
// right.
func greedyScore(path string) (correct, problems int, err error) {
	byID, err := greedyByID(path)
	for _, ok := range byID {
		problems++
		if ok {
			correct++
		}
	}
	return correct, problems, err
}

// greedyByID reads whether each problem's greedy answer was right.
func greedyByID(path string) (map[string]bool, error) {
	samples, err := jsonl.Read[eval.Sample](path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range samples {
		if s.Pass == "greedy" {
			out[s.ID] = s.Reward > 0
		}
	}
	return out, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
