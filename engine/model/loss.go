package model

import (
	"fmt"
	"math"

	"rlvr/engine/nn"
	"rlvr/engine/parallel"
	"rlvr/engine/vec"
)

// Targets are a loss's per-token inputs, packed like the Batch they go with
// (N entries each). Optional slices are nil when the loss does not read
// them.
type Targets struct {
	Targets         []int32   // next token at each position
	Weights         []float32 // per-token scale of every term; 0 = not trained on
	Advantages      []float32 // policy-gradient advantages
	SamplerLogprobs []float32 // the sampler's logprobs, for the importance ratio
	RefLogprobs     []float32 // a reference model's logprobs, for the KL term
	// TeacherRows maps each position to a row of the teacher's
	// distributions (see TeacherBatch), or −1 where there is none.
	TeacherRows []int32
}

// TeacherBatch is the teacher side of a teacher-KL loss: a batch run through
// the current weights without gradient, and the packed positions whose
// next-token distributions Targets.TeacherRows refer to (row r is
// Positions[r]).
type TeacherBatch struct {
	Batch     Batch
	Positions []int
}

// Loss is the objective ForwardBackward sums over a batch's positions. At a
// position with weight w, target logprob logp and next-token distribution
// p:
//
//	Logp.LogpTerms(logp).Loss − w·Entropy·H(p) + w·TeacherKL·KL(q ‖ p)
//
// The terms of the target's logprob alone (likelihood, policy gradients, a
// KL to a reference model) are the caller's, given with their derivative
// by Logp; the engine adds the two that need the whole distribution. The
// zero Loss is no loss at all.
type Loss struct {
	Logp LogpLoss // nil: no terms of the logprob alone
	// Entropy is the entropy bonus coefficient (subtracted from the loss).
	Entropy float32
	// TeacherKL weighs the exact full-vocabulary KL(teacher ‖ policy) at
	// the positions with a teacher row (Targets.TeacherRows).
	TeacherKL float32
}

// LogpLoss is the part of a loss that depends on a position's target
// logprob alone. ForwardBackward calls it from several goroutines at once.
type LogpLoss interface {
	// LogpTerms evaluates the terms at logprob logp of a position whose
	// inputs are in.
	LogpTerms(logp float64, in TokenInputs) TokenTerms
	// Inert reports whether the terms have a zero derivative at a position
	// with inputs in whatever its logprob (a policy gradient's zero
	// advantage), so that a sequence of such positions needs no backward.
	Inert(in TokenInputs) bool
	// Needs reports which optional per-token inputs LogpTerms reads;
	// ForwardBackward checks that the Targets carry them.
	Needs() (advantages, samplerLogprobs, refLogprobs bool)
}

// TokenInputs are one position's inputs to a LogpLoss: its weight, its
// advantage, and the sampler's and a reference model's logprobs of its
// target (0 where the Targets do not carry them).
type TokenInputs struct {
	Weight, Advantage, SamplerLogp, RefLogp float64
}

// TokenTerms are a LogpLoss's terms at one position.
type TokenTerms struct {
	Loss  float64 // their weighted sum
	DLogp float64 // d Loss / d logp
	// Clip and RefKL are not the engine's: it counts and sums them into
	// Metrics for the caller. Clip is −1 where a ratio was clipped at its
	// lower bound, +1 at its upper bound, 0 elsewhere; RefKL is an
	// estimate of the KL to a reference model, unweighted.
	Clip  int8
	RefKL float64
}

// Metrics are sums over the positions with non-zero weight, so that the
// results of several calls add.
type Metrics struct {
	Loss      float64 // the summed objective
	Tokens    int     // positions with non-zero weight
	ClipLow   int     // positions with TokenTerms.Clip −1
	ClipHigh  int     // positions with TokenTerms.Clip +1
	Entropy   float64 // Σ H(p)
	RefKL     float64 // Σ TokenTerms.RefKL
	TeacherKL float64 // Σ KL(q ‖ p)
	NLL       float64 // Σ −logp
}

// add counts one position with non-zero weight.
func (m *Metrics) add(s *tokenStats) {
	m.Tokens++
	m.Loss += s.terms.Loss
	m.NLL -= s.logp
	m.Entropy += s.entropy
	m.TeacherKL += s.teacherKL
	m.RefKL += s.terms.RefKL
	switch s.terms.Clip {
	case -1:
		m.ClipLow++
	case 1:
		m.ClipHigh++
	}
}

// NLL is the negative log-likelihood −w·logp, a LogpLoss: supervised
// fine-tuning's loss.
type NLL struct{}

// LogpTerms implements LogpLoss.
func (NLL) LogpTerms(logp float64, in TokenInputs) TokenTerms {
	return TokenTerms{Loss: -in.Weight * logp, DLogp: -in.Weight}
}

// Inert implements LogpLoss: a weighted position always has a gradient.
func (NLL) Inert(TokenInputs) bool { return false }

// Needs implements LogpLoss: the likelihood reads no optional input.
func (NLL) Needs() (adv, sampler, ref bool) { return false, false, false }

// validate reports a loss without any term.
func (l *Loss) validate() error {
	if l.Logp == nil && l.Entropy == 0 && l.TeacherKL == 0 {
		return fmt.Errorf("loss: every term is zero")
	}
	return nil
}

// needs reports which optional per-token inputs the loss reads.
func (l *Loss) needs() (advantages, samplerLogprobs, refLogprobs bool) {
	if l.Logp == nil {
		return false, false, false
	}
	return l.Logp.Needs()
}

// inert reports whether a position with inputs in adds nothing to the
// gradient whatever the model's distribution there; teacher says whether
// it has a teacher row. An inert position still has a logprob and metrics.
func (l *Loss) inert(in TokenInputs, teacher bool) bool {
	return in.Weight == 0 || (l.Logp == nil || l.Logp.Inert(in)) && l.Entropy == 0 && (l.TeacherKL == 0 || !teacher)
}

// inputs is position n's TokenInputs.
func (t *Targets) inputs(n int) TokenInputs {
	at := func(v []float32) float64 {
		if v == nil {
			return 0
		}
		return float64(v[n])
	}
	return TokenInputs{Weight: float64(t.Weights[n]), Advantage: at(t.Advantages), SamplerLogp: at(t.SamplerLogprobs), RefLogp: at(t.RefLogprobs)}
}

// logitsBudget bounds the logits the loss head materializes at once
// (floats); with a large vocabulary the head runs in token chunks. A
// variable so that tests can make small models chunk too.
var logitsBudget = 1 << 22

// bf16HeadRows is the smallest chunk the head runs in bf16, whatever the
// budget: the head's weight gradient is a product whose inner dimension is
// the chunk, and on AMX oneDNN runs it at about 300 GFLOP/s with 85 rows
// (SmolLM2's chunk under the budget) against over 1,000 with 256.
const bf16HeadRows = 256

// tokenStats are one position's results.
type tokenStats struct {
	// terms are the loss's terms at the position; terms.Loss includes the
	// entropy bonus and the teacher KL.
	terms                    TokenTerms
	logp, entropy, teacherKL float64
	top                      bool // the target is the most likely token
	// grad: the logits row holds dloss/dz, which is not all zero. An
	// inert position's row (a prompt token's, whose weight is 0) keeps its
	// logits and is left out of the head's backward.
	grad bool
}

// validateTargets checks the per-token inputs against the batch and loss.
func (m *Model) validateTargets(b Batch, t Targets, loss *Loss, teacherRows int) error {
	N := len(b.Tokens)
	if len(t.Targets) != N || len(t.Weights) != N {
		return fmt.Errorf("targets: %d targets and %d weights for %d tokens", len(t.Targets), len(t.Weights), N)
	}
	adv, q, ref := loss.needs()
	for _, s := range []struct {
		name   string
		v      []float32
		needed bool
	}{{"advantages", t.Advantages, adv}, {"sampler logprobs", t.SamplerLogprobs, q}, {"reference logprobs", t.RefLogprobs, ref}} {
		if s.needed && len(s.v) != N {
			return fmt.Errorf("targets: the loss needs %s for %d tokens, got %d", s.name, N, len(s.v))
		}
	}
	if loss.TeacherKL != 0 && len(t.TeacherRows) != N {
		return fmt.Errorf("targets: the teacher-KL term needs teacher rows for %d tokens, got %d", N, len(t.TeacherRows))
	}
	for n, y := range t.Targets {
		if y < 0 || int(y) >= m.Config.Vocab {
			s, p := locate(b, n)
			return &PositionError{"targets", s, p, fmt.Sprintf("target %d outside the vocabulary [0, %d)", y, m.Config.Vocab)}
		}
		if t.TeacherRows != nil && (t.TeacherRows[n] < -1 || int(t.TeacherRows[n]) >= teacherRows) {
			s, p := locate(b, n)
			return &PositionError{"targets", s, p, fmt.Sprintf("teacher row %d outside [−1, %d)", t.TeacherRows[n], teacherRows)}
		}
	}
	return nil
}

// PositionError is a problem at one position of a batch: its sequence and
// its position in it, as the batch packs them.
type PositionError struct {
	What               string // the input: batch, targets, loss
	Sequence, Position int
	Detail             string
}

func (e *PositionError) Error() string {
	return fmt.Sprintf("%s: sequence %d position %d: %s", e.What, e.Sequence, e.Position, e.Detail)
}

// locate turns a packed index into (sequence, position).
func locate(b Batch, n int) (int, int) {
	for s := 0; s+1 < len(b.Offsets); s++ {
		if n < b.Offsets[s+1] {
			return s, n - b.Offsets[s]
		}
	}
	return -1, -1
}

// ForwardBackward runs the model over b, sums loss over every position
// (Targets.Weights scale each one), and adds the gradient into m.Grads. It
// writes the logprob of every target into logprobs (N) when that is not
// nil. With a teacher-KL term, teacher gives the teacher's batch. The
// backward runs only over the sequences with a position that is not inert
// (see LogpLoss.Inert); the others cost a forward.
//
// A NaN or Inf loss is reported with the sequence and position where it
// appeared; the decoder's gradients are then left untouched, but the
// output head's may hold part of the batch: call ZeroGrad before going on.
// A frozen model (Freeze) returns an error wrapping ErrFrozen.
func (m *Model) ForwardBackward(b Batch, t Targets, loss Loss, teacher *TeacherBatch, logprobs []float32) (Metrics, error) {
	if err := m.learnable("forward-backward"); err != nil {
		return Metrics{}, err
	}
	if err := loss.validate(); err != nil {
		return Metrics{}, err
	}
	m.Gradients()
	if err := m.Validate(b); err != nil {
		return Metrics{}, err
	}
	var teacherLogp []float32
	teacherRows := 0
	if loss.TeacherKL != 0 {
		if teacher == nil {
			return Metrics{}, fmt.Errorf("loss has a teacher-KL term but no teacher batch")
		}
		if err := m.Validate(teacher.Batch); err != nil {
			return Metrics{}, fmt.Errorf("teacher %w", err)
		}
		teacherLogp = m.teacherLogprobs(*teacher)
		teacherRows = len(teacher.Positions)
	}
	if err := m.validateTargets(b, t, &loss, teacherRows); err != nil {
		return Metrics{}, err
	}
	// Sequences whose every position is inert (a policy gradient with
	// zero advantages, as in GRPO's groups of equal rewards) add nothing to
	// the gradient: they run behind the others, and the backward covers
	// only the live ones before them.
	order, live := liveFirst(b, t, &loss)
	out, callerOffsets := logprobs, b.Offsets
	if order != nil {
		b, t = permute(b, t, order)
		if logprobs != nil {
			out = make([]float32, len(logprobs))
		}
	}
	m.forward(b)
	met, err := m.head(b, t, &loss, teacherLogp, out, b.Offsets[live], order)
	if order != nil && logprobs != nil {
		for i, s := range order {
			copy(logprobs[callerOffsets[s]:callerOffsets[s+1]], out[b.Offsets[i]:b.Offsets[i+1]])
		}
	}
	if err != nil {
		return met, err
	}
	if live > 0 {
		prefix := Batch{Tokens: b.Tokens[:b.Offsets[live]], Offsets: b.Offsets[:live+1]}
		if b.Parents != nil {
			prefix.Parents = b.Parents[:live]
		}
		m.backward(prefix, m.act.dnormed[:len(prefix.Tokens)*m.Config.Dim])
	}
	return met, nil
}

// liveFirst finds the sequences of b with a position that is not inert
// under loss, and returns an order of all sequences that puts them first,
// each group in its own order, with their count. A parent and its
// continuations move together, live when any of them is. The order is nil
// when they come first already.
func liveFirst(b Batch, t Targets, loss *Loss) ([]int, int) {
	S := len(b.Offsets) - 1
	isLive := func(s, e int) bool {
		for n := b.Offsets[s]; n < b.Offsets[e]; n++ {
			if !loss.inert(t.inputs(n), t.TeacherRows != nil && t.TeacherRows[n] >= 0) {
				return true
			}
		}
		return false
	}
	// A first pass counts the live sequences and checks that they come
	// first, allocating nothing; only a reorder needs a second pass.
	live, sorted := 0, true
	for s := 0; s < S; {
		e := nn.FamilyEnd(b.Parents, s)
		if isLive(s, e) {
			sorted = sorted && live == s
			live += e - s
		}
		s = e
	}
	if sorted {
		return nil, live
	}
	order := make([]int, live, S)
	l := 0
	for s := 0; s < S; {
		e := nn.FamilyEnd(b.Parents, s)
		alive := isLive(s, e)
		for i := s; i < e; i++ {
			if alive {
				order[l] = i
				l++
			} else {
				order = append(order, i)
			}
		}
		s = e
	}
	return order, live
}

// permute returns b and t with their sequences in the given order.
func permute(b Batch, t Targets, order []int) (Batch, Targets) {
	p := Batch{Tokens: gather(b.Tokens, b.Offsets, order), Offsets: make([]int, 1, len(b.Offsets))}
	for _, s := range order {
		p.Offsets = append(p.Offsets, p.Offsets[len(p.Offsets)-1]+b.Offsets[s+1]-b.Offsets[s])
	}
	if b.Parents != nil {
		at := make([]int, len(order)) // a sequence's index in p
		for i, s := range order {
			at[s] = i
		}
		p.Parents = make([]int, len(order))
		for i, s := range order {
			p.Parents[i] = -1
			if q := b.Parents[s]; q >= 0 {
				p.Parents[i] = at[q]
			}
		}
	}
	return p, Targets{
		Targets:         gather(t.Targets, b.Offsets, order),
		Weights:         gather(t.Weights, b.Offsets, order),
		Advantages:      gather(t.Advantages, b.Offsets, order),
		SamplerLogprobs: gather(t.SamplerLogprobs, b.Offsets, order),
		RefLogprobs:     gather(t.RefLogprobs, b.Offsets, order),
		TeacherRows:     gather(t.TeacherRows, b.Offsets, order),
	}
}

// gather concatenates the sequences of v (packed at offsets) in the given
// order; nil stays nil.
func gather[E any](v []E, offsets, order []int) []E {
	if v == nil {
		return nil
	}
	out := make([]E, 0, len(v))
	for _, s := range order {
		out = append(out, v[offsets[s]:offsets[s+1]]...)
	}
	return out
}

// Logprobs runs the forward pass only and writes the logprob of each target
// into out (N). When top is not nil it also records, per position, whether
// the target is the most likely token (so greedy decoding would emit it).
// A frozen model (Freeze) returns an error wrapping ErrFrozen.
func (m *Model) Logprobs(b Batch, targets []int32, out []float32, top []bool) error {
	if err := m.learnable("logprobs"); err != nil {
		return err
	}
	if err := m.Validate(b); err != nil {
		return err
	}
	if len(targets) != len(b.Tokens) || len(out) != len(b.Tokens) || (top != nil && len(top) != len(b.Tokens)) {
		return fmt.Errorf("logprobs: %d targets, %d outputs and %d flags for %d tokens", len(targets), len(out), len(top), len(b.Tokens))
	}
	ones := make([]float32, len(targets))
	t := Targets{Targets: targets, Weights: ones}
	// No loss: the head computes the logprobs, and no term needs more.
	if err := m.validateTargets(b, t, &Loss{}, 0); err != nil {
		return err
	}
	m.forward(b)
	_, err := m.head(b, t, &Loss{}, nil, out, 0, nil)
	for n := range top {
		top[n] = m.act.stats[n].top
	}
	return err
}

// teacherLogprobs runs the teacher batch forward and returns the
// log-softmax of the next-token logits at its positions (rows × V).
func (m *Model) teacherLogprobs(tb TeacherBatch) []float32 {
	m.forward(tb.Batch)
	D, V, R := m.Config.Dim, m.Config.Vocab, len(tb.Positions)
	rows := make([]float32, R*D)
	for r, p := range tb.Positions {
		copy(rows[r*D:(r+1)*D], m.act.normed[p*D:(p+1)*D])
	}
	out := make([]float32, R*V)
	m.bw.Gemm(false, true, R, V, D, 1, rows, D, m.w.head, D, 0, out, V)
	scratch := make([]float32, parallel.Threads()*V)
	parallel.Worker(R, func(w, lo, hi int) {
		for r := lo; r < hi; r++ {
			logSoftmax(out[r*V:(r+1)*V], scratch[w*V:(w+1)*V])
		}
	})
	return out
}

// head computes the output logits chunk by chunk and the per-token loss
// terms. For the first gradRows positions it also computes dnormed, the
// gradient at the final norm's output, and adds the head's own gradient
// into m.Grads. order, when not nil, maps b's sequences to the caller's for
// error messages.
func (m *Model) head(b Batch, t Targets, loss *Loss, teacherLogp, logprobs []float32, gradRows int, order []int) (Metrics, error) {
	c, a := m.Config, &m.act
	N, D, V := len(b.Tokens), c.Dim, c.Vocab
	chunk := max(1, min(N, logitsBudget/V))
	if m.prec == BF16 {
		chunk = min(N, max(chunk, bf16HeadRows))
	}
	if len(a.logits) < chunk*V {
		a.logits = make([]float32, chunk*V)
	}
	if len(a.expScratch) < parallel.Threads()*V {
		a.expScratch = make([]float32, parallel.Threads()*V)
	}
	if len(a.dnormed) < a.N*D {
		a.dnormed = make([]float32, a.N*D)
		a.stats = make([]tokenStats, a.N)
	}
	if gradRows > 0 && len(a.headRows) < chunk {
		a.headRows = make([]int, chunk)
		a.headIn = make([]float32, chunk*D)
		a.headOut = make([]float32, chunk*D)
	}
	stats := a.stats[:N]
	for c0 := 0; c0 < N; c0 += chunk {
		c1 := min(c0+chunk, N)
		logits := a.logits[:(c1-c0)*V]
		t0 := m.tic()
		m.bw.Gemm(false, true, c1-c0, V, D, 1, a.normed[c0*D:], D, m.w.head, D, 0, logits, V)
		m.toc(OpHeadMatmul, false, t0)
		t0 = m.tic()
		parallel.Worker(c1-c0, func(w, lo, hi int) {
			for i := lo; i < hi; i++ {
				n := c0 + i
				var q []float32
				if t.TeacherRows != nil && t.TeacherRows[n] >= 0 {
					r := int(t.TeacherRows[n])
					q = teacherLogp[r*V : (r+1)*V]
				}
				grad := n < gradRows && !loss.inert(t.inputs(n), q != nil)
				stats[n] = tokenTerms(logits[i*V:(i+1)*V], a.expScratch[w*V:(w+1)*V], n, t, q, loss, grad)
			}
		})
		m.toc(OpLossTerms, false, t0)
		for n := c0; n < c1; n++ {
			if s := stats[n]; math.IsNaN(s.terms.Loss) || math.IsInf(s.terms.Loss, 0) || math.IsNaN(s.logp) {
				seq, p := locate(b, n)
				if order != nil {
					seq = order[seq]
				}
				return Metrics{}, &PositionError{"loss", seq, p, fmt.Sprintf("non-finite loss %v (logprob %v)", s.terms.Loss, s.logp)}
			}
		}
		if g1 := min(c1, gradRows); g1 > c0 {
			t0 = m.tic()
			m.headBackward(c0, g1, logits)
			m.toc(OpHeadMatmul, true, t0)
		}
	}
	var met Metrics
	for n := range stats {
		if logprobs != nil {
			logprobs[n] = float32(stats[n].logp)
		}
		if t.Weights[n] != 0 {
			met.add(&stats[n])
		}
	}
	return met, nil
}

// headBackward writes dnormed for positions [c0, g1) of the current chunk,
// whose logits rows hold dloss/dz, and adds the head's gradient into
// m.Grads. Inert positions have a zero row: they leave both products, and
// their dnormed is zero. In a policy-gradient batch those are the prompt
// tokens, about half of the rows, so this halves the head's backward.
func (m *Model) headBackward(c0, g1 int, logits []float32) {
	a, D, V := &m.act, m.Config.Dim, m.Config.Vocab
	rows := a.headRows[:0]
	for n := c0; n < g1; n++ {
		if a.stats[n].grad {
			rows = append(rows, n)
		}
	}
	K := len(rows)
	if K == g1-c0 {
		m.bw.Gemm(false, false, K, D, V, 1, logits, V, m.w.head, D, 0, a.dnormed[c0*D:], D)
		m.bw.Gemm(true, false, V, D, K, 1, logits, V, a.normed[c0*D:], D, 1, m.g.head, D)
		return
	}
	clear(a.dnormed[c0*D : g1*D])
	if K == 0 {
		return
	}
	// Rows move only towards the front (k ≤ n − c0), so the logits
	// compact in place.
	in, out := a.headIn[:K*D], a.headOut[:K*D]
	for k, n := range rows {
		copy(logits[k*V:(k+1)*V], logits[(n-c0)*V:(n-c0+1)*V])
		copy(in[k*D:(k+1)*D], a.normed[n*D:(n+1)*D])
	}
	m.bw.Gemm(false, false, K, D, V, 1, logits, V, m.w.head, D, 0, out, D)
	m.bw.Gemm(true, false, V, D, K, 1, logits, V, in, D, 1, m.g.head, D)
	for k, n := range rows {
		copy(a.dnormed[n*D:(n+1)*D], out[k*D:(k+1)*D])
	}
}

// tokenTerms evaluates every term of the loss at packed position n from its
// logits row z (V) and, with grad, overwrites z with dloss/dz:
//
//	dz_j = G·(1[j=y] − p_j) + E·p_j·(log p_j + H) + K·(p_j − q_j)
//
// where G = dloss/dlogp is the LogpLoss's DLogp, E = w·entropy coefficient
// and K = w·teacher-KL coefficient. q is the teacher's log-distribution
// (V), or nil. scratch (V) is overwritten.
func tokenTerms(z, scratch []float32, n int, t Targets, q []float32, l *Loss, grad bool) tokenStats {
	y, w := int(t.Targets[n]), float64(t.Weights[n])
	lse, mx := LogSumExp(z, scratch)
	// scratch holds exp(z − mx), so p_j = scratch[j]·norm.
	norm := math.Exp(float64(mx) - lse)
	var s tokenStats
	s.logp = float64(z[y]) - lse
	s.top = z[y] == mx
	// One pass for the entropy (and the teacher KL) before the gradient,
	// which needs H.
	var h, kl float64
	for j, v := range z {
		lp := float64(v) - lse
		p := float64(scratch[j]) * norm
		h -= p * lp
		if q != nil {
			kl += math.Exp(float64(q[j])) * (float64(q[j]) - lp)
		}
	}
	s.entropy, s.teacherKL = h, kl
	if l.Logp != nil {
		s.terms = l.Logp.LogpTerms(s.logp, t.inputs(n))
	}
	g := s.terms.DLogp // dloss/dlogp
	e := w * float64(l.Entropy)
	s.terms.Loss -= e * h
	k := 0.0
	if q != nil {
		k = w * float64(l.TeacherKL)
		s.terms.Loss += k * kl
	}
	if !grad {
		return s
	}
	s.grad = true
	if e == 0 && q == nil {
		// The common case (likelihood, policy gradients):
		// dz = G·(onehot − p).
		c := float32(-g * norm)
		for j := range z {
			z[j] = c * scratch[j]
		}
	} else {
		for j, v := range z {
			lp := float64(v) - lse
			p := float64(scratch[j]) * norm
			d := -g*p + e*p*(lp+h)
			if q != nil {
				d += k * (p - math.Exp(float64(q[j])))
			}
			z[j] = float32(d)
		}
	}
	z[y] += float32(g)
	return s
}

// LogSumExp returns log Σ exp(z) and max(z), leaving exp(z − max) in
// scratch (len(z) floats). Every logprob in rlvr, the learner's and the
// sampler's, is z[y] − LogSumExp(z), so they agree.
func LogSumExp(z, scratch []float32) (lse float64, mx float32) {
	mx = vec.Max(z)
	sum := vec.ExpShiftSum(scratch[:len(z)], z, mx)
	return float64(mx) + math.Log(sum), mx
}

// logSoftmax replaces a row of logits with its log-probabilities.
func logSoftmax(z, scratch []float32) {
	lse, _ := LogSumExp(z, scratch)
	for i := range z {
		z[i] = float32(float64(z[i]) - lse)
	}
}
