package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
)

func evalCmd() *cobra.Command {
	var (
		modelPath, tokPath, endpoint, endpointModel, apiKey, data string
		levels                                                    []int
		problems, experts                                         int
		cfg                                                       eval.Config
		asJSON                                                    bool
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Score a model: greedy pass@1, pass@k, avg@k, maj@k, variance, per-expert accuracy",
		Long: `eval scores a local model or an OpenAI-compatible endpoint on the built-in
world or a dataset: greedy pass@1 with a 95% interval; with --k, pass@k (unbiased
estimator), avg@k, maj@k and the per-problem variance at --temperature; with
--experts N, each expert prompt's greedy accuracy, the error-overlap table
(errors, errors another expert gets right, errors shared by all) and the
experts' majority vote.`,
		Example: `  rlvr eval --levels 0,3,5 --k 8 --experts 4
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --endpoint http://localhost:8000/v1 --endpoint-model qwen`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			if endpoint != "" {
				c.url("endpoint", endpoint)
			} else {
				c.model("model", modelPath)
				if tokPath != "" {
					c.file("tokenizer", tokPath)
				}
			}
			name, path, isFile := strings.Cut(data, "=")
			switch {
			case data == "world":
				if len(levels) == 0 {
					c.add("levels", "is empty")
				}
				for _, lv := range levels {
					if lv < 0 || lv >= len(world.Levels) {
						c.add("levels", "%d: no such level (0 to %d)", lv, len(world.Levels)-1)
					}
				}
			case !isFile || !slices.Contains(task.Names(), name):
				c.add("data", "%q: want world or NAME=PATH, NAME one of %s", data, strings.Join(task.Names(), ", "))
			default:
				c.file("data", path)
				if cmd.Flags().Changed("levels") {
					c.add("levels", "is for --data world")
				}
			}
			c.intIn("problems", problems, 1, maxProblems)
			if data == "world" && problems >= 1 && problems*len(levels) > maxProblems {
				c.add("problems", "%d per level × %d levels: more than %d problems", problems, len(levels), maxProblems)
			}
			c.intIn("k", cfg.K, 0, maxSamples)
			checkSampling(&c, sample.Params{Temperature: cfg.Temperature, TopP: cfg.TopP}, "the --k samples are drawn at it; greedy pass@1 is always scored")
			c.intIn("max-tokens", cfg.MaxTokens, 1, maxNewTokens)
			c.intIn("experts", experts, 0, len(world.Styles))
			if err := c.err(); err != nil {
				return err
			}
			var examples []task.Example
			if data == "world" {
				examples = world.Examples(cfg.Seed+1000, problems*len(levels), levels)
			} else {
				all, err := task.Load(name, path)
				if err != nil {
					return err
				}
				task.Shuffle(all, cfg.Seed)
				examples = all[:min(problems, len(all))]
			}
			var gen eval.Generator
			if endpoint != "" {
				gen = &eval.Remote{Client: client.New(client.Config{BaseURL: endpoint, Model: endpointModel, APIKey: apiKey})}
			} else {
				l, err := openModel(modelPath, tokPath)
				if err != nil {
					return err
				}
				gen = eval.NewLocal(l)
			}
			for i := range experts {
				cfg.Experts = append(cfg.Experts, world.ExpertPrompt(i))
			}
			rep, err := eval.Run(cmd.Context(), gen, examples, cfg)
			if err != nil {
				return err
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "local model: Hugging Face directory or llama2.c .bin file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&endpoint, "endpoint", "", "OpenAI-compatible base URL (e.g. http://localhost:8000/v1) instead of a local model")
	f.StringVar(&endpointModel, "endpoint-model", "", "model name at the endpoint")
	f.StringVar(&apiKey, "api-key", "", "bearer token for the endpoint")
	f.StringVar(&data, "data", "world", "world, or NAME=PATH of a dataset file")
	f.IntSliceVar(&levels, "levels", []int{0, 1, 2, 3, 4, 5, 6}, "world levels (with --data world)")
	f.IntVar(&problems, "problems", 200, "problems per world level, or in all for a dataset")
	f.IntVar(&cfg.K, "k", 0, "samples per problem for pass@k, avg@k, maj@k and variance (0: greedy only)")
	f.Float32Var(&cfg.Temperature, "temperature", 1, "temperature of the k samples")
	f.Float32Var(&cfg.TopP, "top-p", 1, "nucleus mass of the k samples")
	f.IntVar(&cfg.MaxTokens, "max-tokens", 256, "tokens per completion")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed for sampling and problem selection")
	f.IntVar(&experts, "experts", 0, fmt.Sprintf("evaluate the world's expert prompts @E0..@E<n-1> (at most %d)", len(world.Styles)))
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
