package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/checkpoint"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/probe"
	"rlvr/task"
	"rlvr/train"
)

func probeCmd() *cobra.Command {
	o := probe.Options{Models: localModels, Workflow: probeWorkflow, Setup: probeSetup}
	cmd := &cobra.Command{
		Use:     "probe",
		Short:   "Measure, before any training, whether MEL's, EAPO's and MEML-GRPO's guidance can pay on a model",
		Long:    probeLong,
		Example: probeExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Given = cmd.Flags().Changed
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	bindProbeFlags(cmd.Flags(), &o)
	cmd.MarkFlagsMutuallyExclusive("world", "model")
	cmd.MarkFlagsMutuallyExclusive("world", "config")
	cmd.MarkFlagsMutuallyExclusive("consult", "config")
	cmd.MarkFlagsMutuallyExclusive("levels", "config")
	pathFlags(cmd, "model", "config", "consult", "out")
	return cmd
}

// probeLong is rlvr probe's help.
const probeLong = `probe measures a world model at step 0 on problems of --levels (default the
sparse levels 5 and 6), the preconditions docs/world.md states for a test bed in
which MEL and EAPO can work:

- the policy alone: greedy accuracy, and the share of groups of --k samples at
  --temperature that are all right or all wrong (no signal for GRPO);
- MEL's replay: from each group with right and wrong answers, one pair; the
  policy writes a meta-experience on it, one replay with it validates it, and
  --k fresh answers with it are compared with --k fresh answers without it, on
  the same question (the gain, paired by question);
- EAPO's consultation as at the first step of the --consult config, every
  reply accepted: the share of queries the experts could read, and the
  accuracy of episodes whose accepted replies were all right against episodes
  that did not consult (paired by problem).

With --config, probe measures a chat model on a dataset as a training config
sets them up (docs/probe.md): its model (or --model), data, chat template and
system prompt, and the sections of the parts it lists. The problems come from
the training split (--data-split train, without the problems the run holds
out) or the validation split, never from the test split. It measures the
policy alone (greedy, --k samples), then for each part the config has:

- consultation (EAPO): for each expert of the pool, the policy's accuracy when
  the episode opens with the expert asked the whole question and its reply in
  the history (the expert-assisted workflow at the first step), minus its
  accuracy without consultation, paired by problem; and the expert's own
  accuracy (its reply right);
- meta_experience (MEL): on the questions the policy failed (all --k samples
  wrong, or greedy wrong), the policy writes a meta-experience M on a pair of
  its own right answer (or, without one, the reference solution) and a wrong
  one; --k fresh answers with M against --k without, paired by question, and
  the share of Ms that parse ("no sample" when none does);
- expert_prompts (MEML-GRPO): each expert prompt's greedy accuracy, and the
  share of questions whose answers across the prompts are mixed.

A part the config does not list is skipped, and the report says so. --k, the
temperature, the answers' tokens and the seed default to the config's
group_size, temperature, max_tokens and seed.`

// probeExample is rlvr probe's examples.
const probeExample = `  rlvr probe --world 2
  rlvr probe --world 1 --problems 1000 --out runs/probe-v1.json
  rlvr probe --config results/probe/smollm2-gsm8k.yaml --problems 64 --k 4 --out results/probe/smollm2-gsm8k.json`

// bindProbeFlags binds rlvr probe's flags to o.
func bindProbeFlags(f *pflag.FlagSet, o *probe.Options) {
	f.IntVar(&o.World, "world", 1, "the world version whose pretrained model to probe, instead of --model")
	f.StringVar(&o.Model, "model", "", "a world model directory (default: --world's); with --config, the model in place of the config's")
	f.StringVar(&o.Config, "config", "", "a dataset's training config: probe its model on its data, with its prompts and the sections of its parts")
	f.StringVar(&o.Split, "data-split", probe.SplitTrain, "with --config, the split the problems come from: train or validation (never test)")
	f.IntSliceVar(&o.Levels, "levels", []int{5, 6}, "world levels to draw problems from")
	f.IntVar(&o.Problems, "problems", 500, "problems (with --config, default 200)")
	f.IntVar(&o.K, "k", 8, "samples per problem (the group size; with --config, default its group_size)")
	f.Float64Var(&o.Temperature, "temperature", 1, "sampling temperature (the rollouts'; with --config, default its temperature)")
	f.IntVar(&o.MaxTokens, "max-tokens", 256, "new tokens per answer (with --config, default its max_tokens)")
	f.IntVar(&o.Batch, "batch", 32, "with --config, sequences sampled at once, which bound the KV cache's memory (default its sample_batch, or 32)")
	f.Uint64Var(&o.Seed, "seed", 1, "problem and sampling seed (with --config, default its seed)")
	f.StringVar(&o.Consult, "consult", "configs/world-eapo.yaml", "training config whose consultation part to probe")
	f.StringVar(&o.Out, "out", "", "also write the report as JSON to this file")
}

// probeWorkflow opens the consultation part of the training config at
// path for a world probe (see newConsultWorkflow).
func probeWorkflow(path, modelPath string, l *checkpoint.Loaded) (*eapo.Workflow, func(), error) {
	return newConsultWorkflow(path, modelPath, l, false, nil, nil)
}

// probeSetup reads a dataset's training config as a run reads it, for
// probe --config.
func probeSetup(path string) (probe.Setup, error) {
	cfg, err := train.LoadRLConfig(path, "")
	if err != nil {
		return probe.Setup{}, err
	}
	recipe, err := cfg.Resolve()
	if err != nil {
		return probe.Setup{}, fmt.Errorf("--config %s: %w", path, err)
	}
	d := &cfg.Data
	read := func(path string) ([]task.Example, error) {
		if f := d.Fields; f != nil {
			return task.LoadColumns(path, task.Columns{Dataset: d.Name, ID: f.ID, Prompt: f.Question, Messages: f.Messages,
				Answer: f.Answer, Solution: f.Solution, Choices: f.Choices, Kind: f.Kind})
		}
		return task.Load(d.Name, path)
	}
	split := probe.Split{Train: d.Train, Test: d.Test, Validation: d.Validation, EvalProblems: cfg.EvalProblems,
		TestProblems: cfg.TestProblems, Seed: cfg.Seed, Read: read}
	if d.WarmupFraction > 0 {
		warm, f := d.Part == "warmup", d.WarmupFraction
		split.Side = func(e task.Example) bool { return task.InWarmup(e, f) == warm }
	}
	return probe.Setup{Model: cfg.Model, Data: d.Name, World: d.IsWorld(), Chat: cfg.Chat.Template, Precision: cfg.SamplerPrecision,
		Render: func(l *checkpoint.Loaded) (method.Renderer, error) {
			return train.NewRenderer(l, cfg.Chat, l.Model.Config.MaxSeq)
		},
		GroupSize: cfg.GroupSize, MaxTokens: cfg.MaxTokens, SampleBatch: cfg.SampleBatch, Steps: cfg.Steps,
		Temperature: float64(cfg.Temperature), Seed: cfg.Seed, Parts: recipe.Run.Parts, Sections: recipe.Sections, Split: split}, nil
}
