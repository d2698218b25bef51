// Package backend is the seam between rlvr's methods and whatever computes
// gradients and samples: the local CPU engine today, a Tinker-compatible
// training service later. It holds only types and interfaces, shaped like
// the Tinker API (forward_backward / optim_step / sample / save), so that a
// remote backend is a thin translation and method code never changes.
//
// Reduction follows Tinker: a learner SUMS its per-token loss terms. Every
// aggregation mode (token-mean, seq-mean-token-mean, Dr.GRPO's constant) is
// folded into the per-token Weights by Aggregate, in one place, so both
// backends agree by construction.
package backend

import (
	"context"
	"fmt"
	"math"
)

// Datum is one sequence to train on. Position i of Tokens predicts
// Targets[i] (for a sequence x, Tokens = x[:-1] and Targets = x[1:]). The
// per-token slices have len(Tokens) entries, or are nil when the loss does
// not use them.
type Datum struct {
	Tokens  []int32
	Targets []int32
	// Weights scales every loss term at each position; 0 means the position
	// is context only (a prompt, an expert's reply). Aggregate folds the
	// loss aggregation mode into it.
	Weights []float32
	// Advantages are the per-token advantages of the policy-gradient terms.
	Advantages []float32
	// SamplerLogprobs are the sampler's logprobs of the targets, for the
	// importance ratio of the clipped and importance-sampling policy
	// gradients.
	SamplerLogprobs []float32
	// RefLogprobs are a frozen reference model's logprobs of the targets,
	// for the KL-to-reference term.
	RefLogprobs []float32
	// Teacher, when set, is the same continuation under another context
	// (MEML-GRPO's mutual learning): the teacher-KL term pulls this datum's
	// next-token distributions toward the teacher's, position by position.
	Teacher *Teacher
}

// Teacher is the teacher side of a distillation term. Its model input is
// Tokens; its last Aligned positions predict the same targets as the
// datum's last Aligned positions, and those are where the KL is taken. The
// teacher's distributions are computed by the learner's current weights
// with no gradient (stop-gradient on the teacher side).
type Teacher struct {
	Tokens  []int32
	Aligned int
}

// Len is the number of positions in the datum.
func (d *Datum) Len() int { return len(d.Tokens) }

// Validate checks that every per-token slice matches the token count and
// the teacher alignment fits both sequences. It names the slice at fault.
func (d *Datum) Validate() error {
	n := len(d.Tokens)
	if n == 0 {
		return fmt.Errorf("datum has no tokens")
	}
	if len(d.Targets) != n {
		return fmt.Errorf("datum has %d tokens but %d targets", n, len(d.Targets))
	}
	for _, s := range []struct {
		name string
		v    []float32
	}{{"weights", d.Weights}, {"advantages", d.Advantages}, {"sampler logprobs", d.SamplerLogprobs}, {"reference logprobs", d.RefLogprobs}} {
		if s.v != nil && len(s.v) != n {
			return fmt.Errorf("datum has %d tokens but %d %s", n, len(s.v), s.name)
		}
	}
	if d.Weights == nil {
		return fmt.Errorf("datum has no weights")
	}
	if t := d.Teacher; t != nil {
		if t.Aligned < 1 || t.Aligned > n || t.Aligned > len(t.Tokens) {
			return fmt.Errorf("teacher aligns %d positions but the datum has %d and the teacher %d", t.Aligned, n, len(t.Tokens))
		}
	}
	return nil
}

// PolicyGradient selects the policy-gradient term of a Loss.
type PolicyGradient string

const (
	// NoPolicyGradient leaves the term out.
	NoPolicyGradient PolicyGradient = ""
	// ClippedPG is PPO's clipped surrogate, −min(ρA, clip(ρ, 1−ε_low,
	// 1+ε_high)A), with ρ = exp(logp − sampler logp) (GRPO, DAPO, EAPO, MEL).
	ClippedPG PolicyGradient = "clipped"
	// Reinforce is −A·logp, the vanilla policy gradient (MEML-GRPO's eq. 6
	// with A = max(A, 0) computed by the method).
	Reinforce PolicyGradient = "reinforce"
	// Importance is the unclipped importance-sampling surrogate −ρA, with
	// ρ as in ClippedPG (Tinker's importance_sampling loss).
	Importance PolicyGradient = "importance"
	// CISPO is −sg(clip(ρ, 1−ε_low, 1+ε_high))·A·logp: REINFORCE weighed by
	// the clipped ratio, which is not differentiated, so a clipped token
	// still has a gradient (MiniMax-M1's CISPO; Tinker's cispo loss).
	CISPO PolicyGradient = "cispo"
	// DRO is −(A·logp − β/2·(logp − sampler logp)²): REINFORCE with a
	// quadratic penalty on the log-ratio, β = Loss.DROBeta (Richemond et
	// al. 2024; Tinker's dro loss).
	DRO PolicyGradient = "dro"
)

// KLEstimator names an estimator of KL(π ‖ π_ref) from one sample, with
// d = logp − ref logp (Schulman's k1, k2, k3).
type KLEstimator string

const (
	K1 KLEstimator = "k1" // d: unbiased, high variance, can be negative
	K2 KLEstimator = "k2" // d²/2: biased, low variance
	K3 KLEstimator = "k3" // exp(−d) − 1 + d: unbiased, non-negative (GRPO's)
)

// Estimate returns the estimator's value k at d = logp − ref logp and its
// derivative dk/dd; an unknown estimator gives 0, 0 (Loss.Validate refuses
// it first).
func (e KLEstimator) Estimate(d float64) (k, dk float64) {
	switch e {
	case K1:
		return d, 1
	case K2:
		return d * d / 2, d
	case K3:
		x := math.Exp(-d)
		return x - 1 + d, 1 - x
	}
	return 0, 0
}

// Loss is the per-token objective a ForwardBackward call sums. At each
// position, with w its weight:
//
//	w · ( NLL·(−logp) + PG term + RefKL·k(logp, ref) + TeacherKL·KL(q‖p) − Entropy·H(p) )
//
// A zero coefficient leaves its term out. The zero Loss is no loss at all.
type Loss struct {
	NLL            float32        // weight of the negative log-likelihood (SFT, RFT, MEL)
	PolicyGradient PolicyGradient // which policy-gradient term, if any
	// ClipLow and ClipHigh are ε_low and ε_high of ClippedPG and CISPO
	// (GRPO: 0.2, 0.2; DAPO's clip-higher: 0.2, 0.28).
	ClipLow, ClipHigh float32
	DROBeta           float32     // β of DRO's quadratic penalty
	RefKL             float32     // β of the KL to the reference (needs RefLogprobs)
	RefKLEstimator    KLEstimator // how that KL is estimated
	// TeacherKL weighs the exact full-vocabulary KL(teacher ‖ policy) at the
	// teacher-aligned positions. It needs next-token distributions, so only
	// the local backend offers it.
	TeacherKL float32
	Entropy   float32 // entropy bonus coefficient (subtracted from the loss)
}

// Validate reports every inconsistent setting of the loss at once.
func (l *Loss) Validate() error {
	var errs []string
	switch l.PolicyGradient {
	case NoPolicyGradient, Reinforce, Importance:
	case DRO:
		if !(l.DROBeta >= 0) || math.IsInf(float64(l.DROBeta), 0) {
			errs = append(errs, fmt.Sprintf("DRO beta %v must be finite and not negative", l.DROBeta))
		}
	case ClippedPG, CISPO:
		// A bound of exactly 1 (ε = 0) is allowed: Tinker's ppo accepts
		// clip thresholds of 1.
		if !(l.ClipLow >= 0 && l.ClipLow < 1) {
			errs = append(errs, fmt.Sprintf("clip low %v outside [0, 1)", l.ClipLow))
		}
		if !(l.ClipHigh >= 0) || math.IsInf(float64(l.ClipHigh), 0) {
			errs = append(errs, fmt.Sprintf("clip high %v must be finite and not negative", l.ClipHigh))
		}
	default:
		errs = append(errs, fmt.Sprintf("unknown policy gradient %q (want %q, %q, %q, %q or %q)", l.PolicyGradient, ClippedPG, Importance, Reinforce, CISPO, DRO))
	}
	if l.RefKL != 0 {
		switch l.RefKLEstimator {
		case K1, K2, K3:
		default:
			errs = append(errs, fmt.Sprintf("unknown KL estimator %q (want k1, k2 or k3)", l.RefKLEstimator))
		}
	}
	if l.NLL == 0 && l.PolicyGradient == NoPolicyGradient && l.RefKL == 0 && l.TeacherKL == 0 && l.Entropy == 0 {
		errs = append(errs, "every term is zero")
	}
	if len(errs) > 0 {
		return fmt.Errorf("loss: %s", join(errs))
	}
	return nil
}

func join(s []string) string {
	out := s[0]
	for _, e := range s[1:] {
		out += "; " + e
	}
	return out
}

// MaxLogRatio clamps logp − sampler logp before the importance ratio is
// exponentiated, so a stale sampler logprob cannot overflow it.
const MaxLogRatio = 20

// TokenInputs are one position's inputs to the terms that depend on the
// target's logprob alone: its weight, advantage, and the sampler's and
// the reference's logprobs (those the loss does not read may be 0). The
// engine's model.TokenInputs has the same fields, and so do
// model.TokenTerms and model.Metrics: backend/local converts between them.
type TokenInputs struct {
	Weight, Advantage, SamplerLogp, RefLogp float64
}

// Inputs is the datum's TokenInputs at position j; a nil per-token slice
// reads as 0.
func (d *Datum) Inputs(j int) TokenInputs {
	in := TokenInputs{Weight: float64(d.Weights[j])}
	if d.Advantages != nil {
		in.Advantage = float64(d.Advantages[j])
	}
	if d.SamplerLogprobs != nil {
		in.SamplerLogp = float64(d.SamplerLogprobs[j])
	}
	if d.RefLogprobs != nil {
		in.RefLogp = float64(d.RefLogprobs[j])
	}
	return in
}

// TokenTerms are the loss's terms at one position that depend only on the
// target's logprob — NLL, policy gradient, KL to the reference — with
// their derivative with respect to it.
type TokenTerms struct {
	Loss  float64 // their weighted sum
	DLogp float64 // d Loss / d logp
	Clip  int8    // −1 clipped at 1−ε_low, +1 at 1+ε_high, 0 not clipped
	RefKL float64 // the reference KL estimate k, unweighted
}

// LogpTerms evaluates those terms at logprob logp. The entropy and the
// teacher KL need the whole next-token distribution and are not among
// them. It is the one statement of these terms: the local engine adds the
// distribution terms to it, and a remote learner sends its derivative.
func (l *Loss) LogpTerms(logp float64, in TokenInputs) TokenTerms {
	var t TokenTerms
	w := in.Weight
	if l.NLL != 0 {
		t.Loss -= w * float64(l.NLL) * logp
		t.DLogp -= w * float64(l.NLL)
	}
	switch l.PolicyGradient {
	case ClippedPG, Importance:
		adv := in.Advantage
		ratio := math.Exp(math.Max(-MaxLogRatio, math.Min(MaxLogRatio, logp-in.SamplerLogp)))
		lo, hi := 1-float64(l.ClipLow), 1+float64(l.ClipHigh)
		clipped := l.PolicyGradient == ClippedPG
		// −min(ρA, clip(ρ)A): the clipped branch wins, with zero
		// gradient, exactly when ρ is past the bound on the side A pushes.
		// Importance never clips: −ρA.
		switch {
		case clipped && adv > 0 && ratio > hi:
			t.Loss -= w * hi * adv
			t.Clip = 1
		case clipped && adv < 0 && ratio < lo:
			t.Loss -= w * lo * adv
			t.Clip = -1
		default:
			t.Loss -= w * ratio * adv
			t.DLogp -= w * adv * ratio
		}
	case CISPO:
		adv := in.Advantage
		ratio := math.Exp(math.Max(-MaxLogRatio, math.Min(MaxLogRatio, logp-in.SamplerLogp)))
		lo, hi := 1-float64(l.ClipLow), 1+float64(l.ClipHigh)
		coef := ratio
		switch {
		case ratio > hi:
			coef, t.Clip = hi, 1
		case ratio < lo:
			coef, t.Clip = lo, -1
		}
		t.Loss -= w * coef * adv * logp
		t.DLogp -= w * coef * adv
	case DRO:
		d := logp - in.SamplerLogp
		beta := float64(l.DROBeta)
		t.Loss -= w * (in.Advantage*logp - beta/2*d*d)
		t.DLogp -= w * (in.Advantage - beta*d)
	case Reinforce:
		t.Loss -= w * in.Advantage * logp
		t.DLogp -= w * in.Advantage
	}
	if l.RefKL != 0 {
		k, dk := l.RefKLEstimator.Estimate(logp - in.RefLogp)
		t.RefKL = k
		t.Loss += w * float64(l.RefKL) * k
		t.DLogp += w * float64(l.RefKL) * dk
	}
	return t
}

// Inert reports whether a position adds nothing to the loss's gradient
// whatever the model's distribution there: its weight is zero, or the
// loss's only term is a policy gradient and its advantage is zero (GRPO's
// groups of equal rewards) — not DRO's, whose penalty has a gradient
// wherever the log-ratio is not zero. teacher says whether a teacher distribution is
// aligned with the position. An inert position still has a logprob and
// metrics; a learner may skip only its backward.
func (l *Loss) Inert(in TokenInputs, teacher bool) bool {
	if in.Weight == 0 {
		return true
	}
	return l.NLL == 0 && l.RefKL == 0 && l.Entropy == 0 && (l.TeacherKL == 0 || !teacher) &&
		(l.PolicyGradient == NoPolicyGradient || in.Advantage == 0 && (l.PolicyGradient != DRO || l.DROBeta == 0))
}

// InertDatum reports whether every position of d is inert (Inert), its
// teacher's aligned positions excepted under a teacher-KL term: the datum
// adds nothing to the gradient.
func (l *Loss) InertDatum(d *Datum) bool {
	aligned := 0
	if d.Teacher != nil {
		aligned = d.Teacher.Aligned
	}
	for j := range d.Weights {
		if !l.Inert(d.Inputs(j), j >= len(d.Weights)-aligned) {
			return false
		}
	}
	return true
}

// CheckDatum validates d and checks that it carries every per-token input
// the loss reads, naming the one missing.
func (l *Loss) CheckDatum(d *Datum) error {
	if err := d.Validate(); err != nil {
		return err
	}
	adv, q, ref := l.Needs()
	for _, need := range []struct {
		name string
		ok   bool
	}{{"advantages", !adv || d.Advantages != nil}, {"sampler logprobs", !q || d.SamplerLogprobs != nil}, {"reference logprobs", !ref || d.RefLogprobs != nil}} {
		if !need.ok {
			return fmt.Errorf("the loss needs %s", need.name)
		}
	}
	return nil
}

// Needs reports which per-token inputs the loss reads.
func (l *Loss) Needs() (advantages, samplerLogprobs, refLogprobs bool) {
	ratio := l.PolicyGradient == ClippedPG || l.PolicyGradient == Importance || l.PolicyGradient == CISPO || l.PolicyGradient == DRO
	return l.PolicyGradient != NoPolicyGradient, ratio, l.RefKL != 0
}

// Result is what ForwardBackward returns: the learner's logprob of every
// target (one slice per datum) and the sums of its per-token statistics.
type Result struct {
	Logprobs [][]float32
	Metrics  Metrics
}

// Metrics are sums over the positions with non-zero weight, so results of
// several calls add; Mean turns them into averages.
type Metrics struct {
	Loss      float64 // the summed objective
	Tokens    int     // positions with non-zero weight
	ClipLow   int     // positions clipped at 1−ε_low (A < 0)
	ClipHigh  int     // positions clipped at 1+ε_high (A > 0)
	Entropy   float64 // Σ H(p)
	RefKL     float64 // Σ k(logp, ref)
	TeacherKL float64 // Σ KL(q ‖ p)
	NLL       float64 // Σ −logp
}

// MicroBatches splits data into runs of at most maxTokens tokens (at least
// one datum each): the passes of one gradient, accumulated, that bound a
// pass's activations. maxTokens 0 keeps data whole.
func MicroBatches(data []Datum, maxTokens int) [][]Datum {
	if maxTokens <= 0 {
		return [][]Datum{data}
	}
	var out [][]Datum
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

// Add accumulates o into m.
func (m *Metrics) Add(o Metrics) {
	m.Loss += o.Loss
	m.Tokens += o.Tokens
	m.ClipLow += o.ClipLow
	m.ClipHigh += o.ClipHigh
	m.Entropy += o.Entropy
	m.RefKL += o.RefKL
	m.TeacherKL += o.TeacherKL
	m.NLL += o.NLL
}

// AddPosition adds one weighted position to m: its target's logprob and
// the loss terms there.
func (m *Metrics) AddPosition(logp float64, t TokenTerms) {
	m.Tokens++
	m.Loss += t.Loss
	m.NLL -= logp
	m.RefKL += t.RefKL
	switch t.Clip {
	case -1:
		m.ClipLow++
	case 1:
		m.ClipHigh++
	}
}

// OptimParams are one optimizer step's settings (Tinker's adam_params).
type OptimParams struct {
	LearningRate float32
	// GradClipNorm clips the global gradient norm; 0 disables clipping.
	GradClipNorm float32
	// State names the optimizer state the step updates: "" is the
	// learner's own; any other name has AdamW moments and a step count of
	// its own, fresh at its first step, so that a loss trained at a
	// learning rate of its own (MEML-GRPO's hard-example SFT) neither
	// reads nor moves the shared update's moments. A learner without named
	// states refuses a step that names one.
	State string
}

// StepResult reports an optimizer step.
type StepResult struct {
	// GradNorm is the global norm before clipping; NaN when the backend
	// does not report it (SkyRL tx's optim_step returns no metrics).
	GradNorm float64
}

// Logprober scores sequences under fixed weights: a frozen reference
// model, for the KL to the starting policy.
type Logprober interface {
	// Logprobs runs the forward pass only and returns the logprob of every
	// target, one slice per datum.
	Logprobs(ctx context.Context, batch []Datum) ([][]float32, error)
}

// Learner computes gradients and applies optimizer steps. Implementations
// are not safe for concurrent use.
type Learner interface {
	// ForwardBackward adds the gradients of the summed loss over batch to
	// the accumulated gradients and returns per-datum logprobs and metrics.
	ForwardBackward(ctx context.Context, batch []Datum, loss Loss) (Result, error)
	Logprober
	// OptimStep applies the accumulated gradients and clears them. It
	// refuses (and changes no weight) when a gradient is NaN or Inf.
	OptimStep(ctx context.Context, p OptimParams) (StepResult, error)
	// Save writes the full training state to dir.
	Save(ctx context.Context, dir string) error
}

// Pipelined is a Learner that takes a call before it has answered the
// ones before it, as the Tinker SDK submits optim_step before it awaits
// forward_backward: a remote learner then runs a step's calls back to
// back, with no round trip to the client between them. The calls run in
// the order they are submitted, and are awaited in that order.
type Pipelined interface {
	Learner
	SubmitForwardBackward(ctx context.Context, batch []Datum, loss Loss) (Future[Result], error)
	SubmitOptimStep(ctx context.Context, p OptimParams) (Future[StepResult], error)
}

// Future is a learner call's result, which Await waits for.
type Future[T any] func(ctx context.Context) (T, error)

// Await waits for the result.
func (f Future[T]) Await(ctx context.Context) (T, error) { return f(ctx) }

// Done is a Future of a result already made.
func Done[T any](v T) Future[T] {
	return func(context.Context) (T, error) { return v, nil }
}

// SubmitForwardBackward submits l's forward_backward when l is
// Pipelined, and otherwise makes it at once (its error is then returned
// at once, before any later call is made).
func SubmitForwardBackward(ctx context.Context, l Learner, batch []Datum, loss Loss) (Future[Result], error) {
	if p, ok := l.(Pipelined); ok {
		return p.SubmitForwardBackward(ctx, batch, loss)
	}
	r, err := l.ForwardBackward(ctx, batch, loss)
	if err != nil {
		return nil, err
	}
	return Done(r), nil
}

// SubmitOptimStep submits l's optimizer step when l is Pipelined, and
// otherwise makes it at once.
func SubmitOptimStep(ctx context.Context, l Learner, p OptimParams) (Future[StepResult], error) {
	if pl, ok := l.(Pipelined); ok {
		return pl.SubmitOptimStep(ctx, p)
	}
	r, err := l.OptimStep(ctx, p)
	if err != nil {
		return nil, err
	}
	return Done(r), nil
}
