// Package local is the in-process backend: rlvr's own CPU engine behind the
// backend.Learner interface, and behind package sample's contract of
// generation (Sampler). Every test and the built-in world run on it.
package local

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"rlvr/backend"
	"rlvr/engine/lora"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/format/hfconfig"
)

// Learner trains a model in this process. It is not safe for concurrent
// use.
type Learner struct {
	Model *model.Model
	Opt   *optim.AdamW
	// HFConfig, when set, is the config.json Save writes (token ids,
	// architecture); nil takes Source's config.json, or derives one from
	// the model when there is no Source.
	HFConfig *hfconfig.Config
	// Source is the model directory whose tokenizer files Save copies.
	// They are read at the first Save and written from memory after, so
	// that a run may delete Source (pruning the checkpoint it resumed
	// from) and still save complete directories.
	Source string

	sourceFiles map[string][]byte // Source's tokenizer files; nil until read
	sourceRead  string            // the Source they were read from

	named map[string]*optim.AdamW // backend.OptimParams.State's states; nil until one steps

	// LoRA, when set, holds the adapters the learner trains in place of
	// every parameter (NewLoRALearner): Opt steps their parameters, and
	// each step merges them into Model.
	LoRA *lora.Adapters
}

// NewLearner wraps m with an AdamW optimizer. Weight decay applies to the
// matrices, not to norms and biases.
func NewLearner(m *model.Model, cfg optim.AdamWConfig) (*Learner, error) {
	opt, err := newAdamW(m, cfg)
	if err != nil {
		return nil, err
	}
	return &Learner{Model: m, Opt: opt}, nil
}

// NewLoRALearner wraps m with low-rank adapters over the matrices cfg
// chooses, m's weights as their frozen base, and an AdamW optimizer over
// the adapters alone.
func NewLoRALearner(m *model.Model, adam optim.AdamWConfig, cfg lora.Config) (*Learner, error) {
	a, err := lora.New(m, cfg)
	if err != nil {
		return nil, err
	}
	l := &Learner{Model: m, LoRA: a}
	if l.Opt, err = l.newAdamW(adam); err != nil {
		return nil, err
	}
	return l, nil
}

func newAdamW(m *model.Model, cfg optim.AdamWConfig) (*optim.AdamW, error) {
	segs := make([]optim.Segment, len(m.Tensors))
	for i, t := range m.Tensors {
		segs[i] = optim.Segment{Name: t.Name, Offset: t.Offset, Len: t.Len(), Decay: t.Decay}
	}
	return optim.NewAdamW(cfg, m.NumParams(), segs)
}

// newAdamW is a fresh optimizer over what the learner trains: the model's
// parameters, or its adapters'.
func (l *Learner) newAdamW(cfg optim.AdamWConfig) (*optim.AdamW, error) {
	if l.LoRA == nil {
		return newAdamW(l.Model, cfg)
	}
	return optim.NewAdamW(cfg, l.LoRA.NumParams(), l.LoRA.Segments())
}

// trained returns the slabs the optimizer steps, with the gradients of
// the last passes in the second: the model's, or, with adapters, theirs,
// projected from the model's.
func (l *Learner) trained() (params, grads []float32) {
	if l.LoRA == nil {
		return l.Model.Params, l.Model.Gradients()
	}
	l.LoRA.Project(l.Model.Gradients())
	return l.LoRA.Params, l.LoRA.Grads
}

// optimizer is the AdamW state a step names (backend.OptimParams.State):
// Opt for "", a state of its own otherwise, made fresh with Opt's
// settings the first time.
func (l *Learner) optimizer(name string) (*optim.AdamW, error) {
	if name == "" {
		return l.Opt, nil
	}
	if a, ok := l.named[name]; ok {
		return a, nil
	}
	a, err := l.newAdamW(l.Opt.Config())
	if err != nil {
		return nil, fmt.Errorf("local: optimizer state %q: %w", name, err)
	}
	if l.named == nil {
		l.named = map[string]*optim.AdamW{}
	}
	l.named[name] = a
	return a, nil
}

// packed is a batch in the engine's terms, and where each datum's
// positions went: datum d is its parent's sequence parent[d] (−1: none),
// then its own sequence seq[d].
type packed struct {
	b           model.Batch
	t           model.Targets
	teacher     *model.TeacherBatch
	parent, seq []int
}

// pack turns datums into the engine's packed batch and targets, and the
// teacher batch when the loss has a teacher-KL term. Consecutive datums
// that begin with the same context (tokens and targets equal, weight 0, no
// teacher: a GRPO group's prompt) share it: it is packed once, as the
// parent of each datum's rest (see model.Batch).
func pack(batch []backend.Datum, loss *backend.Loss) (packed, error) {
	var p packed
	if len(batch) == 0 {
		return p, fmt.Errorf("local: empty batch")
	}
	for i := range batch {
		if err := loss.CheckDatum(&batch[i]); err != nil {
			return p, fmt.Errorf("local: datum %d: %w", i, err)
		}
	}
	adv, q, ref := loss.Needs()
	b, t := &p.b, &p.t
	b.Offsets = []int{0}
	if loss.TeacherKL != 0 {
		p.teacher = &model.TeacherBatch{Batch: model.Batch{Offsets: []int{0}}}
		t.TeacherRows = []int32{}
	}
	// add packs positions [lo, hi) of d as a sequence with the given
	// parent, and returns its index.
	add := func(d *backend.Datum, lo, hi, parent int) int {
		start := len(b.Tokens)
		b.Tokens = append(b.Tokens, d.Tokens[lo:hi]...)
		b.Offsets = append(b.Offsets, len(b.Tokens))
		b.Parents = append(b.Parents, parent)
		t.Targets = append(t.Targets, d.Targets[lo:hi]...)
		t.Weights = append(t.Weights, d.Weights[lo:hi]...)
		if adv {
			t.Advantages = append(t.Advantages, d.Advantages[lo:hi]...)
		}
		if q {
			t.SamplerLogprobs = append(t.SamplerLogprobs, d.SamplerLogprobs[lo:hi]...)
		}
		if ref {
			t.RefLogprobs = append(t.RefLogprobs, d.RefLogprobs[lo:hi]...)
		}
		if tb := p.teacher; tb != nil {
			for range hi - lo {
				t.TeacherRows = append(t.TeacherRows, -1)
			}
			// The aligned positions are the datum's last, never shared.
			if d.Teacher != nil && hi == len(d.Tokens) {
				tStart := len(tb.Batch.Tokens)
				tb.Batch.Tokens = append(tb.Batch.Tokens, d.Teacher.Tokens...)
				tb.Batch.Offsets = append(tb.Batch.Offsets, len(tb.Batch.Tokens))
				for k := d.Teacher.Aligned; k >= 1; k-- {
					t.TeacherRows[start+hi-lo-k] = int32(len(tb.Positions))
					tb.Positions = append(tb.Positions, tStart+len(d.Teacher.Tokens)-k)
				}
			}
		}
		return len(b.Offsets) - 2
	}
	p.parent, p.seq = make([]int, len(batch)), make([]int, len(batch))
	for i := 0; i < len(batch); {
		// The run of datums from i that share with it the context it
		// shares with the next: a group's prompt. A shorter context that
		// later datums share too (a system prompt common to every
		// group) ends the run, so each group keeps its whole prompt.
		j, c, parent := i+1, 0, -1
		if i+1 < len(batch) {
			c = sharedContext(&batch[i], &batch[i+1])
		}
		if c > 0 {
			j = i + 2
			for j < len(batch) && sharedContext(&batch[i], &batch[j]) >= c {
				j++
			}
			parent = add(&batch[i], 0, c, -1)
		}
		for k := i; k < j; k++ {
			p.parent[k], p.seq[k] = parent, add(&batch[k], c, len(batch[k].Tokens), parent)
		}
		i = j
	}
	if p.teacher != nil && len(p.teacher.Positions) == 0 {
		return p, fmt.Errorf("local: the loss has a teacher-KL term but no datum has a teacher")
	}
	if !slices.ContainsFunc(b.Parents, func(q int) bool { return q >= 0 }) {
		b.Parents = nil
	}
	return p, nil
}

// sharedContext is how many leading positions a and b share as context:
// equal tokens and targets, weight 0 in both, and outside a teacher's
// aligned positions. Each keeps at least one position of its own.
func sharedContext(a, b *backend.Datum) int {
	n := min(len(a.Tokens), len(b.Tokens)) - 1
	for _, d := range []*backend.Datum{a, b} {
		if d.Teacher != nil {
			n = min(n, len(d.Tokens)-d.Teacher.Aligned)
		}
	}
	for i := range max(n, 0) {
		if a.Tokens[i] != b.Tokens[i] || a.Targets[i] != b.Targets[i] || a.Weights[i] != 0 || b.Weights[i] != 0 {
			return i
		}
	}
	return max(n, 0)
}

// datumError restates an engine error at a packed position as one at the
// datum's own position: a shared context is the first datum's of its run.
func (p *packed) datumError(err error) error {
	var pe *model.PositionError
	if !errors.As(err, &pe) {
		return err
	}
	off := p.b.Offsets
	for d, s := range p.seq {
		pos := pe.Position
		switch q := p.parent[d]; {
		case q >= 0 && q == pe.Sequence:
		case s == pe.Sequence:
			if q >= 0 {
				pos += off[q+1] - off[q]
			}
		default:
			continue
		}
		return fmt.Errorf("%s: datum %d position %d: %s", pe.What, d, pos, pe.Detail)
	}
	return err
}

// split returns each datum's values of v (one per packed position): its
// parent's, then its own.
func (p *packed) split(v []float32) [][]float32 {
	out := make([][]float32, len(p.seq))
	off := p.b.Offsets
	for d, s := range p.seq {
		own := v[off[s]:off[s+1]]
		if q := p.parent[d]; q >= 0 {
			own = append(append(make([]float32, 0, off[q+1]-off[q]+len(own)), v[off[q]:off[q+1]]...), own...)
		}
		out[d] = own
	}
	return out
}

// ForwardBackward implements backend.Learner.
func (l *Learner) ForwardBackward(ctx context.Context, batch []backend.Datum, loss backend.Loss) (backend.Result, error) {
	if err := ctx.Err(); err != nil {
		return backend.Result{}, err
	}
	if err := loss.Validate(); err != nil {
		return backend.Result{}, fmt.Errorf("local: %w", err)
	}
	p, err := pack(batch, &loss)
	if err != nil {
		return backend.Result{}, err
	}
	lp := make([]float32, len(p.b.Tokens))
	met, err := l.Model.ForwardBackward(p.b, p.t, engineLoss(loss), p.teacher, lp)
	if err != nil {
		return backend.Result{}, fmt.Errorf("local: %w", p.datumError(err))
	}
	return backend.Result{Logprobs: p.split(lp), Metrics: backend.Metrics(met)}, nil
}

// engineLoss is loss in the engine's terms: the terms of the target's
// logprob alone stay backend.Loss.LogpTerms, the one statement of them,
// and the engine adds the entropy and teacher-KL terms.
func engineLoss(loss backend.Loss) model.Loss {
	logp := logpLoss(loss)
	logp.Entropy, logp.TeacherKL = 0, 0
	return model.Loss{Logp: &logp, Entropy: loss.Entropy, TeacherKL: loss.TeacherKL}
}

// logpLoss is a backend.Loss without its entropy and teacher-KL terms: the
// engine's model.LogpLoss. The engine's and the backend's per-token types
// have the same fields, so they convert into each other.
type logpLoss backend.Loss

func (l *logpLoss) LogpTerms(logp float64, in model.TokenInputs) model.TokenTerms {
	return model.TokenTerms((*backend.Loss)(l).LogpTerms(logp, backend.TokenInputs(in)))
}

// Inert asks backend.Loss.Inert with no teacher: the engine checks the
// teacher-KL term itself.
func (l *logpLoss) Inert(in model.TokenInputs) bool {
	return (*backend.Loss)(l).Inert(backend.TokenInputs(in), false)
}

func (l *logpLoss) Needs() (advantages, samplerLogprobs, refLogprobs bool) {
	return (*backend.Loss)(l).Needs()
}

// Logprobs implements backend.Learner.
func (l *Learner) Logprobs(ctx context.Context, batch []backend.Datum) ([][]float32, error) {
	return Logprobs(ctx, l.Model, batch)
}

// Logprobs runs m forward over batch and returns every target's logprob,
// one slice per datum: a frozen reference model needs no learner.
func Logprobs(ctx context.Context, m *model.Model, batch []backend.Datum) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := pack(batch, &backend.Loss{NLL: 1})
	if err != nil {
		return nil, err
	}
	lp := make([]float32, len(p.b.Tokens))
	if err := m.Logprobs(p.b, p.t.Targets, lp, nil); err != nil {
		return nil, fmt.Errorf("local: %w", p.datumError(err))
	}
	return p.split(lp), nil
}

// OptimStep implements backend.Learner: it clips the global gradient norm,
// applies AdamW with the state p.State names and clears the gradients. A NaN or Inf gradient is reported
// with the tensor and index where it sits; no weight changes.
func (l *Learner) OptimStep(ctx context.Context, p backend.OptimParams) (backend.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return backend.StepResult{}, err
	}
	opt, err := l.optimizer(p.State)
	if err != nil {
		return backend.StepResult{}, err
	}
	params, g := l.trained()
	norm := optim.GradNorm(g)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		// Step finds and names the first non-finite gradient and refuses.
		err := opt.Step(params, g, p.LearningRate)
		return backend.StepResult{GradNorm: norm}, fmt.Errorf("local: optimizer step refused: %w", err)
	}
	if p.GradClipNorm > 0 && norm > float64(p.GradClipNorm) {
		scale := float32(float64(p.GradClipNorm) / norm)
		for i := range g {
			g[i] *= scale
		}
	}
	if err := opt.Step(params, g, p.LearningRate); err != nil {
		return backend.StepResult{GradNorm: norm}, fmt.Errorf("local: %w", err)
	}
	if l.LoRA != nil {
		// Step cleared the adapters' gradients; the model's, which they
		// were projected from, are cleared here, and the step merged.
		l.Model.ZeroGrad()
		l.LoRA.Merge(l.Model.Params)
	}
	return backend.StepResult{GradNorm: norm}, nil
}
