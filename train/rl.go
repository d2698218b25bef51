package train

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"rlvr/backend"
	"rlvr/engine/optim"
	"rlvr/eval"
	"rlvr/internal/lockfile"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// RL trains a model with the configured method, writing config, metrics,
// evaluations and checkpoints to runDir. With resume it continues from the
// newest checkpoint there. progress, if not nil, gets every step's metrics.
func RL(ctx context.Context, cfg RLConfig, runDir string, resume bool, progress func(method.Metrics)) error {
	return Run(ctx, cfg, runDir, Options{Resume: resume, Progress: progress})
}

// Options are what a run takes beyond its config.
type Options struct {
	Resume   bool                 // continue from the run directory's newest checkpoint
	Progress func(method.Metrics) // gets every step's metrics; may be nil
	// Method replaces the one the config describes: a method of one's own
	// runs on the same loop, with checkpoints, resume and evaluation (nil:
	// the one the config's recipe assembles). The config's parts still
	// join around it: their evaluators, prompt variants and grant.
	Method method.Method
	// Overwrite lets a fresh run replace another run's files in its
	// directory; without it such a directory is refused.
	Overwrite bool
	// Stop, when it is closed, ends the run after the step under way: that
	// step is checkpointed and Run returns ErrStopped (SIGINT and SIGTERM
	// close it in the rlvr command).
	Stop <-chan struct{}
	// Log receives notices, such as a damaged checkpoint skipped on
	// resume; nil discards them.
	Log func(format string, args ...any)
}

// Run is RL with options.
func Run(ctx context.Context, cfg RLConfig, runDir string, opts Options) error {
	r, err := Resolve(cfg)
	if err != nil {
		return err
	}
	return RunResolved(ctx, r, runDir, opts)
}

// Resolved is a training config that Resolve checked and resolved, with
// train's own defaults filled in, and its method's recipe: what
// RunResolved runs, so that a command that checks a config before it
// runs it resolves the config once.
type Resolved struct {
	cfg    RLConfig
	recipe *part.Recipe
}

// Resolve checks cfg and resolves it (RLConfig.Resolve).
func Resolve(cfg RLConfig) (*Resolved, error) {
	recipe, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	return &Resolved{cfg: cfg, recipe: recipe}, nil
}

// Config is the resolved config, with train's own defaults filled in.
func (r *Resolved) Config() RLConfig { return r.cfg }

// RunResolved is Run of a config resolved beforehand.
func RunResolved(ctx context.Context, r *Resolved, runDir string, opts Options) error {
	resume, progress := opts.Resume, opts.Progress
	cfg, recipe := r.cfg, r.recipe
	recorded := cfg.recorded(recipe)
	if err := checkPaths(&cfg); err != nil {
		return err
	}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	// The run directory is locked for as long as this run may write it:
	// at once when it exists, so that a second writer (a resume of a run
	// still going) is refused before anything is loaded; otherwise when it
	// is made, below.
	var lock *lockfile.Lock
	if exists(runDir) {
		var err error
		if lock, err = rundir.Lock(runDir); err != nil {
			return err
		}
		defer lock.Release()
	}
	base, err := startingModel(ctx, &cfg, logf)
	if err != nil {
		return err
	}
	pol, start, err := openResumed(ctx, runDir, base, &cfg, resume, logf)
	if err != nil {
		return err
	}
	defer pol.close()
	var ref backend.Logprober
	if recipe.UsesReference() {
		if ref, err = openReference(base, &cfg); err != nil {
			return err
		}
	}
	if cfg.MaxTokens >= pol.maxLen {
		return fmt.Errorf("train config: max_tokens = %d leaves no room for a prompt in the model's context of %d", cfg.MaxTokens, pol.maxLen)
	}
	render, err := newRenderer(pol.text, cfg.Chat, pol.maxLen)
	if err != nil {
		return err
	}
	meth, build, err := recipe.Assemble(part.Setup{MaxLen: pol.maxLen, Chat: render.chat, Policy: base, Log: logf})
	if err != nil {
		return err
	}
	defer build.Close()
	if opts.Method != nil {
		meth = opts.Method
	}
	src, held, sum, err := loadData(&cfg, render, build.Variants)
	if err != nil {
		return err
	}
	if err := checkExperts(&recorded, src); err != nil {
		return err
	}
	sum.log(&cfg, logf)
	if err := checkColdStart(&recorded, build.ColdStarts, src); err != nil {
		return err
	}
	// Everything above only reads (and opens what the parts use); the run
	// directory is claimed once the config, model and data are known to be
	// usable.
	if lock == nil {
		if lock, err = rundir.Lock(runDir); err != nil {
			return err
		}
		defer lock.Release()
	}
	if err := claimRunDir(runDir, &recorded, resume, opts.Overwrite); err != nil {
		return err
	}
	if render.chat {
		render.grant = build.Grant
	}
	if st, ok := meth.(method.Stateful); ok && start.Step > 0 {
		if err := st.Restore(start.Method); err != nil {
			return err
		}
	}
	src.drawn = start.Cursor
	if err := writeConfig(runDir, recorded); err != nil {
		return err
	}
	if err := rundir.TruncateLogs(runDir, start.Step); err != nil {
		return err
	}
	machine, err := cfg.machineRecord(start.Step)
	if err != nil {
		return err
	}
	logf("engine: %s", machine.Engine())
	if err := rundir.AppendMachine(runDir, machine); err != nil {
		return err
	}
	l := &loop{cfg: &cfg, pol: pol, ref: ref, render: render, src: src, held: held, meth: meth, runDir: runDir,
		optSteps: start.optimizerSteps(&cfg), sched: scheduleOf(&cfg), evaluators: evaluators(&cfg, build)}
	if cfg.ColdStart != nil && start.Step == 0 && (start.ColdStart == nil || !start.ColdStart.Done) {
		if err := l.coldStart(ctx, build.ColdStarts, start.ColdStart, opts.Stop, logf); err != nil {
			return err
		}
		if stopped(opts.Stop) { // the stage is checkpointed as done
			return ErrStopped
		}
	}
	// The starting model's score (for before/after), or the rest of the
	// evaluation a resumed run was killed in.
	if err := l.finishEvaluation(ctx, start.Step); err != nil {
		return err
	}
	// after ends a trained step: its metrics written, and the evaluation
	// and checkpoint it calls for; stop says the run stops there.
	after := func(b *built) (stop bool, err error) {
		if err := rundir.AppendMetrics(runDir, b.m); err != nil {
			return false, err
		}
		if progress != nil {
			progress(b.m)
		}
		stop = stopped(opts.Stop) && b.step+1 < cfg.Steps
		return stop, l.endOfStep(ctx, b, stop)
	}
	if cfg.Async != nil {
		if ref != nil {
			// The producer's reward shaping and the learner's KL term
			// may both score under the reference.
			l.ref = &lockedLogprober{l: ref}
		}
		return l.runAsync(ctx, start.Step, after)
	}
	for step := start.Step; step < cfg.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		b, err := l.build(ctx, step, l.pol.sampler)
		if err == nil {
			err = l.train(ctx, b, t0)
		}
		if err != nil {
			return fmt.Errorf("step %d: %w", step+1, err)
		}
		stop, err := after(b)
		if err != nil {
			return err
		}
		if stop {
			return ErrStopped
		}
	}
	return nil
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// scheduleOf is the shared update's learning-rate schedule, in optimizer
// steps.
func scheduleOf(c *RLConfig) optim.Schedule {
	return optim.Schedule{Kind: optim.Constant, PeakLR: c.LR, WarmupSteps: c.Warmup, TotalSteps: c.Steps * c.Epochs * c.MiniBatches}
}

// loop is one run's moving parts.
type loop struct {
	cfg      *RLConfig
	pol      *policy
	ref      backend.Logprober
	render   *renderer
	src      *source
	held     heldOut
	meth     method.Method
	runDir   string
	sched    optim.Schedule
	optSteps int
	// evaluators add to the base evaluation (greedy accuracy): the end of
	// the run's samples, and what the parts measure.
	evaluators []part.Evaluator
}

// built is one step's batch as the method built it through the sampler
// and verifier, with the step's metrics so far and what a checkpoint
// after the step records.
type built struct {
	step  int // 0-based
	batch *method.Batch
	m     method.Metrics
	// cursor is the training examples drawn once the batch was built.
	cursor int
	// version is the weights' version that sampled the batch: the steps
	// trained before it (async runs).
	version int
	// state and exhibits are the method's state and latest work once the
	// batch was built, taken by an async run's producer, which goes on
	// building later steps while this one trains; a synchronous run
	// reads them from the method when it needs them.
	state    json.RawMessage
	exhibits []method.Exhibit
}

// build runs the method's side of a step: it draws the step's questions
// and the method turns them into a batch through policy and the verifier.
func (l *loop) build(ctx context.Context, step int, policy rollout.Sampler) (*built, error) {
	cfg := l.cfg
	m := method.Metrics{rundir.StepField: float64(step + 1)}
	sampler := &timedSampler{s: policy}
	var verifyS time.Duration
	sc := &method.StepContext{
		Policy: sampler,
		Render: l.render,
		Reward: func(e task.Example, response string) (float64, bool) {
			t := time.Now()
			defer func() { verifyS += time.Since(t) }()
			return eval.Reward(e, response)
		},
		Sampling:  sample.Params{MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, StopTokens: l.pol.text.StopTokens},
		Step:      step,
		Seed:      cfg.Seed*1_000_003 + uint64(step)*7919,
		More:      l.src.next,
		Reference: l.ref,
		Metrics:   m,
	}
	examples, err := l.src.next(cfg.PromptsPerStep)
	if err != nil {
		return nil, err
	}
	batch, err := l.meth.Step(ctx, sc, examples)
	if err != nil {
		return nil, err
	}
	m.Set(MetricRolloutSeconds, sampler.elapsed.Seconds())
	m.Set(MetricVerifySeconds, verifyS.Seconds())
	if len(l.src.pool) > 0 {
		m.Set("data/epoch", l.src.epochs())
	}
	return &built{step: step, batch: batch, m: m, cursor: l.src.drawn}, nil
}

// train runs the learner's side of a step begun at t0: the learner
// trains the batch, and the step's times go to its metrics.
func (l *loop) train(ctx context.Context, b *built, t0 time.Time) error {
	m := b.m
	tl := time.Now()
	if err := l.learn(ctx, b.batch, m); err != nil {
		return err
	}
	m.Set(MetricLearnSeconds, time.Since(tl).Seconds())
	m.Set(MetricStepSeconds, time.Since(t0).Seconds())
	// Each timed part's share of the step (time_rollout_s counts every
	// sampling pass, a method's extra ones included; in an async run
	// sampling overlaps learning, and the shares may sum past 1).
	frac := method.Metrics{}
	for k, v := range m {
		if name, ok := strings.CutPrefix(k, "time_"); ok && strings.HasSuffix(name, "_s") {
			frac.Set(TimeFracMetric(strings.TrimSuffix(name, "_s")), v/m[MetricStepSeconds])
		}
	}
	maps.Copy(m, frac)
	return nil
}

// timedSampler measures the time a step spends sampling, whoever asks.
type timedSampler struct {
	s       rollout.Sampler
	elapsed time.Duration
}

func (t *timedSampler) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	t0 := time.Now()
	defer func() { t.elapsed += time.Since(t0) }()
	return t.s.Sample(ctx, reqs)
}

// endOfStep evaluates and checkpoints when the step b trained calls for
// it, and checkpoints anyway when the run is stopping.
func (l *loop) endOfStep(ctx context.Context, b *built, stopping bool) error {
	cfg, step := l.cfg, b.step
	last := step+1 == cfg.Steps
	async := cfg.Async != nil
	// The checkpoint comes first: a run killed in the evaluation after it
	// (the final test evaluation takes hours on a CPU) resumes there and
	// finishes the evaluation (finishEvaluation), instead of training
	// again from an older checkpoint.
	if last || stopping || cfg.CheckpointEvery > 0 && (step+1)%cfg.CheckpointEvery == 0 {
		st := runState{Step: step + 1, Cursor: b.cursor, OptSteps: &l.optSteps, Method: b.state}
		if !async {
			var err error
			if st.Method, err = stateOf(l.meth); err != nil {
				return err
			}
		}
		if err := saveCheckpoint(ctx, l.pol.learner, l.runDir, st, cfg.KeepLast, cfg.KeepOptimizer == KeepOptimizerLast); err != nil {
			return err
		}
	}
	if l.evaluationDue(step + 1) {
		exhibits := b.exhibits
		if !async {
			exhibits = exhibitsOf(l.meth)
		}
		if err := l.evaluateShowing(ctx, step+1, exhibits); err != nil {
			return err
		}
	}
	return nil
}

// evaluationDue reports whether an evaluation follows step (step 0: the
// starting model's, which every run makes).
func (l *loop) evaluationDue(step int) bool {
	return step == 0 || step == l.cfg.Steps || l.cfg.EvalEvery > 0 && step%l.cfg.EvalEvery == 0
}

// finishEvaluation makes the evaluation after step, the step a run
// resumes from, when one is due there and eval.jsonl does not hold all of
// it: the run was killed while making it. What it had written is dropped,
// and what it had scored is taken from eval_progress.jsonl.
func (l *loop) finishEvaluation(ctx context.Context, step int) error {
	if !l.evaluationDue(step) {
		return nil
	}
	want := []string{"val"}
	if step == l.cfg.Steps && len(l.held.Test) > 0 {
		want = append(want, "test")
	}
	run, err := rundir.Load(l.runDir)
	if err != nil {
		return err
	}
	for _, e := range run.Evals {
		if e.Step == step {
			want = slices.DeleteFunc(want, func(split string) bool { return split == e.Split })
		}
	}
	if len(want) == 0 {
		return nil
	}
	if err := rundir.DropEvaluation(l.runDir, step); err != nil {
		return err
	}
	return l.evaluate(ctx, step)
}

// stateOf is a method's state for a checkpoint; nil for a method
// without one.
func stateOf(m method.Method) (json.RawMessage, error) {
	if s, ok := m.(method.Stateful); ok {
		return s.State()
	}
	return nil, nil
}

// exhibitsOf is what a method shows of its latest work; nil for a method
// that shows none.
func exhibitsOf(m method.Method) []method.Exhibit {
	if x, ok := m.(method.Exhibitor); ok {
		return x.Exhibits()
	}
	return nil
}
