package sampler

import (
	"context"
	"errors"
	"fmt"
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
// A request that could never fit (N above slots, or prompt and MaxNew
// beyond capacity while within the model's context) is refused at
// Submit. A continuation's draws depend only on its request's Seed and
// its index, so they are the same as Sample's, whenever the request
// starts and whatever it runs beside.
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
// continuation.
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
	if need := span(l.s.Model, &j.Request); need > l.capacity {
		return fmt.Errorf("sampler: a prompt of %d tokens and %d new ones need %d cache positions; the loop holds %d per continuation", len(j.Prompt), j.MaxNew, need, l.capacity)
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
	err := l.s.decode(ctx, l.slots, func(free int, idle bool) []*stream { return l.take(ctx, free, idle) })
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
	for _, st := range l.s.active {
		if st.t.live > 0 {
			st.t.live = 0
			st.t.end(err)
		}
	}
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
// nothing to start, it waits for a submission or the end of ctx.
func (l *Loop) take(ctx context.Context, free int, idle bool) []*stream {
	for {
		l.mu.Lock()
		var start []*stream
		for len(l.waiting) > 0 {
			st := l.waiting[0]
			n := max(st.req.N, 1)
			if st.t.gone.Load() {
				l.waiting = l.waiting[n:]
				l.mu.Unlock()
				st.t.end(nil)
				l.mu.Lock()
				continue
			}
			if st.t.weights != nil && st.t.weights != l.current {
				if !idle || len(start) > 0 {
					break // other weights wait for the batch to drain
				}
				st.t.job.Load()
				l.s.Repack()
				l.current = st.t.weights
			}
			if n > free {
				break
			}
			start = append(start, l.waiting[:n]...)
			l.waiting = l.waiting[n:]
			free -= n
		}
		if len(l.waiting) == 0 {
			l.waiting = nil // let the slice's requests go
		}
		l.mu.Unlock()
		if len(start) > 0 || !idle || ctx.Err() != nil {
			return start
		}
		<-l.wake
	}
}
