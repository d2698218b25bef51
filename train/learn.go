package train

import (
	"context"
	"fmt"
	"math"
	"time"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/rundir"
)

// The step's timings, which the loop writes every step; the names are
// rundir's, where every loop metric's name is kept.
const (
	MetricStepSeconds    = rundir.MetricStepSeconds
	MetricRolloutSeconds = rundir.MetricRolloutSeconds
	MetricVerifySeconds  = rundir.MetricVerifySeconds
	MetricLearnSeconds   = rundir.MetricLearnSeconds
)

// The sampler correction's metrics.
const (
	// MetricLogprobGapMean and MetricLogprobGapMax are the mean and
	// largest |learner logprob − sampler logprob| over the sampled tokens
	// the learner scored before the step's first update: every token of
	// the policy-gradient terms under a sampler correction, the first
	// mini-batch's otherwise. They are 0 when sampler and learner compute
	// alike (float32 both), and measure the gap a sampler in another
	// precision opens.
	MetricLogprobGapMean = "logprob_gap/mean"
	MetricLogprobGapMax  = "logprob_gap/max"
	// MetricISWeightMean and MetricISCappedFrac are the sampler
	// correction's mean weight min(π_old/μ, cap) over the sampled tokens,
	// and the share of tokens whose weight the cap truncated.
	MetricISWeightMean = "is_weight/mean"
	MetricISCappedFrac = "is_weight/capped_frac"
)

// LossMetric is the name of a loss term's metric: loss/<term>.
func LossMetric(term string) string { return "loss/" + term }

// TimeFracMetric is the name of the share of the step that a timed part
// took: time_frac/rollout beside time_rollout_s.
func TimeFracMetric(part string) string { return "time_frac/" + part }

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
	m.Flag(rundir.MetricSkippedUpdate, len(shared)+len(own) == 0)
	// Reference logprobs depend only on the data: once per step.
	klInLoss := false
	for _, t := range append(append([]method.Term(nil), shared...), own...) {
		if t.Loss.RefKL == 0 {
			continue
		}
		klInLoss = true
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
	// The gap between the sampler's and the learner's logprobs, before
	// any update; with a sampler correction, which scores every token
	// first, over all of them.
	var gap logprobGap
	if cfg.SamplerCorrection != nil {
		if err := l.correctSampler(ctx, shared, &gap, m); err != nil {
			return err
		}
	}
	var met backend.Metrics
	tokens := 0
	// A step's passes and its optimizer step are submitted before any is
	// awaited (backend.Pipelined): a remote learner runs them back to
	// back. A local one makes each as it is submitted, so the results and
	// their order are the same either way.
	var submitted []func() error // the passes' results, awaited in order
	// pass submits data's passes; record logs its loss, and first says no
	// update of this step came before it (the gap is then measured on it).
	pass := func(term method.Term, data []backend.Datum, record, first bool) error {
		data = cloneWeights(data)
		if err := backend.Aggregate(data, term.Aggregation, term.Norm); err != nil {
			return fmt.Errorf("term %s: %w", term.Name, err)
		}
		for _, micro := range backend.MicroBatches(data, cfg.MicroBatchTokens) {
			f, err := backend.SubmitForwardBackward(ctx, l.pol.learner, micro, term.Loss)
			if err != nil {
				return fmt.Errorf("term %s: %w", term.Name, err)
			}
			submitted = append(submitted, func() error {
				res, err := f.Await(ctx)
				if err != nil {
					return fmt.Errorf("term %s: %w", term.Name, err)
				}
				met.Add(res.Metrics)
				if first && cfg.SamplerCorrection == nil {
					gap.add(micro, res.Logprobs)
				}
				if record {
					m[LossMetric(term.Name)] += res.Metrics.Loss
				}
				for _, d := range micro {
					tokens += d.Len()
				}
				return nil
			})
		}
		return nil
	}
	// optimize submits the optimizer step of the passes submitted, then
	// awaits them and it, and logs its gradient norm under normKey.
	optimize := func(p backend.OptimParams, normKey string) error {
		f, err := backend.SubmitOptimStep(ctx, l.pol.learner, p)
		if err != nil {
			return err
		}
		for _, await := range submitted {
			if err := await(); err != nil {
				return err
			}
		}
		submitted = submitted[:0]
		sr, err := f.Await(ctx)
		if err != nil {
			return err
		}
		setGradNorm(m, normKey, sr)
		return nil
	}
	// step takes the shared update's optimizer step.
	step := func() error {
		lr := l.sched.LR(l.optSteps)
		if err := optimize(backend.OptimParams{LearningRate: float32(lr), GradClipNorm: cfg.GradClip}, rundir.MetricGradNorm); err != nil {
			return err
		}
		m.Set(rundir.MetricLR, lr)
		l.optSteps++
		return nil
	}
	t0 := time.Now()
	if len(shared) == 0 && len(own) == 0 && cfg.NoSignal == NoSignalStep {
		// The optimizer steps a full update would take, on a zero
		// gradient (every step leaves the gradients zeroed): what a
		// trainer without the skip does with an all-zero loss.
		for range cfg.Epochs * cfg.MiniBatches {
			if err := step(); err != nil {
				return err
			}
		}
	}
	if len(shared) > 0 {
		for epoch := 0; epoch < cfg.Epochs; epoch++ {
			for mb := 0; mb < cfg.MiniBatches; mb++ {
				for _, term := range shared {
					lo, hi := mb*len(term.Data)/cfg.MiniBatches, (mb+1)*len(term.Data)/cfg.MiniBatches
					if lo == hi {
						continue
					}
					// The first epoch's losses, before any update of this step.
					if err := pass(term, term.Data[lo:hi], epoch == 0, epoch == 0 && mb == 0); err != nil {
						return err
					}
				}
				if err := step(); err != nil {
					return err
				}
			}
		}
		for _, term := range shared {
			m[LossMetric(term.Name)] /= float64(cfg.MiniBatches)
		}
	}
	for _, term := range own {
		if err := pass(term, term.Data, true, false); err != nil {
			return err
		}
		p := backend.OptimParams{LearningRate: float32(term.LR), GradClipNorm: cfg.GradClip, State: term.Name}
		if err := optimize(p, rundir.MetricGradNorm+"/"+term.Name); err != nil {
			return err
		}
	}
	if met.Tokens > 0 {
		n := float64(met.Tokens)
		m.Set(rundir.MetricClipLowFrac, float64(met.ClipLow)/n)
		m.Set(rundir.MetricClipHighFrac, float64(met.ClipHigh)/n)
		if !cfg.Backend.remote() { // a remote learner does not see the distributions
			m.Set(rundir.MetricEntropy, met.Entropy/n)
		}
		if klInLoss {
			m.Set(rundir.MetricKL, met.RefKL/n)
		}
	}
	gap.log(m)
	m.Set(rundir.MetricTokensPerSec, float64(tokens)/math.Max(time.Since(t0).Seconds(), 1e-9))
	return nil
}

// setGradNorm logs an optimizer step's gradient norm under key, unless
// the backend did not report one: a remote run on SkyRL tx logs none
// rather than a norm of 0.
func setGradNorm(m method.Metrics, key string, sr backend.StepResult) {
	if !math.IsNaN(sr.GradNorm) {
		m.Set(key, sr.GradNorm)
	}
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
