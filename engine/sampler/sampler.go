// Package sampler draws continuations of token prompts from a model with a
// KV cache: greedy or temperature sampling with top-k and top-p, several
// continuations per prompt, prompts of different lengths in one batch,
// seeded and reproducible. Every drawn token comes with the model's logprob
// of it, computed with the learner's numerics (model.LogSumExp), so that an
// importance ratio starts at 1.
//
// Where a continuation ends, beyond its token budget and the model's
// context, is the caller's: Request.Accept sees every drawn token and says.
// Package sample's stop tokens and stop strings are such a caller
// (backend/local); this package knows no text.
package sampler

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"rlvr/engine/model"
	"rlvr/engine/parallel"
	"rlvr/engine/vec"
)

// Request is one prompt and how to draw its continuations.
type Request struct {
	Prompt []int32
	N      int // continuations of the prompt, drawn from one prefill; 0 means 1
	MaxNew int // new tokens at most per continuation; at least 1
	// Temperature scales the logits; 0 means greedy (argmax), and so does
	// a positive temperature too small to divide the logits by (their
	// largest, divided by it, overflows float32: below about 1e-38 for
	// logits of order 1). It must not be negative or NaN.
	Temperature float32
	TopP        float32 // nucleus mass to keep, in [0, 1]; 0 or 1 keeps all
	TopK        int     // keep the k most likely tokens; 0 keeps all
	// Seed fixes the draws: continuation k draws from the PCG stream
	// (Seed, First+k), whatever else is in the batch. First, not
	// negative, lets continuations First… of a request of more be drawn
	// apart from the others (a Loop's slots hold fewer), the same as
	// they are together.
	Seed  uint64
	First int
	// Accept, if set, is given every drawn token of continuation k in
	// order, with its logprob, from the goroutine that called Sample, and
	// reports whether the continuation ends there. last says it ends
	// anyway: MaxNew tokens drawn, or the model's context full.
	Accept func(k int, token int32, logprob float32, last bool) (done bool)
}

// Sampler draws from a model. It is not safe for concurrent use; a server
// gathers concurrent requests into one Sample call.
type Sampler struct {
	Model *model.Model
	// PackOnce keeps the cache's packed copy of the projection matrices
	// from one call to the next: the caller promises the weights do not
	// change (a served checkpoint), or calls Repack when they do (norms and
	// embeddings are read in place, so a change without Repack would leave
	// the sampler on a mix). By default every call repacks, so that a
	// trainer's updates are always seen; packing costs a copy of the
	// weights. A frozen model (NewFrozen) is only sampled PackOnce.
	PackOnce bool
	// MaxStreams bounds the continuations in flight, and so the cache's
	// memory; 0 runs every continuation of a call at once. A long
	// continuation then holds up one slot, not a whole batch.
	MaxStreams int

	cache   *model.Cache
	stale   bool // the packed weights must be refreshed before the next call
	logits  []float32
	scratch []*scratch // per thread
	toks    []int32
	lps     []float32
	// one decoding step's batch: a token per live stream, its slot, and
	// the offsets 0..n
	next    []int32
	slots   []int
	offsets []int
	// the streams in flight, the free slots, and the prompts starting
	// and the slots they are prefilled into
	active  []*stream
	free    []int
	prompts [][]int32
	first   []int
}

// scratch is one thread's working space for drawing a token.
type scratch struct {
	probs, scaled []float32
	order         []int32
}

// Repack tells a PackOnce sampler that the weights have changed: the next
// call packs them again. A frozen model's weights cannot change: Repack
// then returns an error wrapping model.ErrFrozen, and so does every call
// after it, rather than sample what was packed before.
func (s *Sampler) Repack() error {
	s.stale = true
	if s.Model.Frozen() {
		return fmt.Errorf("sampler: repack: %w", model.ErrFrozen)
	}
	return nil
}

// NewFixed returns a sampler over a checkpoint whose weights do not change
// (a served or evaluated one): it packs them once (PackOnce).
func NewFixed(m *model.Model) *Sampler {
	s := New(m)
	s.PackOnce = true
	return s
}

// NewFrozen returns a sampler over a checkpoint that this process only
// samples from: it freezes m (model.Model.Freeze), packing its matrices
// once in m's precision and releasing their float32 copies, so that m
// can no longer be trained, saved or repacked. Its samples are those of
// NewFixed(m), bit for bit.
func NewFrozen(m *model.Model) *Sampler {
	m.Freeze()
	return NewFixed(m)
}

// New returns a sampler over m.
func New(m *model.Model) *Sampler { return &Sampler{Model: m} }

// stream is one continuation being drawn.
type stream struct {
	req   *Request
	t     *ticket // its request's
	k     int     // index among the request's continuations
	slot  int
	rng   *rand.Rand
	drawn int
	done  bool
}

// ticket is one request in the decode loop: how many of its
// continuations are still drawing, and, in a Loop, whether its caller
// has gone and how to tell it the request ended.
type ticket struct {
	live    int
	gone    atomic.Bool // the caller's context ended: drop its streams
	ctx     context.Context
	weights any
	job     *Job // nil in Sample
	unwatch func() bool
}

// newStreams checks r (request i of a call) and returns its
// continuations, each with its own random source, under one ticket.
func newStreams(m *model.Model, i int, r *Request) ([]*stream, error) {
	V := m.Config.Vocab
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("request %d: empty prompt", i)
	}
	for _, t := range r.Prompt {
		if t < 0 || int(t) >= V {
			return nil, fmt.Errorf("request %d: prompt token %d outside the vocabulary [0, %d)", i, t, V)
		}
	}
	if len(r.Prompt) >= m.Config.MaxSeq {
		return nil, fmt.Errorf("request %d: prompt of %d tokens leaves no room in the context of %d", i, len(r.Prompt), m.Config.MaxSeq)
	}
	if r.MaxNew < 1 {
		return nil, fmt.Errorf("request %d: MaxNew %d, want at least 1", i, r.MaxNew)
	}
	if r.First < 0 {
		return nil, fmt.Errorf("request %d: First %d, want at least 0", i, r.First)
	}
	n := max(r.N, 1)
	t := &ticket{live: n}
	streams := make([]*stream, n)
	for k := range streams {
		streams[k] = &stream{req: r, t: t, k: k, rng: rand.New(rand.NewPCG(r.Seed, uint64(r.First+k)))}
	}
	return streams, nil
}

// span is the cache room a request's continuations need: prompt and
// new tokens, up to the model's context.
func span(m *model.Model, r *Request) int { return min(len(r.Prompt)+r.MaxNew, m.Config.MaxSeq) }

// Sample draws every request's continuations. They run as one batch: a
// step feeds one token of every unfinished continuation through the model
// together. With MaxStreams set, a request waits until its continuations
// fit beside those in flight and joins the batch when earlier ones end
// (continuous batching). A continuation's draws depend only on its
// request's Seed and its index k, so they are the same alone, in any
// batch, and whenever they start.
func (s *Sampler) Sample(ctx context.Context, reqs []Request) error {
	m := s.Model
	var streams []*stream
	capacity, widest := 0, 0
	for i := range reqs {
		r := &reqs[i]
		st, err := newStreams(m, i, r)
		if err != nil {
			return err
		}
		streams = append(streams, st...)
		capacity = max(capacity, span(m, r))
		widest = max(widest, len(st))
	}
	if len(streams) == 0 {
		return nil
	}
	slots := len(streams)
	if s.MaxStreams > 0 {
		// A request's continuations share one prefill, so they start
		// together: the widest request fits however small the bound.
		slots = min(slots, max(s.MaxStreams, widest))
	}
	if err := s.ensure(slots, capacity); err != nil {
		return err
	}
	waiting := streams // requests not yet started, in order
	err := s.decode(ctx, slots, func(free int, _ bool) []*stream {
		// Every request that fits, in order.
		end := 0
		for end < len(waiting) {
			n := max(waiting[end].req.N, 1)
			if n > free {
				break
			}
			free -= n
			end += n
		}
		started := waiting[:end]
		waiting = waiting[end:]
		return started
	})
	s.release()
	return err
}

// decode runs the decoding loop over slots cache slots. Before each step
// it starts the streams take returns: whole requests, in order, at most
// free streams in all (idle says none is in flight). It returns when take
// returns none with none in flight, or ctx ends, or the model fails.
// Streams whose ticket is gone are dropped between steps, their slots
// freed.
func (s *Sampler) decode(ctx context.Context, slots int, take func(free int, idle bool) []*stream) error {
	m := s.Model
	V := m.Config.Vocab
	free := s.free[:0]
	for slot := slots - 1; slot >= 0; slot-- {
		free = append(free, slot) // slot 0 is taken first
	}
	logits := s.logits[:slots*V]
	active := s.active[:0]
	next, tokenSlots := s.next, s.slots
	defer func() { s.active, s.free = active, free }()
	for {
		// Start every request take hands over: prefill each prompt once
		// into its first continuation's slot, below the logits rows of
		// the streams in flight, then copy it to the request's other
		// continuations.
		prompts, first := s.prompts[:0], s.first[:0]
		started := len(active)
		for _, st := range take(len(free), started == 0) {
			st.slot, free = free[len(free)-1], free[:len(free)-1]
			active = append(active, st)
			if st.k == 0 {
				prompts = append(prompts, st.req.Prompt)
				first = append(first, st.slot)
			}
		}
		if len(prompts) > 0 {
			if s.stale && started == 0 {
				if err := s.cache.Pack(m); err != nil { // a Loop loaded other weights
					return err
				}
				s.stale = false
			}
			if err := m.Extend(s.cache, first, model.Pack(prompts), logits[started*V:]); err != nil {
				return err
			}
			// Row started+j holds prompt j's logits and slot first[j] its
			// keys and values. A request's continuations follow its
			// prompt's row in order, so spreading from the last row down
			// reads every prompt's row before it is overwritten.
			j := len(prompts) - 1
			for i := len(active) - 1; i >= started; i-- {
				st := active[i]
				copy(logits[i*V:(i+1)*V], logits[(started+j)*V:(started+j+1)*V])
				if st.k > 0 {
					s.cache.CopySlot(st.slot, first[j])
				} else {
					j--
				}
			}
			s.prompts, s.first = prompts, first
		}
		if len(active) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		next, tokenSlots = next[:0], tokenSlots[:0]
		// Draw every stream's token in parallel (each has its own random
		// source and scratch), then accept them in order.
		toks, lps := s.toks[:len(active)], s.lps[:len(active)]
		parallel.Worker(len(active), func(w, lo, hi int) {
			for i := lo; i < hi; i++ {
				toks[i], lps[i] = pick(logits[i*V:(i+1)*V], active[i], s.scratch[w])
			}
		})
		kept := active[:0]
		for i, st := range active {
			if !st.t.gone.Load() {
				s.accept(st, toks[i], lps[i])
			}
			if st.done || st.t.gone.Load() {
				s.cache.Len[st.slot] = 0
				free = append(free, st.slot)
				st.t.live--
				if st.t.live == 0 && st.t.job != nil {
					st.t.end(nil)
				}
				continue
			}
			next = append(next, toks[i])
			tokenSlots = append(tokenSlots, st.slot)
			kept = append(kept, st)
		}
		// The kept streams' logits rows move down with them: row i of
		// the next step is kept[i]'s, which Extend writes below.
		active = kept
		if len(active) == 0 {
			continue // start the waiting requests, if any
		}
		// One token per live stream: offsets 0, 1, …, len(next).
		step := model.Batch{Tokens: next, Offsets: s.offsets[:len(next)+1]}
		if err := m.Extend(s.cache, tokenSlots, step, logits[:len(active)*V]); err != nil {
			return err
		}
	}
}

// release drops the finished streams' requests and prompts, so that the
// sampler keeps no caller's memory alive.
func (s *Sampler) release() {
	clear(s.active[:cap(s.active)])
	clear(s.prompts[:cap(s.prompts)])
	s.active, s.free = s.active[:0], s.free[:0]
}

// ensure sizes the cache and buffers for n slots of capacity tokens.
func (s *Sampler) ensure(n, capacity int) error {
	V := s.Model.Config.Vocab
	switch {
	case s.Model.Frozen() && s.stale:
		return fmt.Errorf("sampler: the weights were said to change (Repack): %w", model.ErrFrozen)
	case s.Model.Frozen() && !s.PackOnce:
		return fmt.Errorf("sampler: a sampler that repacks at every call (not PackOnce): %w", model.ErrFrozen)
	}
	if s.cache == nil || s.cache.Slots < n || s.cache.Capacity < capacity {
		// A larger cache packs into the old one's storage, and the old
		// KV may go before the new one comes.
		var c *model.Cache
		var err error
		if old := s.cache; old != nil {
			s.cache = nil
			c, err = old.Regrow(s.Model, n, capacity)
		} else {
			c, err = s.Model.NewCache(n, capacity)
		}
		if err != nil {
			return err
		}
		s.cache = c
	} else if s.stale || !s.PackOnce {
		if err := s.cache.Pack(s.Model); err != nil { // the weights may have changed since the last call
			return err
		}
	}
	s.stale = false
	s.cache.Reset()
	if len(s.logits) < n*V {
		s.logits = make([]float32, n*V)
		s.toks, s.lps = make([]int32, n), make([]float32, n)
		s.next, s.slots, s.offsets = make([]int32, 0, n), make([]int, 0, n), make([]int, n+1)
		for i := range s.offsets {
			s.offsets[i] = i
		}
	}
	for len(s.scratch) < parallel.Threads() {
		s.scratch = append(s.scratch, &scratch{probs: make([]float32, V), scaled: make([]float32, V), order: make([]int32, V)})
	}
	return nil
}

// accept hands a drawn token to its request's Accept and decides whether
// the stream is finished.
func (s *Sampler) accept(st *stream, tok int32, lp float32) {
	st.drawn++
	// The token goes into the cache at the next step, after those there.
	last := st.drawn >= st.req.MaxNew || s.cache.Len[st.slot]+1 >= s.cache.Capacity
	done := st.req.Accept != nil && st.req.Accept(st.k, tok, lp, last)
	st.done = done || last
}

// pick draws the next token from a logits row and returns it with the
// model's logprob of it (temperature 1, untruncated: the learner's). One
// pass of exponentials serves both the logprob's normalizer and, at
// temperature 1 without truncation, the distribution drawn from.
func pick(z []float32, st *stream, sc *scratch) (int32, float32) {
	lse, mx := model.LogSumExp(z, sc.probs) // leaves exp(z − mx) in sc.probs
	var tok int
	if greedy(st.req.Temperature, mx) {
		tok = argmax(z)
	} else {
		tok = draw(z, st, sc, math.Exp(lse-float64(mx)))
	}
	return int32(tok), float32(float64(z[tok]) - lse)
}

// truncated reports whether r keeps fewer than all V tokens.
func truncated(r *Request, V int) bool {
	return (r.TopK > 0 && r.TopK < V) || (r.TopP > 0 && r.TopP < 1)
}

// greedy reports whether a row whose largest logit is mx is sampled at
// temperature t by taking the argmax: at temperature 0, and at any
// temperature so small that dividing the logits by it overflows float32
// (the largest scaled logit, or 1/t itself, is infinite), where
// softmax(z/t) cannot be computed but its limit as t → 0 is the argmax.
// Larger temperatures that still leave a single token with probability
// above float32's smallest value draw that token anyway.
func greedy(t, mx float32) bool {
	if t == 0 {
		return true
	}
	inv := 1 / t
	x := mx * inv
	return math.IsInf(float64(inv), 0) || math.IsInf(float64(x), 0) || x != x
}

// argmax returns the first index of the largest value, as llama2.c does.
func argmax(z []float32) int {
	best := 0
	for i, v := range z {
		if v > z[best] {
			best = i
		}
	}
	return best
}

// draw samples from softmax(z / temperature) restricted to the top-k tokens
// and then to the smallest set whose mass reaches top-p. sc.probs holds
// exp(z − max z) and sum their total, as LogSumExp left them.
func draw(z []float32, st *stream, sc *scratch, sum float64) int {
	r := st.req
	V := len(z)
	x := z
	if r.Temperature != 1 {
		x = sc.scaled[:V]
		inv := 1 / r.Temperature
		for i, v := range z {
			x[i] = v * inv
		}
	}
	if !truncated(r, V) {
		// The whole vocabulary: no sorting needed, and at temperature 1
		// no exponentials either.
		probs := sc.probs[:V]
		if r.Temperature != 1 {
			sum = vec.ExpShiftSum(probs, x, vec.Max(x))
		}
		return vec.SearchCumulative(probs, st.rng.Float64()*sum)
	}
	topP := r.TopP > 0 && r.TopP < 1
	order := sc.order[:V]
	for i := range order {
		order[i] = int32(i)
	}
	// Sort by logit, largest first; ties by index so results are stable.
	slices.SortFunc(order, func(a, b int32) int {
		if x[a] != x[b] {
			if x[a] > x[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	keep := V
	if r.TopK > 0 && r.TopK < V {
		keep = r.TopK
	}
	order = order[:keep]
	mx := x[order[0]]
	probs := sc.probs[:keep]
	sum = 0
	for k, i := range order {
		e := float64(vec.Exp32(x[i] - mx))
		probs[k] = float32(e)
		sum += e
	}
	if topP {
		var c float64
		for k := range order {
			c += float64(probs[k]) / sum
			if c >= float64(r.TopP) {
				keep = k + 1
				break
			}
		}
		order, probs = order[:keep], probs[:keep]
		sum = 0
		for _, e := range probs {
			sum += float64(e)
		}
	}
	u := st.rng.Float64() * sum
	var c float64
	for k, i := range order {
		c += float64(probs[k])
		if u < c {
			return int(i)
		}
	}
	return int(order[len(order)-1])
}

// LogprobGap recomputes every drawn token's logprob with the learner's
// forward pass and returns the largest |sampler − learner| difference.
// Continuation i continues prompts[i]; logprobs[i] are the sampler's.
// The learner's passes take at most gapPassTokens tokens each (one
// sequence at least), as training's micro-batches do: a forward pass
// holds its activations and logits for every token in it, and 64
// SmolLM2 streams of 256 tokens in one pass held 24 GB.
func LogprobGap(m *model.Model, prompts, continuations [][]int32, logprobs [][]float32) (float64, error) {
	var gap float64
	for start := 0; start < len(prompts); {
		var seqs, targets [][]int32
		tokens, end := 0, start
		for end < len(prompts) && (end == start || tokens+len(prompts[end])+len(continuations[end]) <= gapPassTokens) {
			full := append(append([]int32(nil), prompts[end]...), continuations[end]...)
			seqs, targets = append(seqs, full[:len(full)-1]), append(targets, full[1:])
			tokens += len(full)
			end++
		}
		b := model.Pack(seqs)
		flat := model.Pack(targets).Tokens
		learner := make([]float32, len(flat))
		if err := m.Logprobs(b, flat, learner, nil); err != nil {
			return 0, err
		}
		for s, lp := range logprobs[start:end] {
			last := b.Offsets[s+1]
			for k, v := range lp {
				gap = math.Max(gap, math.Abs(float64(v-learner[last-len(lp)+k])))
			}
		}
		start = end
	}
	return gap, nil
}

// gapPassTokens bounds the tokens of one of LogprobGap's learner passes.
const gapPassTokens = 4096
