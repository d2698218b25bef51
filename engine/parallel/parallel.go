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

// pool is the persistent workers. One loop runs at a time.
type pool struct {
	busy    sync.Mutex
	gen     atomic.Uint64       // bumped for every loop
	current atomic.Pointer[job] // the loop being run
	workers []*worker
	grow    sync.Mutex
}

// job is one loop. Its counters are its own, so a worker that wakes late
// and claims from a finished job finds nothing left.
type job struct {
	body    func(c int)
	chunks  int32
	next    atomic.Int32 // next chunk to claim
	pending atomic.Int32 // chunks not yet finished
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
	j := &job{body: body, chunks: int32(chunks)}
	j.pending.Store(int32(chunks))
	p.current.Store(j)
	p.gen.Add(1)
	for _, w := range p.workers[:chunks-1] {
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	j.work()
	for j.pending.Load() > 0 {
		runtime.Gosched()
	}
}

// work claims and runs chunks of the job until none is left.
func (j *job) work() {
	for {
		c := j.next.Add(1) - 1
		if c >= j.chunks {
			return
		}
		j.body(int(c))
		j.pending.Add(-1)
	}
}

// ensure starts workers until there are at least n.
func (p *pool) ensure(n int) {
	p.grow.Lock()
	defer p.grow.Unlock()
	for len(p.workers) < n {
		w := &worker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.loop(w, p.gen.Load())
	}
}

// loop is a worker: wait for a new loop, help with it, repeat.
func (p *pool) loop(w *worker, seen uint64) {
	for {
		for i := 0; p.gen.Load() == seen; i++ {
			if i < spinLoads {
				continue
			}
			w.parked.Store(true)
			if p.gen.Load() == seen {
				<-w.wake
			}
			w.parked.Store(false)
			i = 0
		}
		seen = p.gen.Load()
		if j := p.current.Load(); j != nil {
			j.work()
		}
	}
}
