package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"rlvr/backend/local"
	"rlvr/engine/model"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/method/probe"
	"rlvr/task"
	"rlvr/task/world"
	"rlvr/train"
)

func probeCmd() *cobra.Command {
	var (
		modelPath, consultPath, out string
		configPath, split           string
		worldVersion, problems, k   int
		maxTokens, batch            int
		levels                      []int
		temperature                 float64
		seed                        uint64
	)
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Measure, before any training, whether MEL's, EAPO's and MEML-GRPO's guidance can pay on a model",
		Long: `probe measures a world model at step 0 on problems of --levels (default the
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
group_size, temperature, max_tokens and seed.`,
		Example: `  rlvr probe --world 2
  rlvr probe --world 1 --problems 1000 --out runs/probe-v1.json
  rlvr probe --config configs/gsm8k-probe-smollm2.yaml --problems 150 --k 4 --out results/probe/smollm2-gsm8k.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath != "" {
				f := cmd.Flags()
				ds := datasetProbe{config: configPath, model: modelPath, split: split, problems: problems, k: k, batch: batch,
					cfg: probe.DatasetConfig{K: k, Temperature: temperature, MaxTokens: maxTokens, Seed: seed}}
				ds.problemsSet, ds.kSet, ds.batchSet = f.Changed("problems"), f.Changed("k"), f.Changed("batch")
				ds.temperatureSet, ds.maxTokensSet, ds.seedSet = f.Changed("temperature"), f.Changed("max-tokens"), f.Changed("seed")
				return ds.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), out)
			}
			var c flagCheck
			if cmd.Flags().Changed("model") {
				c.model("model", modelPath)
			} else if modelPath = worldModelPath(worldVersion); modelPath == "" {
				c.add("world", "%d: no such world version (%v)", worldVersion, world.Versions)
			}
			c.file("consult", consultPath)
			for _, name := range []string{"data-split", "batch"} {
				if cmd.Flags().Changed(name) {
					c.add(name, "is for --config, a dataset's training config")
				}
			}
			if err := c.err(); err != nil {
				return err
			}
			cfg := probe.Config{Levels: levels, Problems: problems, K: k, Temperature: temperature, MaxTokens: maxTokens, Seed: seed}
			if err := cfg.Validate(); err != nil {
				return err
			}
			l, err := openModel(modelPath, "")
			if err != nil {
				return err
			}
			w, stop, err := newConsultWorkflow(consultPath, modelPath, l, false, nil, nil)
			if err != nil {
				return err
			}
			defer stop()
			rep, err := probe.Run(cmd.Context(), cmd.ErrOrStderr(), modelPath, l, w, cfg)
			if err != nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			return writeProbe(out, rep)
		},
	}
	f := cmd.Flags()
	f.IntVar(&worldVersion, "world", 1, "the world version whose pretrained model to probe, instead of --model")
	f.StringVar(&modelPath, "model", "", "a world model directory (default: --world's); with --config, the model in place of the config's")
	f.StringVar(&configPath, "config", "", "a dataset's training config: probe its model on its data, with its prompts and the sections of its parts")
	f.StringVar(&split, "data-split", probe.SplitTrain, "with --config, the split the problems come from: train or validation (never test)")
	f.IntSliceVar(&levels, "levels", []int{5, 6}, "world levels to draw problems from")
	f.IntVar(&problems, "problems", 500, "problems (with --config, default 200)")
	f.IntVar(&k, "k", 8, "samples per problem (the group size; with --config, default its group_size)")
	f.Float64Var(&temperature, "temperature", 1, "sampling temperature (the rollouts'; with --config, default its temperature)")
	f.IntVar(&maxTokens, "max-tokens", 256, "new tokens per answer (with --config, default its max_tokens)")
	f.IntVar(&batch, "batch", 32, "with --config, sequences sampled at once, which bound the KV cache's memory (default its sample_batch, or 32)")
	f.Uint64Var(&seed, "seed", 1, "problem and sampling seed (with --config, default its seed)")
	f.StringVar(&consultPath, "consult", "configs/world-eapo.yaml", "training config whose consultation part to probe")
	f.StringVar(&out, "out", "", "also write the report as JSON to this file")
	cmd.MarkFlagsMutuallyExclusive("world", "model")
	cmd.MarkFlagsMutuallyExclusive("world", "config")
	cmd.MarkFlagsMutuallyExclusive("consult", "config")
	cmd.MarkFlagsMutuallyExclusive("levels", "config")
	pathFlags(cmd, "model", "config", "consult", "out")
	return cmd
}

// writeProbe writes a report as JSON to path, when it is not "".
func writeProbe(path string, rep any) error {
	if path == "" {
		return nil
	}
	b, err := probe.JSON(rep)
	if err != nil {
		return fmt.Errorf("--out %s: %w", path, err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// datasetProbe is rlvr probe --config: the flags, and which of them were
// given (the others take the config's values).
type datasetProbe struct {
	config, model, split string
	problems, k, batch   int
	cfg                  probe.DatasetConfig

	problemsSet, kSet, batchSet, temperatureSet, maxTokensSet, seedSet bool
}

// The parts a dataset probe measures, with what is not measured without
// each.
var probedParts = []struct{ name, skipped string }{
	{eapo.PartConsultation, "EAPO: the config lists no consultation part (parts: [consultation] with its experts), so no expert is probed"},
	{mel.PartMetaExperience, "MEL: the config lists no meta_experience part, so no meta-experience is written or replayed"},
	{meml.PartExpertPrompts, "MEML: the config lists no expert_prompts part, so no expert prompt is scored"},
}

// run probes the config's model on its data, prints the tables to stdout
// and writes the JSON to out.
func (p *datasetProbe) run(ctx context.Context, stdout, stderr io.Writer, out string) error {
	var c flagCheck
	c.file("config", p.config)
	switch p.split {
	case probe.SplitTrain, probe.SplitValidation:
	case "test":
		c.add("data-split", "test: the test split is never probed; what a probe measures chooses how a run is set up, which is done on the training or validation split")
	default:
		c.add("data-split", "%q: want train or validation", p.split)
	}
	if p.model != "" {
		c.model("model", p.model)
	}
	if err := c.err(); err != nil {
		return err
	}
	cfg, err := train.LoadRLConfig(p.config, "")
	if err != nil {
		return err
	}
	recipe, err := cfg.Resolve()
	if err != nil {
		return fmt.Errorf("--config %s: %w", p.config, err)
	}
	if cfg.Data.IsWorld() {
		return fmt.Errorf("--config %s trains on the built-in world: probe the world's model with --world or --model, without --config", p.config)
	}
	if p.model != "" {
		cfg.Model = p.model
	}
	if cfg.Model == "" {
		return fmt.Errorf("--config %s names no model: give --model", p.config)
	}
	p.defaults(&cfg)
	c.intIn("problems", p.problems, 1, maxProblems)
	c.intIn("batch", p.batch, 1, 4096)
	if err := c.err(); err != nil {
		return err
	}
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	l, err := openModel(cfg.Model, "")
	if err != nil {
		return err
	}
	// Sampled as the run's sampler samples (the config is resolved: its
	// sampler_precision parses).
	l.Model.Precision, _ = model.ParsePrecision(cfg.SamplerPrecision)
	render, err := train.NewRenderer(l, cfg.Chat, l.Model.Config.MaxSeq)
	if err != nil {
		return err
	}
	examples, from, err := p.draw(&cfg, render)
	if err != nil {
		return err
	}
	policy := local.NewFixedSampler(l.Model, l.Tokenizer)
	policy.Engine.MaxStreams = p.batch
	d := probe.Dataset{Model: cfg.Model, Data: cfg.Data.Name, Split: p.split, From: from, Examples: examples,
		Policy: policy, Render: render, Stop: l.StopTokens}
	chat := cfg.Chat.Template == "on" || cfg.Chat.Template == "auto" && l.Chat != nil
	for _, pt := range probedParts {
		if !recipe.Run.Has(pt.name) {
			d.Skipped = append(d.Skipped, pt.skipped)
			fmt.Fprintf(stderr, "probe: skipped: %s\n", pt.skipped)
		}
	}
	if len(d.Skipped) == len(probedParts) {
		fmt.Fprintf(stderr, "probe: --config %s lists none of the parts probed (%s): only the policy alone is measured\n", p.config, partNames())
	}
	if k := part.Get[*eapo.ConsultationConfig](recipe.Sections); k != nil {
		if err := expert.CheckSolutions("consultation.experts", k.Experts, cfg.Data.Name, examples); err != nil {
			return fmt.Errorf("--config %s: %w", p.config, err)
		}
		// Checkpoint experts answer in this process, a batch at a time:
		// a probe waits for them, with no deadline to miss.
		pool, err := expert.Open(k.Experts, expert.Options{Policy: cfg.Model, Seed: cfg.Seed, Batch: 16,
			Warn: func(msg string) { fmt.Fprintf(stderr, "probe: %s\n", msg) }})
		if err != nil {
			return err
		}
		defer pool.Close()
		d.Consultation = k.TestTime(cfg.Steps, chat, pool)
	}
	if m := part.Get[*mel.MetaExperienceConfig](recipe.Sections); m != nil {
		var format mel.Format = mel.World{}
		if chat {
			format = mel.Chat{Instruction: m.Instruction, Validation: m.Validation}
		}
		d.Meta = &mel.MetaExperience{Format: format, Temperature: m.Temperature, MaxTokens: m.MaxTokens}
	}
	if e := part.Get[*meml.ExpertPromptsConfig](recipe.Sections); e != nil {
		d.Variants = e.Variants()
	}
	rep, err := probe.RunDataset(ctx, stderr, d, p.cfg)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	return writeProbe(out, rep)
}

// defaults takes the config's values for the flags not given.
func (p *datasetProbe) defaults(cfg *train.RLConfig) {
	if !p.problemsSet {
		p.problems = 200
	}
	if !p.kSet {
		p.cfg.K = cfg.GroupSize
	}
	if !p.temperatureSet {
		p.cfg.Temperature = float64(cfg.Temperature)
	}
	if !p.maxTokensSet {
		p.cfg.MaxTokens = cfg.MaxTokens
	}
	if !p.seedSet {
		p.cfg.Seed = cfg.Seed
	}
	if !p.batchSet && cfg.SampleBatch > 0 {
		p.batch = cfg.SampleBatch
	}
}

// draw reads the config's data as a training run reads it and draws the
// probe's problems from the split asked for.
func (p *datasetProbe) draw(cfg *train.RLConfig, render method.Renderer) ([]task.Example, string, error) {
	d := &cfg.Data
	read := func(path string) ([]task.Example, error) {
		if f := d.Fields; f != nil {
			return task.LoadColumns(path, task.Columns{Dataset: d.Name, ID: f.ID, Prompt: f.Question, Messages: f.Messages,
				Answer: f.Answer, Solution: f.Solution, Choices: f.Choices, Kind: f.Kind})
		}
		return task.Load(d.Name, path)
	}
	usable := func(e task.Example) bool {
		if _, ok := eval.Reward(e, ""); !ok {
			return false
		}
		_, err := render.Prompt(e, method.Variant{})
		return err == nil
	}
	s := probe.Split{Name: p.split, Train: d.Train, Test: d.Test, Validation: d.Validation, EvalProblems: cfg.EvalProblems,
		TestProblems: cfg.TestProblems, Seed: cfg.Seed, Read: read, Usable: usable}
	if d.WarmupFraction > 0 {
		warm, f := d.Part == "warmup", d.WarmupFraction
		s.Side = func(e task.Example) bool { return task.InWarmup(e, f) == warm }
	}
	return s.Draw(p.problems, p.cfg.Seed)
}

// partNames lists the parts a dataset probe measures.
func partNames() string {
	var names []string
	for _, pt := range probedParts {
		names = append(names, pt.name)
	}
	return strings.Join(names, ", ")
}
