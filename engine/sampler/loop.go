package sampler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"rlvr/engine/model"
)

// ErrLoopStopped is the error a Loop's requests end with when its Run
// returns before they finish.
var ErrLoopStopped = errors.New("sampler: the decode loop stopped")

// Job is a request submitted to a Loop.
type Job struct {
	Request
	// Weights, if not nil, names the weights the request samples from,
	// compared by identity; nil samples from whatever the model holds. A
	// request for other weights than those in flight waits until the
	// running batch drains; then Load puts them into the model (from
	// Run's goroutine, no stream in flight), and the sampler repacks.
	Weights any
	Load    func()
	// Done is called once, from Run's goroutine, when the request ends:
	// with nil when every continuation ended, with the context's cause
	// when its context ended first (its slots are freed at the next
	// step), or with the error that stopped the loop.
	Done func(error)
}

// Loop is a long-lived decoding loop over one Sampler: requests submitted
// at any time start between two decode steps, in slots that ended
// continuations freed, and each ends, and is told so, when its own
// continuations end (continuous batching across calls, where MaxStreams
// is continuous batching within one Sample call).
//
// The cache is sized once, slots continuations of capacity tokens each,
// and that bounds its memory: a request starts when its N continuations
// fit in the free slots, in the order submitted, and waits until then.
//
// A request whose prompt and MaxNew need more than a slot holds runs
// alone in the same memory (runLong): once the requests in flight end,
// the cache is replaced by one of fewer, longer slots sized for it, the
// long requests next to it in the queue for the same weights join it
// there, and when they
// end that cache is freed, the slots come back, and the requests behind
// them start. A long request with more continuations than the longer
// slots draws them in turns. The requests behind wait meanwhile: that
// is what the fallback costs.
//
// A request that could never fit (N above slots, or one continuation
// beyond the whole cache, slots × capacity positions) is refused at
// Submit. A continuation's draws depend only on its request's Seed and
// its index, so they are the same as Sample's, whenever the request
// starts, in whichever cache, and whatever it runs beside.
//
// Submit is safe for concurrent use; the sampler belongs to Run while it
// runs, and must not be used otherwise meanwhile.
type Loop struct {
	s               *Sampler
	slots, capacity int

	mu      sync.Mutex
	waiting []*stream // whole requests, in order
	stopped error     // set when Run returns
	wake    chan struct{}
	current any // the weights of the streams in flight

	// rest is, in runLong, the continuations not yet started of a long
	// request that started in part. Run's goroutine alone uses it.
	rest []*stream
}

// NewLoop returns a decoding loop of slots continuations of up to
// capacity tokens each (at most the model's context). It sizes the
// sampler's cache now: KVBytes(capacity) per slot.
func (s *Sampler) NewLoop(slots, capacity int) (*Loop, error) {
	if capacity > s.Model.Config.MaxSeq {
		return nil, fmt.Errorf("sampler: loop capacity %d is beyond the model's context of %d", capacity, s.Model.Config.MaxSeq)
	}
	if err := s.ensure(slots, capacity); err != nil {
		return nil, err
	}
	return &Loop{s: s, slots: slots, capacity: capacity, wake: make(chan struct{}, 1)}, nil
}

// KVBytes is the memory the KV cache takes for tokens positions of model
// cf: a float32 key and value row per layer and position.
func KVBytes(cf model.Config, tokens int) int64 {
	return int64(tokens) * int64(cf.Layers) * int64(cf.KVHeads*cf.HeadDim) * 2 * 4
}

// Capacity is the tokens each of the loop's slots holds: prompt and
// continuation. A request that needs more, up to Slots × Capacity
// positions, runs alone.
func (l *Loop) Capacity() int { return l.capacity }

// Slots is how many continuations the loop draws at once.
func (l *Loop) Slots() int { return l.slots }

// Submit queues j to start as soon as its continuations fit. It returns
// an error, and never calls j.Done, when j is malformed, could never fit
// the loop, or the loop has stopped. When ctx ends before j does, j's
// continuations are dropped and Done gets ctx's cause.
func (l *Loop) Submit(ctx context.Context, j *Job) error {
	if j.Done == nil || (j.Weights != nil && j.Load == nil) {
		return errors.New("sampler: a loop's job needs Done, and Load when it names Weights")
	}
	streams, err := newStreams(l.s.Model, 0, &j.Request)
	if err != nil {
		return err
	}
	if len(streams) > l.slots {
		return fmt.Errorf("sampler: %d continuations, more than the loop's %d slots", len(streams), l.slots)
	}
	if need := span(l.s.Model, &j.Request); need > l.slots*l.capacity {
		return fmt.Errorf("sampler: a prompt of %d tokens and %d new ones need %d cache positions; the loop's whole cache holds %d (%d slots of %d), too few for one continuation even alone", len(j.Prompt), j.MaxNew, need, l.slots*l.capacity, l.slots, l.capacity)
	}
	t := streams[0].t
	t.ctx, t.job, t.weights = ctx, j, j.Weights
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped != nil {
		return l.stopped
	}
	t.unwatch = context.AfterFunc(ctx, func() {
		t.gone.Store(true)
		l.signal()
	})
	l.waiting = append(l.waiting, streams...)
	l.signal()
	return nil
}

func (l *Loop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// end tells t's caller its request ended: with err, or with its
// context's cause if it was dropped.
func (t *ticket) end(err error) {
	t.unwatch()
	if err == nil && t.gone.Load() {
		err = context.Cause(t.ctx)
	}
	t.job.Done(err)
}

// Run draws the submitted requests until ctx ends, and then ends every
// request still in the loop with ErrLoopStopped (or the model's error,
// if one stopped it), and returns that error.
func (l *Loop) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, l.signal)
	defer stop()
	var err error
	for err == nil && ctx.Err() == nil {
		err = l.s.decode(ctx, l.slots, func(free int, idle bool) []*stream { return l.take(ctx, free, idle) })
		if err == nil && ctx.Err() == nil {
			// take stopped at a request longer than a slot, with none
			// in flight.
			err = l.runLong(ctx)
		}
	}
	if err == nil || errors.Is(err, ctx.Err()) {
		err = ErrLoopStopped // take returns nothing while idle only once ctx ends
	} else {
		err = fmt.Errorf("%w: %w", ErrLoopStopped, err)
	}
	l.mu.Lock()
	l.stopped = err
	waiting := l.waiting
	l.waiting = nil
	l.mu.Unlock()
	for _, streams := range [][]*stream{l.s.active, l.rest} {
		for _, st := range streams {
			if st.t.live > 0 {
				st.t.live = 0
				st.t.end(err)
			}
		}
	}
	l.rest = nil
	for _, st := range waiting {
		if st.k == 0 {
			st.t.end(err)
		}
	}
	l.s.release()
	return err
}

// take hands the decode loop the waiting requests that fit in free
// slots, in order, dropping those whose caller has gone. Idle, with
// nothing to start, it waits for a submission or the end of ctx; idle at
// a request longer than a slot, it returns none, for Run to run it
// alone.
func (l *Loop) take(ctx context.Context, free int, idle bool) []*stream {
	for {
		l.mu.Lock()
		var start []*stream
		for st := l.head(); st != nil; st = l.head() {
			if l.long(st) {
				if idle && len(start) == 0 {
					l.mu.Unlock()
					return nil
				}
				break // it waits for the batch to drain
			}
			n := max(st.req.N, 1)
			if st.t.weights != nil && st.t.weights != l.current {
				if !idle || len(start) > 0 {
					break // other weights wait for the batch to drain
				}
				l.use(st.t)
			}
			if n > free {
				break
			}
			start = append(start, l.waiting[:n]...)
			l.waiting = l.waiting[n:]
			free -= n
		}
		l.mu.Unlock()
		if len(start) > 0 || !idle || ctx.Err() != nil {
			return start
		}
		<-l.wake
	}
}

// head drops the requests at the head of the queue whose caller has
// gone, telling them so, and returns the first continuation of the next
// one, or nil. l.mu is held, and released while a dropped request is
// told.
func (l *Loop) head() *stream {
	for len(l.waiting) > 0 {
		st := l.waiting[0]
		if !st.t.gone.Load() {
			return st
		}
		l.waiting = l.waiting[max(st.req.N, 1):]
		l.mu.Unlock()
		st.t.end(nil)
		l.mu.Lock()
	}
	l.waiting = nil // let the slice's requests go
	return nil
}

// use loads t's weights into the model and has them packed again at the
// next step, none being in flight. Only requests with weights of their
// own get here (serve --tinker's), whose model is never frozen, so Repack
// does not refuse.
func (l *Loop) use(t *ticket) {
	t.job.Load()
	l.s.Repack()
	l.current = t.weights
}

// long reports whether st's request needs more than a slot holds.
func (l *Loop) long(st *stream) bool { return span(l.s.Model, st.req) > l.capacity }

// runLong runs the long requests at the head of the queue, none being in
// flight. It loads the first one's weights, and replaces the cache by
// one of at most as many positions, in slots as long as the longest of
// the long requests waiting next to it with those weights, and no more
// slots than they have continuations. There they draw as a batch of
// their own (takeLong), and then the cache is freed and the slots come
// back.
func (l *Loop) runLong(ctx context.Context) error {
	l.mu.Lock()
	first := l.head()
	if first == nil || !l.long(first) {
		l.mu.Unlock()
		return nil // its caller went meanwhile
	}
	weights := l.current
	if first.t.weights != nil {
		weights = first.t.weights
	}
	capacity, n := 0, 0
	for i := 0; i < len(l.waiting); i += max(l.waiting[i].req.N, 1) {
		st := l.waiting[i]
		if !l.long(st) || (st.t.weights != nil && st.t.weights != weights) {
			break
		}
		capacity, n = max(capacity, span(l.s.Model, st.req)), n+max(st.req.N, 1)
	}
	l.mu.Unlock()
	if weights != l.current {
		l.use(first.t)
	}
	slots := min(n, l.slots*l.capacity/capacity)
	if err := l.resize(slots, capacity); err != nil {
		return err
	}
	if err := l.s.decode(ctx, slots, func(free int, _ bool) []*stream { return l.takeLong(capacity, free) }); err != nil {
		return err
	}
	l.s.release()
	return l.resize(l.slots, l.capacity)
}

// takeLong hands runLong's decoding loop, in order, the continuations
// that fit in free slots: those left of a request started in part, then
// those of the requests at the head of the queue that need more than a
// slot, no more than capacity, and the weights in the model. A request
// with more continuations than the free slots starts in part (split).
// It stops at the first request that does not qualify, dropping those
// whose caller has gone.
func (l *Loop) takeLong(capacity, free int) []*stream {
	var start []*stream
	for free > 0 {
		if len(l.rest) == 0 {
			l.mu.Lock()
			st := l.head()
			if st == nil || !l.long(st) || span(l.s.Model, st.req) > capacity || (st.t.weights != nil && st.t.weights != l.current) {
				l.mu.Unlock()
				break
			}
			n := max(st.req.N, 1)
			l.rest, l.waiting = l.waiting[:n:n], l.waiting[n:]
			l.mu.Unlock()
		}
		if t := l.rest[0].t; t.gone.Load() {
			// The continuations not started end here; those drawing,
			// at the next step.
			t.live -= len(l.rest)
			l.rest = nil
			if t.live == 0 {
				t.end(nil)
			}
			continue
		}
		m := min(free, len(l.rest))
		start = append(start, split(l.rest[:m])...)
		l.rest, free = l.rest[m:], free-m
	}
	if len(l.rest) == 0 {
		l.rest = nil
	}
	return start
}

// split makes streams, the next continuations of a request, none of them
// started, a request of their own: their Request.First follows on from
// the ones before, so they draw what they would together, and decode
// prefills the prompt once for them. Accept still sees the request's
// own indices.
func split(streams []*stream) []*stream {
	r, k0 := streams[0].req, streams[0].k
	if k0 == 0 && len(streams) == max(r.N, 1) {
		return streams // the whole request
	}
	part := *r
	part.First, part.N = r.First+k0, len(streams)
	if r.Accept != nil {
		part.Accept = func(k int, tok int32, lp float32, last bool) bool { return r.Accept(k0+k, tok, lp, last) }
	}
	for i, st := range streams {
		st.req, st.k = &part, i
	}
	return streams
}

// resize replaces the sampler's cache by one of n slots of capacity
// tokens. The old cache is collected first, so that the two are not held
// at once.
func (l *Loop) resize(n, capacity int) error {
	l.s.cache = nil
	runtime.GC()
	return l.s.ensure(n, capacity)
}
