package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/engine/gemm"
	"rlvr/train"
)

func pretrainCmd() *cobra.Command {
	o := train.PretrainCommand{Config: train.DefaultPretrain(), World: 1, Stop: stopTraining}
	cmd := &cobra.Command{
		Use:   "pretrain",
		Short: "Train a tiny model from scratch on the built-in arithmetic world",
		Long:  pretrainLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			o.Given = cmd.Flags().Changed
			o.Log = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			o.Start = func(steps int) (func(train.Progress), func()) {
				fmt.Fprintf(out, "GEMM: %s\n", gemm.Backend())
				bar := newBar(cmd, steps)
				graceful.Store(true) // a signal from here on stops at a step's end
				return func(p train.Progress) {
					bar.Describe(fmt.Sprintf("pretrain loss %.3f lr %.1e %5.0f tok/s", p.Loss, p.LR, p.TokensPerSec))
					bar.Add(1)
				}, func() { bar.Finish() }
			}
			res, err := o.Run(cmd.Context())
			if errors.Is(err, train.ErrStopped) {
				fmt.Fprintf(out, "%v; run the same command again to continue\n", err)
				return nil
			}
			if err != nil {
				return err
			}
			printPretrained(out, res)
			return nil
		},
	}
	bindPretrainFlags(cmd.Flags(), &o)
	pathFlags(cmd, "out")
	return cmd
}

// pretrainLong is rlvr pretrain's help.
const pretrainLong = `pretrain trains a small Llama-style model from scratch on the built-in world's
corpus (reference solutions, expert styles, consultations, reflections), shows
the loss falling, scores held-out problems of every level, and saves a Hugging
Face checkpoint (config.json + model.safetensors). Without --out the model is
cached under a hash of its configuration (see rlvr's cache directory, or
$RLVR_CACHE), and later commands start from it; a second run with the same
settings finds it there and only prints its scores. Each world version's model
(--world 1, the default settings, and --world 2) is kept in the repository and
installs at once. --world 2's corpus is world version 2's, in which the policy
has a habit of slipping that only its context corrects (docs/world.md).

SIGINT or SIGTERM ends the run after the step under way with a checkpoint (in
--out, or beside the cache entry); the same command then continues it.`

// bindPretrainFlags binds rlvr pretrain's flags to o; each defaults to
// o's.
func bindPretrainFlags(f *pflag.FlagSet, o *train.PretrainCommand) {
	cfg := &o.Config
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "optimizer steps")
	f.Lookup("steps").DefValue = fmt.Sprintf("the world version's: %d for 1, %d for 2", cfg.Steps, train.Version2Steps)
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "initialization and corpus seed")
	f.IntVar(&cfg.BatchTokens, "batch-tokens", cfg.BatchTokens, "tokens per step")
	f.Float64Var(&cfg.Schedule.PeakLR, "lr", cfg.Schedule.PeakLR, "peak learning rate (cosine schedule with warmup)")
	f.IntVar(&cfg.Schedule.WarmupSteps, "warmup", cfg.Schedule.WarmupSteps, "learning-rate warmup steps, at most --steps")
	f.Lookup("warmup").DefValue = fmt.Sprintf("%d, or a tenth of --steps when fewer", cfg.Schedule.WarmupSteps)
	f.IntVar(&cfg.EvalProblems, "eval", cfg.EvalProblems, "held-out problems per level")
	f.StringVar(&cfg.Out, "out", "", "checkpoint directory (default: the cache)")
	f.IntVar(&o.World, "world", o.World, "world version whose corpus to train on (1, or 2: docs/world.md)")
}

// printPretrained prints what a pretraining made: where the model came
// from, its loss and held-out scores, and where it is.
func printPretrained(out io.Writer, res *train.PretrainOutcome) {
	cfg, r := res.Config, res.Result
	switch {
	case r.Shipped:
		fmt.Fprint(out, "installed the world model that ships with rlvr (--out DIR trains one anew): ")
	case r.Cached:
		fmt.Fprint(out, "found in the cache (--out DIR trains one anew): ")
	}
	fmt.Fprintf(out, "trained %.2fM parameters for %d steps in %s: loss %.3f -> %.3f\n\n",
		float64(r.Params)/1e6, cfg.Steps, r.Elapsed.Round(1e9), r.FirstLoss, r.LastLoss)
	fmt.Fprintf(out, "held-out problems (%d per level):\n%s", cfg.EvalProblems, r.Table())
	fmt.Fprintf(out, "\ncheckpoint: %s\n", res.Dir)
	if cfg.Out != "" {
		fmt.Fprintf(out, "the cache's directory for these settings, where a copy of it is found: %s\n", train.PretrainedPath(cfg))
	}
}
