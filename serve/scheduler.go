package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"rlvr/backend/local"
	"rlvr/engine/sampler"
	"rlvr/sample"
)

var (
	errOverloaded   = errors.New("serve: too many requests are waiting; retry later")
	errShuttingDown = errors.New("serve: the server is shutting down")
)

// A job is one HTTP request's share of a batch: one sample.Request per
// prompt.
type job struct {
	ctx    context.Context // the client's; done when it goes away
	reqs   []sample.Request
	seqs   int      // sequences: the sum of the requests' N
	events *mailbox // the streamed tokens, or nil
	done   chan result
}

// result is what a job gets back: per prompt, its N completions.
type result struct {
	out [][]sample.Completion
	err error
}

func (j *job) finish(r result) {
	select {
	case j.done <- r:
	default: // finished already; cannot happen with a buffer of one
	}
}

// event is one token reported by Request.OnToken.
type event struct {
	choice  int // prompt index × n + sample index
	token   int32
	logprob float32
}

// mailbox buffers a stream's events between the sampling goroutine, which
// must never block, and the handler that writes them to a slow client.
// It grows without bound, but a request's tokens are bounded by
// max_tokens × n.
type mailbox struct {
	mu     sync.Mutex
	events []event
	closed bool
	ready  chan struct{} // holds a signal while events are waiting
}

func newMailbox() *mailbox { return &mailbox{ready: make(chan struct{}, 1)} }

func (m *mailbox) push(e event) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.events = append(m.events, e)
	m.mu.Unlock()
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// take returns the waiting events and empties the mailbox.
func (m *mailbox) take() []event {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.events
	m.events = nil
	return e
}

// close drops waiting and future events: the client is gone.
func (m *mailbox) close() {
	m.mu.Lock()
	m.closed = true
	m.events = nil
	m.mu.Unlock()
}

// scheduler batches the jobs of one Generator and runs them on one
// goroutine: in a decoding loop (loop set), or in whole batches.
type scheduler struct {
	gen      Generator
	loop     *local.Loop // nil: whole batches
	queue    chan *job
	quit     chan struct{}
	window   time.Duration
	maxBatch int
	maxQueue int
	base     context.Context
	log      *slog.Logger
	// admitted counts the loop's jobs not yet finished, bounded by
	// maxBatch running and maxQueue waiting.
	admitted atomic.Int64

	mu      sync.RWMutex // orders submit against stop
	stopped bool
}

// submit queues j without blocking, or says why it cannot.
func (sc *scheduler) submit(j *job) error {
	sc.mu.RLock()
	defer sc.mu.RUnlock()
	if sc.stopped {
		return errShuttingDown
	}
	if sc.loop != nil {
		return sc.admit(j)
	}
	select {
	case sc.queue <- j:
		return nil
	default:
		return errOverloaded
	}
}

// stop makes the loop fail what is queued and return.
func (sc *scheduler) stop() {
	sc.mu.Lock()
	sc.stopped = true
	sc.mu.Unlock()
	close(sc.quit)
}

// run is the scheduler's goroutine: the decoding loop, or the loop of
// whole batches.
func (sc *scheduler) run() {
	if sc.loop == nil {
		sc.batches()
		return
	}
	ctx, cancel := context.WithCancel(sc.base)
	go func() {
		<-sc.quit
		cancel()
	}()
	if err := sc.loop.Run(ctx); err != sampler.ErrLoopStopped {
		sc.log.Warn("serve: the decoding loop failed", "err", err) // the model's error; requests in flight got it
	}
}

// admit submits j's requests into the decoding loop; j finishes when
// the last of them ends. A request the loop refuses fails the job and
// cancels the others.
func (sc *scheduler) admit(j *job) error {
	if sc.admitted.Add(1) > int64(sc.maxBatch+sc.maxQueue) {
		sc.admitted.Add(-1)
		return errOverloaded
	}
	ctx, cancel := context.WithCancel(j.ctx)
	var (
		mu    sync.Mutex
		out   = make([][]sample.Completion, len(j.reqs))
		first error
		left  = len(j.reqs) + 1 // one for the submitting below
	)
	end := func(i int, c []sample.Completion, err error) {
		mu.Lock()
		defer mu.Unlock()
		if i >= 0 {
			out[i] = c
		}
		if err != nil && first == nil {
			first = err
			cancel()
		}
		if left--; left > 0 {
			return
		}
		cancel()
		sc.admitted.Add(-1)
		if first != nil {
			j.finish(result{err: first})
			return
		}
		j.finish(result{out: out})
	}
	for i, r := range j.reqs {
		if err := sc.loop.Submit(ctx, r, nil, nil, func(c []sample.Completion, err error) { end(i, c, err) }); err != nil {
			mu.Lock()
			left -= len(j.reqs) - i // the requests never submitted
			mu.Unlock()
			end(-1, nil, fmt.Errorf("serve: %w", err))
			return nil
		}
	}
	end(-1, nil, nil)
	return nil
}

// batches gathers queued jobs into whole batches and samples each to
// completion.
func (sc *scheduler) batches() {
	var carry *job // the job that did not fit the last batch
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-sc.queue:
			case <-sc.quit:
				sc.drain()
				return
			}
		}
		batch, seqs := []*job{first}, first.seqs
		add := func(j *job) {
			if seqs+j.seqs > sc.maxBatch {
				carry = j
				return
			}
			batch, seqs = append(batch, j), seqs+j.seqs
		}
		// Take what arrived while the last batch sampled.
		waiting := true
		for waiting && carry == nil {
			select {
			case j := <-sc.queue:
				add(j)
			default:
				waiting = false
			}
		}
		// An idle scheduler waits a little for company.
		if len(batch) == 1 && carry == nil && sc.window > 0 && seqs < sc.maxBatch {
			timer := time.NewTimer(sc.window)
		collect:
			for carry == nil && seqs < sc.maxBatch {
				select {
				case j := <-sc.queue:
					add(j)
				case <-timer.C:
					break collect
				case <-sc.quit:
					break collect
				}
			}
			timer.Stop()
		}
		sc.sampleBatch(batch)
	}
}

// drain fails the queued jobs.
func (sc *scheduler) drain() {
	for {
		select {
		case j := <-sc.queue:
			j.finish(result{err: errShuttingDown})
		default:
			return
		}
	}
}

// sampleBatch samples one batch and hands each job its results.
func (sc *scheduler) sampleBatch(batch []*job) {
	live := batch[:0]
	for _, j := range batch {
		if j.ctx.Err() != nil {
			j.finish(result{err: j.ctx.Err()}) // the client left while queued
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	var reqs []sample.Request
	for _, j := range live {
		reqs = append(reqs, j.reqs...)
	}

	// The batch outlives any one client: cancel it only when all are gone.
	ctx, cancel := context.WithCancel(sc.base)
	sampled := make(chan struct{})
	go func() {
		for _, j := range live {
			select {
			case <-j.ctx.Done():
			case <-sampled:
				return
			}
		}
		cancel()
	}()
	start := time.Now()
	out, err := sc.sample(ctx, reqs)
	close(sampled)
	cancel()
	if err == nil {
		err = checkShape(reqs, out)
	}
	seqs := 0
	for _, j := range live {
		seqs += j.seqs
	}
	if err != nil && sc.base.Err() == nil && ctx.Err() == nil {
		sc.log.Warn("serve: sampling failed", "requests", len(live), "sequences", seqs, "err", err)
	} else {
		sc.log.Debug("serve: batch", "requests", len(live), "sequences", seqs, "duration", time.Since(start), "err", err)
	}
	off := 0
	for _, j := range live {
		n := len(j.reqs)
		if err != nil {
			j.finish(result{err: err})
		} else {
			j.finish(result{out: out[off : off+n]})
		}
		off += n
	}
}

// sample calls the Generator, turning a panic into an error so that one
// bad batch does not take the server down.
func (sc *scheduler) sample(ctx context.Context, reqs []sample.Request) (out [][]sample.Completion, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("serve: generator panicked: %v", p)
		}
	}()
	return sc.gen.Sample(ctx, reqs)
}

// checkShape reports a Generator that broke its contract.
func checkShape(reqs []sample.Request, out [][]sample.Completion) error {
	if len(out) != len(reqs) {
		return fmt.Errorf("serve: generator returned %d results for %d requests", len(out), len(reqs))
	}
	for i, r := range reqs {
		if len(out[i]) != r.Params.N {
			return fmt.Errorf("serve: generator returned %d completions for request %d with n=%d", len(out[i]), i, r.Params.N)
		}
		for k, c := range out[i] {
			if len(c.Logprobs) != len(c.Tokens) {
				return fmt.Errorf("serve: generator returned %d logprobs for %d tokens (request %d, sample %d)", len(c.Logprobs), len(c.Tokens), i, k)
			}
		}
	}
	return nil
}
