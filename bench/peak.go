package bench

import (
	"runtime"
	"sync"
	"time"
)

// peakProbeTime is how long each core runs the FMA loop.
const peakProbeTime = 200 * time.Millisecond

// measuredPeak times a loop of independent 8-wide float32 FMAs on every
// core at once, the machine's float32 peak as the clock runs now (turbo
// included), which /proc/cpuinfo's nominal clock understates. ok is false
// where the loop is not built (no cgo, not amd64, or no AVX2/FMA).
func measuredPeak() (gflops float64, ok bool) {
	if !fmaProbeAvailable {
		return 0, false
	}
	cores := runtime.NumCPU()
	rates := make([]float64, cores)
	var wg sync.WaitGroup
	for c := range cores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			const chunk = 1 << 20 // iterations per call, ~1 ms
			fmaProbe(chunk)       // warm the clock up
			var flops float64
			start := time.Now()
			for time.Since(start) < peakProbeTime {
				flops += fmaProbe(chunk)
			}
			rates[c] = flops / time.Since(start).Seconds() / 1e9
		}()
	}
	wg.Wait()
	for _, r := range rates {
		gflops += r
	}
	return gflops, true
}
