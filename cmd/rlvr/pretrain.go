package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"rlvr/engine/gemm"
	"rlvr/train"
)

func pretrainCmd() *cobra.Command {
	cfg := train.DefaultPretrain()
	cmd := &cobra.Command{
		Use:   "pretrain",
		Short: "Train a tiny model from scratch on the built-in arithmetic world",
		Long: `pretrain trains a small Llama-style model from scratch on the built-in world's
corpus (reference solutions, expert styles, consultations, reflections), shows
the loss falling, scores held-out problems of every level, and saves a Hugging
Face checkpoint (config.json + model.safetensors). Without --out the model is
cached under a hash of its configuration (see rlvr's cache directory, or
$RLVR_CACHE), and later commands start from it; a second run with the same
settings finds it there and only prints its scores.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Schedule.TotalSteps = cfg.Steps
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "GEMM: %s\n", gemm.Backend())
			bar := newBar(cmd, cfg.Steps)
			report := func(p train.Progress) {
				bar.Describe(fmt.Sprintf("pretrain loss %.3f lr %.1e %5.0f tok/s", p.Loss, p.LR, p.TokensPerSec))
				bar.Add(1)
			}
			var res *train.PretrainResult
			var err error
			dir := cfg.Out
			if dir == "" {
				dir, res, err = train.EnsurePretrained(cmd.Context(), cfg, report)
			} else {
				res, err = train.Pretrain(cmd.Context(), cfg, report)
			}
			bar.Finish()
			if err != nil {
				return err
			}
			if res.Cached {
				fmt.Fprint(out, "found in the cache (delete the directory below to train again): ")
			}
			fmt.Fprintf(out, "trained %.2fM parameters for %d steps in %s: loss %.3f -> %.3f\n\n",
				float64(res.Params)/1e6, cfg.Steps, res.Elapsed.Round(1e9), res.FirstLoss, res.LastLoss)
			fmt.Fprintf(out, "held-out problems (%d per level):\n%s", cfg.EvalProblems, res.Table())
			fmt.Fprintf(out, "\ncheckpoint: %s\n", dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "optimizer steps")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "initialization and corpus seed")
	f.IntVar(&cfg.BatchTokens, "batch-tokens", cfg.BatchTokens, "tokens per step")
	f.Float64Var(&cfg.Schedule.PeakLR, "lr", cfg.Schedule.PeakLR, "peak learning rate (cosine schedule with warmup)")
	f.IntVar(&cfg.EvalProblems, "eval", cfg.EvalProblems, "held-out problems per level")
	f.StringVar(&cfg.Out, "out", "", "checkpoint directory (default: the cache)")
	return cmd
}
