package optim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"rlvr/engine/parallel"
)

// Segment is a named region of the parameter slab, usually one tensor.
type Segment struct {
	Name        string
	Offset, Len int
	// Decay reports whether weight decay applies. Norm gains and biases
	// conventionally get none.
	Decay bool
}

// AdamWConfig holds the AdamW hyperparameters. Every field is taken
// literally, zero included: zero does not mean "use the default". Start
// from [DefaultAdamW] and override what you need.
type AdamWConfig struct {
	// Beta1 is the decay rate of the first-moment (mean) estimate, in [0, 1).
	// Zero disables momentum: each update uses only the current gradient.
	Beta1 float64 `yaml:"beta1" json:"beta1"`
	// Beta2 is the decay rate of the second-moment (uncentred variance)
	// estimate, in [0, 1). Zero normalises by the current gradient alone,
	// which makes the update close to sign descent.
	Beta2 float64 `yaml:"beta2" json:"beta2"`
	// Eps is added to the denominator for numerical stability; it must be
	// positive, since a zero gradient would otherwise divide 0 by 0.
	Eps float64 `yaml:"eps" json:"eps"`
	// WeightDecay is the decoupled decay rate: each step multiplies
	// parameters in Decay segments by (1 - lr*WeightDecay). It must be >= 0;
	// zero disables decay.
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"`
}

// DefaultAdamW returns the Tinker-style defaults: Beta1 0.9, Beta2 0.95,
// Eps 1e-8 and no weight decay.
func DefaultAdamW() AdamWConfig {
	return AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
}

// Validate reports every invalid field at once, naming each field and value.
func (c AdamWConfig) Validate() error {
	var probs []string
	if !(c.Beta1 >= 0 && c.Beta1 < 1) {
		probs = append(probs, fmt.Sprintf("Beta1 = %v, want in [0, 1)", c.Beta1))
	}
	if !(c.Beta2 >= 0 && c.Beta2 < 1) {
		probs = append(probs, fmt.Sprintf("Beta2 = %v, want in [0, 1)", c.Beta2))
	}
	if !(c.Eps > 0) || math.IsInf(c.Eps, 0) {
		probs = append(probs, fmt.Sprintf("Eps = %v, want finite and > 0", c.Eps))
	}
	if !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0) {
		probs = append(probs, fmt.Sprintf("WeightDecay = %v, want finite and >= 0", c.WeightDecay))
	}
	return problems("AdamW config", probs)
}

// problems turns a list of problems into one error, or nil if there are none.
func problems(what string, probs []string) error {
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("optim: invalid %s: %s", what, strings.Join(probs, "; "))
}

// NonFiniteError reports a NaN or Inf gradient found by [AdamW.Step].
type NonFiniteError struct {
	// Segment is the name of the segment holding the value, or "" if no
	// segment covers it.
	Segment string
	// Index is the position inside the segment, or in the whole slab when
	// Segment is "".
	Index int
	Value float32
}

func (e *NonFiniteError) Error() string {
	if e.Segment == "" {
		return fmt.Sprintf("optim: non-finite gradient %v at slab index %d", e.Value, e.Index)
	}
	return fmt.Sprintf("optim: non-finite gradient %v in %s[%d]", e.Value, e.Segment, e.Index)
}

// AdamW is the Adam optimizer with decoupled weight decay (Loshchilov &
// Hutter, "Decoupled Weight Decay Regularization"), updating one flat
// parameter slab in place. Per element, at step t (counted from 1):
//
//	p -= lr*wd*p                       (Decay segments only)
//	m  = beta1*m + (1-beta1)*g
//	v  = beta2*v + (1-beta2)*g*g
//	p -= lr * (m/(1-beta1^t)) / (sqrt(v/(1-beta2^t)) + eps)
//
// which matches PyTorch's torch.optim.AdamW.
//
// Large slabs are updated in contiguous chunks on the threads of package
// parallel; since every element's update is independent, the result is
// bit-identical to a serial update, and the chunk functions are bound once
// so Step allocates nothing. An AdamW is not safe for concurrent use.
type AdamW struct {
	cfg  AdamWConfig
	runs []run // disjoint, sorted, covering [0, len(m)) exactly
	m, v []float32
	step int64

	bad []bool // one entry per chunk: did the finiteness check fail there?

	// The current Step's arguments and coefficients, read by the chunk
	// functions. params and grads are cleared when Step returns so the
	// optimizer does not keep the caller's slabs alive.
	params, grads []float32
	k             kernel
	decay         float32
	checkFn       func(chunk int) // a.checkChunk over chunk's range, bound once
	updateFn      func(chunk int) // a.updateChunk over chunk's range, bound once
}

// run is a stretch of the slab with uniform decay; gaps between segments
// become unnamed, undecayed runs so the update loop needs no special cases.
type run struct {
	name       string
	off, end   int
	decay      bool
	hasSegment bool
}

// NewAdamW returns an optimizer for a slab of nParams parameters described
// by segs. Segments may come in any order but must lie inside the slab and
// must not overlap; elements no segment covers are updated without weight
// decay. The moment slabs are allocated here, once.
func NewAdamW(cfg AdamWConfig, nParams int, segs []Segment) (*AdamW, error) {
	// Below about minChunk elements per goroutine the handoff costs more
	// than the parallel speedup saves.
	const minChunk = 1 << 15
	return newAdamW(cfg, nParams, segs, min(parallel.Threads(), nParams/minChunk))
}

// newAdamW is NewAdamW with an explicit number of chunks (<= 1 is serial),
// so tests can exercise the parallel path on small slabs.
func newAdamW(cfg AdamWConfig, nParams int, segs []Segment, chunks int) (*AdamW, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nParams < 0 {
		return nil, fmt.Errorf("optim: nParams = %d, want >= 0", nParams)
	}
	runs, err := buildRuns(nParams, segs)
	if err != nil {
		return nil, err
	}
	a := &AdamW{
		cfg:  cfg,
		runs: runs,
		m:    make([]float32, nParams),
		v:    make([]float32, nParams),
		bad:  make([]bool, max(chunks, 1)),
	}
	a.checkFn = func(c int) { lo, hi := a.chunk(c); a.checkChunk(c, lo, hi) }
	a.updateFn = func(c int) { lo, hi := a.chunk(c); a.updateChunk(c, lo, hi) }
	return a, nil
}

// chunk returns the slab range [lo, hi) of chunk c.
func (a *AdamW) chunk(c int) (lo, hi int) {
	n, chunks := len(a.m), len(a.bad)
	per := (n + chunks - 1) / chunks
	return min(c*per, n), min((c+1)*per, n)
}

func buildRuns(n int, segs []Segment) ([]run, error) {
	sorted := slices.Clone(segs)
	slices.SortStableFunc(sorted, func(a, b Segment) int { return a.Offset - b.Offset })
	var runs []run
	pos := 0
	for i, s := range sorted {
		if s.Offset < 0 || s.Len < 0 || s.Offset > n-s.Len {
			return nil, fmt.Errorf("optim: segment %q [%d, %d+%d) outside slab of %d", s.Name, s.Offset, s.Offset, s.Len, n)
		}
		if s.Offset < pos {
			p := sorted[i-1]
			return nil, fmt.Errorf("optim: segment %q [%d, %d) overlaps %q [%d, %d)",
				s.Name, s.Offset, s.Offset+s.Len, p.Name, p.Offset, p.Offset+p.Len)
		}
		if s.Len == 0 {
			continue
		}
		if s.Offset > pos {
			runs = append(runs, run{off: pos, end: s.Offset})
		}
		runs = append(runs, run{name: s.Name, off: s.Offset, end: s.Offset + s.Len, decay: s.Decay, hasSegment: true})
		pos = s.Offset + s.Len
	}
	if pos < n {
		runs = append(runs, run{off: pos, end: n})
	}
	return runs, nil
}

// Config returns the optimizer's current hyperparameters.
func (a *AdamW) Config() AdamWConfig { return a.cfg }

// SetConfig replaces the hyperparameters from the next Step on, keeping the
// moment estimates and the step count: a service that receives AdamW's
// settings with every step (Tinker's adam_params) applies them this way.
// An invalid config is an error and changes nothing.
func (a *AdamW) SetConfig(cfg AdamWConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	a.cfg = cfg
	return nil
}

// Step applies one AdamW update with learning rate lr to params, using and
// then zeroing grads, so the caller can accumulate the next step's gradients
// straight into the same slab. A successful Step does not allocate.
//
// Before touching anything it checks that every gradient is finite. If one
// is not, Step returns a *[NonFiniteError] for the first such element and
// leaves params, grads, the moments and the step counter exactly as they
// were; the caller decides whether to skip the batch (clear(grads)) or stop.
// Any other error (wrong slab length, bad lr) likewise changes nothing.
func (a *AdamW) Step(params, grads []float32, lr float32) error {
	n := len(a.m)
	if len(params) != n || len(grads) != n {
		return fmt.Errorf("optim: AdamW.Step got %d params and %d grads, want %d", len(params), len(grads), n)
	}
	if !(lr >= 0) || math.IsInf(float64(lr), 0) {
		return fmt.Errorf("optim: AdamW.Step lr = %v, want finite and >= 0", lr)
	}
	a.params, a.grads = params, grads
	defer func() { a.params, a.grads = nil, nil }()

	a.forChunks(a.checkFn)
	if slices.Contains(a.bad, true) {
		return a.nonFinite(grads)
	}

	a.step++
	// Scalars are derived in float64 once per step; the per-element loop
	// runs in float32.
	t := float64(a.step)
	lr64 := float64(lr)
	bc1 := 1 - math.Pow(a.cfg.Beta1, t)
	bc2 := 1 - math.Pow(a.cfg.Beta2, t)
	a.k = kernel{
		b1:       float32(a.cfg.Beta1),
		c1:       float32(1 - a.cfg.Beta1),
		b2:       float32(a.cfg.Beta2),
		c2:       float32(1 - a.cfg.Beta2),
		stepSize: float32(lr64 / bc1),
		invBC2:   float32(1 / math.Sqrt(bc2)),
		eps:      float32(a.cfg.Eps),
	}
	a.decay = float32(1 - lr64*a.cfg.WeightDecay)
	a.forChunks(a.updateFn)
	return nil
}

// forChunks calls fn on the contiguous chunks covering the slab, in
// parallel, and waits for all of them.
func (a *AdamW) forChunks(fn func(chunk int)) { parallel.Run(len(a.bad), fn) }

// checkChunk records whether grads[lo:hi] holds a NaN or Inf.
func (a *AdamW) checkChunk(chunk, lo, hi int) {
	a.bad[chunk] = false
	for _, g := range a.grads[lo:hi] {
		if !finite(g) {
			a.bad[chunk] = true
			return
		}
	}
}

// updateChunk applies the current step to [lo, hi), which may span several
// runs.
func (a *AdamW) updateChunk(_, lo, hi int) {
	for _, r := range a.runs {
		lo, hi := max(lo, r.off), min(hi, r.end)
		if lo >= hi {
			continue
		}
		keep := float32(1)
		if r.decay {
			keep = a.decay
		}
		a.k.update(a.params[lo:hi], a.grads[lo:hi], a.m[lo:hi], a.v[lo:hi], keep)
	}
}

// finite reports whether x is neither NaN nor Inf: all exponent bits set
// means one of those, and testing the bits is cheaper than two float64
// classifications.
func finite(x float32) bool {
	return math.Float32bits(x)&0x7f800000 != 0x7f800000
}

// nonFinite returns a *NonFiniteError for the first NaN or Inf in grads.
// It runs only after the parallel check found one, so it can be simple.
func (a *AdamW) nonFinite(grads []float32) error {
	for _, r := range a.runs {
		for i, g := range grads[r.off:r.end] {
			if finite(g) {
				continue
			}
			if !r.hasSegment {
				i += r.off
			}
			return &NonFiniteError{Segment: r.name, Index: i, Value: g}
		}
	}
	panic("optim: chunk check found a non-finite gradient that the scan did not")
}

// kernel holds one step's float32 coefficients.
type kernel struct {
	b1, c1, b2, c2   float32 // beta and 1-beta for each moment
	stepSize, invBC2 float32 // lr/(1-beta1^t) and 1/sqrt(1-beta2^t)
	eps              float32
}

// update runs the AdamW update over equal-length slices in a single pass,
// multiplying params by keep (1-lr*wd, or 1 without decay) first.
func (k kernel) update(p, g, m, v []float32, keep float32) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)] // lets the compiler drop bounds checks
	for i := range p {
		gi := g[i]
		mi := k.b1*m[i] + k.c1*gi
		vi := k.b2*v[i] + k.c2*gi*gi
		m[i], v[i], g[i] = mi, vi, 0
		den := float32(math.Sqrt(float64(vi)))*k.invBC2 + k.eps
		p[i] = p[i]*keep - k.stepSize*mi/den
	}
}

// State returns the optimizer's moment slabs and the number of updates
// applied so far, for checkpointing. m and v alias the optimizer's own
// storage: read (or save) them between steps, do not modify them; use
// [AdamW.SetState] to restore.
func (a *AdamW) State() (m, v []float32, step int64) {
	return a.m, a.v, a.step
}

// SetState copies m and v into the optimizer and sets its step counter, as
// when resuming from a checkpoint. It returns an error, changing nothing, if
// the lengths do not match the slab or step is negative.
func (a *AdamW) SetState(m, v []float32, step int64) error {
	if len(m) != len(a.m) || len(v) != len(a.v) {
		return fmt.Errorf("optim: AdamW.SetState got m of %d and v of %d, want %d", len(m), len(v), len(a.m))
	}
	if step < 0 {
		return fmt.Errorf("optim: AdamW.SetState step = %d, want >= 0", step)
	}
	copy(a.m, m)
	copy(a.v, v)
	a.step = step
	return nil
}
