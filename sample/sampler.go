package sample

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"rlvr/engine/model"
)

// Sampler generates from a model. It is not safe for concurrent use; a
// server gathers concurrent requests into one Sample call.
type Sampler struct {
	Model   *model.Model
	Decoder Decoder // for stop strings and Completion.Text; nil leaves Text empty and rejects stop strings

	cache  *model.Cache
	logits []float32
	probs  []float32
	order  []int32
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
		capacity = max(capacity, min(len(r.Prompt)+maxTokens(p), m.Config.MaxSeq))
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
	var next []int32
	var slots []int
	for len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next, slots = next[:0], slots[:0]
		for i, st := range active {
			row := logits[i*V : (i+1)*V]
			tok, lp := s.pick(row, st)
			s.accept(st, tok, lp)
			if !st.done {
				next = append(next, tok)
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
		seqs := make([][]int32, len(next))
		for i := range next {
			seqs[i] = next[i : i+1]
		}
		if err := m.Extend(s.cache, slots, model.Pack(seqs), logits[:len(active)*V]); err != nil {
			return nil, err
		}
	}
	for _, st := range streams {
		out[st.req] = append(out[st.req], st.out)
	}
	return out, nil
}

func maxTokens(p *Params) int {
	if p.MaxTokens == 0 {
		return 256
	}
	return p.MaxTokens
}

// ensure sizes the cache and buffers for n slots of capacity tokens.
func (s *Sampler) ensure(n, capacity int) error {
	V := s.Model.Config.Vocab
	if s.cache == nil || s.cache.Slots < n || s.cache.Capacity < capacity {
		c, err := s.Model.NewCache(n, capacity)
		if err != nil {
			return err
		}
		s.cache = c
	}
	s.cache.Reset()
	if len(s.logits) < n*V {
		s.logits = make([]float32, n*V)
		s.probs = make([]float32, V)
		s.order = make([]int32, V)
	}
	return nil
}

// pick draws the next token from a logits row and returns it with the
// model's logprob of it (temperature 1, untruncated: the learner's).
func (s *Sampler) pick(z []float32, st *stream) (int32, float32) {
	lse, _ := model.LogSumExp(z)
	var tok int
	if st.p.Temperature == 0 {
		tok = argmax(z)
	} else {
		tok = s.draw(z, st)
	}
	return int32(tok), float32(float64(z[tok]) - lse)
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
// and then to the smallest set whose mass reaches top-p.
func (s *Sampler) draw(z []float32, st *stream) int {
	p := st.p
	V := len(z)
	inv := 1 / float64(p.Temperature)
	probs, order := s.probs[:V], s.order[:V]
	for i := range order {
		order[i] = int32(i)
	}
	keep := V
	if p.TopK > 0 && p.TopK < V {
		keep = p.TopK
	}
	if keep < V || (p.TopP > 0 && p.TopP < 1) {
		// Sort by logit, largest first; ties by index so results are stable.
		slices.SortFunc(order, func(a, b int32) int {
			if z[a] != z[b] {
				if z[a] > z[b] {
					return -1
				}
				return 1
			}
			return int(a - b)
		})
	}
	order = order[:keep]
	mx := z[order[0]]
	for _, i := range order {
		mx = max(mx, z[i])
	}
	var sum float64
	for k, i := range order {
		e := math.Exp((float64(z[i]) - float64(mx)) * inv)
		probs[k] = float32(e)
		sum += e
	}
	if p.TopP > 0 && p.TopP < 1 {
		var c float64
		for k := range order {
			c += float64(probs[k]) / sum
			if c >= float64(p.TopP) {
				keep = k + 1
				break
			}
		}
		order = order[:keep]
		sum = 0
		for k := range order {
			sum += float64(probs[k])
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
	p := st.p
	if len(p.Stop) > 0 {
		ids := make([]int, len(st.out.Tokens)+1)
		for i, t := range st.out.Tokens {
			ids[i] = int(t)
		}
		ids[len(ids)-1] = int(tok)
		text := s.Decoder.Decode(ids)
		for _, stop := range p.Stop {
			if i := strings.Index(text, stop); i >= 0 {
				st.out.Text = text[:i]
				st.out.Finish, st.done = FinishStop, true
				return
			}
		}
	}
	st.out.Tokens = append(st.out.Tokens, tok)
	st.out.Logprobs = append(st.out.Logprobs, lp)
	if st.onToken != nil {
		st.onToken(st.idx, tok, lp)
	}
	promptLen := s.cache.Len[st.slot] // tokens already in the cache
	switch {
	case slices.Contains(p.StopTokens, tok):
		st.out.Finish, st.done = FinishStop, true
	case len(st.out.Tokens) >= maxTokens(p) || promptLen+1 >= s.cache.Capacity:
		st.out.Finish, st.done = FinishLength, true
	}
	if st.done && s.Decoder != nil {
		ids := make([]int, len(st.out.Tokens))
		for i, t := range st.out.Tokens {
			ids[i] = int(t)
		}
		st.out.Text = s.Decoder.Decode(ids)
	}
}
