package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/eval"
	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/sample"
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
	var o collectFlags
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
serve, vLLM, SGLang, llama.cpp, Ollama, OpenAI; MODEL defaults to NAME), or a
local model, --expert NAME=PATH (a Hugging Face directory, .gguf file or
llama2.c .bin file). --experts FILE gives them as a YAML list in the schema of
a training config's consultation.experts (name; url, model, world, reply,
policy or kind; api, system, max_tokens, temperature, …); the settings an
entry leaves unset take the flags' values. Experts are numbered 1, 2, … in
the order given, the file's before the --expert flags'; expert i's prompt P_i
is --prompt with {i} (and {name}) filled in. With api completion the expert
continues the question followed by P_i; with api chat, P_i is the system
message and the question the user's. --api is the API of every expert that
does not name its own (a local model without a chat template then gets the
completion); an entry of the file written api: chat on such a model is an
error. Without --expert or --experts, on the built-in world, the world's
scripted experts E1-E3 are served on loopback in this process and asked over
HTTP.

An entry with its own system (a persona, such as "You are a careful math
teacher.") is asked under it instead of P_i, after --system as P_i would be;
D_ME still records P_i as the expert prompt, the one the policy is trained
behind, and the persona beside it. An entry of kind: reference answers every
question with the dataset's own worked solution and its gold answer: a named
copy of Expert0 to mix with model personas. It is an oracle, not a model, and
a dataset without reference solutions is refused.

Requests have a per-attempt --timeout and an overall --deadline per answer,
are retried (--retries) with backoff on 429, 5xx, timeouts and dropped
connections, and at most --concurrency are in flight per expert. A failed
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
  rlvr experts collect --data gsm8k --data-file ../shared/data/gsm8k/train.jsonl --experts experts.yaml --out gsm8k-dme.jsonl
  rlvr serve --world-experts &
  rlvr experts collect --expert E1=http://127.0.0.1:8000/v1 --expert E2=http://127.0.0.1:8000/v1 --out dme.jsonl
  rlvr experts collect --data gsm8k --data-file ../shared/data/gsm8k/train.jsonl \
      --expert r1=http://gpu1:8000/v1#deepseek-r1 --expert qwen=runs/qwen-sft --out gsm8k-dme.jsonl
  rlvr experts analyze dme.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			experts, err := o.check(cmd.Flags())
			if err != nil {
				return err
			}
			examples, err := o.examples(cmd.Flags())
			if err != nil {
				return err
			}
			if err := expert.CheckSolutions(o.expertsFile, experts[:o.fromFile], o.dataset(), examples); err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			if len(o.experts) == 0 && o.expertsFile == "" {
				fmt.Fprintf(stderr, "no --expert: asking the world's scripted experts E1-E%d, served on loopback\n", len(experts))
			}
			for _, e := range experts {
				if e.Model != "" {
					if err := ensureWorldModel(cmd.Context(), e.Model); err != nil {
						return fmt.Errorf("expert %s: %w", e.Name, err)
					}
				}
			}
			pool, err := expert.Open(experts, expert.Options{Seed: o.seed, Batch: o.batch, Warn: func(msg string) { fmt.Fprintln(stderr, msg) }})
			if err != nil {
				return err
			}
			defer pool.Close()
			var bar *progressbar.ProgressBar
			cfg := collect.Config{
				Experts:         o.poolExperts(pool),
				ReferencePrompt: expert.RenderPrompt(o.prompt, 0, collect.ReferenceName),
				Cache:           o.cache,
				RetryFailures:   o.retryFailures,
				Warn:            func(msg string) { fmt.Fprintln(stderr, "rlvr: warning:", msg) },
				Start: func(cached, pending int) {
					if cached > 0 {
						fmt.Fprintf(stderr, "%s holds %d answers; asking for %d more\n", o.cache, cached, pending)
					}
					if pending > 0 {
						bar = newBar(cmd, pending)
					}
				},
				Progress: func(collect.Record) {
					if bar != nil {
						bar.Add(1)
					}
				},
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
			if err := collect.WriteDME(o.out, res.Records); err != nil {
				return err
			}
			if o.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res.Summary)
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Summary.Table())
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d lines of D_ME to %s\n", len(res.Records), o.out)
			return nil
		},
	}
	o.bind(cmd.Flags())
	pathFlags(cmd, "data-file", "experts", "out", "cache")
	return cmd
}

// collectFlags are experts collect's flags.
type collectFlags struct {
	data, dataFile, api, prompt, system, out, cache  string
	apiKey, expertsFile                              string
	levels                                           []int
	experts, stop                                    []string
	problems, concurrency, retries, maxTokens, batch int
	seed                                             uint64
	temperature                                      float32
	timeout, deadline                                time.Duration
	retryFailures, json                              bool
	warmup                                           float64
	// fromFile counts the experts of --experts, which come first.
	fromFile int
}

func (o *collectFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&o.data, "data", "world", "world, or a dataset: "+strings.Join(task.Names(), ", "))
	f.StringVar(&o.dataFile, "data-file", "", "the dataset's file (JSONL, JSON or Parquet)")
	f.IntSliceVar(&o.levels, "levels", []int{3, 4, 5, 6}, "world levels (with --data world)")
	f.IntVar(&o.problems, "problems", 100, "questions per level of the world; for a dataset, its first N (unset: all of them)")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the world's questions and of sampling")
	f.Float64Var(&o.warmup, "warmup-fraction", 0, "ask only the questions of the warm-up side of training's split (data.warmup_fraction; 0: every question)")
	f.StringArrayVar(&o.experts, "expert", nil, "an expert: NAME=URL[#MODEL] for an OpenAI-compatible endpoint, NAME=PATH for a local model (repeatable; numbered 1, 2, … in order)")
	f.StringVar(&o.expertsFile, "experts", "", "a YAML file listing experts in the schema of a training config's consultation.experts (url, model, kind: reference, api, system, max_tokens, …), numbered before the --expert flags")
	f.StringVar(&o.api, "api", "", "how experts that name no api are asked: completion or chat (default: completion for the world, chat for a dataset)")
	f.StringVar(&o.prompt, "prompt", "", `expert prompt P_i, {i} the expert's index and {name} its name, \n a newline (default: @E{i}\n for the world, "`+expert.DefaultPrompt+`" for a dataset)`)
	f.StringVar(&o.system, "system", "", "instruction written before every expert's P_i (or its own system), as training writes chat.system before an expert's persona (a chat's system message; after the question for a completion), so that experts answer in the format the run asks for")
	f.StringVar(&o.out, "out", "dme.jsonl", "D_ME output file (JSON Lines)")
	f.StringVar(&o.cache, "cache", "", "cache of answers collected so far (default: --out with .cache appended)")
	f.IntVar(&o.concurrency, "concurrency", 8, "requests in flight per expert")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "time limit of one attempt of a request")
	f.IntVar(&o.retries, "retries", 2, "retries of a request after a 429, 5xx, timeout or dropped connection")
	f.DurationVar(&o.deadline, "deadline", 10*time.Minute, "time limit of one answer, retries included")
	f.IntVar(&o.maxTokens, "max-tokens", 2048, "tokens per answer")
	f.Float32Var(&o.temperature, "temperature", 0, "sampling temperature (0: greedy)")
	f.StringArrayVar(&o.stop, "stop", nil, "stop string (repeatable)")
	f.IntVar(&o.batch, "batch", 16, "prompts a local model answers at once")
	f.StringVar(&o.apiKey, "api-key", "", "bearer token for the endpoints (default: $"+apiKeyEnv+", which keeps it out of the process list)")
	f.BoolVar(&o.retryFailures, "retry-failures", true, "ask again for the answers the cache holds as failures")
	f.BoolVar(&o.json, "json", false, "print the summary as JSON")
}

// check reports every problem with the flags at once, fills the defaults
// that depend on other flags, and returns the experts to ask, checked:
// the --expert flags, or on the world without any, its scripted experts.
func (o *collectFlags) check(flags *pflag.FlagSet) ([]expert.Config, error) {
	isWorld := o.data == "world"
	var c flagCheck
	switch {
	case isWorld:
		if flags.Changed("data-file") {
			c.add("data-file", "is for a dataset, not --data world")
		}
		c.worldLevels(o.levels)
	case !slices.Contains(task.Names(), o.data):
		c.add("data", "%q: want world or one of %s", o.data, strings.Join(task.Names(), ", "))
	default:
		if o.dataFile == "" {
			c.add("data-file", "is required with --data %s", o.data)
		} else {
			c.file("data-file", o.dataFile)
		}
		if flags.Changed("levels") {
			c.add("levels", "is for --data world")
		}
	}
	if math.IsNaN(o.warmup) || o.warmup < 0 || o.warmup >= 1 {
		c.add("warmup-fraction", "%v: must be in [0, 1)", o.warmup)
	}
	if isWorld || flags.Changed("problems") {
		c.intIn("problems", o.problems, 1, maxProblems)
	}
	if isWorld {
		c.worldTotal(o.levels, o.problems)
	}
	if o.api != "" && o.api != expert.APICompletion && o.api != expert.APIChat {
		c.add("api", "%q: want %s or %s", o.api, expert.APICompletion, expert.APIChat)
	}
	if o.prompt == "" && !flags.Changed("prompt") {
		o.prompt = expert.DefaultPrompt
		if isWorld {
			o.prompt = expert.WorldPrompt
		}
	}
	o.prompt = withNewlines(o.prompt)
	if !strings.Contains(o.prompt, "{i}") && !strings.Contains(o.prompt, "{name}") {
		c.add("prompt", "%q has neither {i} nor {name}: every expert would get the same prompt", o.prompt)
	}
	if flags.Changed("system") && strings.TrimSpace(o.system) == "" {
		c.add("system", "is empty")
	}
	// The instruction first, then the persona that tells the experts
	// apart, in one message: eval.SystemPrompt, as training renders them.
	o.prompt = eval.SystemPrompt(withNewlines(o.system), o.prompt)
	var fromFile []expert.Config
	if o.expertsFile != "" {
		before := len(c.problems)
		c.file("experts", o.expertsFile)
		if len(c.problems) == before {
			var err error
			if fromFile, err = readExpertsFile(o.expertsFile); err != nil {
				c.add("experts", "%v", err)
			}
		}
	}
	flagExperts := parseExpertFlags(&c, o.experts)
	if len(fromFile)+len(flagExperts) > maxExperts {
		c.add("experts", "%s and --expert give %d experts: at most %d", o.expertsFile, len(fromFile)+len(flagExperts), maxExperts)
	}
	c.intIn("concurrency", o.concurrency, 1, maxConcurrency)
	c.intIn("retries", o.retries, 0, maxRetries)
	c.intIn("max-tokens", o.maxTokens, 1, maxNewTokens)
	c.intIn("batch", o.batch, 1, maxSamples)
	if o.timeout <= 0 || o.timeout > maxDeadline {
		c.add("timeout", "%v: must be in (0, %v]", o.timeout, maxDeadline)
	}
	if o.deadline <= 0 || o.deadline > maxDeadline {
		c.add("deadline", "%v: must be in (0, %v]", o.deadline, maxDeadline)
	}
	checkSampling(&c, sample.Params{Temperature: o.temperature, TopP: 1, Stop: o.stop}, "")
	c.outFile("out", o.out)
	if o.cache == "" && !flags.Changed("cache") {
		o.cache = o.out + ".cache"
	}
	c.outFile("cache", o.cache)
	if o.out != "" && o.cache != "" && filepath.Clean(o.out) == filepath.Clean(o.cache) {
		c.add("cache", "%s is --out too: the cache and D_ME must be different files", o.cache)
	}
	if len(flagExperts) == 0 && o.expertsFile == "" && !isWorld {
		c.add("expert", "is required with --data %s (NAME=URL[#MODEL] or NAME=PATH, or --experts FILE)", o.data)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	if len(flagExperts) == 0 && len(fromFile) == 0 {
		flagExperts = expert.WorldPool()
	}
	retries := o.retries
	if retries == 0 {
		retries = -1 // expert.Config's "none"
	}
	for i := range fromFile {
		o.fillFromFlags(&fromFile[i], retries, flags.Changed("api-key"))
	}
	for i := range flagExperts {
		e := &flagExperts[i]
		e.Concurrency, e.Timeout, e.Retries, e.Deadline = o.concurrency, o.timeout, retries, o.deadline
		e.MaxTokens, e.Temperature, e.Stop = o.maxTokens, o.temperature, o.stop
		if e.URL != "" {
			if e.APIKey = o.apiKey; !flags.Changed("api-key") {
				e.APIKey, e.APIKeyEnv = "", apiKeyEnv
			}
		}
	}
	// --api is the default of every expert that names no api of its own.
	chat := o.api == expert.APIChat || o.api == "" && !isWorld
	var errs []string
	if err := expert.CheckAll(o.expertsFile, fromFile, chat); err != nil {
		errs = append(errs, err.Error())
	}
	if err := expert.CheckAll("--expert", flagExperts, chat); err != nil {
		errs = append(errs, err.Error())
	}
	names := map[string]bool{}
	for i, e := range fromFile {
		if e.Name == collect.ReferenceName {
			errs = append(errs, fmt.Sprintf("%s[%d]: the name %q names Expert0, the dataset's reference solution (give a kind: reference expert another name)", o.expertsFile, i, e.Name))
		}
		names[e.Name] = true
	}
	for _, e := range flagExperts {
		if names[e.Name] {
			errs = append(errs, fmt.Sprintf("--expert %s: the name is given in %s too", e.Name, o.expertsFile))
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	o.fromFile = len(fromFile)
	return append(fromFile, flagExperts...), nil
}

// dataset names the flags' dataset for a message.
func (o *collectFlags) dataset() string {
	if o.data == "world" {
		return "the world"
	}
	return o.data + " (" + o.dataFile + ")"
}

// poolExperts are the pool's members as the collection's experts: expert
// i prompted with P_i, and one with a persona of its own asked under it,
// after --system's instruction as P_i is.
func (o *collectFlags) poolExperts(pool *expert.Pool) []collect.Expert {
	xs := collect.PoolExperts(pool, o.prompt)
	for i := range xs {
		if xs[i].System != "" {
			xs[i].System = eval.SystemPrompt(withNewlines(o.system), xs[i].System)
		}
	}
	return xs
}

// examples are the questions the flags ask for.
func (o *collectFlags) examples(flags *pflag.FlagSet) ([]task.Example, error) {
	switch {
	case o.data == "world" && o.warmup > 0:
		return warmupWorld(o.seed, o.problems, o.levels, o.warmup), nil
	case o.data == "world":
		return world.Examples(o.seed, o.problems*len(o.levels), o.levels), nil
	}
	all, err := task.Load(o.data, o.dataFile)
	if err != nil {
		return nil, err
	}
	if o.warmup > 0 {
		all = slices.DeleteFunc(all, func(e task.Example) bool { return !task.InWarmup(e, o.warmup) })
	}
	if flags.Changed("problems") {
		all = all[:min(o.problems, len(all))]
	}
	return all, nil
}

// parseExpertFlags reads --expert values, NAME=URL[#MODEL] or NAME=PATH,
// as experts' configs, recording every problem in c. A target with a
// scheme (://) is a URL, checked as one, so that a mistyped URL is not
// taken for a path.
func parseExpertFlags(c *flagCheck, specs []string) []expert.Config {
	if len(specs) > maxExperts {
		c.add("expert", "given %d times: at most %d experts", len(specs), maxExperts)
		return nil
	}
	var out []expert.Config
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
		}
		e := expert.Config{Name: name}
		if strings.Contains(target, "://") {
			e.URL, e.RemoteModel, _ = strings.Cut(target, "#")
			c.url("expert", e.URL)
		} else {
			e.Model = target
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
