package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/method"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/rundir"
	"rlvr/train"
)

// bindRLFlags defines the training flags over c, so the same definitions
// can re-apply the flags a user set onto a config read from YAML.
func bindRLFlags(f *pflag.FlagSet, c *train.RLConfig) {
	f.StringVar((*string)(&c.Algorithm), "algorithm", string(c.Algorithm), fmt.Sprintf("one of %v", method.Algorithms))
	f.StringVar(&c.Model, "model", c.Model, "starting checkpoint, a Hugging Face directory (default: the built-in world model)")
	f.StringVar(&c.Data.Name, "data", c.Data.Name, "world, or a dataset name (gsm8k, math500, mathqa, strategyqa, deepscaler, …)")
	f.StringVar(&c.Data.Train, "train-file", c.Data.Train, "the dataset's training file (JSONL, JSON or Parquet)")
	f.StringVar(&c.Data.Test, "test-file", c.Data.Test, "the held-out file (default: hold out --eval-problems training examples)")
	f.StringVar(&c.Data.DME, "dme", c.Data.DME, "a multi-expert dataset (rlvr experts collect) to fine-tune on, in place of the config's data.dme")
	f.IntSliceVar(&c.Data.Levels, "levels", c.Data.Levels, "world levels of the training problems (default 6, the hardest)")
	f.IntVar(&c.Data.World, "world", c.Data.World, "world version whose model a run without --model starts from (1 or 2: docs/world.md)")
	f.StringVar(&c.Chat.Template, "chat", c.Chat.Template, "chat template: auto, on or off")
	f.StringVar(&c.Chat.System, "system", c.Chat.System, "system prompt of chat prompts")
	f.StringSliceVar(&c.Parts, "parts", c.Parts, fmt.Sprintf("guidance parts to run, from %v", part.Names()))
	f.Uint64Var(&c.Seed, "seed", c.Seed, "seed of data order, sampling and every random draw")
	f.IntVar(&c.Steps, "steps", c.Steps, "training steps")
	f.IntVar(&c.PromptsPerStep, "prompts", c.PromptsPerStep, "questions per step")
	f.IntVar(&c.GroupSize, "group-size", c.GroupSize, "samples per question")
	f.IntVar(&c.MaxTokens, "max-tokens", c.MaxTokens, "response budget in tokens")
	f.Float32Var(&c.Temperature, "temperature", c.Temperature, "sampling temperature")
	f.Float64Var(&c.LR, "lr", c.LR, "learning rate")
	f.IntVar(&c.Warmup, "warmup", c.Warmup, "warmup optimizer steps")
	f.Float32Var(&c.KL, "kl", c.KL, "KL penalty to the starting model (0: none)")
	f.StringVar((*string)(&c.KLEstimator), "kl-estimator", string(c.KLEstimator), "k1, k2 or k3")
	f.BoolVar(&c.KLInReward, "kl-in-reward", c.KLInReward, "subtract the KL from the reward instead of adding it to the loss")
	f.IntVar(&c.MicroBatchTokens, "micro-batch-tokens", c.MicroBatchTokens, "tokens per forward/backward pass; larger mini-batches accumulate gradients (0: one pass)")
	f.BoolVar(&c.GradientCheckpointing, "gradient-checkpointing", c.GradientCheckpointing, "keep one block's activations and recompute the rest in the backward (long sequences; same gradients)")
	f.StringVar(&c.Precision, "precision", c.Precision, "arithmetic of the learner's matrix products, and the sampler's unless --sampler-precision: fp32 or bf16 (default fp32)")
	f.StringVar(&c.SamplerPrecision, "sampler-precision", c.SamplerPrecision, "arithmetic of the sampler's matrix products: fp32, bf16, or int8 (weights in int8, a scale per output feature) (default --precision)")
	f.Float32Var(&c.Entropy, "entropy", c.Entropy, "entropy bonus")
	f.IntVar(&c.Epochs, "epochs", c.Epochs, "update epochs per batch")
	f.IntVar(&c.MiniBatches, "mini-batches", c.MiniBatches, "optimizer steps per epoch")
	f.IntVar(&c.EvalEvery, "eval-every", c.EvalEvery, "steps between held-out evaluations")
	f.IntVar(&c.EvalProblems, "eval-problems", c.EvalProblems, "held-out problems (per level on the world)")
	f.IntVar(&c.TestProblems, "test-problems", c.TestProblems, "test problems scored at the end (per level on the world)")
	f.IntVar(&c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "steps between checkpoints")
	f.IntVar(&c.KeepLast, "keep-last", c.KeepLast, "checkpoints kept")
	f.StringVar(&c.KeepOptimizer, "keep-optimizer", c.KeepOptimizer, "checkpoints that keep the optimizer state: all, or last (the others keep the model only; a resume starts from the last)")
}

// rlCommand builds train and sft: one loop, a different default preset.
func rlCommand(use, preset, short, long, example string) *cobra.Command {
	o := train.RLCommand{Config: train.DefaultRL(), Stop: stopTraining}
	if err := o.Config.ApplyPreset(preset); err != nil {
		panic(err) // a preset name in this file
	}
	cmd := &cobra.Command{Use: use, Short: short, Long: long, Example: example, Args: cobra.NoArgs}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		w := cmd.OutOrStdout()
		o.Override = func(c *train.RLConfig) error { return overrideRLFlags(cmd.Flags(), c) }
		o.Log = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
		o.Start = func(runDir string, cfg train.RLConfig) (func(method.Metrics), func()) {
			fmt.Fprintf(w, "run: %s (the whole config: %s)\n%s\n", runDir, filepath.Join(runDir, "config.yaml"), runSummary(cfg))
			bar := newBar(cmd, cfg.Steps)
			graceful.Store(true) // a signal from here on stops at a step's end
			return func(m method.Metrics) {
				bar.Describe(progressLine(string(cfg.Algorithm), m))
				bar.Set(int(m[rundir.StepField]))
			}, func() { bar.Finish() }
		}
		res, err := o.Run(cmd.Context())
		if err != nil {
			return err
		}
		if res.Stopped {
			fmt.Fprintf(w, "stopped after step %d of %d, checkpointed; continue with: rlvr %s --run %s --resume\n", res.Last, res.Steps, use, res.RunDir)
			return nil
		}
		if o.Out != "" {
			fmt.Fprintf(w, "model: %s\n", o.Out)
		}
		return printEvalSummary(w, res.RunDir)
	}
	bindRLFlags(cmd.Flags(), &o.Config)
	f := cmd.Flags()
	f.StringVar(&o.ConfigFile, "config", "", "YAML config (flags override it)")
	f.StringArrayVar(&o.Sets, "set", nil, "KEY=VALUE: set a config key, dotted for a section's (expert_prompts.experts=[1]), the value read as YAML; repeatable, applied to the config file before the flags")
	f.StringVar(&o.Preset, "preset", "", fmt.Sprintf("a named recipe, one of %v (the config file and flags override it)", train.PresetNames()))
	f.StringVar(&o.RunDir, "run", "", "run directory (default: runs/<algorithm>-seed<seed>)")
	f.BoolVar(&o.Resume, "resume", false, "continue from the run directory's newest intact checkpoint, with its recorded config")
	f.BoolVar(&o.Overwrite, "overwrite", false, "replace another run's files in the run directory")
	f.StringVar(&o.Out, "out", "", "also write the final model to this directory")
	// An empty path given on purpose would otherwise read as unset: the
	// defaults, trained into runs/<algorithm>-seed<seed>, or a config's
	// model or data replaced by the built-in world's.
	pathFlags(cmd, "config", "run", "out", "model", "train-file", "test-file", "dme")
	return cmd
}

// overrideRLFlags sets the training flags given on flags over c, a config
// read from a file or a preset: flags the user set win over both.
func overrideRLFlags(flags *pflag.FlagSet, c *train.RLConfig) error {
	fs := pflag.NewFlagSet("override", pflag.ContinueOnError)
	bindRLFlags(fs, c)
	var setErr error
	flags.Visit(func(f *pflag.Flag) {
		if fs.Lookup(f.Name) != nil && setErr == nil {
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				setErr = fs.Lookup(f.Name).Value.(pflag.SliceValue).Replace(sv.GetSlice())
			} else {
				setErr = fs.Set(f.Name, f.Value.String())
			}
		}
	})
	return setErr
}

func trainCmd() *cobra.Command {
	return rlCommand("train", "", "Train: GRPO, Dr.GRPO, DAPO, REINFORCE++, RFT, SFT, with guidance parts",
		`train runs reinforcement learning with verifiable rewards (or SFT) on the built-in
world from its model, or on a dataset (GSM8K, MATH500, MathQA, StrategyQA,
DeepScaleR, any JSONL/Parquet with named fields) from any Hugging Face checkpoint,
prompted through its chat template. Settings come from --preset, then --config
(YAML; see train.RLConfig and configs/), then flags; the resolved config is
printed and saved to the run directory, with metrics.jsonl, eval.jsonl and
checkpoints. --resume continues from the newest checkpoint.`,
		`  rlvr train --algorithm dapo --steps 50 --run runs/dapo
  rlvr train --config configs/gsm8k-grpo-chat.yaml --run runs/gsm8k
  rlvr train --config configs/world-grpo.yaml --seed 2 --run runs/grpo-2 --resume`)
}

func sftCmd() *cobra.Command {
	return rlCommand("sft", "sft", "Fine-tune a model on reference solutions (the training loop with the sft preset)",
		`sft fine-tunes a model on the reference solutions of the built-in world or of
a dataset (GSM8K's worked answers, MATH's solutions, …), training on the response
only. It is rlvr train with the sft preset: the same flags, config file, run
directory, checkpoints and resume; --out writes the final model as a Hugging Face
directory.`,
		`  rlvr sft --levels 0,1,2,3 --steps 200 --out runs/sft-model
  rlvr sft --model runs/qwen --data gsm8k --train-file ../shared/data/gsm8k/train.jsonl --out runs/qwen-sft`)
}

// runSummary is the line a run starts with: what is trained, from what, on
// what, and how long. The whole config goes to the run directory.
func runSummary(cfg train.RLConfig) string {
	model := cfg.Model
	if model == "" {
		model = fmt.Sprintf("the world model (version %d)", max(cfg.Data.World, 1))
	}
	data := cfg.Data.Name
	if data == "world" && len(cfg.Data.Levels) > 0 {
		data = fmt.Sprintf("world levels %v", cfg.Data.Levels)
	}
	recipe := string(cfg.Algorithm)
	if cfg.Preset != "" {
		recipe = cfg.Preset
	}
	steps := "steps"
	if cfg.Steps == 1 {
		steps = "step"
	}
	line := fmt.Sprintf("%s from %s on %s: %d %s", recipe, model, data, cfg.Steps, steps)
	if cfg.Algorithm != method.SFT {
		line += fmt.Sprintf(" of %d questions × %d samples", cfg.PromptsPerStep, cfg.GroupSize)
	}
	return line + fmt.Sprintf(", lr %g, seed %d", cfg.LR, cfg.Seed)
}

// progressLine is the progress bar's live description of a step.
func progressLine(name string, m method.Metrics) string {
	var b strings.Builder
	b.WriteString(name)
	if v, ok := m[rundir.MetricRewardMean]; ok {
		fmt.Fprintf(&b, " reward %.3f acc %.3f", v, m[rundir.MetricAccuracy])
	}
	if v, ok := m[train.LossMetric("sft")]; ok {
		fmt.Fprintf(&b, " loss %.3f", v)
	}
	fmt.Fprintf(&b, " %.1fs/step", m[rundir.MetricStepSeconds])
	return b.String()
}

// printEvalSummary prints the held-out validation accuracy before and
// after training and, when the run has a test split, the test line: the
// expert chosen on validation and the majority vote.
func printEvalSummary(out io.Writer, runDir string) error {
	r, err := rundir.Load(runDir)
	if err != nil {
		return err
	}
	var val []rundir.Eval
	var test *rundir.Eval
	for _, e := range r.Evals {
		if e.Split == "test" {
			test = &e
		} else {
			val = append(val, e)
		}
	}
	if len(val) > 0 {
		first, last := val[0], val[len(val)-1]
		fmt.Fprintf(out, "held-out greedy accuracy: step %d %.1f%% [%.1f, %.1f] -> step %d %.1f%% [%.1f, %.1f]\n",
			first.Step, 100*first.Greedy, 100*first.GreedyLow, 100*first.GreedyHigh, last.Step, 100*last.Greedy, 100*last.GreedyLow, 100*last.GreedyHigh)
	}
	if test == nil {
		return nil
	}
	fmt.Fprintf(out, "test (%d problems): greedy %.1f%% [%.1f, %.1f]", test.Problems, 100*test.Greedy, 100*test.GreedyLow, 100*test.GreedyHigh)
	x, _, err := meml.ExpertRecordOf(*test)
	if err != nil {
		return err
	}
	if x.Best != nil && x.BestLow != nil && x.BestHigh != nil {
		fmt.Fprintf(out, "; %s, best on validation, %.1f%% [%.1f, %.1f]", x.BestExpert, 100**x.Best, 100**x.BestLow, 100**x.BestHigh)
	}
	if x.Majority != nil && x.Delta != nil {
		fmt.Fprintf(out, "; majority vote %.1f%% (%+.1f points)", 100**x.Majority, 100**x.Delta)
	}
	if test.AvgAtK != nil && test.Variance != nil {
		fmt.Fprintf(out, "; %d samples at T=%g: mean %.1f%%, variance %.4f", test.Samples, test.SampleTemperature, 100**test.AvgAtK, *test.Variance)
	}
	fmt.Fprintln(out)
	return nil
}
