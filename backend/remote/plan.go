package remote

import (
	"context"
	"errors"
	"fmt"

	"rlvr/api/tinker"
	"rlvr/backend"
)

// How each term of a backend.Loss runs on a Tinker server. The learner
// sums per-token terms (backend.Aggregate has already folded the
// aggregation mode into the weights w), and so does a "sum" server:
//
//	term                      remote call                          per-token input
//	clipped policy gradient   ppo, clip thresholds 1−ε_low, 1+ε_high  advantages A·w
//	importance (−ρA)          importance_sampling                  advantages A·w
//	REINFORCE (−A·logp)       cross_entropy                        weights += A·w
//	NLL (−logp)               cross_entropy                        weights += NLL·w
//	reference KL β·k(logp−r)  two passes: logp from the first call  weights −= β·w·k′(logp−r)
//	                          (or a forward), then cross_entropy
//	teacher KL (exact)        refused: needs full distributions
//	entropy bonus             refused: needs full distributions
//
// The cross_entropy pass carries every term whose gradient with respect
// to logp the client can compute: cross_entropy's loss −c·logp has
// gradient −c, so a term with gradient g rides on it with c = −g. A Loss
// becomes at most two forward_backward calls (ppo, then cross_entropy),
// whose gradients the server accumulates into the same step; the
// reference KL needs no third pass because the first call returns the
// logprobs its gradient depends on. (MEML-GRPO's sequence-level mutual
// learning, with the teacher side held fixed, has the gradient of an NLL
// and so is a plain cross_entropy term.)
//
// A "datum-mean" server (SkyRL tx's JAX backend) divides each datum's
// summed loss by the sum of its weights, and the accumulated gradient by
// the number of datums before the optimizer step. The client undoes the
// first: it sends weights of 1 and folds w and the datum's length n into
// the advantages, and the cross_entropy pass — whose weights the
// division would cancel — becomes importance_sampling with the sampler
// logprobs set to the current logp (ratio 1, gradient −A/n per token)
// and A = c·n. The second division, by the step's datum count, is a
// constant factor of that step's gradient that the client cannot know
// when it sends the data; see docs/scale-out.md.

// Reduction is how a server reduces a loss_fn's per-token losses.
type Reduction string

const (
	// Sum adds every token's loss (hosted Tinker, rlvr serve --tinker).
	Sum Reduction = "sum"
	// DatumMean divides each datum's sum by its weight sum (SkyRL tx).
	DatumMean Reduction = "datum-mean"
)

// Validate reports a reduction that is neither.
func (r Reduction) Validate() error {
	switch r {
	case Sum, DatumMean:
		return nil
	}
	return fmt.Errorf("remote: unknown reduction %q (want %q or %q)", r, Sum, DatumMean)
}

// ErrNotRemote is the error of a loss term no Tinker loss_fn expresses.
var ErrNotRemote = errors.New("not available on a Tinker backend")

// CheckLoss reports the terms of l a remote backend cannot run, naming
// each and its alternative: a config is refused with it before any work.
func CheckLoss(l backend.Loss) error {
	var errs []error
	if l.TeacherKL != 0 {
		errs = append(errs, fmt.Errorf("the exact teacher KL needs full next-token distributions and is %w; use the sequence-level estimator", ErrNotRemote))
	}
	if l.Entropy != 0 {
		errs = append(errs, fmt.Errorf("the entropy bonus needs full next-token distributions and is %w; leave it out", ErrNotRemote))
	}
	return errors.Join(errs...)
}

// ForwardBackward implements backend.Learner by the mapping above.
func (m *Model) ForwardBackward(ctx context.Context, batch []backend.Datum, loss backend.Loss) (backend.Result, error) {
	f, err := m.SubmitForwardBackward(ctx, batch, loss)
	if err != nil {
		return backend.Result{}, err
	}
	return f.Await(ctx)
}

// SubmitForwardBackward implements backend.Pipelined: ForwardBackward's
// calls are submitted, and its last one is awaited by the Future, so
// that an optim_step submitted next runs right after it on the server.
// A call that fails after it leaves the model broken, as it would
// have; the optimizer step may then have run on partial gradients, which
// the resume from a checkpoint discards.
func (m *Model) SubmitForwardBackward(ctx context.Context, batch []backend.Datum, loss backend.Loss) (backend.Future[backend.Result], error) {
	if m.broken != nil {
		return nil, fmt.Errorf("remote: forward_backward refused after an earlier failure (%v); resume from the last checkpoint", m.broken)
	}
	if err := loss.Validate(); err != nil {
		return nil, err
	}
	if err := CheckLoss(loss); err != nil {
		return nil, err
	}
	if err := checkBatch(batch, &loss); err != nil {
		return nil, err
	}
	live, inert := m.splitInert(batch, &loss)
	// The inert datums' forward is submitted first and awaited last: the
	// server runs it and then the passes back to back, without waiting
	// for this client between them.
	var forward *Pending
	if len(inert) > 0 {
		var err error
		if forward, err = m.submitLogprobs(ctx, pick(batch, inert)); err != nil {
			return nil, err
		}
	}
	var passes backend.Future[[][]float32]
	if len(live) > 0 {
		var err error
		if passes, err = m.passes(ctx, pick(batch, live), &loss); err != nil {
			// Some of the passes may have added their gradients: the step
			// cannot be completed.
			m.broken = err
			return nil, err
		}
		m.pending = true
	}
	return func(ctx context.Context) (backend.Result, error) {
		lp := make([][]float32, len(batch))
		if passes != nil {
			got, err := passes.Await(ctx)
			if err != nil {
				m.broken = err
				return backend.Result{}, err
			}
			scatter(lp, live, got)
		}
		if forward != nil {
			got, err := m.outputs(ctx, forward, pick(batch, inert))
			if err != nil {
				if len(live) > 0 {
					m.broken = err // the passes' gradients are in, the step's are not all
				}
				return backend.Result{}, err
			}
			scatter(lp, inert, got)
		}
		return backend.Result{Logprobs: lp, Metrics: metrics(batch, &loss, lp)}, nil
	}, nil
}

// splitInert returns the indices of the datums that carry gradient and,
// on a "sum" server, of those that do not (backend.Loss.InertDatum): GRPO's
// groups of equal rewards. Those go through a forward call, for their
// logprobs and metrics, and cost no backward. A "datum-mean" server divides
// the step's gradient by the number of datums it saw, so there every datum
// goes through forward_backward.
func (m *Model) splitInert(batch []backend.Datum, loss *backend.Loss) (live, inert []int) {
	for i := range batch {
		if m.cfg.Reduction == Sum && loss.InertDatum(&batch[i]) {
			inert = append(inert, i)
		} else {
			live = append(live, i)
		}
	}
	return live, inert
}

// pick returns the datums at the given indices.
func pick(batch []backend.Datum, idx []int) []backend.Datum {
	out := make([]backend.Datum, len(idx))
	for k, i := range idx {
		out[k] = batch[i]
	}
	return out
}

// scatter puts the logprobs of the datums at idx back in batch order.
func scatter(lp [][]float32, idx []int, got [][]float32) {
	for k, i := range idx {
		lp[i] = got[k]
	}
}

// passes makes the remote calls of one loss: it submits each, awaits
// those a later call reads, and returns the learner's logprobs of the
// targets, from the first call (before any update), as a Future that
// awaits the last.
func (m *Model) passes(ctx context.Context, batch []backend.Datum, loss *backend.Loss) (backend.Future[[][]float32], error) {
	mean := m.cfg.Reduction == DatumMean
	var lp [][]float32
	// The rest of the loss, after the ratio term's own call.
	rest := *loss
	_, ratio, _ := loss.Needs()
	if ratio {
		rest.PolicyGradient = backend.NoPolicyGradient
	}
	ce := crossEntropyTerms(&rest)
	if ratio {
		data := make([]tinker.Datum, len(batch))
		for i := range batch {
			d := &batch[i]
			adv, weights := make([]float32, d.Len()), make([]float32, d.Len())
			for j, w := range d.Weights {
				adv[j], weights[j] = d.Advantages[j]*w, mask(w)
				if mean {
					adv[j], weights[j] = adv[j]*float32(d.Len()), 1
				}
			}
			data[i] = datum(d, map[string]tinker.TensorData{
				"weights": tinker.Floats(weights), "advantages": tinker.Floats(adv), "logprobs": tinker.Floats(d.SamplerLogprobs)})
		}
		fn, cfg := tinker.ImportanceSampling, map[string]float64(nil)
		clip := map[string]float64{tinker.ClipLowThreshold: 1 - float64(loss.ClipLow), tinker.ClipHighThreshold: 1 + float64(loss.ClipHigh)}
		switch loss.PolicyGradient {
		case backend.ClippedPG:
			fn, cfg = tinker.PPO, clip
		case backend.CISPO:
			fn, cfg = tinker.CISPO, clip
		case backend.DRO:
			// Tinker's dro weighs its penalty by no weight, so the
			// weights folded into the advantages here would not reach it.
			return nil, fmt.Errorf("remote: the DRO term is not sent to a remote learner")
		}
		p, err := m.submitForward(ctx, tinker.PathForwardBackward, fn, cfg, data)
		if err != nil {
			return nil, err
		}
		ratioCall := func(ctx context.Context) ([][]float32, error) { return m.outputs(ctx, p, batch) }
		if !ce {
			return ratioCall, nil
		}
		if lp, err = ratioCall(ctx); err != nil {
			return nil, err
		}
	}
	if rest.RefKL != 0 && lp == nil || mean && lp == nil && ce {
		var err error
		if lp, err = m.Logprobs(ctx, batch); err != nil {
			return nil, err
		}
	}
	if !ce {
		return backend.Done(lp), nil
	}
	data := make([]tinker.Datum, len(batch))
	for i := range batch {
		d := &batch[i]
		// cross_entropy's −c·logp has gradient −c: c is minus the rest's.
		c := make([]float32, d.Len())
		for j, w := range d.Weights {
			if w == 0 {
				continue
			}
			logp := 0.0 // read only by the reference KL, which fetched lp
			if lp != nil {
				logp = float64(lp[i][j])
			}
			c[j] = float32(-rest.LogpTerms(logp, d.Inputs(j)).DLogp)
		}
		if mean {
			ones := make([]float32, d.Len())
			for j := range ones {
				ones[j] = 1
				c[j] *= float32(d.Len())
			}
			data[i] = datum(d, map[string]tinker.TensorData{"weights": tinker.Floats(ones), "advantages": tinker.Floats(c), "logprobs": tinker.Floats(lp[i])})
		} else {
			data[i] = datum(d, map[string]tinker.TensorData{"weights": tinker.Floats(c)})
		}
	}
	fn := tinker.CrossEntropy
	if mean {
		fn = tinker.ImportanceSampling
	}
	p, err := m.submitForward(ctx, tinker.PathForwardBackward, fn, nil, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([][]float32, error) {
		got, err := m.outputs(ctx, p, batch)
		switch {
		case err != nil:
			return nil, err
		case lp != nil: // the first call's, before this one's update
			return lp, nil
		}
		return got, nil
	}, nil
}

// crossEntropyTerms says the loss has a term the cross_entropy pass
// carries: one whose gradient with respect to logp the client computes.
func crossEntropyTerms(l *backend.Loss) bool {
	return l.NLL != 0 || l.PolicyGradient == backend.Reinforce || l.RefKL != 0
}

func mask(w float32) float32 {
	if w != 0 {
		return 1
	}
	return 0
}

// datum is the wire form of d with the given loss inputs and its targets.
func datum(d *backend.Datum, inputs map[string]tinker.TensorData) tinker.Datum {
	inputs["target_tokens"] = tinker.Ints(d.Targets)
	return tinker.Datum{ModelInput: tinker.Text(d.Tokens), LossFnInputs: inputs}
}

// Logprobs implements backend.Logprober: a forward call, which changes
// no gradient, returning the model's logprobs of every target.
func (m *Model) Logprobs(ctx context.Context, batch []backend.Datum) ([][]float32, error) {
	p, err := m.submitLogprobs(ctx, batch)
	if err != nil {
		return nil, err
	}
	return m.outputs(ctx, p, batch)
}

// submitLogprobs submits Logprobs' forward call.
func (m *Model) submitLogprobs(ctx context.Context, batch []backend.Datum) (*Pending, error) {
	data := make([]tinker.Datum, len(batch))
	for i := range batch {
		d := &batch[i]
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("remote: datum %d: %w", i, err)
		}
		data[i] = datum(d, map[string]tinker.TensorData{"weights": tinker.Floats(make([]float32, d.Len()))})
	}
	return m.submitForward(ctx, tinker.PathForward, tinker.CrossEntropy, nil, data)
}

// submitForward submits a forward or forward_backward call.
func (m *Model) submitForward(ctx context.Context, path, fn string, cfg map[string]float64, data []tinker.Datum) (*Pending, error) {
	name := "forward_backward"
	if path == tinker.PathForward {
		name = "forward"
	}
	in := tinker.ForwardBackwardInput{Data: data, LossFn: fn, LossFnConfig: cfg}
	return m.submit(ctx, name, path, func(seq *int64) any {
		if path == tinker.PathForward {
			return tinker.ForwardRequest{ModelID: m.id, Input: in, SeqID: seq}
		}
		return tinker.ForwardBackwardRequest{ModelID: m.id, Input: in, SeqID: seq}
	})
}

// outputs awaits a forward or forward_backward call and returns the
// learner's logprobs of batch's targets, checking that they fit.
func (m *Model) outputs(ctx context.Context, p *Pending, batch []backend.Datum) ([][]float32, error) {
	name := p.call
	var out tinker.ForwardBackwardOutput
	if err := m.await(ctx, p, &out); err != nil {
		return nil, err
	}
	if len(out.LossFnOutputs) != len(batch) {
		return nil, &CallError{Call: name, Message: fmt.Sprintf("%d outputs for %d datums", len(out.LossFnOutputs), len(batch))}
	}
	lp := make([][]float32, len(batch))
	for i, o := range out.LossFnOutputs {
		t, ok := o["logprobs"]
		if !ok {
			return nil, &CallError{Call: name, Message: fmt.Sprintf("output %d has no logprobs", i)}
		}
		v, err := t.Float32s()
		if err != nil {
			return nil, &CallError{Call: name, Message: fmt.Sprintf("output %d: logprobs", i), Err: err}
		}
		if len(v) != batch[i].Len() {
			return nil, &CallError{Call: name, Message: fmt.Sprintf("output %d has %d logprobs for %d targets", i, len(v), batch[i].Len())}
		}
		for j, x := range v {
			if x > 0 {
				return nil, &CallError{Call: name, Message: fmt.Sprintf("output %d: logprobs[%d] = %v is positive", i, j, x)}
			}
		}
		lp[i] = v
	}
	return lp, nil
}

// checkBatch checks the datums and that they carry what the loss reads.
func checkBatch(batch []backend.Datum, loss *backend.Loss) error {
	if len(batch) == 0 {
		return fmt.Errorf("remote: empty batch")
	}
	for i := range batch {
		if err := loss.CheckDatum(&batch[i]); err != nil {
			return fmt.Errorf("remote: datum %d: %w", i, err)
		}
	}
	return nil
}

// metrics computes, from the learner's logprobs, the sums the local
// engine reports; the entropy is unknown remotely and stays 0.
func metrics(batch []backend.Datum, l *backend.Loss, lp [][]float32) backend.Metrics {
	var met backend.Metrics
	for i := range batch {
		d := &batch[i]
		for j, w := range d.Weights {
			if w == 0 {
				continue
			}
			logp := float64(lp[i][j])
			met.AddPosition(logp, l.LogpTerms(logp, d.Inputs(j)))
		}
	}
	return met
}
