package local

import (
	"context"
	"fmt"

	"rlvr/engine/model"
	"rlvr/engine/sampler"
	"rlvr/sample"
)

// Sampler generates completions of sample.Requests in this process: the
// engine's sampler draws the tokens, and sample's stop rules
// (Completion.Add) end each completion, so that it completes exactly what
// a remote sampler completes after sample.Replay. It is not safe for
// concurrent use; a server gathers concurrent requests into one Sample
// call.
type Sampler struct {
	Engine  *sampler.Sampler
	Decoder sample.Decoder // for stop strings and Completion.Text; nil leaves Text empty and rejects stop strings
}

// NewSampler returns a sampler over m that sees every change to its
// weights (a trainer's).
func NewSampler(m *model.Model, dec sample.Decoder) *Sampler {
	return &Sampler{Engine: sampler.New(m), Decoder: dec}
}

// NewFixedSampler returns a sampler over a checkpoint whose weights do not
// change (a served or evaluated one): it packs them once
// (sampler.Sampler.PackOnce); call Repack after changing them.
func NewFixedSampler(m *model.Model, dec sample.Decoder) *Sampler {
	return &Sampler{Engine: sampler.NewFixed(m), Decoder: dec}
}

// NewFrozenSampler is NewFixedSampler for a process that only samples
// from m (rlvr eval, rlvr serve's OpenAI server): it freezes m
// (model.Model.Freeze), releasing the float32 matrices that its packed
// copy replaces, so that m can no longer be trained, saved or repacked.
// Its completions are NewFixedSampler's, bit for bit.
func NewFrozenSampler(m *model.Model, dec sample.Decoder) *Sampler {
	return &Sampler{Engine: sampler.NewFrozen(m), Decoder: dec}
}

// SampleStreaming is Sample with at most streams continuations in flight:
// a request starts when its samples fit beside those drawing, and joins
// their batch (sampler.Sampler.MaxStreams). The completions are the same.
func (s *Sampler) SampleStreaming(ctx context.Context, reqs []sample.Request, streams int) ([][]sample.Completion, error) {
	defer func(bound int) { s.Engine.MaxStreams = bound }(s.Engine.MaxStreams)
	s.Engine.MaxStreams = streams
	return s.Sample(ctx, reqs)
}

// Repack tells a fixed sampler that the weights have changed; over a
// frozen model it fails (sampler.Sampler.Repack).
func (s *Sampler) Repack() error { return s.Engine.Repack() }

// Sample continues every request's prompt Params.N times and returns the
// completions per request. All samples run as one batch, and a sample
// depends only on its request's Seed and its index among the request's
// samples (sampler.Sampler.Sample).
func (s *Sampler) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	draws := make([]sampler.Request, len(reqs))
	for i := range reqs {
		var err error
		if draws[i], out[i], err = s.draw(i, &reqs[i]); err != nil {
			return nil, err
		}
	}
	if err := s.Engine.Sample(ctx, draws); err != nil {
		return nil, err
	}
	return out, nil
}

// draw turns request i into the engine's request, whose Accept applies
// the stop rules to the request's completions, cs.
func (s *Sampler) draw(i int, r *sample.Request) (sampler.Request, []sample.Completion, error) {
	p := &r.Params
	if err := p.Validate(); err != nil {
		return sampler.Request{}, nil, fmt.Errorf("request %d: %w", i, err)
	}
	if len(p.Stop) > 0 && s.Decoder == nil {
		return sampler.Request{}, nil, fmt.Errorf("request %d: stop strings need a decoder", i)
	}
	cs := make([]sample.Completion, max(p.N, 1))
	return sampler.Request{Prompt: r.Prompt, N: len(cs), MaxNew: p.MaxNew(),
		Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, Seed: p.Seed,
		Accept: func(k int, tok int32, lp float32, last bool) bool {
			kept, done := cs[k].Add(p, s.Decoder, tok, lp, last)
			if kept && r.OnToken != nil {
				r.OnToken(k, tok, lp)
			}
			return done
		}}, cs, nil
}

// Loop is a Sampler's long-lived decoding loop (sampler.Loop): a request
// submitted at any time joins the running batch between two decoding
// steps, and completes when its own samples end, with the completions
// Sample gives it.
type Loop struct {
	s    *Sampler
	loop *sampler.Loop
}

// NewLoop returns a loop drawing up to slots samples at once, each of up
// to capacity tokens, prompt included (sampler.Sampler.NewLoop). The
// sampler belongs to the loop's Run while it runs.
func (s *Sampler) NewLoop(slots, capacity int) (*Loop, error) {
	l, err := s.Engine.NewLoop(slots, capacity)
	if err != nil {
		return nil, err
	}
	return &Loop{s: s, loop: l}, nil
}

// Run draws the submitted requests until ctx ends (sampler.Loop.Run).
func (l *Loop) Run(ctx context.Context) error { return l.loop.Run(ctx) }

// Capacity is the tokens, prompt included, a sample holds in one of the
// loop's slots; a request that needs more runs alone (sampler.Loop).
func (l *Loop) Capacity() int { return l.loop.Capacity() }

// Submit queues r and returns at once; done is called once, from Run's
// goroutine, with r's completions when its samples end, or with why they
// were cut (ctx ended, or the loop stopped). weights and load, when
// weights is not nil, name the weights r samples from and put them into
// the model (sampler.Job). A request of more samples than the loop's
// slots runs as consecutive parts of at most that many (sampler.Request's
// First), which draw what they would together. An error means r was
// refused and done is never called.
func (l *Loop) Submit(ctx context.Context, r sample.Request, weights any, load func(), done func([]sample.Completion, error)) error {
	req, cs, err := l.s.draw(0, &r)
	if err != nil {
		return err
	}
	// Every part's Done runs on Run's goroutine: they alone change left
	// and failed once the parts are submitted.
	left := (len(cs) + l.loop.Slots() - 1) / l.loop.Slots()
	var failed error
	for first := 0; first < len(cs); first += l.loop.Slots() {
		part := req
		part.First, part.N = first, min(l.loop.Slots(), len(cs)-first)
		part.Accept = func(k int, tok int32, lp float32, last bool) bool { return req.Accept(first+k, tok, lp, last) }
		err := l.loop.Submit(ctx, &sampler.Job{Request: part, Weights: weights, Load: load, Done: func(err error) {
			if failed == nil {
				failed = err
			}
			if left--; left > 0 {
				return
			}
			if failed != nil {
				done(nil, failed)
				return
			}
			done(cs, nil)
		}})
		if err != nil {
			// Only the first part can be malformed or beyond the loop
			// (the others are the same but for N); a later one is refused
			// only when the loop has stopped, which ends the parts
			// submitted, and left never reaches 0.
			return err
		}
	}
	return nil
}
