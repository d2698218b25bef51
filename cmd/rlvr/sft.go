package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"rlvr/task"
	"rlvr/task/world"
	"rlvr/train"
)

func sftCmd() *cobra.Command {
	cfg := train.DefaultSFT()
	var (
		modelPath, tokPath, data string
		levels                   []int
		problems                 int
	)
	cmd := &cobra.Command{
		Use:   "sft",
		Short: "Fine-tune a model on reference solutions",
		Long: `sft fine-tunes a model on the reference solutions of the built-in world or of
a dataset (GSM8K's worked answers, MATH's solutions, …), training on the
response only, and saves it as a Hugging Face checkpoint to --out.`,
		Example: `  rlvr sft --data world --levels 3,4 --out runs/sft
  rlvr sft --model runs/qwen --data gsm8k=../shared/data/gsm8k/train.jsonl --chat --out runs/qwen-sft`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Out == "" {
				return fmt.Errorf("--out is required")
			}
			var examples []task.Example
			if data == "world" {
				examples = world.Examples(cfg.Seed+7, problems, levels)
			} else {
				name, path, ok := strings.Cut(data, "=")
				if !ok {
					return fmt.Errorf("--data %q: want world or NAME=PATH (NAME one of %s)", data, strings.Join(task.Names(), ", "))
				}
				var err error
				if examples, err = task.Load(name, path); err != nil {
					return err
				}
			}
			l, err := openModel(modelPath, tokPath)
			if err != nil {
				return err
			}
			cfg.Schedule.TotalSteps = cfg.Steps
			bar := newBar(cmd, cfg.Steps)
			res, err := train.SFT(cmd.Context(), l, examples, cfg, func(p train.Progress) {
				bar.Describe(fmt.Sprintf("sft loss %.3f %5.0f tok/s", p.Loss, p.TokensPerSec))
				bar.Add(1)
			})
			bar.Finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "fine-tuned on %d examples (%d skipped) for %d steps in %s: loss %.3f -> %.3f\ncheckpoint: %s\n",
				res.Examples, res.Skipped, cfg.Steps, res.Elapsed.Round(1e9), res.FirstLoss, res.LastLoss, cfg.Out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "model to fine-tune: Hugging Face directory or llama2.c .bin file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&data, "data", "world", "world, or NAME=PATH of a dataset file")
	f.IntSliceVar(&levels, "levels", []int{0, 1, 2, 3}, "world levels (with --data world)")
	f.IntVar(&problems, "problems", 20000, "world problems to draw (with --data world)")
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "optimizer steps")
	f.IntVar(&cfg.BatchTokens, "batch-tokens", cfg.BatchTokens, "tokens per step")
	f.Float64Var(&cfg.Schedule.PeakLR, "lr", cfg.Schedule.PeakLR, "learning rate")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "example order seed")
	f.BoolVar(&cfg.Chat, "chat", false, "render prompts with the model's chat template")
	f.StringVar(&cfg.Out, "out", "", "checkpoint directory")
	return cmd
}
