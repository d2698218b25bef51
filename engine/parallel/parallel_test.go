package parallel

import (
	"sync/atomic"
	"testing"
)

func TestForCoversEveryIndexOnce(t *testing.T) {
	defer SetThreads(SetThreads(3))
	for _, tc := range []struct{ n, grain int }{{0, 1}, {1, 1}, {7, 1}, {100, 8}, {5, 16}, {1000, 7}} {
		hits := make([]int32, tc.n)
		For(tc.n, tc.grain, func(lo, hi int) {
			if lo%tc.grain != 0 {
				t.Errorf("n=%d grain=%d: chunk starts at %d", tc.n, tc.grain, lo)
			}
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&hits[i], 1)
			}
		})
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("n=%d grain=%d: index %d visited %d times", tc.n, tc.grain, i, h)
			}
		}
	}
}

func TestWorkerIndicesDistinct(t *testing.T) {
	defer SetThreads(SetThreads(4))
	var seen [4]int32
	var total atomic.Int64
	Worker(10, func(w, lo, hi int) {
		atomic.AddInt32(&seen[w], 1)
		total.Add(int64(hi - lo))
	})
	if total.Load() != 10 {
		t.Fatalf("covered %d of 10", total.Load())
	}
	for w, s := range seen {
		if s > 1 {
			t.Fatalf("worker %d ran %d chunks", w, s)
		}
	}
}

// TestNestedAndConcurrentLoops runs loops from several goroutines and from
// inside loop bodies; every index must still be visited once.
func TestNestedAndConcurrentLoops(t *testing.T) {
	defer SetThreads(SetThreads(3))
	var total atomic.Int64
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func() {
			for range 200 {
				For(10, 1, func(lo, hi int) {
					For(hi-lo, 1, func(a, b int) { total.Add(int64(b - a)) })
				})
			}
			done <- true
		}()
	}
	for range 4 {
		<-done
	}
	if got := total.Load(); got != 4*200*10 {
		t.Fatalf("visited %d indices, want %d", got, 4*200*10)
	}
}

// TestRunDoesNotAllocate checks a loop over a body bound once allocates
// nothing.
func TestRunDoesNotAllocate(t *testing.T) {
	defer SetThreads(SetThreads(2))
	var hits [4]atomic.Int32
	body := func(c int) { hits[c].Add(1) }
	if a := testing.AllocsPerRun(200, func() { Run(4, body) }); a != 0 {
		t.Fatalf("Run allocates %v times per call", a)
	}
	for c := range hits {
		if hits[c].Load() != 201 {
			t.Fatalf("chunk %d ran %d times, want 201", c, hits[c].Load())
		}
	}
}
