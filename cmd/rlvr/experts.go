package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/task"
	"rlvr/task/world"
)

// apiKeyEnv is the environment variable experts collect reads the
// endpoints' API key from when --api-key is not given.
const apiKeyEnv = "RLVR_API_KEY"

// Bounds on experts collect's flags.
const (
	maxConcurrency = 1024
	maxRetries     = 100
	maxExperts     = 64
	maxDeadline    = 24 * time.Hour
)

func expertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experts",
		Short: "Collect experts' answers into MEML-GRPO's D_ME, and analyze it (Table 1)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(expertsCollectCmd(), expertsAnalyzeCmd())
	return cmd
}

func expertsCollectCmd() *cobra.Command {
	var (
		data, dataFile, api, prompt, out, cachePath, apiKey string
		levels                                              []int
		specs, stop                                         []string
		problems, concurrency, retries, maxTokens, batch    int
		seed                                                uint64
		temperature                                         float32
		timeout, deadline                                   time.Duration
		retryFailures, asJSON                               bool
		warmup                                              float64
	)
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Ask experts for an answer to every question: MEML-GRPO's D_ME",
		Long: `collect asks N experts for an answer to every question of a dataset, verifies
each answer against the gold one, and writes MEML-GRPO's multi-expert dataset
D_ME to --out as JSON Lines: one line per question and expert, with the
question's id, source, text and gold answer, the expert's index and name, the
expert prompt, the response, whether it is correct, and the kind of failure
when the expert gave no usable answer. Expert0 is the dataset's own reference
solution, verified like the others.

An expert is an OpenAI-compatible endpoint, --expert NAME=URL[#MODEL] (rlvr
serve, vLLM, SGLang, llama.cpp, Ollama, OpenAI), or a local model,
--expert NAME=PATH (a Hugging Face directory, .gguf file or llama2.c .bin file). Experts
are numbered 1, 2, … in the order given; expert i's prompt P_i is --prompt with
{i} (and {name}) filled in. With --api completion the expert continues the
question followed by P_i; with --api chat, P_i is the system message and the
question the user's (a local model without a chat template gets the
completion). Without --expert, on the built-in world, the world's scripted
experts E1-E3 are served on loopback in this process and asked over HTTP.

Requests have a per-attempt --timeout and an overall --deadline per answer,
are retried (--retries) with backoff on 429, 5xx, timeouts and dropped
connections, and at most --concurrency are in flight per endpoint. A failed
answer is recorded with its kind (timeout, connection, rate-limited,
server-error, refused, malformed, empty) and collection goes on.

Every answer is appended to --cache as it arrives, one synced line at a time,
so a collection stopped at any moment (even by kill -9) loses at most the
answer being written; running the same command again asks only for the
answers the cache lacks (and, with --retry-failures, for the failed ones).

MEML-GRPO fine-tunes on D_ME (MEF) with 20% of the training questions and
runs RL on the other 80%: --warmup-fraction 0.2 asks only the questions on the
warm-up side of that split, the one a training config with
data.warmup_fraction 0.2 and data.part warmup trains on (a question's side
depends only on its text, so the split agrees across files).`,
		Example: `  rlvr experts collect --out dme.jsonl
  rlvr serve --world-experts &
  rlvr experts collect --expert E1=http://127.0.0.1:8000/v1#E1 --expert E2=http://127.0.0.1:8000/v1#E2 --out dme.jsonl
  rlvr experts collect --data gsm8k --data-file ../shared/data/gsm8k/train.jsonl \
      --expert r1=http://gpu1:8000/v1#deepseek-r1 --expert qwen=runs/qwen-sft --out gsm8k-dme.jsonl
  rlvr experts analyze dme.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			flags := cmd.Flags()
			isWorld := data == "world"
			var c flagCheck
			switch {
			case isWorld:
				if flags.Changed("data-file") {
					c.add("data-file", "is for a dataset, not --data world")
				}
				c.worldLevels(levels)
			case !slices.Contains(task.Names(), data):
				c.add("data", "%q: want world or one of %s", data, strings.Join(task.Names(), ", "))
			default:
				if dataFile == "" {
					c.add("data-file", "is required with --data %s", data)
				} else {
					c.file("data-file", dataFile)
				}
				if flags.Changed("levels") {
					c.add("levels", "is for --data world")
				}
			}
			if math.IsNaN(warmup) || warmup < 0 || warmup >= 1 {
				c.add("warmup-fraction", "%v: must be in [0, 1)", warmup)
			}
			if isWorld || flags.Changed("problems") {
				c.intIn("problems", problems, 1, maxProblems)
			}
			if isWorld {
				c.worldTotal(levels, problems)
			}
			switch {
			case api == "" && isWorld:
				api = collect.APICompletion
			case api == "":
				api = collect.APIChat
			case api != collect.APICompletion && api != collect.APIChat:
				c.add("api", "%q: want %s or %s", api, collect.APICompletion, collect.APIChat)
			}
			if prompt == "" && !flags.Changed("prompt") {
				prompt = collect.DefaultPrompt
				if isWorld {
					prompt = `@E{i}\n`
				}
			}
			prompt = withNewlines(prompt)
			if !strings.Contains(prompt, "{i}") && !strings.Contains(prompt, "{name}") {
				c.add("prompt", "%q has neither {i} nor {name}: every expert would get the same prompt", prompt)
			}
			parsed := parseExpertFlags(&c, specs)
			c.intIn("concurrency", concurrency, 1, maxConcurrency)
			c.intIn("retries", retries, 0, maxRetries)
			c.intIn("max-tokens", maxTokens, 1, maxNewTokens)
			c.intIn("batch", batch, 1, maxSamples)
			if timeout <= 0 || timeout > maxDeadline {
				c.add("timeout", "%v: must be in (0, %v]", timeout, maxDeadline)
			}
			if deadline <= 0 || deadline > maxDeadline {
				c.add("deadline", "%v: must be in (0, %v]", deadline, maxDeadline)
			}
			checkSampling(&c, sample.Params{Temperature: temperature, TopP: 1, Stop: stop}, "")
			c.outFile("out", out)
			if cachePath == "" && !flags.Changed("cache") {
				cachePath = out + ".cache"
			}
			c.outFile("cache", cachePath)
			if out != "" && cachePath != "" && filepath.Clean(out) == filepath.Clean(cachePath) {
				c.add("cache", "%s is --out too: the cache and D_ME must be different files", cachePath)
			}
			if len(parsed) == 0 && !isWorld {
				c.add("expert", "is required with --data %s (NAME=URL[#MODEL] or NAME=PATH)", data)
			}
			if err := c.err(); err != nil {
				return err
			}
			if !flags.Changed("api-key") {
				apiKey = os.Getenv(apiKeyEnv)
			}

			var examples []task.Example
			switch {
			case isWorld && warmup > 0:
				examples = warmupWorld(seed, problems, levels, warmup)
			case isWorld:
				examples = world.Examples(seed, problems*len(levels), levels)
			default:
				all, err := task.Load(data, dataFile)
				if err != nil {
					return err
				}
				if warmup > 0 {
					all = slices.DeleteFunc(all, func(e task.Example) bool { return !task.InWarmup(e, warmup) })
				}
				examples = all
				if flags.Changed("problems") {
					examples = all[:min(problems, len(all))]
				}
			}
			if len(parsed) == 0 {
				base, stopServer, err := serve.Loopback(serve.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, expert.WorldModels()...)
				if err != nil {
					return err
				}
				defer stopServer()
				for s := 1; s < len(world.Styles); s++ {
					name := fmt.Sprintf("E%d", s)
					parsed = append(parsed, expertFlag{name: name, url: base, model: name})
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "no --expert: asking the world's scripted experts E1-E%d, served on %s\n", len(world.Styles)-1, base)
			}
			params := sample.Params{MaxTokens: maxTokens, Temperature: temperature, Stop: stop, Seed: seed}
			clients := map[string]*client.Client{}
			cfg := collect.Config{
				ReferencePrompt: collect.RenderPrompt(prompt, 0, collect.ReferenceName),
				Cache:           cachePath,
				RetryFailures:   retryFailures,
				Warn:            func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), "rlvr: warning:", msg) },
			}
			for i, p := range parsed {
				ex := collect.Expert{Name: p.name, Index: i + 1, API: api}
				ex.Prompt = collect.RenderPrompt(prompt, ex.Index, ex.Name)
				if p.url != "" {
					cl := clients[p.url]
					if cl == nil {
						tries := retries
						if tries == 0 {
							tries = -1 // the client's "none"
						}
						cl = client.New(client.Config{BaseURL: p.url, APIKey: apiKey, Timeout: timeout, MaxRetries: tries, MaxConcurrent: concurrency})
						clients[p.url] = cl
					}
					ex.Model = p.model
					ex.Answerer = &collect.Endpoint{Client: cl, Model: p.model, Params: params, Concurrency: concurrency, Deadline: deadline}
				} else {
					l, err := openModel(p.path, "")
					if err != nil {
						return fmt.Errorf("--expert %s: %w", p.name, err)
					}
					ex.Model = p.path
					b := &collect.Batched{Gen: eval.NewLocal(l), Params: params, Batch: batch}
					if api == collect.APIChat {
						if l.Chat != nil {
							b.Chat = l.Chat
						} else {
							ex.API = collect.APICompletion
							fmt.Fprintf(cmd.ErrOrStderr(), "expert %s: %s has no chat template; it continues the question followed by its prompt\n", p.name, p.path)
						}
					}
					ex.Answerer = b
				}
				cfg.Experts = append(cfg.Experts, ex)
			}
			var bar *progressbar.ProgressBar
			cfg.Start = func(cached, pending int) {
				if cached > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s holds %d answers; asking for %d more\n", cachePath, cached, pending)
				}
				if pending > 0 {
					bar = newBar(cmd, pending)
				}
			}
			cfg.Progress = func(collect.Record) {
				if bar != nil {
					bar.Add(1)
				}
			}
			res, err := collect.Collect(cmd.Context(), examples, cfg)
			if bar != nil {
				bar.Finish()
			}
			if err != nil {
				if res != nil && cmd.Context().Err() != nil {
					return fmt.Errorf("%w; run the same command again to continue", err)
				}
				return err
			}
			if err := collect.WriteDME(out, res.Records); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res.Summary)
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Summary.Table())
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d lines of D_ME to %s\n", len(res.Records), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "world", "world, or a dataset: "+strings.Join(task.Names(), ", "))
	f.StringVar(&dataFile, "data-file", "", "the dataset's file (JSONL, JSON or Parquet)")
	f.IntSliceVar(&levels, "levels", []int{3, 4, 5, 6}, "world levels (with --data world)")
	f.IntVar(&problems, "problems", 100, "questions per level of the world; for a dataset, its first N (unset: all of them)")
	f.Uint64Var(&seed, "seed", 0, "seed of the world's questions and of sampling")
	f.Float64Var(&warmup, "warmup-fraction", 0, "ask only the questions of the warm-up side of training's split (data.warmup_fraction; 0: every question)")
	f.StringArrayVar(&specs, "expert", nil, "an expert: NAME=URL[#MODEL] for an OpenAI-compatible endpoint, NAME=PATH for a local model (repeatable; numbered 1, 2, … in order)")
	f.StringVar(&api, "api", "", "how experts are asked: completion or chat (default: completion for the world, chat for a dataset)")
	f.StringVar(&prompt, "prompt", "", `expert prompt P_i, {i} the expert's index and {name} its name, \n a newline (default: @E{i}\n for the world, "`+collect.DefaultPrompt+`" for a dataset)`)
	f.StringVar(&out, "out", "dme.jsonl", "D_ME output file (JSON Lines)")
	f.StringVar(&cachePath, "cache", "", "cache of answers collected so far (default: --out with .cache appended)")
	f.IntVar(&concurrency, "concurrency", 8, "requests in flight per endpoint")
	f.DurationVar(&timeout, "timeout", 2*time.Minute, "time limit of one attempt of a request")
	f.IntVar(&retries, "retries", 2, "retries of a request after a 429, 5xx, timeout or dropped connection")
	f.DurationVar(&deadline, "deadline", 10*time.Minute, "time limit of one answer, retries included")
	f.IntVar(&maxTokens, "max-tokens", 2048, "tokens per answer")
	f.Float32Var(&temperature, "temperature", 0, "sampling temperature (0: greedy)")
	f.StringArrayVar(&stop, "stop", nil, "stop string (repeatable)")
	f.IntVar(&batch, "batch", 16, "prompts a local model answers at once")
	f.StringVar(&apiKey, "api-key", "", "bearer token for the endpoints (default: $"+apiKeyEnv+", which keeps it out of the process list)")
	f.BoolVar(&retryFailures, "retry-failures", true, "ask again for the answers the cache holds as failures")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}

// expertFlag is one parsed --expert.
type expertFlag struct {
	name       string
	url, model string // an endpoint
	path       string // a local model
}

// parseExpertFlags reads --expert values, NAME=URL[#MODEL] or NAME=PATH,
// recording every problem in c.
func parseExpertFlags(c *flagCheck, specs []string) []expertFlag {
	if len(specs) > maxExperts {
		c.add("expert", "given %d times: at most %d experts", len(specs), maxExperts)
		return nil
	}
	var out []expertFlag
	names := map[string]bool{}
	for _, s := range specs {
		name, target, ok := strings.Cut(s, "=")
		switch {
		case !ok || target == "":
			c.add("expert", "%q: want NAME=URL[#MODEL] or NAME=PATH", s)
			continue
		case name == "" || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
			c.add("expert", "%q: the name must be non-empty, without spaces or control characters", s)
			continue
		case name == collect.ReferenceName:
			c.add("expert", "%q: %q names Expert0, the dataset's reference solution", s, name)
			continue
		case names[name]:
			c.add("expert", "%q: the name %s is given twice", s, name)
			continue
		}
		names[name] = true
		e := expertFlag{name: name}
		if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
			e.url, e.model, _ = strings.Cut(target, "#")
			c.url("expert", e.url)
		} else {
			e.path = target
			c.model("expert", target)
		}
		out = append(out, e)
	}
	return out
}

func expertsAnalyzeCmd() *cobra.Command {
	var (
		opt    collect.AnalyzeOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "analyze FILE",
		Short: "Tabulate a D_ME file as MEML-GRPO's Table 1",
		Long: `analyze reads a D_ME file written by rlvr experts collect and prints MEML-GRPO's
Table 1: per expert, its errors with their rate and 95% Wilson interval and how
many of them another expert gets right; the errors all experts share; and the
errors each pair of experts shares. The reference solution (Expert0) is left
out unless --reference; a question on which an expert failed to answer is left
out unless --failed-as-wrong. A malformed line is an error naming its line and
field.`,
		Example: `  rlvr experts analyze dme.jsonl
  rlvr experts analyze dme.jsonl --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			c.file("FILE", args[0])
			if err := c.err(); err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "--"))
			}
			t, err := collect.AnalyzeFile(args[0], opt)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(t)
			}
			fmt.Fprint(cmd.OutOrStdout(), t.Table())
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opt.Reference, "reference", false, "count Expert0, the reference solution, as an expert")
	f.BoolVar(&opt.FailedAsWrong, "failed-as-wrong", false, "count a failed answer as an error instead of leaving its question out")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// warmupWorld draws problems world questions of each level that lie on the
// warm-up side of a split at fraction f.
func warmupWorld(seed uint64, problems int, levels []int, f float64) []task.Example {
	var out []task.Example
	for _, lv := range levels {
		kept := 0
		for _, e := range world.Examples(seed+uint64(lv)*7919, int(float64(problems)/f)*2+64, []int{lv}) {
			if kept < problems && task.InWarmup(e, f) {
				out = append(out, e)
				kept++
			}
		}
	}
	return out
}
