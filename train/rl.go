package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/backend/remote"
	"rlvr/engine/optim"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/internal/atomicfile"
	"rlvr/method"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// runState is what a checkpoint records beyond the weights and optimizer.
type runState struct {
	Step   int `json:"step"`   // steps completed
	Cursor int `json:"cursor"` // training examples drawn so far
	// OptSteps is the learning-rate schedule's position: optimizer steps
	// of the shared update taken so far (skipped steps take none).
	// It is nil in checkpoints written before it was stored.
	OptSteps *int            `json:"opt_steps"`
	Method   json.RawMessage `json:"method,omitempty"` // the method's own state
}

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
	// NewMethod).
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
	resume, progress := opts.Resume, opts.Progress
	if err := cfg.Resolve(); err != nil {
		return err
	}
	if err := checkPaths(&cfg); err != nil {
		return err
	}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	base := cfg.Model
	if base == "" {
		var err error
		if pc, err := WorldPretrain(cfg.Data.World); err == nil && !exists(PretrainedPath(pc)) && cfg.Data.World != 1 {
			logf("pretraining world version %d's model first (about 15 minutes on two cores; `rlvr pretrain --world %d` does it alone)", cfg.Data.World, cfg.Data.World)
		}
		if base, err = WorldModel(ctx, cfg.Data.World); err != nil {
			return err
		}
	}
	var start runState
	var pol *policy
	if resume {
		// A local checkpoint is intact when its model opens; a remote one
		// when it names the server's saved state, loaded below.
		var state string
		dir, st, skipped, err := latestIntact(runDir, func(dir string) (err error) {
			if cfg.Backend.remote() {
				state, err = remoteState(dir)
			} else {
				pol, err = openPolicy(ctx, base, dir, &cfg)
			}
			return err
		})
		for _, s := range skipped {
			logf("resume: skipping damaged checkpoint %s", s)
		}
		if err != nil {
			return err
		}
		if dir != "" {
			start = st
			logf("resume: from %s (step %d)", dir, st.Step)
			if state != "" {
				// Loaded once: a failure ends the run rather than falling
				// back to an older checkpoint.
				if pol, err = openRemote(ctx, base, state, &cfg); err != nil {
					return err
				}
			}
		}
	}
	var err error
	if pol == nil {
		if pol, err = openPolicy(ctx, base, "", &cfg); err != nil {
			return err
		}
	}
	defer pol.close()
	var ref backend.Logprober
	if cfg.KL != 0 {
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
	src, held, sum, err := loadData(&cfg, render)
	if err != nil {
		return err
	}
	if !cfg.Data.IsWorld() || cfg.Data.DME != "" {
		logf("data: %v", sum)
		for i, s := range sum.Skipped {
			if i == 20 {
				logf("data: … and %d more set aside", len(sum.Skipped)-i)
				break
			}
			logf("data: set aside %s", s)
		}
	}
	// Everything above only reads; the run directory is claimed once the
	// config, model and data are known to be usable.
	if err := claimRunDir(runDir, &cfg, resume, opts.Overwrite); err != nil {
		return err
	}
	var pool *expert.Pool
	if k := cfg.Consultation; slices.Contains(cfg.Parts, PartConsultation) {
		if k.MaxTokens >= pol.maxLen {
			return fmt.Errorf("train config: consultation.max_tokens = %d leaves no room for a prompt in the model's context of %d", k.MaxTokens, pol.maxLen)
		}
		if render.chat {
			render.grant = consultGrant(k)
		}
		if pool, err = expert.Open(k.Experts, expert.Options{Policy: base, Seed: cfg.Seed, Warn: func(msg string) { logf("consultation: %s", msg) }}); err != nil {
			return err
		}
		defer pool.Close()
	}
	meth := opts.Method
	if meth == nil {
		if meth, err = NewMethod(&cfg, Setup{MaxLen: pol.maxLen, Chat: render.chat, Pool: pool}); err != nil {
			return err
		}
	}
	if st, ok := meth.(method.Stateful); ok && start.Step > 0 {
		if err := st.Restore(start.Method); err != nil {
			return err
		}
	}
	src.drawn = start.Cursor
	optSteps := 0
	if start.OptSteps != nil {
		optSteps = *start.OptSteps
	} else if start.Step > 0 {
		// A checkpoint from before the schedule position was stored: the
		// best estimate is one update per mini-batch of every step.
		optSteps = start.Step * cfg.Epochs * cfg.MiniBatches
	}
	if err := writeConfig(runDir, cfg); err != nil {
		return err
	}
	if err := rundir.TruncateLogs(runDir, start.Step); err != nil {
		return err
	}
	l := &loop{cfg: &cfg, pol: pol, ref: ref, render: render, src: src, held: held, meth: meth, runDir: runDir,
		optSteps: optSteps, sched: scheduleOf(&cfg)}
	if start.Step == 0 { // the starting model's score, for before/after
		if err := l.evaluate(ctx, 0); err != nil {
			return err
		}
	}
	for step := start.Step; step < cfg.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := l.step(ctx, step)
		if err != nil {
			return fmt.Errorf("step %d: %w", step+1, err)
		}
		if err := rundir.AppendMetrics(runDir, m); err != nil {
			return err
		}
		if progress != nil {
			progress(m)
		}
		stop := stopped(opts.Stop) && step+1 < cfg.Steps
		if err := l.endOfStep(ctx, step, stop); err != nil {
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
}

// The loop's metrics, beside the method's in each line of metrics.jsonl.
const (
	// MetricStepSeconds is the whole step's time; MetricRolloutSeconds,
	// MetricVerifySeconds and MetricLearnSeconds its parts: sampling (a
	// method's extra passes included), rewarding, and the learner's
	// passes and optimizer steps.
	MetricStepSeconds    = "step_s"
	MetricRolloutSeconds = "time_rollout_s"
	MetricVerifySeconds  = "time_verify_s"
	MetricLearnSeconds   = "time_learn_s"
	// MetricSkippedUpdate is 1 on a step that trained nothing.
	MetricSkippedUpdate = "skipped_update"
	// MetricClipLowFrac and MetricClipHighFrac are the shares of tokens
	// whose probability ratio the objective clipped below 1−ε and above
	// 1+ε.
	MetricClipLowFrac  = "clip_low_frac"
	MetricClipHighFrac = "clip_high_frac"
	MetricEntropy      = "entropy" // mean per token
	// MetricGradNorm is the shared update's gradient norm; a term with a
	// learning rate of its own logs its own under MetricGradNorm/<term>.
	MetricGradNorm     = "grad_norm"
	MetricLR           = "lr"
	MetricTokensPerSec = "tokens_per_sec" // through the learner
)

// LossMetric is the name of a loss term's metric: loss/<term>.
func LossMetric(term string) string { return "loss/" + term }

// TimeFracMetric is the name of the share of the step that a timed part
// took: time_frac/rollout beside time_rollout_s.
func TimeFracMetric(part string) string { return "time_frac/" + part }

// step runs one training step: the method builds the batch through the
// sampler and verifier, then the learner trains it.
func (l *loop) step(ctx context.Context, step int) (method.Metrics, error) {
	t0 := time.Now()
	cfg := l.cfg
	m := method.Metrics{rundir.StepField: float64(step + 1)}
	sampler := &timedSampler{s: l.pol.sampler}
	var verifyS time.Duration
	env := &method.Env{
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
	batch, err := l.meth.Step(ctx, env, examples)
	if err != nil {
		return nil, err
	}
	tl := time.Now()
	if err := l.learn(ctx, batch, m); err != nil {
		return nil, err
	}
	m.Set(MetricLearnSeconds, time.Since(tl).Seconds())
	m.Set(MetricRolloutSeconds, sampler.elapsed.Seconds())
	m.Set(MetricVerifySeconds, verifyS.Seconds())
	m.Set(MetricStepSeconds, time.Since(t0).Seconds())
	// Each timed part's share of the step (time_rollout_s counts every
	// sampling pass, a method's extra ones included).
	frac := method.Metrics{}
	for k, v := range m {
		if name, ok := strings.CutPrefix(k, "time_"); ok && strings.HasSuffix(name, "_s") {
			frac.Set(TimeFracMetric(strings.TrimSuffix(name, "_s")), v/m[MetricStepSeconds])
		}
	}
	maps.Copy(m, frac)
	if len(l.src.pool) > 0 {
		m.Set("data/epoch", l.src.epochs())
	}
	return m, nil
}

// setGradNorm logs an optimizer step's gradient norm under key, unless
// the backend did not report one: a remote run on SkyRL tx logs none
// rather than a norm of 0.
func setGradNorm(m method.Metrics, key string, sr backend.StepResult) {
	if !math.IsNaN(sr.GradNorm) {
		m.Set(key, sr.GradNorm)
	}
}

// learn trains a batch. The terms that share the update are summed into
// one gradient per mini-batch — each term aggregated over its own share of
// the mini-batch, accumulated over micro-batches — and one optimizer step
// applies it; a term with a learning rate of its own then takes its own
// step. A batch without any data changes no weight.
func (l *loop) learn(ctx context.Context, batch *method.Batch, m method.Metrics) error {
	cfg := l.cfg
	var shared, own []method.Term
	for _, t := range batch.Terms {
		switch {
		case len(t.Data) == 0:
		case t.LR > 0:
			own = append(own, t)
		default:
			shared = append(shared, t)
		}
	}
	m.Flag(MetricSkippedUpdate, len(shared)+len(own) == 0)
	// Reference logprobs depend only on the data: once per step.
	for _, t := range append(append([]method.Term(nil), shared...), own...) {
		if t.Loss.RefKL == 0 {
			continue
		}
		if l.ref == nil {
			return fmt.Errorf("term %s has a KL to the reference but the run has none", t.Name)
		}
		lps, err := l.ref.Logprobs(ctx, t.Data)
		if err != nil {
			return err
		}
		for i := range t.Data {
			t.Data[i].RefLogprobs = lps[i]
		}
	}
	var met backend.Metrics
	tokens := 0
	pass := func(term method.Term, data []backend.Datum, record bool) error {
		data = cloneWeights(data)
		if err := backend.Aggregate(data, term.Aggregation, term.Norm); err != nil {
			return fmt.Errorf("term %s: %w", term.Name, err)
		}
		for _, micro := range microBatches(data, cfg.MicroBatchTokens) {
			res, err := l.pol.learner.ForwardBackward(ctx, micro, term.Loss)
			if err != nil {
				return fmt.Errorf("term %s: %w", term.Name, err)
			}
			met.Add(res.Metrics)
			if record {
				m[LossMetric(term.Name)] += res.Metrics.Loss
			}
			for _, d := range micro {
				tokens += d.Len()
			}
		}
		return nil
	}
	t0 := time.Now()
	if len(shared) > 0 {
		for epoch := 0; epoch < cfg.Epochs; epoch++ {
			for mb := 0; mb < cfg.MiniBatches; mb++ {
				for _, term := range shared {
					lo, hi := mb*len(term.Data)/cfg.MiniBatches, (mb+1)*len(term.Data)/cfg.MiniBatches
					if lo == hi {
						continue
					}
					// The first epoch's losses, before any update of this step.
					if err := pass(term, term.Data[lo:hi], epoch == 0); err != nil {
						return err
					}
				}
				lr := l.sched.LR(l.optSteps)
				sr, err := l.pol.learner.OptimStep(ctx, backend.OptimParams{LearningRate: float32(lr), GradClipNorm: cfg.GradClip})
				if err != nil {
					return err
				}
				setGradNorm(m, MetricGradNorm, sr)
				m.Set(MetricLR, lr)
				l.optSteps++
			}
		}
		for _, term := range shared {
			m[LossMetric(term.Name)] /= float64(cfg.MiniBatches)
		}
	}
	for _, term := range own {
		if err := pass(term, term.Data, true); err != nil {
			return err
		}
		sr, err := l.pol.learner.OptimStep(ctx, backend.OptimParams{LearningRate: float32(term.LR), GradClipNorm: cfg.GradClip, State: term.Name})
		if err != nil {
			return err
		}
		setGradNorm(m, MetricGradNorm+"/"+term.Name, sr)
	}
	if met.Tokens > 0 {
		n := float64(met.Tokens)
		m.Set(MetricClipLowFrac, float64(met.ClipLow)/n)
		m.Set(MetricClipHighFrac, float64(met.ClipHigh)/n)
		if !cfg.Backend.remote() { // a remote learner does not see the distributions
			m.Set(MetricEntropy, met.Entropy/n)
		}
		if !cfg.KLInReward && cfg.KL != 0 {
			m.Set(method.MetricKL, met.RefKL/n)
		}
	}
	m.Set(MetricTokensPerSec, float64(tokens)/math.Max(time.Since(t0).Seconds(), 1e-9))
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

// endOfStep evaluates and checkpoints when the step calls for it, and
// checkpoints anyway when the run is stopping.
func (l *loop) endOfStep(ctx context.Context, step int, stopping bool) error {
	cfg := l.cfg
	last := step+1 == cfg.Steps
	if last || cfg.EvalEvery > 0 && (step+1)%cfg.EvalEvery == 0 {
		if err := l.evaluate(ctx, step+1); err != nil {
			return err
		}
	}
	if last || stopping || cfg.CheckpointEvery > 0 && (step+1)%cfg.CheckpointEvery == 0 {
		st := runState{Step: step + 1, Cursor: l.src.drawn, OptSteps: &l.optSteps}
		if s, ok := l.meth.(method.Stateful); ok {
			var err error
			if st.Method, err = s.State(); err != nil {
				return err
			}
		}
		return saveCheckpoint(ctx, l.pol.learner, l.runDir, st, cfg.KeepLast)
	}
	return nil
}

// evaluate scores greedy accuracy on the validation problems, prompted as
// in training (chat template and system prompt included), under each
// expert prompt when the run has them. After the last step it also scores
// the test problems, where the expert best on this validation is reported
// beside the experts' majority vote (MEML-GRPO's inference, Table 6).
func (l *loop) evaluate(ctx context.Context, step int) error {
	last := step == l.cfg.Steps
	if x, ok := l.meth.(method.Exhibitor); ok {
		for _, ex := range x.Exhibits() {
			if err := rundir.AppendSample(l.runDir, rundir.Sample{Step: step, Title: ex.Title, Text: ex.Text}); err != nil {
				return err
			}
		}
	}
	val, valExperts, err := l.score(ctx, l.held.Val, last && len(l.held.Test) == 0)
	if err != nil {
		return err
	}
	val.Step, val.Split = step, "val"
	if err := rundir.AppendEval(l.runDir, val); err != nil {
		return err
	}
	if !last || len(l.held.Test) == 0 {
		return nil
	}
	test, testExperts, err := l.score(ctx, l.held.Test, true)
	if err != nil {
		return err
	}
	test.Step, test.Split, test.Problems, test.ProblemSet = step, "test", len(l.held.Test), problemSet(l.held.Test)
	if best := bestExpert(expertVariants(l.cfg), valExperts); best != "" {
		b := testExperts[best]
		test.BestExpert, test.Best, test.BestLow, test.BestHigh = best, &b.Mean, &b.Low, &b.High
		if test.ExpertMajority != nil {
			d := *test.ExpertMajority - b.Mean
			test.Delta = &d
		}
	}
	return rundir.AppendEval(l.runDir, test)
}

// problemSet is the fingerprint of a list of problems: the first 12 hex
// digits of the SHA-256 of their IDs, one per line.
func problemSet(examples []task.Example) string {
	h := sha256.New()
	for _, e := range examples {
		io.WriteString(h, e.ID+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// bestExpert is the variant with the highest accuracy, the first of them
// on a tie; "" without variants.
func bestExpert(variants []method.Variant, acc map[string]eval.Interval) string {
	best := ""
	for _, v := range variants {
		if best == "" || acc[v.Name].Mean > acc[best].Mean {
			best = v.Name
		}
	}
	return best
}

// score is greedy accuracy on examples under the plain prompt and under
// each expert prompt, with the experts' majority vote, and with sampled,
// the eval_samples answers' statistics. Every prompt is rendered as in
// training: an expert's is a suffix of plain text, or in a chat its
// persona after the run's system prompt.
func (l *loop) score(ctx context.Context, examples []task.Example, sampled bool) (rundir.Eval, map[string]eval.Interval, error) {
	var m rundir.Eval
	variants := expertVariants(l.cfg)
	ecfg := eval.Config{MaxTokens: l.cfg.MaxTokens, Experts: make([]eval.Expert, len(variants))}
	for x, v := range variants {
		ecfg.Experts[x] = eval.Expert{Name: v.Name, Prompts: make([]string, len(examples))}
	}
	prompted := make([]task.Example, len(examples))
	for i, e := range examples {
		for x, v := range variants {
			text, err := l.render.Text(e, v)
			if err != nil {
				return m, nil, err
			}
			ecfg.Experts[x].Prompts[i] = text
		}
		text, err := l.render.Text(e, method.Variant{})
		if err != nil {
			return m, nil, err
		}
		e.Prompt = text
		prompted[i] = e
	}
	if n := l.cfg.EvalSamples; sampled && n > 0 {
		ecfg.K, ecfg.PassK, ecfg.Temperature, ecfg.Seed = n, []int{n}, l.cfg.EvalTemperature, l.cfg.Seed
	}
	rep, err := eval.Run(ctx, eval.NewSampled(l.pol.sampler, l.pol.text), prompted, ecfg)
	if err != nil {
		return m, nil, err
	}
	m.Greedy, m.GreedyLow, m.GreedyHigh = rep.Greedy.Mean, rep.Greedy.Low, rep.Greedy.High
	if rep.K > 0 {
		m.Samples, m.SampleTemperature = rep.K, rep.Temperature
		m.AvgAtK, m.Variance = &rep.AvgAtK, &rep.Variance
		m.PassAtK = map[string]float64{strconv.Itoa(rep.K): rep.PassAtK[rep.K]}
	}
	if len(variants) == 0 {
		return m, nil, nil
	}
	experts := map[string]eval.Interval{}
	m.Experts = map[string]float64{}
	for _, x := range rep.Experts {
		experts[x.Name] = x.Accuracy
		m.Experts[x.Name] = x.Accuracy.Mean
	}
	m.ExpertMajority = &rep.ExpertMajority.Mean
	return m, experts, nil
}

// microBatches splits data into runs of at most maxTokens tokens (at least
// one datum each); maxTokens 0 keeps it whole.
func microBatches(data []backend.Datum, maxTokens int) [][]backend.Datum {
	if maxTokens <= 0 {
		return [][]backend.Datum{data}
	}
	var out [][]backend.Datum
	start, tokens := 0, 0
	for i, d := range data {
		if tokens+d.Len() > maxTokens && i > start {
			out = append(out, data[start:i])
			start, tokens = i, 0
		}
		tokens += d.Len()
	}
	return append(out, data[start:])
}

// cloneWeights copies the datums' weights, which Aggregate scales in
// place, so later epochs start from the method's weights again.
func cloneWeights(data []backend.Datum) []backend.Datum {
	out := make([]backend.Datum, len(data))
	for i, d := range data {
		d.Weights = append([]float32(nil), d.Weights...)
		out[i] = d
	}
	return out
}

func writeConfig(runDir string, cfg RLConfig) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(runDir, rundir.ConfigFile), b)
}

// saveCheckpoint writes ckpt-<step>/ (a complete model directory, the
// optimizer, the run and method state) atomically and keeps the newest
// keep.
func saveCheckpoint(ctx context.Context, l backend.Learner, runDir string, st runState, keep int) error {
	final := rundir.CheckpointDir(runDir, st.Step)
	tmp := final + ".tmp"
	os.RemoveAll(tmp)
	if err := l.Save(ctx, tmp); err != nil {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(tmp, rundir.StateFile), b); err != nil {
		return err
	}
	os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	ckpts, _ := rundir.Checkpoints(runDir)
	for len(ckpts) > max(keep, 1) {
		os.RemoveAll(ckpts[0])
		ckpts = ckpts[1:]
	}
	return nil
}

// ExportModel copies the final checkpoint of a run, without the optimizer
// and run state, to out: a Hugging Face model directory.
func ExportModel(runDir, out string) error {
	ckpts, err := rundir.Checkpoints(runDir)
	if err != nil {
		return err
	}
	if len(ckpts) == 0 {
		return fmt.Errorf("train: %s has no checkpoint", runDir)
	}
	src := ckpts[len(ckpts)-1]
	if path, ok, err := remote.ReadState(src); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("train: %s trained on a Tinker backend: its weights are on the server, at %s", runDir, path)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == rundir.StateFile || e.Name() == local.OptimizerFile {
			continue
		}
		if err := atomicfile.Copy(filepath.Join(src, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
