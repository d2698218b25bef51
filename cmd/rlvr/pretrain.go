package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"rlvr/engine/gemm"
	"rlvr/internal/flagcheck"
	"rlvr/rundir"
	"rlvr/task/world"
	"rlvr/train"
)

func pretrainCmd() *cobra.Command {
	cfg := train.DefaultPretrain()
	version := 1
	cmd := &cobra.Command{
		Use:   "pretrain",
		Short: "Train a tiny model from scratch on the built-in arithmetic world",
		Long: `pretrain trains a small Llama-style model from scratch on the built-in world's
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
--out, or beside the cache entry); the same command then continues it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagcheck.Check
			// The version's own pretraining, under the flags given.
			if base, err := train.WorldPretrain(version); err == nil {
				cfg.Corpus = base.Corpus
				if !cmd.Flags().Changed("steps") {
					cfg.Steps = base.Steps
				}
			} else {
				c.Add("world", "%d: no such world version (%v)", version, world.Versions)
			}
			c.IntIn("steps", cfg.Steps, 1, maxPretrainSteps)
			c.IntIn("batch-tokens", cfg.BatchTokens, 1, maxBatchTokens)
			c.FloatIn("lr", cfg.Schedule.PeakLR, 0, 1, true)
			c.IntIn("eval", cfg.EvalProblems, 1, flagcheck.MaxProblems)
			if cmd.Flags().Changed("warmup") {
				if cfg.Schedule.WarmupSteps < 0 || cfg.Steps >= 1 && cfg.Schedule.WarmupSteps > cfg.Steps {
					c.Add("warmup", "%d: must be in [0, --steps %d]", cfg.Schedule.WarmupSteps, cfg.Steps)
				}
			} else {
				cfg.Schedule.WarmupSteps = defaultWarmup(cfg.Steps)
			}
			if cfg.Out != "" {
				c.OutDir("out", cfg.Out, true)
			}
			if err := c.Err(); err != nil {
				return err
			}
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
			if dir != "" {
				// --out holds the run's state while it goes: one writer.
				lock, err := rundir.Lock(dir)
				if err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				defer lock.Release()
			}
			graceful.Store(true)
			opts := train.PretrainOptions{Progress: report, Stop: stopTraining, State: cfg.Out,
				Log: func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }}
			if dir == "" {
				dir, res, err = train.EnsurePretrainedWith(cmd.Context(), cfg, opts)
			} else {
				res, err = train.PretrainWith(cmd.Context(), cfg, opts)
			}
			bar.Finish()
			if errors.Is(err, train.ErrStopped) {
				fmt.Fprintf(out, "%v; run the same command again to continue\n", err)
				return nil
			}
			if err != nil {
				return err
			}
			if cfg.Out != "" {
				// The result file makes the directory a whole cache entry,
				// which a copy into the cache then is.
				if err := train.WriteResult(dir, res); err != nil {
					return err
				}
			}
			switch {
			case res.Shipped:
				fmt.Fprint(out, "installed the world model that ships with rlvr (--out DIR trains one anew): ")
			case res.Cached:
				fmt.Fprint(out, "found in the cache (--out DIR trains one anew): ")
			}
			fmt.Fprintf(out, "trained %.2fM parameters for %d steps in %s: loss %.3f -> %.3f\n\n",
				float64(res.Params)/1e6, cfg.Steps, res.Elapsed.Round(1e9), res.FirstLoss, res.LastLoss)
			fmt.Fprintf(out, "held-out problems (%d per level):\n%s", cfg.EvalProblems, res.Table())
			fmt.Fprintf(out, "\ncheckpoint: %s\n", dir)
			if cfg.Out != "" {
				fmt.Fprintf(out, "the cache's directory for these settings, where a copy of it is found: %s\n", train.PretrainedPath(cfg))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "optimizer steps")
	f.Lookup("steps").DefValue = fmt.Sprintf("the world version's: %d for 1, %d for 2", cfg.Steps, train.Version2Steps)
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "initialization and corpus seed")
	f.IntVar(&cfg.BatchTokens, "batch-tokens", cfg.BatchTokens, "tokens per step")
	f.Float64Var(&cfg.Schedule.PeakLR, "lr", cfg.Schedule.PeakLR, "peak learning rate (cosine schedule with warmup)")
	f.IntVar(&cfg.Schedule.WarmupSteps, "warmup", cfg.Schedule.WarmupSteps, "learning-rate warmup steps, at most --steps")
	f.Lookup("warmup").DefValue = fmt.Sprintf("%d, or a tenth of --steps when fewer", cfg.Schedule.WarmupSteps)
	f.IntVar(&cfg.EvalProblems, "eval", cfg.EvalProblems, "held-out problems per level")
	f.StringVar(&cfg.Out, "out", "", "checkpoint directory (default: the cache)")
	f.IntVar(&version, "world", version, "world version whose corpus to train on (1, or 2: docs/world.md)")
	pathFlags(cmd, "out")
	return cmd
}

// Bounds on pretrain's flags.
const (
	maxPretrainSteps = 10_000_000
	maxBatchTokens   = 1 << 20
)

// defaultWarmup is the warmup of a pretraining run of steps steps without
// --warmup: the default configuration's, or a tenth of the run when that
// is shorter, so that a short run still reaches its peak learning rate.
func defaultWarmup(steps int) int {
	return max(0, min(train.DefaultPretrain().Schedule.WarmupSteps, steps/10))
}
