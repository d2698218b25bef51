// Package parallel splits loops across a fixed number of goroutines.
//
// The engine has exactly one layer of parallelism: this package. BLAS runs
// single-threaded inside it, so the machine's cores are never oversubscribed
// (multi-threaded BLAS called from parallel Go code halves throughput). Every
// split depends only on the loop length and the thread count, so results are
// deterministic for a given thread count.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var threads atomic.Int32

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// Threads returns the number of goroutines loops are split across.
func Threads() int { return int(threads.Load()) }

// SetThreads sets the number of goroutines loops are split across; n < 1
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
	if grain < 1 {
		grain = 1
	}
	t := Threads()
	blocks := (n + grain - 1) / grain
	if t > blocks {
		t = blocks
	}
	if t <= 1 {
		fn(0, n)
		return
	}
	per := (blocks + t - 1) / t * grain
	var wg sync.WaitGroup
	for lo := per; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	fn(0, min(per, n))
	wg.Wait()
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

// Worker is like For but also passes the chunk's index w in [0, Threads()),
// for loops that keep per-thread partial sums and reduce them afterwards in
// a fixed order.
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
	var wg sync.WaitGroup
	for w := 1; w*per < n; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	fn(0, 0, min(per, n))
	wg.Wait()
}
