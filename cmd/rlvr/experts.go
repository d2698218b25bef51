package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/expert/collect"
	"rlvr/expert/prompt"
	"rlvr/internal/flagcheck"
	"rlvr/task"
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
	o := collect.Options{Models: localModels}
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "collect",
		Short:   "Ask experts for an answer to every question: MEML-GRPO's D_ME",
		Long:    expertsCollectLong,
		Example: expertsCollectExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Given = cmd.Flags().Changed
			o.Progress = func(pending int) (func(), func()) {
				bar := newBar(cmd, pending)
				return func() { bar.Add(1) }, func() { bar.Finish() }
			}
			res, err := o.Run(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res.Summary)
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Summary.Table())
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d lines of D_ME to %s\n", len(res.Records), o.Out)
			return nil
		},
	}
	bindCollectFlags(cmd.Flags(), &o, &asJSON)
	pathFlags(cmd, "data-file", "experts", "out", "cache")
	return cmd
}

// expertsCollectLong is rlvr experts collect's help.
const expertsCollectLong = `collect asks N experts for an answer to every question of a dataset, verifies
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
depends only on its text, so the split agrees across files).`

// expertsCollectExample is rlvr experts collect's examples.
const expertsCollectExample = `  rlvr experts collect --out dme.jsonl
  rlvr experts collect --data gsm8k --data-file ../shared/data/gsm8k/train.jsonl --experts experts.yaml --out gsm8k-dme.jsonl
  rlvr serve --world-experts &
  rlvr experts collect --expert E1=http://127.0.0.1:8000/v1 --expert E2=http://127.0.0.1:8000/v1 --out dme.jsonl
  rlvr experts collect --data gsm8k --data-file ../shared/data/gsm8k/train.jsonl \
      --expert r1=http://gpu1:8000/v1#deepseek-r1 --expert qwen=runs/qwen-sft --out gsm8k-dme.jsonl
  rlvr experts analyze dme.jsonl`

// bindCollectFlags binds rlvr experts collect's flags to o, and --json to
// asJSON.
func bindCollectFlags(f *pflag.FlagSet, o *collect.Options, asJSON *bool) {
	f.StringVar(&o.Data, "data", "world", "world, or a dataset: "+strings.Join(task.Names(), ", "))
	f.StringVar(&o.DataFile, "data-file", "", "the dataset's file (JSONL, JSON or Parquet)")
	f.IntSliceVar(&o.Levels, "levels", []int{3, 4, 5, 6}, "world levels (with --data world)")
	f.IntVar(&o.Problems, "problems", 100, "questions per level of the world; for a dataset, its first N (unset: all of them)")
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the world's questions and of sampling")
	f.Float64Var(&o.Warmup, "warmup-fraction", 0, "ask only the questions of the warm-up side of training's split (data.warmup_fraction; 0: every question)")
	f.StringArrayVar(&o.Expert, "expert", nil, "an expert: NAME=URL[#MODEL] for an OpenAI-compatible endpoint, NAME=PATH for a local model (repeatable; numbered 1, 2, … in order)")
	f.StringVar(&o.ExpertsFile, "experts", "", "a YAML file listing experts in the schema of a training config's consultation.experts (url, model, kind: reference, api, system, max_tokens, …), numbered before the --expert flags")
	f.StringVar(&o.API, "api", "", "how experts that name no api are asked: completion or chat (default: completion for the world, chat for a dataset)")
	f.StringVar(&o.Prompt, "prompt", "", `expert prompt P_i, {i} the expert's index and {name} its name, \n a newline (default: @E{i}\n for the world, "`+prompt.Paper+`" for a dataset)`)
	f.StringVar(&o.System, "system", "", "instruction written before every expert's P_i (or its own system), as training writes chat.system before an expert's persona (a chat's system message; after the question for a completion), so that experts answer in the format the run asks for")
	f.StringVar(&o.Out, "out", "dme.jsonl", "D_ME output file (JSON Lines)")
	f.StringVar(&o.Cache, "cache", "", "cache of answers collected so far (default: --out with .cache appended)")
	f.IntVar(&o.Concurrency, "concurrency", 8, "requests in flight per expert")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "time limit of one attempt of a request")
	f.IntVar(&o.Retries, "retries", 2, "retries of a request after a 429, 5xx, timeout or dropped connection")
	f.DurationVar(&o.Deadline, "deadline", 10*time.Minute, "time limit of one answer, retries included")
	f.IntVar(&o.MaxTokens, "max-tokens", 2048, "tokens per answer")
	f.Float32Var(&o.Temperature, "temperature", 0, "sampling temperature (0: greedy)")
	f.StringArrayVar(&o.Stop, "stop", nil, "stop string (repeatable)")
	f.IntVar(&o.Batch, "batch", 16, "prompts a local model answers at once")
	f.StringVar(&o.APIKey, "api-key", "", "bearer token for the endpoints (default: $"+collect.APIKeyEnv+", which keeps it out of the process list)")
	f.BoolVar(&o.RetryFailures, "retry-failures", true, "ask again for the answers the cache holds as failures")
	f.BoolVar(asJSON, "json", false, "print the summary as JSON")

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
			var c flagcheck.Check
			c.File("FILE", args[0])
			if err := c.Err(); err != nil {
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
