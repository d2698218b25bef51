// Command speed times rlvr's engine against its peers on one real model
// (scripts/peers.sh rollouts and learner, docs/peers.md):
//
//   - rollouts: rlvr's sampler in fp32, bf16 and int8 (weight-only)
//     against transformers' generate (fp32 and bf16) and llama.cpp (llama-batched-bench, on an
//     F32, a BF16 and a Q8_0 GGUF), each continuing a one-token prompt to
//     the same number of tokens in 1, 8 and 64 streams;
//   - learner: rlvr's training step (forward, backward, AdamW) in fp32 and
//     bf16 against PyTorch's on transformers' implementation of the model,
//     in fp32, under autocast and with bf16 weights.
//
// The engines run in turn, the order rotated each round, so that each pair
// is measured in the same minutes; each engine's figure is its median over
// the rounds, and each ratio's range over the rounds is given beside it.
//
//	go run ./scripts/peers/speed rollouts -rlvr BIN -model M.gguf -hf DIR -python PY \
//	    -llama BINDIR -f32 F32.gguf -bf16 BF16.gguf -q8 Q8_0.gguf -out runs/peers/rollouts -doc docs/peers.md
//	go run ./scripts/peers/speed learner -rlvr BIN -hf DIR -python PY -out runs/peers/learner -doc docs/peers.md
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rlvr/bench"
	"rlvr/format/tokenizer"
	"rlvr/internal/atomicfile"
	"rlvr/internal/jsonl"
	"rlvr/scripts/peers/docblock"
)

// measurement is one engine's tokens/s at one stream count in one round.
type measurement struct {
	Engine       string
	Round        int
	Streams      int
	Tokens       int
	Seconds      float64
	TokensPerSec float64
}

// run is one engine's process over every stream count.
type run struct {
	results []measurement
	rss     int64   // peak resident bytes while sampling
	peak    float64 // rlvr's measured machine peak, GFLOP/s
	cpu     string  // the processor and its bf16 features, as rlvr names them
	flops   map[int]float64
}

type engine struct {
	name string
	run  func(streams []int) (run, error)
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "rollouts" && os.Args[1] != "learner") {
		fmt.Fprintln(os.Stderr, "usage: speed rollouts|learner [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	var (
		rlvrBin  = fs.String("rlvr", "", "the rlvr binary")
		model    = fs.String("model", "", "rollouts: the model as rlvr samples it (.gguf or Hugging Face directory)")
		hfDir    = fs.String("hf", "", "the model's Hugging Face directory, for transformers")
		python   = fs.String("python", "", "a python with torch and transformers")
		llama    = fs.String("llama", "", "rollouts: llama.cpp's bin directory (llama-batched-bench)")
		f32      = fs.String("f32", "", "rollouts: the model as an F32 GGUF, for llama.cpp")
		bf16     = fs.String("bf16", "", "rollouts: the model as a BF16 GGUF, for llama.cpp")
		q8       = fs.String("q8", "", "rollouts: the model as a Q8_0 GGUF, for llama.cpp")
		streamsF = fs.String("streams", "1,8,64", "rollouts: stream counts")
		tokens   = fs.Int("tokens", 128, "rollouts: new tokens per stream")
		batch    = fs.Int("batch", 8, "learner: sequences per step")
		seq      = fs.Int("seq", 256, "learner: tokens per sequence")
		steps    = fs.Int("steps", 3, "learner: timed steps per round (after one warm-up step)")
		rounds   = fs.Int("rounds", 3, "rounds of every engine")
		threads  = fs.Int("threads", 2, "threads of every engine")
		out      = fs.String("out", "runs/peers/"+os.Args[1], "output folder")
		doc      = fs.String("doc", "", "a Markdown file whose "+os.Args[1]+"-table block to replace (none when empty)")
		only     = fs.String("engines", "", "rollouts: the engines to run, by name, comma-separated (all when empty; a subset writes no -doc block)")
	)
	fs.Parse(os.Args[2:])
	var err error
	if os.Args[1] == "rollouts" {
		err = rollouts(*rlvrBin, *model, *hfDir, *python, *llama, *f32, *bf16, *q8, *streamsF, *only, *tokens, *rounds, *threads, *out, *doc)
	} else {
		err = learner(*rlvrBin, *hfDir, *python, *batch, *seq, *steps, *rounds, *threads, *out, *doc)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "speed %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// rolloutEngines are the rollout engines and the files or settings each
// runs on.
func rolloutEngines(rlvrBin, model, hfDir, python, llama, f32, bf16, q8 string, bos int32, tokens, threads int, env []string) []engine {
	batched := filepath.Join(llama, "llama-batched-bench")
	return []engine{
		{"rlvr fp32", func(streams []int) (run, error) {
			return runRlvr(rlvrBin, model, "fp32", streams, tokens, threads, env)
		}},
		{"rlvr bf16", func(streams []int) (run, error) {
			return runRlvr(rlvrBin, model, "bf16", streams, tokens, threads, env)
		}},
		{"rlvr int8", func(streams []int) (run, error) {
			return runRlvr(rlvrBin, model, "int8", streams, tokens, threads, env)
		}},
		{"transformers fp32", func(streams []int) (run, error) {
			return runTransformers(python, hfDir, "fp32", bos, streams, tokens, threads, env)
		}},
		{"transformers bf16", func(streams []int) (run, error) {
			return runTransformers(python, hfDir, "bf16", bos, streams, tokens, threads, env)
		}},
		{"llama.cpp F32", func(streams []int) (run, error) { return runLlama(batched, f32, streams, tokens, threads, env) }},
		{"llama.cpp BF16", func(streams []int) (run, error) { return runLlama(batched, bf16, streams, tokens, threads, env) }},
		{"llama.cpp Q8_0", func(streams []int) (run, error) { return runLlama(batched, q8, streams, tokens, threads, env) }},
	}
}

func rollouts(rlvrBin, model, hfDir, python, llama, f32, bf16, q8, streamsF, only string, tokens, rounds, threads int, out, doc string) error {
	var streams []int
	for _, s := range strings.Split(streamsF, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("-streams %q: want positive counts", streamsF)
		}
		streams = append(streams, n)
	}
	tok, err := tokenizer.Load(filepath.Join(hfDir, "tokenizer.json"))
	if err != nil {
		return err
	}
	// Every engine starts from the same one token: llama-batched-bench's
	// -npp 1 prompt is one token too.
	bos, ok := tok.BOS()
	if !ok {
		bos = 0
	}
	env := append(os.Environ(), fmt.Sprintf("OMP_NUM_THREADS=%d", threads))
	engines := rolloutEngines(rlvrBin, model, hfDir, python, llama, f32, bf16, q8, bos, tokens, threads, env)
	if only != "" {
		want := strings.Split(only, ",")
		engines = slices.DeleteFunc(engines, func(e engine) bool { return !slices.Contains(want, e.name) })
		if len(engines) != len(want) {
			return fmt.Errorf("-engines %q: want names among the engines (%s)", only, strings.Join(engineNames(rolloutEngines("", "", "", "", "", "", "", "", 0, 0, 0, nil)), ", "))
		}
		doc = "" // a partial table replaces no block
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var all []measurement
	rss := map[string]int64{}
	var peak float64
	var processor string
	flops := map[int]float64{} // per token, by stream count
	for r := range rounds {
		for i := range engines {
			e := engines[(r+i)%len(engines)]
			t0 := time.Now()
			got, err := e.run(streams)
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			fmt.Fprintf(os.Stderr, "rollouts: round %d, %s: %.0f s\n", r+1, e.name, time.Since(t0).Seconds())
			for _, m := range got.results {
				m.Engine, m.Round = e.name, r
				all = append(all, m)
			}
			rss[e.name] = max(rss[e.name], got.rss)
			if got.peak > 0 {
				peak, processor = got.peak, got.cpu
				for n, f := range got.flops {
					flops[n] = f
				}
			}
		}
	}
	return write(all, render(all, engineNames(engines), streams, rss, peak, processor, flops, tokens, rounds, threads), out, doc, "rollouts-table")
}

// engineNames are the engines' names.
func engineNames(engines []engine) []string {
	names := make([]string, len(engines))
	for i, e := range engines {
		names[i] = e.name
	}
	return names
}

// write keeps the measurements and the table under out, and puts the
// table into doc's block.
func write[M any](all []M, table, out, doc, block string) error {
	if err := jsonl.Write(filepath.Join(out, "measurements.jsonl"), all); err != nil {
		return err
	}
	fmt.Print(table)
	if err := atomicfile.WriteBytes(filepath.Join(out, "table.md"), []byte(table)); err != nil {
		return err
	}
	if doc == "" {
		return nil
	}
	return docblock.Replace(doc, map[string]string{block: table})
}

// runRlvr runs rlvr bench sample, which reports tokens/s, FLOP/s and its
// resident memory while sampling (before its learner pass for the logprob
// gap, which the other engines do not make).
func runRlvr(bin, model, precision string, streams []int, tokens, threads int, env []string) (run, error) {
	cmd := exec.Command(bin, "--threads", strconv.Itoa(threads), "bench", "sample", "--model", model, "--streams", joinInts(streams),
		"--max-tokens", strconv.Itoa(tokens), "--reps", "1", "--json", "--precision", precision)
	cmd.Env = env
	outb, _, err := output(cmd)
	if err != nil {
		return run{}, err
	}
	var rep bench.SampleReport
	if err := json.Unmarshal(outb, &rep); err != nil {
		return run{}, fmt.Errorf("rlvr bench sample's JSON: %v", err)
	}
	r := run{peak: rep.Peak.GFLOPS, cpu: rep.CPU, flops: map[int]float64{}}
	for _, x := range rep.Results {
		r.results = append(r.results, measurement{Streams: x.Streams, Tokens: x.Tokens, Seconds: x.Seconds, TokensPerSec: x.TokensPerSec})
		r.flops[x.Streams] = x.GFLOPS * 1e9 / x.TokensPerSec
	}
	for _, b := range rep.SamplingRSSBytes {
		r.rss = max(r.rss, b)
	}
	return r, nil
}

// runTransformers runs python/rollout_bench_transformers.py.
func runTransformers(python, dir, dtype string, token int32, streams []int, tokens, threads int, env []string) (run, error) {
	cmd := exec.Command(python, "python/rollout_bench_transformers.py", "--model", dir, "--token", fmt.Sprint(token),
		"--streams", joinInts(streams), "--max-new", strconv.Itoa(tokens), "--threads", strconv.Itoa(threads), "--dtype", dtype)
	cmd.Env = env
	return measureLines(cmd, func(line []byte) (measurement, error) {
		var x struct {
			Streams    int     `json:"streams"`
			Tokens     int     `json:"tokens"`
			Seconds    float64 `json:"seconds"`
			TokensPerS float64 `json:"tokens_per_s"`
		}
		if err := json.Unmarshal(line, &x); err != nil {
			return measurement{}, fmt.Errorf("transformers' line %q: %v", line, err)
		}
		return measurement{Streams: x.Streams, Tokens: x.Tokens, Seconds: x.Seconds, TokensPerSec: x.TokensPerS}, nil
	})
}

// measureLines runs cmd and reads a measurement from each line of its
// output; lines that give no stream count are not measurements.
func measureLines(cmd *exec.Cmd, parse func([]byte) (measurement, error)) (run, error) {
	outb, rss, err := output(cmd)
	if err != nil {
		return run{}, err
	}
	r := run{rss: rss}
	sc := bufio.NewScanner(bytes.NewReader(outb))
	for sc.Scan() {
		m, err := parse(sc.Bytes())
		if err != nil {
			return run{}, err
		}
		if m.Streams > 0 {
			r.results = append(r.results, m)
		}
	}
	return r, nil
}

// runLlama runs llama-batched-bench: one token of prompt per sequence,
// then tokens generated in every sequence at once. It decodes without
// sampling (each step feeds a fixed token), so it does a little less than
// the others do. Weight repacking is off (-nr): on an AMX machine the
// pinned llama.cpp repacks Q8_0 for its AMX kernel, which dies of SIGILL
// at its first tile instruction (tilezero), so Q8_0 runs on its AVX-512
// VNNI dot products, as on any other x86 CPU.
func runLlama(bin, gguf string, streams []int, tokens, threads int, env []string) (run, error) {
	ctx := slices.Max(streams) * (tokens + 1)
	cmd := exec.Command(bin, "-m", gguf, "-c", strconv.Itoa(ctx), "-b", "2048", "-ub", "512", "-npp", "1",
		"-ntg", strconv.Itoa(tokens), "-npl", joinInts(streams), "-t", strconv.Itoa(threads), "-nr", "--output-format", "jsonl")
	cmd.Env = env
	r, err := measureLines(cmd, func(line []byte) (measurement, error) {
		var x struct {
			PL      int     `json:"pl"`
			TG      int     `json:"tg"`
			TTG     float64 `json:"t_tg"`
			SpeedTG float64 `json:"speed_tg"`
		}
		if json.Unmarshal(line, &x) != nil {
			return measurement{}, nil // llama.cpp's other output
		}
		return measurement{Streams: x.PL, Tokens: x.PL * x.TG, Seconds: x.TTG, TokensPerSec: x.SpeedTG}, nil
	})
	if err != nil {
		return run{}, err
	}
	if len(r.results) != len(streams) {
		return run{}, fmt.Errorf("llama-batched-bench printed %d results for %d stream counts", len(r.results), len(streams))
	}
	return r, nil
}

// output runs cmd and returns its standard output and its peak resident
// memory in bytes; its standard error is shown only when it fails.
func output(cmd *exec.Cmd) ([]byte, int64, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, tail(stderr.String(), 2000))
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024 // kilobytes on Linux
	}
	return stdout.Bytes(), rss, nil
}

func render(all []measurement, engines []string, streams []int, rss map[string]int64, peak float64, processor string,
	flops map[int]float64, tokens, rounds, threads int) string {
	// tps[engine][streams] lists tokens/s by round.
	tps := map[string]map[int][]float64{}
	for _, m := range all {
		if tps[m.Engine] == nil {
			tps[m.Engine] = map[int][]float64{}
		}
		tps[m.Engine][m.Streams] = append(tps[m.Engine][m.Streams], m.TokensPerSec)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d new tokens per stream from a one-token prompt, %d threads, median of %d rounds, on %s "+
		"(tokens/s, and the share of the machine's measured float32 FMA peak of %.0f GFLOP/s):\n\n", tokens, threads, rounds, processor, peak)
	b.WriteString("| engine |")
	for _, n := range streams {
		fmt.Fprintf(&b, " %d streams |", n)
	}
	b.WriteString(" peak resident memory |\n| --- |" + strings.Repeat(" ---: |", len(streams)+1) + "\n")
	for _, e := range engines {
		fmt.Fprintf(&b, "| %s |", e)
		for _, n := range streams {
			v := median(tps[e][n])
			fmt.Fprintf(&b, " %s (%.0f%%) |", thousands(v), 100*v*flops[n]/1e9/peak)
		}
		fmt.Fprintf(&b, " %d MiB |\n", rss[e]>>20)
	}
	b.WriteString("\nrlvr's tokens/s over each peer's, median [range over the rounds]:\n\n| rlvr / peer |")
	for _, n := range streams {
		fmt.Fprintf(&b, " %d streams |", n)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(streams)) + "\n")
	for _, mine := range []string{"rlvr fp32", "rlvr bf16", "rlvr int8"} {
		if !slices.Contains(engines, mine) {
			continue
		}
		for _, e := range engines {
			if strings.HasPrefix(e, "rlvr") {
				continue
			}
			fmt.Fprintf(&b, "| %s / %s |", mine, e)
			for _, n := range streams {
				fmt.Fprintf(&b, " %s |", pairedRatio(tps[mine][n], tps[e][n]))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// pairedRatio is a's median over b's, with the range of the round-by-round
// ratios a[r]/b[r] (the rounds measure both in the same minutes); empty
// when the two were not measured in the same rounds.
func pairedRatio(a, b []float64) string {
	if len(a) != len(b) || len(a) == 0 {
		return ""
	}
	rs := make([]float64, len(a))
	for r := range a {
		rs[r] = a[r] / b[r]
	}
	return fmt.Sprintf("×%.2f [%.2f, %.2f]", median(a)/median(b), slices.Min(rs), slices.Max(rs))
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func thousands(v float64) string {
	s := strconv.Itoa(int(v + 0.5))
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// step is one engine's training step in one round.
type step struct {
	Engine       string
	Round        int
	Seconds      float64 // median over the round's steps
	TokensPerSec float64
	RSSBytes     int64
}

// learnerEngine is one engine at one precision.
type learnerEngine struct {
	name      string
	precision string // rlvr's --precision, or learner_bench_torch.py's
	rlvr      bool
}

// learnerEngines are the engines the learner table compares: rlvr in
// float32 and bf16, PyTorch in float32, under autocast and with bf16
// weights, each the same step.
var learnerEngines = []learnerEngine{
	{"rlvr fp32", "fp32", true},
	{"rlvr bf16", "bf16", true},
	{"PyTorch fp32", "fp32", false},
	{"PyTorch autocast", "autocast", false},
	{"PyTorch bf16 weights", "bf16", false},
}

// learner times rlvr's training step on the model's shape (random
// weights: the speed does not depend on their values) against PyTorch's
// on transformers' implementation of the model itself, each in float32
// and in bf16.
func learner(rlvrBin, hfDir, python string, batch, seq, steps, rounds, threads int, out, doc string) error {
	cfgBytes, err := os.ReadFile(filepath.Join(hfDir, "config.json"))
	if err != nil {
		return err
	}
	var hc struct {
		Layers  int  `json:"num_hidden_layers"`
		Dim     int  `json:"hidden_size"`
		Heads   int  `json:"num_attention_heads"`
		KVHeads int  `json:"num_key_value_heads"`
		FFN     int  `json:"intermediate_size"`
		Vocab   int  `json:"vocab_size"`
		Tied    bool `json:"tie_word_embeddings"`
	}
	if err := json.Unmarshal(cfgBytes, &hc); err != nil {
		return fmt.Errorf("%s/config.json: %v", hfDir, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	env := append(os.Environ(), fmt.Sprintf("OMP_NUM_THREADS=%d", threads))
	itoa := strconv.Itoa
	var peak float64
	var processor string
	gflopsPerStep := map[string]float64{}
	kernels, ops := map[string]string{}, map[string]string{}
	run := func(e learnerEngine) (step, error) {
		if e.rlvr {
			args := []string{"--threads", itoa(threads), "bench", "engine", "--layers", itoa(hc.Layers), "--dim", itoa(hc.Dim),
				"--heads", itoa(hc.Heads), "--kv-heads", itoa(hc.KVHeads), "--ffn", itoa(hc.FFN), "--vocab", itoa(hc.Vocab),
				"--seq", itoa(seq), "--batch", itoa(batch), "--reps", itoa(steps), "--gemm=false", "--json", "--precision", e.precision}
			if hc.Tied {
				args = append(args, "--tied")
			}
			cmd := exec.Command(rlvrBin, args...)
			cmd.Env = env
			outb, _, err := output(cmd)
			if err != nil {
				return step{}, err
			}
			var rep bench.EngineReport
			if err := json.Unmarshal(outb, &rep); err != nil {
				return step{}, fmt.Errorf("rlvr bench engine's JSON: %v", err)
			}
			peak, processor = rep.Peak.GFLOPS, rep.CPU
			gflopsPerStep[e.name] = rep.GFLOPS * rep.StepMs / 1e3
			kernels[e.name], ops[e.name] = rep.Kernel, opsLine(rep.Ops)
			return step{Seconds: rep.StepMs / 1e3, TokensPerSec: rep.TokensPerSec, RSSBytes: rep.PeakRSSBytes}, nil
		}
		cmd := exec.Command(python, "python/learner_bench_torch.py", "--model", hfDir, "--batch", itoa(batch),
			"--seq", itoa(seq), "--reps", itoa(steps), "--threads", itoa(threads), "--precision", e.precision)
		cmd.Env = env
		outb, rss, err := output(cmd)
		if err != nil {
			return step{}, err
		}
		var x struct {
			Median     float64 `json:"step_s_median"`
			TokensPerS float64 `json:"tokens_per_s"`
			Torch      string  `json:"torch"`
			CPU        string  `json:"cpu_capability"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(outb), &x); err != nil {
			return step{}, fmt.Errorf("learner_bench_torch.py's JSON: %v", err)
		}
		kernels[e.name] = fmt.Sprintf("torch %s, %s", x.Torch, x.CPU)
		return step{Seconds: x.Median, TokensPerSec: x.TokensPerS, RSSBytes: rss}, nil
	}
	var all []step
	for r := range rounds {
		for i := range learnerEngines {
			e := learnerEngines[(r+i)%len(learnerEngines)]
			t0 := time.Now()
			got, err := run(e)
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			fmt.Fprintf(os.Stderr, "learner: round %d, %s: %.0f s\n", r+1, e.name, time.Since(t0).Seconds())
			got.Engine, got.Round = e.name, r
			all = append(all, got)
		}
	}
	return write(all, learnerTable(all, gflopsPerStep, kernels, ops, processor, peak, batch, seq, steps, rounds, threads), out, doc, "learner-table")
}

// learnerTable renders the rounds: each engine's median step, and rlvr's
// ratio to each PyTorch row with its range over the rounds (the rounds
// pair the engines in the same minutes).
func learnerTable(all []step, gflopsPerStep map[string]float64, kernels, ops map[string]string, processor string, peak float64,
	batch, seq, steps, rounds, threads int) string {
	secs := map[string][]float64{}
	rss := map[string]int64{}
	for _, s := range all {
		secs[s.Engine] = append(secs[s.Engine], s.Seconds)
		rss[s.Engine] = max(rss[s.Engine], s.RSSBytes)
	}
	ratio := func(a, b string) string { return pairedRatio(secs[a], secs[b]) }
	tokens := float64(batch * seq)
	var b strings.Builder
	fmt.Fprintf(&b, "A training step of %d sequences × %d tokens (forward, backward, AdamW over every parameter), %d threads, "+
		"median of %d rounds of %d steps, on %s; the machine's measured float32 FMA peak is %.0f GFLOP/s.\n\n",
		batch, seq, threads, rounds, steps, processor, peak)
	b.WriteString("| engine | step | tokens/s | share of fp32 peak | peak resident memory | rlvr fp32 / it | rlvr bf16 / it |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	flops := gflopsPerStep["rlvr fp32"]
	for _, e := range learnerEngines {
		if len(secs[e.name]) == 0 {
			continue
		}
		t := median(secs[e.name])
		fmt.Fprintf(&b, "| %s | %.2f s | %s | %.0f%% | %d MiB |", e.name, t, thousands(tokens/t), 100*flops/t/peak, rss[e.name]>>20)
		if e.rlvr {
			b.WriteString(" | |\n")
			continue
		}
		fmt.Fprintf(&b, " %s | %s |\n", ratio("rlvr fp32", e.name), ratio("rlvr bf16", e.name))
	}
	b.WriteString("\nKernels:")
	for _, e := range learnerEngines {
		if k := kernels[e.name]; k != "" {
			fmt.Fprintf(&b, " %s: %s;", e.name, k)
		}
	}
	b.WriteString("\n\n")
	for _, e := range learnerEngines {
		if o := ops[e.name]; o != "" {
			fmt.Fprintf(&b, "%s's step by op: %s.\n", e.name, o)
		}
	}
	return b.String()
}

// opsLine names the ops taking the most of a step's time, with their
// shares.
func opsLine(ops []bench.OpTime) string {
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b bench.OpTime) int { return cmp.Compare(b.Share, a.Share) })
	var parts []string
	for _, o := range sorted[:min(5, len(sorted))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", o.Op, 100*o.Share))
	}
	return strings.Join(parts, ", ")
}
