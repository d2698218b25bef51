package train

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"rlvr/internal/flagcheck"
	"rlvr/method"
	"rlvr/rundir"
	"rlvr/task/world"
)

// RLCommand are rlvr train's and rlvr sft's settings, a field for each
// of their flags (the command binds them and prints the run's start, its
// progress and its end): a config from the flags, or from a file, a
// preset and --set with the flags given over it, run in a run directory.
// Validate reports the problems with them, the config's at once; Run
// validates, runs the config and writes the final model to Out.
//
// The hooks at the end are what the command gives a run: how the flags
// given override a config read from elsewhere, and how the run's start
// and progress are shown.
type RLCommand struct {
	// Config is the config the flags describe, over the command's
	// preset; with ConfigFile, Preset or Sets the config is theirs
	// instead, with the flags given set over it (Override).
	Config     RLConfig
	ConfigFile string   // --config: a YAML config
	Preset     string   // --preset: a named recipe
	Sets       []string // --set KEY=VALUE, applied to ConfigFile
	// RunDir is the run directory (default: runs/<algorithm>-seed<seed>);
	// with Resume and no ConfigFile, the config it recorded is read.
	RunDir    string
	Resume    bool   // --resume: continue from RunDir's newest intact checkpoint
	Overwrite bool   // --overwrite: replace another run's files in RunDir
	Out       string // --out: also write the final model to this directory

	// Override sets the flags the command line gave over c, a config
	// read from a file or a preset; nil sets none.
	Override func(c *RLConfig) error
	// Start, when set, is called once the config is resolved and the
	// options checked, before the run: it is given the run directory and
	// the resolved config, and returns what hears every step's metrics
	// and what is called when the run ends.
	Start func(runDir string, cfg RLConfig) (step func(method.Metrics), done func())
	// Stop and Log are the run's (Options).
	Stop <-chan struct{}
	Log  func(format string, args ...any)
}

// RLOutcome is where a run of RLCommand ended.
type RLOutcome struct {
	RunDir string
	Steps  int // the config's
	// Stopped says the run stopped on Stop after step Last, checkpointed.
	Stopped bool
	Last    int
}

// Validate reads the config the options describe and reports every
// problem with it at once, and with --out.
func (o *RLCommand) Validate() error {
	_, _, err := o.plan()
	return err
}

// plan reads and resolves the config the options describe, and returns
// it with the run directory.
func (o *RLCommand) plan() (*Resolved, string, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, "", err
	}
	r, err := Resolve(cfg)
	if err != nil {
		return nil, "", err
	}
	runDir := o.RunDir
	if runDir == "" {
		runDir = filepath.Join("runs", fmt.Sprintf("%s-seed%d", r.cfg.Algorithm, r.cfg.Seed))
	}
	if o.Out != "" {
		var c flagcheck.Check
		c.OutDir("out", o.Out, false)
		if err := c.Err(); err != nil {
			return nil, "", err
		}
	}
	return r, runDir, nil
}

// config is the config the options describe, not yet resolved.
func (o *RLCommand) config() (RLConfig, error) {
	path := o.ConfigFile
	if o.Resume && path == "" && o.RunDir != "" && exists(filepath.Join(o.RunDir, rundir.ConfigFile)) {
		// A resumed run starts from what it recorded; flags may then
		// change the knobs that are safe to change.
		path = filepath.Join(o.RunDir, rundir.ConfigFile)
	}
	if path == "" && o.Preset == "" && len(o.Sets) == 0 {
		return o.Config, nil
	}
	var cfg RLConfig
	if path != "" || len(o.Sets) > 0 {
		var err error
		if cfg, err = LoadRLConfig(path, o.Preset, o.Sets...); err != nil {
			return RLConfig{}, err
		}
	} else {
		cfg = DefaultRL()
		if err := cfg.ApplyPreset(o.Preset); err != nil {
			return RLConfig{}, err
		}
	}
	// Flags the user set win over the file and the preset.
	if o.Override != nil {
		if err := o.Override(&cfg); err != nil {
			return RLConfig{}, err
		}
	}
	return cfg, nil
}

// Run validates the options and runs the config (RunResolved), then
// writes the final model to Out. A run stopped on Stop is no error: the
// outcome says it stopped.
func (o *RLCommand) Run(ctx context.Context) (*RLOutcome, error) {
	r, runDir, err := o.plan()
	if err != nil {
		return nil, err
	}
	res := &RLOutcome{RunDir: runDir, Steps: r.cfg.Steps}
	step, done := func(method.Metrics) {}, func() {}
	if o.Start != nil {
		step, done = o.Start(runDir, r.cfg)
	}
	err = RunResolved(ctx, r, runDir, Options{Resume: o.Resume, Overwrite: o.Overwrite, Stop: o.Stop, Log: o.Log,
		Progress: func(m method.Metrics) {
			res.Last = int(m[rundir.StepField])
			step(m)
		}})
	done()
	if errors.Is(err, ErrStopped) {
		res.Stopped = true
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	if o.Out != "" {
		if err := ExportModel(runDir, o.Out); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Bounds on rlvr pretrain's flags.
const (
	maxPretrainSteps = 10_000_000
	maxBatchTokens   = 1 << 20
)

// DefaultWarmup is the warmup of a pretraining run of steps steps that
// sets none: the default configuration's, or a tenth of the run when that
// is shorter, so that a short run still reaches its peak learning rate.
func DefaultWarmup(steps int) int {
	return max(0, min(DefaultPretrain().Schedule.WarmupSteps, steps/10))
}

// PretrainCommand are rlvr pretrain's settings, a field for each of its
// flags (the command binds them and prints the result): a world
// version's pretraining under the flags given, cached or written to a
// directory of its own. Validate reports every problem with them at
// once, naming the flags; Run validates and pretrains, or finds the model
// in the cache. The options are read, never written.
//
// The hooks at the end are what the command gives the run: how its start
// and progress are shown, and what stops it.
type PretrainCommand struct {
	// Config is --steps, --seed, --batch-tokens, --lr, --warmup, --eval
	// and --out over DefaultPretrain. The corpus is World's, and so are
	// the steps unless given; the warmup not given is DefaultWarmup's.
	Config PretrainConfig
	World  int // --world: the version whose corpus is trained on

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
	// Start, when set, is called once the options are checked, before
	// the training: it is given the steps, and returns what hears every
	// step's progress and what is called when the training ends.
	Start func(steps int) (step func(Progress), done func())
	// Stop and Log are the run's (PretrainOptions); a stopped run is
	// checkpointed in Out, or beside the cache's entry.
	Stop <-chan struct{}
	Log  func(format string, args ...any)
}

// PretrainOutcome is what a run of PretrainCommand made.
type PretrainOutcome struct {
	Dir    string         // the model: Out, or the cache's directory
	Config PretrainConfig // the configuration trained, as the options resolve it
	Result *PretrainResult
}

// Validate reports every problem with the options at once, each naming
// its flag.
func (o *PretrainCommand) Validate() error {
	_, err := o.config()
	return err
}

// config checks the options and returns the configuration they describe.
func (o *PretrainCommand) config() (PretrainConfig, error) {
	var c flagcheck.Check
	cfg := o.Config
	// The version's own pretraining, under the flags given.
	if base, err := WorldPretrain(o.World); err == nil {
		cfg.Corpus = base.Corpus
		if !o.Given.Has("steps") {
			cfg.Steps = base.Steps
		}
	} else {
		c.Add("world", "%d: no such world version (%v)", o.World, world.Versions)
	}
	c.IntIn("steps", cfg.Steps, 1, maxPretrainSteps)
	c.IntIn("batch-tokens", cfg.BatchTokens, 1, maxBatchTokens)
	c.FloatIn("lr", cfg.Schedule.PeakLR, 0, 1, true)
	c.IntIn("eval", cfg.EvalProblems, 1, flagcheck.MaxProblems)
	if o.Given.Has("warmup") {
		if cfg.Schedule.WarmupSteps < 0 || cfg.Steps >= 1 && cfg.Schedule.WarmupSteps > cfg.Steps {
			c.Add("warmup", "%d: must be in [0, --steps %d]", cfg.Schedule.WarmupSteps, cfg.Steps)
		}
	} else {
		cfg.Schedule.WarmupSteps = DefaultWarmup(cfg.Steps)
	}
	if cfg.Out != "" {
		c.OutDir("out", cfg.Out, true)
	}
	cfg.Schedule.TotalSteps = cfg.Steps
	return cfg, c.Err()
}

// Run validates the options and pretrains: into Out, holding its lock,
// or into the cache, where a model of the same configuration (or the one
// that ships with rlvr) is found instead. A run into Out ends with the
// result file that makes the directory a whole cache entry. A run
// stopped on Stop returns an error wrapping ErrStopped.
func (o *PretrainCommand) Run(ctx context.Context) (*PretrainOutcome, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	step, done := func(Progress) {}, func() {}
	if o.Start != nil {
		step, done = o.Start(cfg.Steps)
	}
	dir := cfg.Out
	if dir != "" {
		// Out holds the run's state while it goes: one writer.
		lock, err := rundir.Lock(dir)
		if err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		defer lock.Release()
	}
	opts := PretrainOptions{Progress: step, Stop: o.Stop, State: cfg.Out, Log: o.Log}
	var res *PretrainResult
	if dir == "" {
		dir, res, err = EnsurePretrainedWith(ctx, cfg, opts)
	} else {
		res, err = PretrainWith(ctx, cfg, opts)
	}
	done()
	if err != nil {
		return nil, err
	}
	if cfg.Out != "" {
		// The result file makes the directory a whole cache entry, which
		// a copy into the cache then is.
		if err := WriteResult(dir, res); err != nil {
			return nil, err
		}
	}
	return &PretrainOutcome{Dir: dir, Config: cfg, Result: res}, nil
}
