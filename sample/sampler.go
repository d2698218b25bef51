package sample

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"

	"rlvr/engine/model"
	"rlvr/engine/parallel"
	"rlvr/engine/vec"
)

// Sampler generates from a model. It is not safe for concurrent use; a
// server gathers concurrent requests into one Sample call.
type Sampler struct {
	Model   *model.Model
	Decoder Decoder // for stop strings and Completion.Text; nil leaves Text empty and rejects stop strings
	// PackOnce keeps the cache's packed copy of the projection matrices
	// from one call to the next: the caller promises the weights do not
	// change (a served checkpoint), or calls Repack when they do (norms and
	// embeddings are read in place, so a change without Repack would leave
	// the sampler on a mix). By default every call repacks, so that a
	// trainer's updates are always seen; packing costs a copy of the
	// weights.
	PackOnce bool

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
}

// scratch is one thread's working space for drawing a token.
type scratch struct {
	probs, scaled []float32
	order         []int32
}

// Repack tells a PackOnce sampler that the weights have changed: the next
// call packs them again.
func (s *Sampler) Repack() { s.stale = true }

// NewFixed returns a sampler over a checkpoint whose weights do not change
// (a served or evaluated one): it packs them once (PackOnce).
func NewFixed(m *model.Model, dec Decoder) *Sampler {
	s := New(m, dec)
	s.PackOnce = true
	return s
}

// New returns a sampler over m.
func New(m *model.Model, dec Decoder) *Sampler { return &Sampler{Model: m, Decoder: dec} }

// stream is one sample being generated.
type stream struct {
	req, idx int // request and sample index within it
	slot     int
	rng      *rand.Rand
	p        *Params
	out      Completion
	done     bool
	onToken  func(int, int32, float32)
}

// Sample continues every request's prompt Params.N times and returns the
// completions per request. All samples run as one batch: a step feeds one
// token of every unfinished sample through the model together. Sampling is
// reproducible: a sample's randomness depends only on its request's Seed
// and its index among the request's samples.
func (s *Sampler) Sample(ctx context.Context, reqs []Request) ([][]Completion, error) {
	m := s.Model
	V := m.Config.Vocab
	var streams []*stream
	capacity := 0
	for i := range reqs {
		r := &reqs[i]
		p := &r.Params
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if len(r.Prompt) == 0 {
			return nil, fmt.Errorf("request %d: empty prompt", i)
		}
		if len(p.Stop) > 0 && s.Decoder == nil {
			return nil, fmt.Errorf("request %d: stop strings need a decoder", i)
		}
		for _, t := range r.Prompt {
			if t < 0 || int(t) >= V {
				return nil, fmt.Errorf("request %d: prompt token %d outside the vocabulary [0, %d)", i, t, V)
			}
		}
		if len(r.Prompt) >= m.Config.MaxSeq {
			return nil, fmt.Errorf("request %d: prompt of %d tokens leaves no room in the context of %d", i, len(r.Prompt), m.Config.MaxSeq)
		}
		n := max(p.N, 1)
		for k := 0; k < n; k++ {
			streams = append(streams, &stream{req: i, idx: k, slot: len(streams), p: p, onToken: r.OnToken,
				rng: rand.New(rand.NewPCG(p.Seed, uint64(k)))})
		}
		capacity = max(capacity, min(len(r.Prompt)+p.MaxNew(), m.Config.MaxSeq))
	}
	out := make([][]Completion, len(reqs))
	if len(streams) == 0 {
		return out, nil
	}
	if err := s.ensure(len(streams), capacity); err != nil {
		return nil, err
	}
	// Prefill each prompt once, then copy it to the request's other slots.
	var prompts [][]int32
	var first []int
	for _, st := range streams {
		if st.idx == 0 {
			prompts = append(prompts, reqs[st.req].Prompt)
			first = append(first, st.slot)
		}
	}
	logits := s.logits[:len(streams)*V]
	if err := m.Extend(s.cache, first, model.Pack(prompts), logits); err != nil {
		return nil, err
	}
	// Spread each prompt's logits to its samples, in slot order.
	for i := len(streams) - 1; i >= 0; i-- {
		st := streams[i]
		src := slices.Index(first, st.slot-st.idx)
		copy(logits[st.slot*V:(st.slot+1)*V], logits[src*V:(src+1)*V])
		if st.idx > 0 {
			s.cache.CopySlot(st.slot, st.slot-st.idx)
		}
	}
	active := slices.Clone(streams)
	next, slots := s.next, s.slots
	for len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next, slots = next[:0], slots[:0]
		// Draw every stream's token in parallel (each has its own random
		// source and scratch), then accept them in order.
		toks, lps := s.toks[:len(active)], s.lps[:len(active)]
		parallel.Worker(len(active), func(w, lo, hi int) {
			for i := lo; i < hi; i++ {
				toks[i], lps[i] = s.pick(logits[i*V:(i+1)*V], active[i], s.scratch[w])
			}
		})
		for i, st := range active {
			s.accept(st, toks[i], lps[i])
			if !st.done {
				next = append(next, toks[i])
				slots = append(slots, st.slot)
			}
		}
		kept := active[:0]
		for _, st := range active {
			if !st.done {
				kept = append(kept, st)
			}
		}
		active = kept
		if len(active) == 0 {
			break
		}
		// One token per live stream: offsets 0, 1, …, len(next).
		step := model.Batch{Tokens: next, Offsets: s.offsets[:len(next)+1]}
		if err := m.Extend(s.cache, slots, step, logits[:len(active)*V]); err != nil {
			return nil, err
		}
	}
	for _, st := range streams {
		out[st.req] = append(out[st.req], st.out)
	}
	return out, nil
}

// MaxNew is the number of new tokens the params allow: MaxTokens, or 256
// when it is 0.
func (p *Params) MaxNew() int {
	if p.MaxTokens == 0 {
		return 256
	}
	return p.MaxTokens
}

// ensure sizes the cache and buffers for n slots of capacity tokens.
func (s *Sampler) ensure(n, capacity int) error {
	V := s.Model.Config.Vocab
	if s.cache == nil || s.cache.Slots < n || s.cache.Capacity < capacity {
		s.cache = nil // its KV and packed weights may go before the new ones come
		c, err := s.Model.NewCache(n, capacity)
		if err != nil {
			return err
		}
		s.cache = c
	} else if s.stale || !s.PackOnce {
		s.cache.Pack(s.Model) // the weights may have changed since the last call
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

// pick draws the next token from a logits row and returns it with the
// model's logprob of it (temperature 1, untruncated: the learner's). One
// pass of exponentials serves both the logprob's normalizer and, at
// temperature 1 without truncation, the distribution drawn from.
func (s *Sampler) pick(z []float32, st *stream, sc *scratch) (int32, float32) {
	lse, mx := model.LogSumExp(z, sc.probs) // leaves exp(z − mx) in sc.probs
	var tok int
	if greedy(st.p.Temperature, mx) {
		tok = argmax(z)
	} else {
		tok = draw(z, st, sc, math.Exp(lse-float64(mx)))
	}
	return int32(tok), float32(float64(z[tok]) - lse)
}

// truncated reports whether p keeps fewer than all V tokens.
func truncated(p *Params, V int) bool {
	return (p.TopK > 0 && p.TopK < V) || (p.TopP > 0 && p.TopP < 1)
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
	p := st.p
	V := len(z)
	x := z
	if p.Temperature != 1 {
		x = sc.scaled[:V]
		inv := 1 / p.Temperature
		for i, v := range z {
			x[i] = v * inv
		}
	}
	if !truncated(p, V) {
		// The whole vocabulary: no sorting needed, and at temperature 1
		// no exponentials either.
		probs := sc.probs[:V]
		if p.Temperature != 1 {
			sum = vec.ExpShiftSum(probs, x, vec.Max(x))
		}
		return vec.SearchCumulative(probs, st.rng.Float64()*sum)
	}
	topP := p.TopP > 0 && p.TopP < 1
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
	if p.TopK > 0 && p.TopK < V {
		keep = p.TopK
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
			if c >= float64(p.TopP) {
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

// accept appends a token to a stream and decides whether it is finished.
func (s *Sampler) accept(st *stream, tok int32, lp float32) {
	promptLen := s.cache.Len[st.slot] // tokens already in the cache
	kept, done := st.out.push(st.p, s.Decoder, tok, lp, promptLen+1 >= s.cache.Capacity)
	if kept && st.onToken != nil {
		st.onToken(st.idx, tok, lp)
	}
	st.done = done
}

// push appends a sampled token to c under p's stop rules and reports
// whether the token was kept and whether the sample ended; full says the
// model's context has no room for another token.
func (c *Completion) push(p *Params, dec Decoder, tok int32, lp float32, full bool) (kept, done bool) {
	if len(p.Stop) > 0 {
		text := dec.Decode(append(c.Tokens, tok))
		for _, stop := range p.Stop {
			if i := strings.Index(text, stop); i >= 0 {
				c.Finish, c.StopString = FinishStop, stop
				if !p.IncludeStop {
					c.Text = text[:i]
					return false, true
				}
				c.Text = text[:i+len(stop)]
				c.Tokens = append(c.Tokens, tok)
				c.Logprobs = append(c.Logprobs, lp)
				return true, true
			}
		}
	}
	c.Tokens = append(c.Tokens, tok)
	c.Logprobs = append(c.Logprobs, lp)
	switch {
	case slices.Contains(p.StopTokens, tok):
		c.Finish, done = FinishStop, true
	case len(c.Tokens) >= p.MaxNew() || full:
		c.Finish, done = FinishLength, true
	}
	if done && dec != nil {
		c.Text = dec.Decode(c.Tokens)
	}
	return true, done
}

// anyStopIn reports whether text holds one of the stop strings, or
// whether one holds U+FFFD, which a prefix's cut character decodes to
// and the whole text may not hold.
func anyStopIn(text string, stop []string) bool {
	for _, s := range stop {
		if strings.Contains(text, s) || strings.ContainsRune(s, utf8.RuneError) {
			return true
		}
	}
	return false
}

// Replay passes tokens sampled elsewhere through p's stop rules and
// returns the completion a sampler honouring them returns: the same
// tokens, cut where a stop token, stop string or MaxTokens ends them.
// finish is why the tokens ended when no rule ends them first. A remote
// sampler that stops only at its own stop tokens gives, after Replay, the
// local sampler's completion for the same draws. dec may be nil when p
// has no stop strings.
func Replay(p *Params, dec Decoder, toks []int32, lps []float32, finish Finish) (Completion, error) {
	var c Completion
	if len(toks) != len(lps) {
		return c, fmt.Errorf("sample: %d tokens but %d logprobs", len(toks), len(lps))
	}
	if len(p.Stop) > 0 && dec == nil {
		return c, fmt.Errorf("sample: stop strings need a decoder")
	}
	if len(p.Stop) > 0 && !anyStopIn(dec.Decode(toks), p.Stop) {
		// No stop string anywhere in the whole text, so none in a prefix
		// of it: the per-token search, a decode per token, can be
		// skipped.
		q := *p
		q.Stop = nil
		p = &q
	}
	for i, t := range toks {
		if _, done := c.push(p, dec, t, lps[i], false); done {
			return c, nil
		}
	}
	c.Finish = finish
	if dec != nil {
		c.Text = dec.Decode(c.Tokens)
	}
	return c, nil
}

// LogprobGap recomputes every sampled token's logprob with the learner's
// forward pass and returns the largest |sampler − learner| difference.
func LogprobGap(m *model.Model, reqs []Request, out [][]Completion) (float64, error) {
	var seqs, targets [][]int32
	var lps [][]float32
	for i, r := range reqs {
		for _, c := range out[i] {
			full := append(append([]int32(nil), r.Prompt...), c.Tokens...)
			seqs, targets = append(seqs, full[:len(full)-1]), append(targets, full[1:])
			lps = append(lps, c.Logprobs)
		}
	}
	b := model.Pack(seqs)
	flat := model.Pack(targets).Tokens
	learner := make([]float32, len(flat))
	if err := m.Logprobs(b, flat, learner, nil); err != nil {
		return 0, err
	}
	var gap float64
	for s, lp := range lps {
		end := b.Offsets[s+1]
		for k, v := range lp {
			gap = math.Max(gap, math.Abs(float64(v-learner[end-len(lp)+k])))
		}
	}
	return gap, nil
}
