package probe

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/internal/flagcheck"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/task"
	"rlvr/task/world"
)

// Options are rlvr probe's settings, a field for each of its flags (the
// command binds them): a world model probed on the world's levels (Run),
// or, with Config, a dataset's training config probed as a run would set
// it up (RunDataset). Validate reports the problems with the flags, each
// naming its flag; Run validates, probes, prints the report's tables and
// writes its JSON to Out. The options are read, never written.
//
// The hooks at the end are what a probe needs of the layers above it
// (the world's pretrained models, training configs): the command fills
// them.
type Options struct {
	Model  string // --model: a world model, or with Config the config's in its place
	World  int    // --world: the version whose model to probe, when Model is not given
	Config string // --config: a dataset's training config
	Split  string // --data-split, with Config: SplitTrain or SplitValidation
	Levels []int  // --levels of the world
	// Problems, K, Temperature, MaxTokens, Batch and Seed are the
	// problems and how they are sampled; with Config, each not given is
	// the config's (Problems 200).
	Problems, K, MaxTokens, Batch int
	Temperature                   float64
	Seed                          uint64
	Consult                       string // --consult: the training config whose consultation a world probe probes
	Out                           string // --out: the report as JSON, when not ""

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
	// Models opens the model, and names the world's models.
	Models checkpoint.Models
	// Workflow opens the consultation part of the training config at
	// path over the world model l (at modelPath); done closes its pool.
	Workflow func(path, modelPath string, l *checkpoint.Loaded) (w *eapo.Workflow, done func(), err error)
	// Setup reads the training config at path as a run reads it.
	Setup func(path string) (Setup, error)
}

// Setup is what a dataset probe takes from a training config, read and
// resolved as a run reads it.
type Setup struct {
	Model     string // the config's model; "" for none
	Data      string // data.name
	World     bool   // the config trains on the built-in world
	Chat      string // chat.template: on, auto or off
	Precision string // sampler_precision, resolved
	// Render is the run's prompt renderer for the model l.
	Render func(l *checkpoint.Loaded) (method.Renderer, error)
	// GroupSize, Temperature, MaxTokens, SampleBatch and Seed are the
	// config's, the defaults of the flags not given; Steps is its length.
	GroupSize, MaxTokens, SampleBatch, Steps int
	Temperature                              float64
	Seed                                     uint64
	Parts                                    []string
	Sections                                 part.Sections
	// Split is the config's data as a run splits it, without the Name and
	// Usable the probe gives it.
	Split Split
}

// Validate reports the problems with the flags that can be checked
// before a config is read, each naming its flag.
func (o *Options) Validate() error {
	if o.Config != "" {
		return o.checkDataset()
	}
	_, err := o.checkWorld()
	return err
}

// Run validates the options and probes: it prints the report's tables to
// stdout, writes its JSON to Out, and tells its progress to stderr.
func (o *Options) Run(ctx context.Context, stdout, stderr io.Writer) error {
	if o.Config != "" {
		return o.runDataset(ctx, stdout, stderr)
	}
	cfg, err := o.checkWorld()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	path := o.worldModel()
	l, err := o.Models.Open(path, "")
	if err != nil {
		return err
	}
	w, done, err := o.Workflow(o.Consult, path, l)
	if err != nil {
		return err
	}
	defer done()
	rep, err := Run(ctx, stderr, path, l, w, cfg)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	return WriteJSON(o.Out, rep)
}

// worldModel is the path of the world model probed.
func (o *Options) worldModel() string {
	if o.Given.Has("model") {
		return o.Model
	}
	return o.Models.Path(o.World)
}

// checkWorld checks the flags of a world probe and returns its config.
func (o *Options) checkWorld() (Config, error) {
	var c flagcheck.Check
	if o.Given.Has("model") {
		c.Error("model", o.Models.Check(o.Model))
	} else if o.worldModel() == "" {
		c.Add("world", "%d: no such world version (%v)", o.World, world.Versions)
	}
	c.File("consult", o.Consult)
	for _, name := range []string{"data-split", "batch"} {
		if o.Given.Has(name) {
			c.Add(name, "is for --config, a dataset's training config")
		}
	}
	cfg := Config{Levels: o.Levels, Problems: o.Problems, K: o.K, Temperature: o.Temperature, MaxTokens: o.MaxTokens, Seed: o.Seed}
	return cfg, c.Err()
}

// WriteJSON writes a report as JSON to path (--out), when it is not "".
func WriteJSON(path string, rep any) error {
	if path == "" {
		return nil
	}
	b, err := JSON(rep)
	if err != nil {
		return fmt.Errorf("--out %s: %w", path, err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// The parts a dataset probe measures, with what is not measured without
// each.
var probedParts = []struct{ name, skipped string }{
	{eapo.PartConsultation, "EAPO: the config lists no consultation part (parts: [consultation] with its experts), so no expert is probed"},
	{mel.PartMetaExperience, "MEL: the config lists no meta_experience part, so no meta-experience is written or replayed"},
	{meml.PartExpertPrompts, "MEML: the config lists no expert_prompts part, so no expert prompt is scored"},
}

// checkDataset checks the flags of a dataset probe that need no config.
func (o *Options) checkDataset() error {
	var c flagcheck.Check
	c.File("config", o.Config)
	switch o.Split {
	case SplitTrain, SplitValidation:
	case "test":
		c.Add("data-split", "test: the test split is never probed; what a probe measures chooses how a run is set up, which is done on the training or validation split")
	default:
		c.Add("data-split", "%q: want train or validation", o.Split)
	}
	if o.Model != "" {
		c.Error("model", o.Models.Check(o.Model))
	}
	return c.Err()
}

// datasetProbe is a dataset probe as the options and the config set it.
type datasetProbe struct {
	setup           Setup
	problems, batch int
	cfg             DatasetConfig
}

// dataset reads the config and settles the probe: the flags given, and
// the config's values for the others.
func (o *Options) dataset() (*datasetProbe, error) {
	if err := o.checkDataset(); err != nil {
		return nil, err
	}
	s, err := o.Setup(o.Config)
	if err != nil {
		return nil, err
	}
	if s.World {
		return nil, fmt.Errorf("--config %s trains on the built-in world: probe the world's model with --world or --model, without --config", o.Config)
	}
	if o.Model != "" {
		s.Model = o.Model
	}
	if s.Model == "" {
		return nil, fmt.Errorf("--config %s names no model: give --model", o.Config)
	}
	p := &datasetProbe{setup: s, problems: o.Problems, batch: o.Batch,
		cfg: DatasetConfig{K: o.K, Temperature: o.Temperature, MaxTokens: o.MaxTokens, Seed: o.Seed}}
	flagcheck.Default(o.Given.Has("problems"), &p.problems, 200)
	flagcheck.Default(o.Given.Has("k"), &p.cfg.K, s.GroupSize)
	flagcheck.Default(o.Given.Has("temperature"), &p.cfg.Temperature, s.Temperature)
	flagcheck.Default(o.Given.Has("max-tokens"), &p.cfg.MaxTokens, s.MaxTokens)
	flagcheck.Default(o.Given.Has("seed"), &p.cfg.Seed, s.Seed)
	flagcheck.Default(o.Given.Has("batch") || s.SampleBatch <= 0, &p.batch, s.SampleBatch)
	var c flagcheck.Check
	c.IntIn("problems", p.problems, 1, flagcheck.MaxProblems)
	c.IntIn("batch", p.batch, 1, 4096)
	if err := c.Err(); err != nil {
		return nil, err
	}
	return p, p.cfg.Validate()
}

// runDataset probes the config's model on its data, prints the tables to
// stdout and writes the JSON to Out.
func (o *Options) runDataset(ctx context.Context, stdout, stderr io.Writer) error {
	p, err := o.dataset()
	if err != nil {
		return err
	}
	s := p.setup
	l, err := o.Models.Open(s.Model, "")
	if err != nil {
		return err
	}
	// Sampled as the run's sampler samples (the config is resolved: its
	// sampler_precision parses).
	l.Model.Precision, _ = model.ParsePrecision(s.Precision)
	render, err := s.Render(l)
	if err != nil {
		return err
	}
	examples, from, err := p.draw(o.Split, render)
	if err != nil {
		return err
	}
	policy := local.NewFixedSampler(l.Model, l.Tokenizer)
	policy.Engine.MaxStreams = p.batch
	d := Dataset{Model: s.Model, Data: s.Data, Split: o.Split, From: from, Examples: examples,
		Policy: policy, Render: render, Stop: l.StopTokens}
	chat := s.Chat == "on" || s.Chat == "auto" && l.Chat != nil
	done, err := o.guidance(&d, s, chat, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := RunDataset(ctx, stderr, d, p.cfg)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	return WriteJSON(o.Out, rep)
}

// guidance gives d the parts of the config that it probes, saying which
// it skips; done closes the consultation's pool.
func (o *Options) guidance(d *Dataset, s Setup, chat bool, stderr io.Writer) (done func(), err error) {
	for _, pt := range probedParts {
		if !slices.Contains(s.Parts, pt.name) {
			d.Skipped = append(d.Skipped, pt.skipped)
			fmt.Fprintf(stderr, "probe: skipped: %s\n", pt.skipped)
		}
	}
	if len(d.Skipped) == len(probedParts) {
		fmt.Fprintf(stderr, "probe: --config %s lists none of the parts probed (%s): only the policy alone is measured\n", o.Config, partNames())
	}
	if m := part.Get[*mel.MetaExperienceConfig](s.Sections); m != nil {
		var format mel.Format = mel.World{}
		if chat {
			format = mel.Chat{Instruction: m.Instruction, Validation: m.Validation}
		}
		d.Meta = &mel.MetaExperience{Format: format, Temperature: m.Temperature, MaxTokens: m.MaxTokens}
	}
	if e := part.Get[*meml.ExpertPromptsConfig](s.Sections); e != nil {
		d.Variants = e.Variants()
	}
	k := part.Get[*eapo.ConsultationConfig](s.Sections)
	if k == nil {
		return func() {}, nil
	}
	if err := expert.CheckSolutions("consultation.experts", k.Experts, s.Data, d.Examples); err != nil {
		return nil, fmt.Errorf("--config %s: %w", o.Config, err)
	}
	// Checkpoint experts answer in this process, a batch at a time: a
	// probe waits for them, with no deadline to miss.
	pool, err := expert.Open(k.Experts, expert.Options{Policy: s.Model, Seed: s.Seed, Batch: 16,
		Warn: func(msg string) { fmt.Fprintf(stderr, "probe: %s\n", msg) }})
	if err != nil {
		return nil, err
	}
	d.Consultation = k.TestTime(s.Steps, chat, pool)
	return pool.Close, nil
}

// draw draws the probe's problems from the split asked for, as a run
// reads its data: the examples it uses, with gold answers that read and
// prompts that render.
func (p *datasetProbe) draw(split string, render method.Renderer) ([]task.Example, string, error) {
	usable := func(e task.Example) bool {
		if _, ok := eval.Reward(e, ""); !ok {
			return false
		}
		_, err := render.Prompt(e, method.Variant{})
		return err == nil
	}
	sp := p.setup.Split
	sp.Name, sp.Usable = split, usable
	return sp.Draw(p.problems, p.cfg.Seed)
}

// partNames lists the parts a dataset probe measures.
func partNames() string {
	var names []string
	for _, pt := range probedParts {
		names = append(names, pt.name)
	}
	return strings.Join(names, ", ")
}
