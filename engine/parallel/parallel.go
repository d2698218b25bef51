// Package parallel splits loops across a fixed number of threads.
//
// The engine has exactly one layer of parallelism: this package. BLAS runs
// single-threaded inside it, so the machine's cores are never
// oversubscribed (multi-threaded BLAS called from parallel Go code halves
// throughput). Every split depends only on the loop length and the thread
// count, so results are deterministic for a given thread count.
//
// The worker goroutines persist and spin briefly between loops before
// parking: a training step or a decoding step runs hundreds of short
// parallel loops back to back, and waking a parked goroutine costs more than
// many of those loops take. Loops started while another is running (from a
// second goroutine, or nested inside a loop body) run their chunks in order
// on the calling goroutine, with the same chunk boundaries, so the result
// is the same.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var threads atomic.Int32

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// Threads returns the number of threads loops are split across.
func Threads() int { return int(threads.Load()) }

// SetThreads sets the number of threads loops are split across; n < 1
// means runtime.GOMAXPROCS(0). It returns the previous value. Results are
// bit-reproducible for a fixed thread count.
func SetThreads(n int) int {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return int(threads.Swap(int32(n)))
}

// For calls fn(lo, hi) on contiguous chunks covering [0, n), one chunk per
// thread, each chunk a multiple of grain (except the last). Chunks run
// concurrently; For returns when all are done. fn must be safe to call
// concurrently on disjoint ranges.
func For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	blocks := (n + grain - 1) / grain
	t := min(Threads(), blocks)
	if t <= 1 {
		fn(0, n)
		return
	}
	per := (blocks + t - 1) / t * grain
	chunks := (n + per - 1) / per
	run(chunks, func(c int) { fn(c*per, min((c+1)*per, n)) })
}

// Each calls fn(i) for every i in [0, n), items dealt to threads in
// contiguous chunks. Use it for coarse independent tasks (one sequence and
// head of attention, say).
func Each(n int, fn func(i int)) {
	For(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}

// Worker is like For with grain 1 but also passes the chunk's index w in
// [0, Threads()), for loops that need per-thread scratch space.
func Worker(n int, fn func(w, lo, hi int)) {
	if n <= 0 {
		return
	}
	t := min(Threads(), n)
	if t <= 1 {
		fn(0, 0, n)
		return
	}
	per := (n + t - 1) / t
	chunks := (n + per - 1) / per
	run(chunks, func(c int) { fn(c, c*per, min((c+1)*per, n)) })
}

// spinLoads is how many times an idle worker polls for the next loop
// before it parks (tens of microseconds).
const spinLoads = 1 << 16

// Run calls body(c) for every chunk c in [0, chunks), concurrently, and
// returns when all are done. It allocates nothing, so a caller that binds
// body once (a method value kept in a struct) has allocation-free loops.
func Run(chunks int, body func(c int)) {
	switch {
	case chunks <= 0:
		return
	case chunks == 1 || Threads() == 1:
		for c := 0; c < chunks; c++ {
			body(c)
		}
		return
	}
	run(chunks, body)
}

// pool is the persistent workers. One loop runs at a time; state packs the
// loop's generation with its next unclaimed chunk, so a worker that wakes
// late cannot claim a chunk of a loop it has not seen.
type pool struct {
	busy    sync.Mutex
	state   atomic.Uint64 // generation<<32 | next chunk
	body    atomic.Value  // func(c int) of the current loop
	chunks  atomic.Int32
	pending atomic.Int32 // chunks of the current loop not yet finished
	workers []*worker
	grow    sync.Mutex
}

type worker struct {
	parked atomic.Bool
	wake   chan struct{}
}

var global pool

// run executes body(c) for c in [0, chunks): the caller takes chunks too,
// and the workers claim the rest.
func run(chunks int, body func(c int)) {
	if !global.busy.TryLock() {
		for c := 0; c < chunks; c++ {
			body(c)
		}
		return
	}
	defer global.busy.Unlock()
	p := &global
	p.ensure(chunks - 1)
	p.body.Store(body)
	p.chunks.Store(int32(chunks))
	p.pending.Store(int32(chunks))
	gen := p.state.Load()>>32 + 1
	p.state.Store(gen << 32) // publishes the loop
	for _, w := range p.workers[:chunks-1] {
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	p.work(gen)
	for p.pending.Load() > 0 {
		runtime.Gosched()
	}
	// Every chunk is claimed, so no worker calls body again: the pool lets
	// it go, and what it holds (a model's weights that were just packed)
	// with it.
	p.body.Store(idle)
}

// idle is the pool's body between loops.
var idle = func(int) {}

// work claims and runs chunks of loop gen until none is left or another
// loop has started.
func (p *pool) work(gen uint64) {
	for {
		s := p.state.Load()
		c := int32(uint32(s))
		if s>>32 != gen || c >= p.chunks.Load() {
			return
		}
		// A successful claim proves loop gen is still running, so body
		// and chunks are still its own.
		if p.state.CompareAndSwap(s, s+1) {
			p.body.Load().(func(int))(int(c))
			p.pending.Add(-1)
		}
	}
}

// ensure starts workers until there are at least n.
func (p *pool) ensure(n int) {
	p.grow.Lock()
	defer p.grow.Unlock()
	for len(p.workers) < n {
		w := &worker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.loop(w, p.state.Load()>>32)
	}
}

// loop is a worker: wait for a new loop, help with it, repeat.
func (p *pool) loop(w *worker, seen uint64) {
	for {
		for i := 0; p.state.Load()>>32 == seen; i++ {
			if i < spinLoads {
				continue
			}
			w.parked.Store(true)
			if p.state.Load()>>32 == seen {
				<-w.wake
			}
			w.parked.Store(false)
			i = 0
		}
		seen = p.state.Load() >> 32
		p.work(seen)
	}
}
