package train

import (
	"context"
	"fmt"
	"sync"
	"time"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/rollout"
)

// AsyncConfig is async RL with bounded staleness (TRL's AsyncGRPOTrainer
// max_staleness, verl's fully-async mode, tinker-cookbook's async loop):
// a producer builds the batches of the next steps — the method's
// rollouts, its extra sampling passes and verification — while the
// learner trains the current one.
//
// Versions and staleness. The weights' version v is the number of
// training steps they have taken (a step's mini-batches and epochs count
// once). The learner trains step s (0-based) on weights of version s; the
// batch of step s is sampled by the weights of version max(start, s − k),
// where start is the step the run started or resumed at, and its
// staleness is s minus that version: 0 ≤ staleness ≤ k. The version used
// is fixed, never "whatever is newest", so an async run is deterministic
// for its seed and k, and the producer waits (it is paced) rather than
// sampling from weights older than that; nothing is ever dropped for
// staleness.
type AsyncConfig struct {
	// MaxStaleness is k, the steps the producer may run ahead: the
	// batches of steps s+1 … s+k are sampled while step s trains. 0
	// samples each batch from the weights that train it, as a synchronous
	// run does, and trains the same weights bit for bit.
	MaxStaleness int `yaml:"max_staleness"`
}

// Async metrics, in each line of metrics.jsonl of an async run.
const (
	// MetricStalenessMean and MetricStalenessMax are the staleness of the
	// step's sampled datums: the version of the weights the learner
	// trains them with minus the version that sampled them. Every datum
	// of a step is sampled by one version, so the two agree; both are
	// logged so that a producer mixing versions would show.
	MetricStalenessMean = "async/staleness/mean"
	MetricStalenessMax  = "async/staleness/max"
	// MetricSamplerVersion is the version that sampled the step's batch.
	MetricSamplerVersion = "async/sampler_version"
	// MetricAsyncWaitSeconds is the time the learner waited for the
	// step's batch: the part of sampling the overlap did not hide.
	MetricAsyncWaitSeconds = "async/wait_s"
)

// DefaultAsyncCap is the sampler correction's cap an async run with
// max_staleness above 0 takes when the config sets none: verl's
// rollout_is_threshold default.
const DefaultAsyncCap = 2

// resolveAsync checks the async section and gives an async run that
// trains a policy gradient on stale samples the sampler correction.
func (c *RLConfig) resolveAsync(add func(string, ...any)) {
	a := c.Async
	if a == nil {
		return
	}
	switch {
	case a.MaxStaleness < 0:
		add("async.max_staleness = %d is negative", a.MaxStaleness)
		return
	case a.MaxStaleness > 64:
		// Each step in flight holds a copy of the weights.
		add("async.max_staleness = %d must be at most 64", a.MaxStaleness)
		return
	}
	if c.Algorithm == method.SFT {
		add("async: algorithm sft samples nothing, so there is no sampling to overlap with learning (remove async)")
		return
	}
	// Stale samples are off-policy: the clipped ratio is then taken
	// against the learner's weights before the update (π_old), and each
	// token weighed by min(π_old/μ, cap) against the sampler's μ
	// (decoupled PPO). RFT trains NLL, which reads no ratio.
	if a.MaxStaleness > 0 && c.SamplerCorrection == nil && c.Algorithm != method.RFT {
		c.SamplerCorrection = &SamplerCorrectionConfig{Cap: DefaultAsyncCap}
	}
}

// versionedSampler samples from the weights of one version.
type versionedSampler struct {
	rollout.Sampler
	version int
}

// produced is what the producer hands the learner: a step's batch, or
// why it has none.
type produced struct {
	b   *built
	err error
}

// runAsync trains steps start … Steps−1 with the batches a producer
// builds up to max_staleness steps ahead (AsyncConfig). after ends each
// trained step.
func (l *loop) runAsync(ctx context.Context, start int, after func(*built) (bool, error)) error {
	k, steps := l.cfg.Async.MaxStaleness, l.cfg.Steps
	if start >= steps {
		return nil
	}
	first, err := l.pol.snapshot(ctx, start, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	// versions carries the learner's snapshots to the producer, batches
	// the producer's steps to the learner, and spent the snapshots the
	// producer is done with back, for their memory. At most k snapshots
	// wait in versions (the producer, building step t, has taken version
	// t − k, and the learner has published no more than version t), and
	// at most k + 1 batches in batches.
	versions := make(chan versionedSampler, k+1)
	batches := make(chan produced, k+1)
	spent := make(chan rollout.Sampler, k+2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.produce(ctx, start, versionedSampler{first, start}, versions, batches, spent)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	for step := start; step < steps; step++ {
		t0 := time.Now()
		var p produced
		select {
		case p = <-batches:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.err != nil {
			return fmt.Errorf("step %d: %w", step+1, p.err)
		}
		b := p.b
		if b.step != step {
			return fmt.Errorf("step %d: the producer built step %d", step+1, b.step+1)
		}
		stale := float64(step - b.version)
		b.m.Set(MetricAsyncWaitSeconds, time.Since(t0).Seconds())
		b.m.Set(MetricSamplerVersion, float64(b.version))
		b.m.Set(MetricStalenessMean, stale)
		b.m.Set(MetricStalenessMax, stale)
		if err := l.train(ctx, b, t0); err != nil {
			return fmt.Errorf("step %d: %w", step+1, err)
		}
		// The weights are now version step+1, which samples step
		// step+1+k: published before this step's evaluation and
		// checkpoint, so that the producer works through them.
		if step+1+k < steps {
			var reuse rollout.Sampler
			select {
			case reuse = <-spent:
			default:
			}
			s, err := l.pol.snapshot(ctx, step+1, reuse)
			if err != nil {
				return fmt.Errorf("step %d: weights for the sampler: %w", step+1, err)
			}
			select {
			case versions <- versionedSampler{s, step + 1}:
			case <-ctx.Done():
				return ctx.Err()
			}
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

// produce builds the batches of steps start … Steps−1 in order, each from
// the weights of version max(start, step − k): the first k+1 from the
// snapshot it is given, each later one from the next snapshot the learner
// sends, waiting for it. It alone draws examples and runs the method, so
// the data stream is a synchronous run's. It stops at the first error,
// which it hands on, or when ctx ends.
func (l *loop) produce(ctx context.Context, start int, snap versionedSampler, versions <-chan versionedSampler, out chan<- produced, spent chan<- rollout.Sampler) {
	k := l.cfg.Async.MaxStaleness
	send := func(p produced) bool {
		select {
		case out <- p:
			return p.err == nil
		case <-ctx.Done():
			return false
		}
	}
	for step := start; step < l.cfg.Steps; step++ {
		if want := max(start, step-k); snap.version != want {
			select {
			case spent <- snap.Sampler:
			default:
			}
			select {
			case snap = <-versions:
			case <-ctx.Done():
				return
			}
			if snap.version != want {
				send(produced{err: fmt.Errorf("async: step %d wants the weights of version %d, the learner sent %d", step+1, want, snap.version)})
				return
			}
		}
		b, err := l.build(ctx, step, snap.Sampler)
		if err == nil {
			b.version = snap.version
			b.exhibits = exhibitsOf(l.meth)
			b.state, err = stateOf(l.meth)
		}
		if !send(produced{b: b, err: err}) {
			return
		}
	}
}

// lockedLogprober serializes the calls of a Logprober that is not safe
// for concurrent use (the local reference model): an async run's producer
// and learner may both score under it.
type lockedLogprober struct {
	mu sync.Mutex
	l  backend.Logprober
}

func (r *lockedLogprober) Logprobs(ctx context.Context, data []backend.Datum) ([][]float32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.l.Logprobs(ctx, data)
}
