// Command skyrl puts rlvr's training on SkyRL tx, the open-source Tinker
// server, side by side with the same run on rlvr's own engine.
// scripts/peers.sh skyrl runs it:
//
//	skyrl logprobs -model DIR -url URL -base NAME -data mathqa=FILE -out runs/peers/skyrl
//	skyrl compare -dir runs/peers/skyrl -doc docs/peers.md
//
// logprobs samples completions from the server's base model through
// rlvr's client (backend/remote), scores the same tokens with the
// server's forward pass and with rlvr's engine (backend/local), and
// writes logprobs.json: how far apart the three are on every sampled
// token. compare reads that and the two runs' metrics.jsonl (run-local,
// run-skyrl) and replaces the SkyRL tables of docs/peers.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/backend/remote"
	"rlvr/checkpoint"
	"rlvr/engine/optim"
	"rlvr/internal/atomicfile"
	"rlvr/method"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/scripts/peers/docblock"
	"rlvr/task"
	"rlvr/train"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "logprobs":
		err = logprobsCmd(os.Args[2:])
	case "compare":
		err = compareCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skyrl:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage:
  skyrl logprobs -model DIR -url URL -base NAME -data NAME=FILE [-problems 4 -n 4 -max-tokens 64 -seed 1] -out DIR
  skyrl compare -dir DIR -doc docs/peers.md`)
	os.Exit(2)
}

// Gap is how far two scorings of the same tokens are apart.
type Gap struct {
	Tokens     int     `json:"tokens"`
	MeanAbs    float64 `json:"mean_abs"`
	MaxAbs     float64 `json:"max_abs"`
	Mean       float64 `json:"mean"`         // of a − b
	MaxSeqDiff float64 `json:"max_seq_diff"` // largest |Σ(a − b)| over one sequence
}

// Logprobs is what logprobs.json holds.
type Logprobs struct {
	Model     string `json:"model"`
	Base      string `json:"base_model"`
	Prompts   int    `json:"prompts"`
	Sequences int    `json:"sequences"`
	Tokens    int    `json:"tokens"`
	// The three scorings of every sampled token, pairwise: the server's
	// sampler (asample), the server's forward, rlvr's engine.
	SamplerVsRLVR  Gap `json:"sampler_vs_rlvr"`
	ForwardVsRLVR  Gap `json:"forward_vs_rlvr"`
	SamplerVsRemFw Gap `json:"sampler_vs_forward"`
}

func logprobsCmd(args []string) error {
	fs := flag.NewFlagSet("logprobs", flag.ExitOnError)
	modelDir := fs.String("model", "", "the model's Hugging Face directory (the one the server serves)")
	url := fs.String("url", "http://127.0.0.1:8123", "the server")
	base := fs.String("base", "", "the server's base model name (default: -model)")
	data := fs.String("data", "", "NAME=FILE: the prompts' dataset")
	problems := fs.Int("problems", 4, "prompts")
	n := fs.Int("n", 4, "samples per prompt")
	maxTokens := fs.Int("max-tokens", 64, "tokens per sample at most")
	seed := fs.Uint64("seed", 1, "sampling seed")
	rank := fs.Int("lora-rank", 32, "the LoRA rank of the model created on the server (never trained here)")
	out := fs.String("out", "", "directory for logprobs.json")
	fs.Parse(args)
	name, file, ok := strings.Cut(*data, "=")
	if *modelDir == "" || !ok || *out == "" {
		usage()
	}
	if *base == "" {
		*base = *modelDir
	}
	ctx := context.Background()
	text, err := checkpoint.OpenText(*modelDir)
	if err != nil {
		return err
	}
	render, err := train.NewRenderer(text, train.ChatConfig{Template: "on"}, text.HFConfig.MaxPositionEmbeddings)
	if err != nil {
		return err
	}
	examples, err := task.Load(name, file)
	if err != nil {
		return err
	}
	examples = examples[:min(*problems, len(examples))]
	m, err := remote.Open(ctx, remote.Config{Client: remote.Client{BaseURL: *url}, BaseModel: *base, LoraRank: *rank,
		Reduction: remote.DatumMean, Adam: optim.DefaultAdamW()})
	if err != nil {
		return err
	}
	defer m.Close()
	reqs := make([]sample.Request, len(examples))
	for i, e := range examples {
		prompt, err := render.Prompt(e, method.Variant{})
		if err != nil {
			return fmt.Errorf("%s: %w", e.ID, err)
		}
		reqs[i] = sample.Request{Prompt: prompt, Params: sample.Params{MaxTokens: *maxTokens, Temperature: 1, N: *n,
			Seed: *seed + uint64(i), StopTokens: text.StopTokens}}
	}
	// Before any optimizer step the client samples from the base model.
	got, err := (&remote.Sampler{Model: m, Decoder: text.Tokenizer}).Sample(ctx, reqs)
	if err != nil {
		return err
	}
	var batch []backend.Datum
	var sampler [][]float32
	for i, cs := range got {
		for _, c := range cs {
			if len(c.Tokens) == 0 {
				continue
			}
			batch = append(batch, completionDatum(reqs[i].Prompt, c.Tokens))
			sampler = append(sampler, c.Logprobs)
		}
	}
	if len(batch) == 0 {
		return fmt.Errorf("the server sampled no tokens")
	}
	forward, err := m.Logprobs(ctx, batch)
	if err != nil {
		return err
	}
	frozen, err := local.OpenFrozen(*modelDir)
	if err != nil {
		return err
	}
	mine, err := frozen.Logprobs(ctx, batch)
	if err != nil {
		return err
	}
	res := Logprobs{Model: filepath.Base(*modelDir), Base: *base, Prompts: len(examples), Sequences: len(batch)}
	completion := func(all [][]float32) [][]float32 { // the sampled positions of each datum
		out := make([][]float32, len(all))
		for k, v := range all {
			out[k] = v[len(v)-len(sampler[k]):]
		}
		return out
	}
	res.SamplerVsRLVR = gap(sampler, completion(mine))
	res.ForwardVsRLVR = gap(completion(forward), completion(mine))
	res.SamplerVsRemFw = gap(sampler, completion(forward))
	res.Tokens = res.SamplerVsRLVR.Tokens
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("%s\n", b)
	return atomicfile.WriteBytes(filepath.Join(*out, "logprobs.json"), append(b, '\n'))
}

// completionDatum is the datum that scores completion after prompt: the
// sequence's tokens but its last, each target the next token, weight 1
// on the sampled ones.
func completionDatum(prompt, completion []int32) backend.Datum {
	seq := append(append([]int32(nil), prompt...), completion...)
	d := backend.Datum{Tokens: seq[:len(seq)-1], Targets: seq[1:], Weights: make([]float32, len(seq)-1)}
	for j := len(prompt) - 1; j < len(d.Weights); j++ {
		d.Weights[j] = 1
	}
	return d
}

// gap compares two scorings of the same sequences, token by token.
func gap(a, b [][]float32) Gap {
	var g Gap
	var sum, sumAbs float64
	for k := range a {
		var seq float64
		for j := range a[k] {
			d := float64(a[k][j]) - float64(b[k][j])
			sum, sumAbs, seq = sum+d, sumAbs+math.Abs(d), seq+d
			g.MaxAbs = max(g.MaxAbs, math.Abs(d))
			g.Tokens++
		}
		g.MaxSeqDiff = max(g.MaxSeqDiff, math.Abs(seq))
	}
	if g.Tokens > 0 {
		g.Mean, g.MeanAbs = sum/float64(g.Tokens), sumAbs/float64(g.Tokens)
	}
	return g
}

// stepMetrics are the metrics compared per step. The gradient norm is
// not among them: SkyRL tx reports none, and the two runs train
// different parameters (every one here, a LoRA adapter there).
var stepMetrics = []struct{ key, label, format string }{
	{"reward_mean", "reward", "%.3f"},
	{"zero_variance_frac", "equal-reward groups", "%.2f"},
	{"response_len_mean", "response tokens", "%.1f"},
	{"loss/pg", "loss/pg", "%.3g"},
	{"clip_low_frac", "clipped low", "%.3f"},
	{"clip_high_frac", "clipped high", "%.3f"},
	{"step_s", "s/step", "%.0f"},
}

func compareCmd(args []string) error {
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	dir := fs.String("dir", "runs/peers/skyrl", "the section's directory (run-local, run-skyrl, logprobs.json)")
	doc := fs.String("doc", "docs/peers.md", "the Markdown file whose skyrl blocks are replaced")
	fs.Parse(args)
	local, err := readMetrics(filepath.Join(*dir, "run-local", rundir.MetricsFile))
	if err != nil {
		return err
	}
	skyrl, err := readMetrics(filepath.Join(*dir, "run-skyrl", rundir.MetricsFile))
	if err != nil {
		return err
	}
	var lp Logprobs
	b, err := os.ReadFile(filepath.Join(*dir, "logprobs.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &lp); err != nil {
		return fmt.Errorf("logprobs.json: %w", err)
	}
	return docblock.Replace(*doc, map[string]string{"skyrl-steps": stepsTable(local, skyrl), "skyrl-logprobs": logprobsTable(lp)})
}

// readMetrics reads a run's metrics.jsonl, one map per step.
func readMetrics(path string) ([]map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []map[string]float64
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]float64
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func stepsTable(local, skyrl []map[string]float64) string {
	var b strings.Builder
	b.WriteString("| step | run |")
	for _, m := range stepMetrics {
		b.WriteString(" " + m.label + " |")
	}
	b.WriteString("\n| ---: | --- |" + strings.Repeat(" ---: |", len(stepMetrics)) + "\n")
	for i := range max(len(local), len(skyrl)) {
		for _, run := range []struct {
			name string
			rows []map[string]float64
		}{{"rlvr engine", local}, {"SkyRL tx", skyrl}} {
			if i >= len(run.rows) {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s |", i+1, run.name)
			for _, m := range stepMetrics {
				v, ok := run.rows[i][m.key]
				if !ok {
					b.WriteString(" – |")
					continue
				}
				fmt.Fprintf(&b, " "+m.format+" |", v)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func logprobsTable(lp Logprobs) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d sequences, %d sampled tokens, from %d prompts.\n\n", lp.Sequences, lp.Tokens, lp.Prompts)
	b.WriteString("| a − b | mean abs(a − b) | max abs(a − b) | mean a − b | max abs(Σ a − b) over a sequence |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, r := range []struct {
		name string
		g    Gap
	}{{"SkyRL sampler − rlvr engine", lp.SamplerVsRLVR}, {"SkyRL forward − rlvr engine", lp.ForwardVsRLVR}, {"SkyRL sampler − SkyRL forward", lp.SamplerVsRemFw}} {
		fmt.Fprintf(&b, "| %s | %.2e | %.2e | %+.2e | %.2e |\n", r.name, r.g.MeanAbs, r.g.MaxAbs, r.g.Mean, r.g.MaxSeqDiff)
	}
	return b.String()
}
