// Package servetest provides a fake serve.Generator for tests of rlvr's
// server and of the code that calls it over HTTP: deterministic,
// instantaneous unless told to take its time, and recording how it was
// called. A Generator is safe for concurrent use. Faults wraps an
// endpoint's handler to inject the failures real endpoints have
// (timeouts, resets, 5xx, 429, malformed, empty and endless replies) on
// a reproducible share of requests.
package servetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"rlvr/sample"
)

// Generator continues each prompt with bytes drawn from a hash of the
// prompt, the seed and the sample's index (greedy requests ignore the
// last two), so a request's completions do not depend on what it was
// batched with. It emits EOS, when set, at hash-chosen positions, and now
// and then a two-byte UTF-8 character ("é") split across two tokens. It
// honours MaxTokens, StopTokens, Stop strings (cutting the text before the
// stop string and dropping the token that completed it, as sample's rules
// do), N and OnToken. Its Text includes the text of a final stop token.
// Its logprobs are in (-1, 0).
type Generator struct {
	// Decoder turns tokens into Completion.Text; with
	// tokenizer.ByteTokenizer the tokens are the bytes of the text.
	Decoder sample.Decoder
	// EOS is the token that ends a sample at hash-chosen positions (one
	// in eleven); negative means never.
	EOS int32
	// Delay is slept after each decoding step of the whole batch, to let
	// tests see batching, streaming and cancellation.
	Delay time.Duration
	// OnBatch, if set, is called with each batch before sampling starts.
	OnBatch func(reqs []sample.Request)

	mu        sync.Mutex
	batches   []int
	cancelled int
}

// Batches returns the number of requests of each Sample call so far.
func (g *Generator) Batches() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.batches...)
}

// Cancelled returns how many Sample calls ended because ctx was done.
func (g *Generator) Cancelled() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled
}

type seq struct {
	req    int
	sample int
	state  uint64
	toks   []int32
	lps    []float32
	text   string
	finish sample.Finish
	done   bool
	utf8   bool // the second byte of "é" is due
}

// Sample implements serve.Generator.
func (g *Generator) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	g.mu.Lock()
	g.batches = append(g.batches, len(reqs))
	g.mu.Unlock()
	if g.OnBatch != nil {
		g.OnBatch(reqs)
	}
	var seqs []*seq
	for i, r := range reqs {
		if err := r.Params.Validate(); err != nil {
			return nil, fmt.Errorf("servetest: request %d: %w", i, err)
		}
		h := uint64(14695981039346656037)
		for _, t := range r.Prompt {
			h = (h ^ uint64(uint32(t))) * 1099511628211
		}
		for k := range max(r.Params.N, 1) {
			s := h
			if r.Params.Temperature != 0 {
				s = mix(mix(h^r.Params.Seed) + uint64(k))
			}
			seqs = append(seqs, &seq{req: i, sample: k, state: s})
		}
	}
	for active := len(seqs); active > 0; {
		if err := ctx.Err(); err != nil {
			g.mu.Lock()
			g.cancelled++
			g.mu.Unlock()
			return nil, fmt.Errorf("servetest: %w", err)
		}
		for _, s := range seqs {
			if s.done {
				continue
			}
			g.step(&reqs[s.req], s)
			if s.done {
				active--
			}
		}
		if g.Delay > 0 && active > 0 {
			select {
			case <-time.After(g.Delay):
			case <-ctx.Done():
			}
		}
	}
	out := make([][]sample.Completion, len(reqs))
	for i, r := range reqs {
		out[i] = make([]sample.Completion, max(r.Params.N, 1))
	}
	for _, s := range seqs {
		out[s.req][s.sample] = sample.Completion{Tokens: s.toks, Logprobs: s.lps, Text: s.text, Finish: s.finish}
	}
	return out, nil
}

// step draws one token for s.
func (g *Generator) step(r *sample.Request, s *seq) {
	p := r.Params
	maxTokens := p.MaxTokens
	if maxTokens == 0 {
		maxTokens = 256
	}
	s.state = mix(s.state + uint64(len(s.toks)) + 1)
	x := s.state
	var tok int32
	switch {
	case s.utf8:
		tok, s.utf8 = 0xA9, false
	case g.EOS >= 0 && len(s.toks) > 0 && x%11 == 0:
		tok = g.EOS
	case x%13 == 0:
		tok, s.utf8 = 0xC3, true
	default:
		const alphabet = "abcdefghijklmnopqrstuvwxyz   ,.\n"
		tok = int32(alphabet[(x>>8)%uint64(len(alphabet))])
	}
	lp := -float32((x>>20)%1000+1) / 1001

	text := g.Decoder.Decode(append(s.toks, tok))
	cut := -1
	for _, stop := range p.Stop {
		if i := strings.Index(text, stop); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 { // the stop string is complete: drop this token
		s.text, s.finish, s.done = text[:cut], sample.FinishStop, true
		return
	}
	s.toks, s.lps, s.text = append(s.toks, tok), append(s.lps, lp), text
	if r.OnToken != nil {
		r.OnToken(s.sample, tok, lp)
	}
	switch {
	case contains(p.StopTokens, tok):
		s.finish, s.done = sample.FinishStop, true
	case len(s.toks) >= maxTokens:
		s.finish, s.done = sample.FinishLength, true
	}
}

func contains(ts []int32, t int32) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// mix is SplitMix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
