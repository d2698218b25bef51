package main

import (
	"fmt"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"rlvr/engine/gemm"
	"rlvr/train"
)

func pretrainCmd() *cobra.Command {
	cfg := train.DefaultPretrain()
	cmd := &cobra.Command{
		Use:   "pretrain",
		Short: "Train a tiny model from scratch on the built-in arithmetic world",
		Long: `pretrain trains a small Llama-style model from scratch on problems generated
by the built-in world (one step per line, answer after ####), shows the loss
falling, scores held-out problems of every level, and saves a Hugging Face
checkpoint (config.json + model.safetensors) to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Schedule.TotalSteps = cfg.Steps
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "GEMM: %s\n", gemm.Backend())
			bar := progressbar.NewOptions(cfg.Steps,
				progressbar.OptionSetWriter(cmd.ErrOrStderr()),
				progressbar.OptionSetDescription("pretrain"),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100_000_000),
				progressbar.OptionClearOnFinish(),
			)
			res, err := train.Pretrain(cmd.Context(), cfg, func(p train.Progress) {
				bar.Describe(fmt.Sprintf("pretrain loss %.3f lr %.1e %5.0f tok/s", p.Loss, p.LR, p.TokensPerSec))
				bar.Add(1)
			})
			bar.Finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "trained %.2fM parameters for %d steps in %s: loss %.3f -> %.3f\n\n",
				float64(res.Params)/1e6, cfg.Steps, res.Elapsed.Round(1e9), res.FirstLoss, res.LastLoss)
			fmt.Fprintf(out, "held-out problems (%d per level):\n%s", cfg.EvalProblems, res.Table())
			if cfg.Out != "" {
				fmt.Fprintf(out, "\ncheckpoint: %s\n", cfg.Out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "optimizer steps")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "initialization and corpus seed")
	f.IntVar(&cfg.BatchTokens, "batch-tokens", cfg.BatchTokens, "tokens per step")
	f.Float64Var(&cfg.Schedule.PeakLR, "lr", cfg.Schedule.PeakLR, "peak learning rate (cosine schedule with warmup)")
	f.IntVar(&cfg.EvalProblems, "eval", cfg.EvalProblems, "held-out problems per level")
	f.StringVar(&cfg.Out, "out", cfg.Out, `checkpoint directory ("" saves nothing)`)
	return cmd
}
