package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/train"
)

// execute runs rlvr with args in-process and returns its output and error.
// A panic fails the test.
func execute(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := rootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("rlvr %s: panic: %v\n%s", strings.Join(args, " "), r, debug.Stack())
			}
		}()
		err = root.ExecuteContext(ctx)
	}()
	return out.String(), errOut.String(), err
}

// cliFixture makes a working directory for hostile command lines, with an
// empty cache: a file, a non-empty directory, an empty directory, a small
// model, a model whose config.json claims a huge one, and a tokenizer
// directory. It returns the directory, now the working directory.
func cliFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("RLVR_CACHE", filepath.Join(dir, "cache"))
	work := filepath.Join(dir, "work")
	for _, d := range []string{filepath.Join(dir, "cache"), filepath.Join(work, "adir"), filepath.Join(work, "empty")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(work, "afile.txt"), filepath.Join(work, "adir", "x")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	saveByteModel(t, filepath.Join(work, "model"))
	// A model whose config.json claims far more than its weights hold.
	saveByteModel(t, filepath.Join(work, "huge"))
	cfgPath := filepath.Join(work, "huge", "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"vocab_size": 259`), []byte(`"vocab_size": 1048576`), 1)
	b = bytes.Replace(b, []byte(`"hidden_size": 16`), []byte(`"hidden_size": 4096`), 1)
	b = bytes.Replace(b, []byte(`"head_dim": 8`), []byte(`"head_dim": 2048`), 1)
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tokenizer.WriteByteTokenizer(filepath.Join(work, "tok")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	return dir
}

// saveByteModel writes a small random model over the byte tokenizer.
func saveByteModel(t *testing.T, dir string) {
	t.Helper()
	m, err := model.New(model.Config{Vocab: tokenizer.NewByteTokenizer().VocabSize(), Dim: 16, Layers: 1, Heads: 2, Hidden: 32, MaxSeq: 64}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every file under root with its size and modification
// time.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files[path] = fmt.Sprint(info.ModTime(), info.Mode(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestHostileFlags runs every command with flags that must be refused
// before any work: each run returns an error naming every bad flag, does
// not panic, and writes nothing, neither in the working directory nor in
// the cache.
func TestHostileFlags(t *testing.T) {
	dir := cliFixture(t)
	for _, tc := range []struct {
		args []string
		want []string // in the error
	}{
		// The root flag, on several commands.
		{[]string{"generate", "--threads", "-5"}, []string{"--threads -5"}},
		{[]string{"eval", "--threads", "1000000"}, []string{"--threads 1000000"}},
		{[]string{"train", "--threads", "-5"}, []string{"--threads -5"}},

		// generate
		{[]string{"generate", "--top-p", "0"}, []string{"--top-p 0"}},
		{[]string{"generate", "--top-p", "1.5"}, []string{"--top-p 1.5"}},
		{[]string{"generate", "--top-p", "NaN"}, []string{"--top-p NaN"}},
		{[]string{"generate", "--temperature", "NaN"}, []string{"--temperature NaN"}},
		{[]string{"generate", "--temperature", "-1"}, []string{"--temperature -1"}},
		{[]string{"generate", "--temperature", "+Inf"}, []string{"--temperature +Inf"}},
		{[]string{"generate", "--max-tokens", "0"}, []string{"--max-tokens 0"}},
		{[]string{"generate", "--max-tokens", "-3"}, []string{"--max-tokens -3"}},
		{[]string{"generate", "--max-tokens", "9223372036854775807"}, []string{"--max-tokens 9223372036854775807"}},
		{[]string{"generate", "--top-k", "-1"}, []string{"--top-k -1"}},
		{[]string{"generate", "--n", "0"}, []string{"--n 0"}},
		{[]string{"generate", "--n", "1000000"}, []string{"--n 1000000"}},
		{[]string{"generate", "--stop", ""}, []string{"--stop"}},
		{[]string{"generate", "--model", "nosuch"}, []string{"--model nosuch"}},
		{[]string{"generate", "--model", "afile.txt"}, []string{"--model afile.txt"}},
		{[]string{"generate", "--model", "adir"}, []string{"--model adir has no config.json"}},
		{[]string{"generate", "--model", "model", "--tokenizer", "nosuch.json"}, []string{"--tokenizer nosuch.json"}},
		{[]string{"generate", "--model", "model", "--tokenizer", "adir"}, []string{"--tokenizer adir is a directory"}},
		{[]string{"generate", "--model", "model", "--prompt", strings.Repeat("1+1=2\n", 20)}, []string{"--prompt is 121 tokens, leaving no room in the context of 64"}},
		{[]string{"generate", "--model", "model", "--max-tokens", "0", "--temperature", "NaN", "--top-p", "0", "--n", "-1"},
			[]string{"--max-tokens 0", "--temperature NaN", "--top-p 0", "--n -1"}},

		{[]string{"generate", "--model", "huge"}, []string{"huge/config.json", "vocab_size 1048576, hidden_size 4096"}},

		// eval
		{[]string{"eval", "--problems", "-1"}, []string{"--problems -1"}},
		{[]string{"eval", "--problems", "0"}, []string{"--problems 0"}},
		{[]string{"eval", "--problems", "9223372036854775807"}, []string{"--problems 9223372036854775807"}},
		{[]string{"eval", "--problems", "500000"}, []string{"--problems 500000 per level × 7 levels"}},
		{[]string{"eval", "--k", "-1"}, []string{"--k -1"}},
		{[]string{"eval", "--skip", "-1"}, []string{"--skip -1"}},
		{[]string{"eval", "--k", "1000000"}, []string{"--k 1000000"}},
		{[]string{"eval", "--experts", "-1"}, []string{"--experts -1"}},
		{[]string{"eval", "--experts", "99"}, []string{"--experts 99"}},
		{[]string{"eval", "--max-tokens", "0"}, []string{"--max-tokens 0"}},
		{[]string{"eval", "--temperature", "NaN"}, []string{"--temperature NaN"}},
		{[]string{"eval", "--temperature", "0", "--k", "4"}, []string{"--temperature 0"}},
		{[]string{"eval", "--top-p", "0"}, []string{"--top-p 0"}},
		{[]string{"eval", "--levels", "99"}, []string{"--levels 99"}},
		{[]string{"eval", "--levels", "-1"}, []string{"--levels -1"}},
		{[]string{"eval", "--data", "nosuch"}, []string{"--data \"nosuch\""}},
		{[]string{"eval", "--data", "nosuch=afile.txt"}, []string{"--data \"nosuch=afile.txt\""}},
		{[]string{"eval", "--data", "gsm8k=nosuch.jsonl"}, []string{"--data nosuch.jsonl"}},
		{[]string{"eval", "--data", "gsm8k=adir"}, []string{"--data adir is a directory"}},
		{[]string{"eval", "--data", "gsm8k=afile.txt", "--levels", "1"}, []string{"--levels is for --data world"}},
		{[]string{"eval", "--endpoint", "notaurl"}, []string{"--endpoint \"notaurl\""}},
		{[]string{"eval", "--model", "nosuch"}, []string{"--model nosuch"}},
		{[]string{"eval", "--precision", "fp16"}, []string{`--precision "fp16": want fp32`}},
		{[]string{"eval", "--endpoint", "http://127.0.0.1:1/v1", "--precision", "bf16"}, []string{"--precision sets rlvr's own engine"}},
		{[]string{"eval", "--model", "huge", "--problems", "1", "--levels", "0"}, []string{"huge/config.json", "vocab_size 1048576"}},
		{[]string{"eval", "--problems", "-1", "--k", "-1", "--experts", "-1", "--max-tokens", "0", "--temperature", "NaN"},
			[]string{"--problems -1", "--k -1", "--experts -1", "--max-tokens 0", "--temperature NaN"}},

		// pretrain
		{[]string{"pretrain", "--eval", "-1"}, []string{"--eval -1"}},
		{[]string{"pretrain", "--eval", "0"}, []string{"--eval 0"}},
		{[]string{"pretrain", "--batch-tokens", "0"}, []string{"--batch-tokens 0"}},
		{[]string{"pretrain", "--batch-tokens", "-1"}, []string{"--batch-tokens -1"}},
		{[]string{"pretrain", "--batch-tokens", "1000000000000"}, []string{"--batch-tokens 1000000000000"}},
		{[]string{"pretrain", "--steps", "0"}, []string{"--steps 0"}},
		{[]string{"pretrain", "--steps", "-1"}, []string{"--steps -1"}},
		{[]string{"pretrain", "--lr", "NaN"}, []string{"--lr NaN"}},
		{[]string{"pretrain", "--lr", "-Inf"}, []string{"--lr -Inf"}},
		{[]string{"pretrain", "--lr", "0"}, []string{"--lr 0"}},
		{[]string{"pretrain", "--lr", "5"}, []string{"--lr 5"}},
		{[]string{"pretrain", "--warmup", "-1"}, []string{"--warmup -1"}},
		{[]string{"pretrain", "--steps", "50", "--warmup", "100"}, []string{"--warmup 100", "--steps 50"}},
		{[]string{"pretrain", "--out", "afile.txt"}, []string{"--out afile.txt is a file"}},
		{[]string{"pretrain", "--out", "afile.txt/sub"}, []string{"--out afile.txt/sub"}},
		{[]string{"pretrain", "--eval", "-1", "--batch-tokens", "0", "--lr", "NaN", "--out", "afile.txt"},
			[]string{"--eval -1", "--batch-tokens 0", "--lr NaN", "--out afile.txt"}},

		// serve
		{[]string{"serve", "--world-experts", "--max-tokens", "-1"}, []string{"--max-tokens -1"}},
		{[]string{"serve", "--world-experts", "--max-n", "-1"}, []string{"--max-n -1"}},
		{[]string{"serve", "--world-experts", "--max-batch", "-1"}, []string{"--max-batch -1"}},
		{[]string{"serve", "--world-experts", "--batch-window", "-1s"}, []string{"--batch-window -1s"}},
		{[]string{"serve", "--world-experts", "--batch-window", "1h"}, []string{"--batch-window 1h0m0s"}},
		{[]string{"serve", "--world-experts", "--addr", "nonsense"}, []string{"--addr \"nonsense\""}},
		{[]string{"serve", "--world-experts", "--addr", "127.0.0.1:99999"}, []string{"--addr \"127.0.0.1:99999\""}},
		{[]string{"serve", "--world-experts", "--token", ""}, []string{"--token is empty"}},
		{[]string{"serve", "--world-experts", "--name", " "}, []string{"--name is empty"}},
		{[]string{"serve", "--model", "nosuch"}, []string{"--model nosuch"}},
		{[]string{"serve", "--world-experts", "--precision", "fp16"}, []string{`--precision "fp16": want fp32`}},
		{[]string{"serve", "--tinker", "--precision", "bf16"}, []string{"--precision bf16: the Tinker server's models compute in fp32"}},
		{[]string{"serve", "--model", "huge"}, []string{"huge/config.json", "vocab_size 1048576"}},

		// report
		{[]string{"report", "nosuch"}, []string{"run directory nosuch"}},
		{[]string{"report", "afile.txt"}, []string{"run directory afile.txt is a file"}},
		{[]string{"report", "adir", "--out", "afile.txt"}, []string{"--out afile.txt is a file"}},
		{[]string{"report", "adir", "--blocks", "0"}, []string{"--blocks 0: a block is at least one step"}},
		{[]string{"report", "adir", "--baseline", "grpo"}, []string{"--baseline needs --table or --blocks"}},
		{[]string{"report", "adir", "--column", "row"}, []string{"--column needs --table"}},
		{[]string{"report", "adir", "--expert", "E1"}, []string{"--expert needs --table"}},
		{[]string{"report", "adir", "--table", "--expert", ""}, []string{"--expert is empty"}},
		{[]string{"report", "adir", "--metrics", "accuracy"}, []string{"--metrics needs --blocks"}},
		{[]string{"report", "adir", "--blocks", "50", "--metrics", "accuracy,,grad_norm"}, []string{"--metrics an empty metric name"}},
		{[]string{"report", "adir", "--blocks", "50", "--out", "x"}, []string{"blocks", "out"}},

		// bench
		{[]string{"bench", "engine", "--layers", "0"}, []string{"--layers 0"}},
		{[]string{"bench", "engine", "--dim", "-1"}, []string{"--dim -1"}},
		{[]string{"bench", "engine", "--heads", "3"}, []string{"--heads 3 does not divide --dim 256"}},
		{[]string{"bench", "engine", "--kv-heads", "3"}, []string{"--kv-heads 3 does not divide --heads 4"}},
		{[]string{"bench", "engine", "--vocab", "1000000000"}, []string{"--vocab 1000000000"}},
		{[]string{"bench", "engine", "--dim", "16384", "--layers", "256"}, []string{"--dim 16384, --layers 256"}},
		{[]string{"bench", "engine", "--seq", "65536", "--batch", "4096"}, []string{"--batch 4096 × --seq 65536"}},
		{[]string{"bench", "engine", "--reps", "0", "--peak", "NaN"}, []string{"--reps 0", "--peak NaN"}},
		{[]string{"bench", "sample", "--stories", "nosuch.bin"}, []string{"--stories nosuch.bin"}},
		{[]string{"bench", "sample", "--max-tokens", "0", "--reps", "-1"}, []string{"--max-tokens 0", "--reps -1"}},
		{[]string{"bench", "sample", "--models", "gpt5", "--streams", "0"}, []string{"--models \"gpt5\" is not one of stories260K, world-d128", "--streams 0"}},
		{[]string{"bench", "sample", "--run-c", "nosuch"}, []string{"--run-c nosuch"}},
		{[]string{"--cpuprofile", "adir", "bench", "sample", "--models", "world-d128"}, []string{"--cpuprofile: open adir"}},

		// init-model
		{[]string{"init-model", "--tokenizer", "tok", "--out", "afile.txt"}, []string{"--out afile.txt is a file"}},
		{[]string{"init-model", "--tokenizer", "tok", "--out", "adir"}, []string{"--out adir is not empty"}},
		{[]string{"init-model", "--tokenizer", "nosuch", "--out", "new"}, []string{"--tokenizer nosuch"}},
		{[]string{"init-model", "--tokenizer", "afile.txt", "--out", "new"}, []string{"--tokenizer afile.txt is a file"}},
		{[]string{"init-model", "--tokenizer", "tok"}, []string{"--out is required"}},
		{[]string{"init-model", "--tokenizer", "tok", "--out", "new", "--shape", "nosuch"}, []string{"--shape \"nosuch\""}},
		{[]string{"init-model", "--tokenizer", "tok", "--out", "new", "--dim", "-8", "--layers", "1000000", "--heads", "0", "--max-seq", "-1", "--head-dim", "-2"},
			[]string{"--dim -8", "--layers 1000000", "--heads 0", "--max-seq -1", "--head-dim -2"}},
		{[]string{"init-model", "--tokenizer", "tok", "--out", "new", "--heads", "3"}, []string{"heads 3"}},

		// train and sft, validated by train.RLConfig.Resolve, which names
		// the config keys the flags set.
		{[]string{"train", "--steps", "0"}, []string{"steps = 0"}},
		{[]string{"train", "--precision", "fp16"}, []string{`precision "fp16": want fp32`}},
		{[]string{"train", "--sampler-precision", "int4"}, []string{`sampler_precision "int4": want fp32`}},
		{[]string{"train", "--precision", "int8"}, []string{"precision int8 is for sampling (sampler_precision: int8)"}},
		{[]string{"bench", "engine", "--precision", "int8"}, []string{"int8 is for sampling: rlvr bench sample"}},
		{[]string{"train", "--set", "sampler_correction.cap=0.5"}, []string{"sampler_correction.cap = 0.5"}},
		{[]string{"train", "--config", "", "--run", ""}, []string{"--config is empty", "--run is empty"}},
		{[]string{"train", "--run", ""}, []string{"--run is empty"}},
		{[]string{"sft", "--out", ""}, []string{"--out is empty"}},
		{[]string{"train", "--config", "configs/world-grpo.yaml", "--model", ""}, []string{"--model is empty"}},
		{[]string{"train", "--data", "gsm8k", "--train-file", " ", "--test-file", "", "--dme", ""}, []string{"--train-file is empty", "--test-file is empty", "--dme is empty"}},
		{[]string{"--cpuprofile", "", "train"}, []string{"--cpuprofile is empty"}},
		{[]string{"eval", "--tokenizer", "", "--samples", ""}, []string{"--tokenizer is empty", "--samples is empty"}},
		{[]string{"generate", "--model", ""}, []string{"--model is empty"}},
		{[]string{"probe", "--config", ""}, []string{"--config is empty"}},
		{[]string{"serve", "--tinker", "--state", ""}, []string{"--state is empty"}},
		{[]string{"experts", "collect", "--cache", ""}, []string{"--cache is empty"}},
		{[]string{"train", "--lr", "NaN"}, []string{"lr = NaN"}},
		{[]string{"train", "--temperature", "-1"}, []string{"temperature = -1"}},
		{[]string{"train", "--kl", "-1"}, []string{"kl = -1"}},
		{[]string{"train", "--micro-batch-tokens", "-1"}, []string{"micro_batch_tokens = -1"}},
		{[]string{"train", "--eval-problems", "-1"}, []string{"eval_problems = -1"}},
		{[]string{"train", "--levels", "99"}, []string{"levels: no world level 99"}},
		{[]string{"train", "--data", "nosuch"}, []string{"data.name \"nosuch\""}},
		{[]string{"train", "--preset", "nosuch"}, []string{"preset \"nosuch\""}},
		{[]string{"train", "--config", "missing.yaml"}, []string{"missing.yaml"}},
		{[]string{"train", "--parts", "nosuch"}, []string{"parts: \"nosuch\""}},
		{[]string{"sft", "--levels", "99"}, []string{"levels: no world level 99"}},
		{[]string{"sft", "--steps", "0", "--lr", "NaN"}, []string{"steps = 0", "lr = NaN"}},
		{[]string{"sft", "--model", "model", "--out", "afile.txt"}, []string{"--out afile.txt is a file"}},
		{[]string{"sft", "--model", "model", "--out", "adir"}, []string{"--out adir is not empty"}},
		{[]string{"train", "--model", "model", "--max-tokens", "16", "--run", "afile.txt"}, []string{"run directory", "not a directory"}},
		{[]string{"train", "--model", "model", "--run", "fresh", "--steps", "1"}, []string{"max_tokens = 256 leaves no room for a prompt in the model's context of 64"}},
		{[]string{"train", "--group-size", "100000000"}, []string{"group_size = 100000000"}},
		{[]string{"train", "--prompts", "100000000"}, []string{"prompts_per_step = 100000000"}},
		{[]string{"train", "--epochs", "100000000"}, []string{"epochs = 100000000"}},
		{[]string{"train", "--max-tokens", "1000000000"}, []string{"max_tokens = 1000000000"}},
		{[]string{"train", "--lr", "1e30"}, []string{"lr = 1e+30"}},
		{[]string{"train", "--model", "nosuch"}, []string{"model: stat nosuch"}},
		{[]string{"train", "--data", "gsm8k", "--train-file", "nosuch.jsonl"}, []string{"data.train: stat nosuch.jsonl"}},
		{[]string{"train", "--eval-problems", "0"}, []string{"eval_problems = 0"}},
		{[]string{"train", "--set", "steps"}, []string{"--set \"steps\": want KEY=VALUE"}},
		{[]string{"train", "--set", "steps=0"}, []string{"steps = 0"}},
		{[]string{"train", "--set", "expert_prompts.expertz=[1]", "--parts", "expert_prompts"}, []string{"expertz"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { refused(t, dir, tc.args, tc.want) })
	}
}

// refused runs a hostile command line and checks it fails without a
// panic, with an error naming every want, and without writing or removing
// any file under dir.
func refused(t *testing.T, dir string, args, want []string) {
	t.Helper()
	before := snapshot(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stdout, _, err := execute(t, ctx, args...)
	if err == nil {
		t.Fatalf("no error; output:\n%s", stdout)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	after := snapshot(t, dir)
	for path := range after {
		if before[path] != after[path] {
			t.Errorf("wrote %s", path)
		}
	}
	for path := range before {
		if _, ok := after[path]; !ok {
			t.Errorf("removed %s", path)
		}
	}
}

// TestEveryCommandHasHelp runs --help on every command.
func TestEveryCommandHasHelp(t *testing.T) {
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			args := append(append([]string(nil), path...), sub.Name())
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				out, _, err := execute(t, context.Background(), append(args, "--help")...)
				if err != nil || !strings.Contains(out, "Usage:") {
					t.Errorf("error %v, output %q", err, out)
				}
			})
			walk(sub, args)
		}
	}
	walk(rootCmd(), nil)
}

// TestPretrainShortRunFitsWarmup trains a few steps without --warmup: the
// warmup shrinks to fit the run instead of failing.
func TestPretrainShortRunFitsWarmup(t *testing.T) {
	cliFixture(t)
	out := filepath.Join(t.TempDir(), "m")
	stdout, _, err := execute(t, context.Background(), "pretrain", "--steps", "3", "--batch-tokens", "256", "--eval", "1", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "for 3 steps") {
		t.Errorf("output %q", stdout)
	}
	// A directory trained with --out is a whole cache entry.
	for _, f := range []string{"model.safetensors", train.ResultFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(stdout, "the cache's directory for these settings, where a copy of it is found: "+filepath.Join(train.CacheDir(), "pretrain-")) {
		t.Errorf("output %q does not name the cache's directory", stdout)
	}
	if got := train.DefaultWarmup(3); got != 0 {
		t.Errorf("DefaultWarmup(3) = %d", got)
	}
	if got := train.DefaultWarmup(4000); got != 100 {
		t.Errorf("DefaultWarmup(4000) = %d, want the default configuration's 100", got)
	}
}

// TestGenerateTinyTemperatureIsGreedy checks that temperatures too small
// to divide by print the greedy continuation.
func TestGenerateTinyTemperatureIsGreedy(t *testing.T) {
	cliFixture(t)
	gen := func(temp string) string {
		t.Helper()
		out, _, err := execute(t, context.Background(), "generate", "--model", "model", "--prompt", "Q:12+7\n", "--max-tokens", "24", "--temperature", temp, "--seed", "3")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := gen("0")
	for _, temp := range []string{"1e-38", "1e-40", "1e-45"} {
		if got := gen(temp); got != want {
			t.Errorf("temperature %s: %q, want the greedy %q", temp, got, want)
		}
	}
	if gen("1") == want {
		t.Error("temperature 1 gave the greedy text: the test cannot tell sampling from greedy")
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in
// different goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEvalSkipJoinsParts checks that an evaluation run in parts with
// --skip draws the problems and the samples of one whole run, on the
// world and on a dataset file.
func TestEvalSkipJoinsParts(t *testing.T) {
	cliFixture(t)
	var lines []string
	for i := range 6 {
		lines = append(lines, fmt.Sprintf(`{"question": "%d+%d?", "answer": "%d+%d=%d\n#### %d"}`, i, i, i, i, 2*i, 2*i))
	}
	if err := os.WriteFile("gsm8k.jsonl", []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]string{{"--data", "world", "--levels", "0,2"}, {"--data", "gsm8k=gsm8k.jsonl"}} {
		run := func(out string, extra ...string) []string {
			args := append([]string{"eval", "--model", "model", "--k", "3", "--temperature", "0.8", "--max-tokens", "6",
				"--batch", "6", "--seed", "7", "--samples", out}, data...)
			if _, stderr, err := execute(t, t.Context(), append(args, extra...)...); err != nil {
				t.Fatalf("rlvr %s: %v\n%s", strings.Join(append(args, extra...), " "), err, stderr)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(string(b)), "\n")
			slices.Sort(got)
			return got
		}
		whole := run("whole.jsonl", "--problems", "4")
		parts := append(run("a.jsonl", "--problems", "1"), run("b.jsonl", "--problems", "3", "--skip", "1")...)
		slices.Sort(parts)
		if len(whole) == 0 || !slices.Equal(whole, parts) {
			t.Errorf("%s: the parts' %d samples differ from the whole run's %d", data[1], len(parts), len(whole))
		}
		if slices.Equal(run("first.jsonl", "--problems", "3"), run("later.jsonl", "--problems", "3", "--skip", "1")) {
			t.Errorf("%s: --skip 1 gave the samples of --skip 0", data[1])
		}
	}
	_, _, err := execute(t, t.Context(), "eval", "--model", "model", "--data", "gsm8k=gsm8k.jsonl", "--skip", "6", "--problems", "1")
	if err == nil || !strings.Contains(err.Error(), "skip 6: gsm8k.jsonl has 6 problems") {
		t.Errorf("--skip past the end: %v", err)
	}
	_, _, err = execute(t, t.Context(), "eval", "--model", "model", "--data", "gsm8k=gsm8k.jsonl", "--world-words")
	if err == nil || !strings.Contains(err.Error(), "--world-words is for --data world") {
		t.Errorf("--world-words on a dataset: %v", err)
	}
	// A base model is asked the world in words in plain text.
	m, err := model.New(model.Config{Vocab: tokenizer.NewByteTokenizer().VocabSize(), Dim: 16, Layers: 1, Heads: 2, Hidden: 32, MaxSeq: 256}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := hf.Save("long", m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := execute(t, t.Context(), "eval", "--model", "long", "--levels", "1", "--problems", "1", "--max-tokens", "4",
		"--world-words", "--samples", "words.jsonl"); err != nil {
		t.Fatalf("--world-words: %v\n%s", err, stderr)
	}
	b, err := os.ReadFile("words.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Prompt string }
	if err := json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &s); err != nil || !strings.HasPrefix(s.Prompt, "Calculate ") {
		t.Errorf("--world-words prompt %q (%v), want the question in words", s.Prompt, err)
	}
}

// TestTrainDMEFlag checks that --dme replaces the config's data.dme: the
// experiment scripts point each world version's runs at its own D_ME.
func TestTrainDMEFlag(t *testing.T) {
	config, err := filepath.Abs("../../configs/world-expert0-sft.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := cliFixture(t)
	refused(t, dir, []string{"train", "--config", config, "--model", "model", "--dme", "nosuch-dme.jsonl", "--max-tokens", "16", "--run", "r"},
		[]string{"data.dme", "nosuch-dme.jsonl"})
}
