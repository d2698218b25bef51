package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"rlvr/method"
	"rlvr/train"
)

// bindRLFlags defines the train flags over c, so the same definitions can
// re-apply the flags a user set onto a config read from YAML.
func bindRLFlags(f *pflag.FlagSet, c *train.RLConfig) {
	f.StringVar((*string)(&c.Algorithm), "algorithm", string(c.Algorithm), fmt.Sprintf("one of %v", method.Algorithms))
	f.StringVar(&c.Model, "model", c.Model, "starting checkpoint (default: the cached world model)")
	f.IntSliceVar(&c.Levels, "levels", c.Levels, "world levels of the training problems")
	f.Uint64Var(&c.Seed, "seed", c.Seed, "seed of problems, sampling and initialization")
	f.IntVar(&c.Steps, "steps", c.Steps, "RL steps")
	f.IntVar(&c.PromptsPerStep, "prompts", c.PromptsPerStep, "questions per step")
	f.IntVar(&c.GroupSize, "group-size", c.GroupSize, "samples per question")
	f.IntVar(&c.MaxTokens, "max-tokens", c.MaxTokens, "response budget in tokens")
	f.Float32Var(&c.Temperature, "temperature", c.Temperature, "sampling temperature")
	f.Float64Var(&c.LR, "lr", c.LR, "learning rate")
	f.Float32Var(&c.KL, "kl", c.KL, "KL penalty to the starting model (0: none)")
	f.StringVar((*string)(&c.KLEstimator), "kl-estimator", string(c.KLEstimator), "k1, k2 or k3")
	f.BoolVar(&c.KLInReward, "kl-in-reward", c.KLInReward, "subtract the KL from the reward instead of adding it to the loss")
	f.IntVar(&c.MicroBatchTokens, "micro-batch-tokens", c.MicroBatchTokens, "tokens per forward/backward pass; larger mini-batches accumulate gradients (0: one pass)")
	f.Float32Var(&c.Entropy, "entropy", c.Entropy, "entropy bonus")
	f.IntVar(&c.Epochs, "epochs", c.Epochs, "update epochs per batch")
	f.IntVar(&c.MiniBatches, "mini-batches", c.MiniBatches, "optimizer steps per epoch")
	f.IntVar(&c.EvalEvery, "eval-every", c.EvalEvery, "steps between held-out evaluations")
	f.IntVar(&c.EvalProblems, "eval-problems", c.EvalProblems, "held-out problems per level")
	f.IntVar(&c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "steps between checkpoints")
	f.IntVar(&c.KeepLast, "keep-last", c.KeepLast, "checkpoints kept")
}

func trainCmd() *cobra.Command {
	cfg := train.DefaultRL()
	var configPath, runDir string
	var resume bool
	cmd := &cobra.Command{
		Use:   "train",
		Short: "RL with verifiable rewards: GRPO, Dr.GRPO, DAPO, REINFORCE++, RFT",
		Long: `train runs reinforcement learning with verifiable rewards on the built-in world
from the cached world model (rlvr pretrain trains it), or from --model. Settings
come from --config (YAML; see train.RLConfig) with flags overriding it; the
resolved config is printed and saved to the run directory, with metrics.jsonl,
eval.jsonl and checkpoints. --resume continues from the newest checkpoint.`,
		Example: `  rlvr train --algorithm dapo --steps 50 --run runs/dapo
  rlvr train --config grpo.yaml --seed 2 --run runs/grpo-2 --resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath != "" {
				fileCfg, err := train.LoadRLConfig(configPath)
				if err != nil {
					return err
				}
				// Flags the user set win over the file.
				fs := pflag.NewFlagSet("override", pflag.ContinueOnError)
				bindRLFlags(fs, &fileCfg)
				var setErr error
				cmd.Flags().Visit(func(f *pflag.Flag) {
					if fs.Lookup(f.Name) != nil && setErr == nil {
						setErr = fs.Set(f.Name, f.Value.String())
					}
				})
				if setErr != nil {
					return setErr
				}
				cfg = fileCfg
			}
			if err := cfg.Resolve(); err != nil {
				return err
			}
			if runDir == "" {
				runDir = filepath.Join("runs", fmt.Sprintf("%s-seed%d", cfg.Algorithm, cfg.Seed))
			}
			out := cmd.OutOrStdout()
			b, _ := yaml.Marshal(cfg)
			fmt.Fprintf(out, "run: %s\n%s\n", runDir, b)
			bar := newBar(cmd, cfg.Steps)
			err := train.RL(cmd.Context(), cfg, runDir, resume, func(m train.StepMetrics) {
				bar.Describe(fmt.Sprintf("%s reward %.3f acc %.3f %.1fs/step", cfg.Algorithm, m.RewardMean, m.Accuracy, m.StepS))
				bar.Set(m.Step)
			})
			bar.Finish()
			if err != nil {
				return err
			}
			return printEvalSummary(out, runDir)
		},
	}
	bindRLFlags(cmd.Flags(), &cfg)
	cmd.Flags().StringVar(&configPath, "config", "", "YAML config (flags override it)")
	cmd.Flags().StringVar(&runDir, "run", "", "run directory (default: runs/<algorithm>-seed<seed>)")
	cmd.Flags().BoolVar(&resume, "resume", false, "continue from the run directory's newest checkpoint")
	return cmd
}

// printEvalSummary prints the held-out accuracy before and after training.
func printEvalSummary(out interface{ Write([]byte) (int, error) }, runDir string) error {
	b, err := os.ReadFile(filepath.Join(runDir, "eval.jsonl"))
	if err != nil {
		return err
	}
	var first, last train.EvalMetrics
	n := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e train.EvalMetrics
		if json.Unmarshal(line, &e) == nil {
			if n == 0 {
				first = e
			}
			last = e
			n++
		}
	}
	if n == 0 {
		return nil
	}
	fmt.Fprintf(out, "held-out greedy accuracy: step %d %.1f%% [%.1f, %.1f] -> step %d %.1f%% [%.1f, %.1f]\n",
		first.Step, 100*first.Greedy, 100*first.GreedyLow, 100*first.GreedyHigh, last.Step, 100*last.Greedy, 100*last.GreedyLow, 100*last.GreedyHigh)
	return nil
}
