package bench

import (
	"runtime"
	"testing"
)

// TestMeasuredPeak checks the FMA probe gives a rate a CPU can have: above
// zero and below every core at 6 GHz doing two 8-wide FMAs a cycle (a
// miscount of the loop's work by 2× lands outside on any current CPU).
func TestMeasuredPeak(t *testing.T) {
	g, ok := measuredPeak()
	if !ok {
		t.Skip("the FMA probe is not built here (needs cgo on amd64 with AVX2 and FMA)")
	}
	if limit := float64(runtime.NumCPU()) * 6 * 32; g <= 0 || g > limit {
		t.Fatalf("measured peak %.0f GFLOP/s outside (0, %.0f]", g, limit)
	}
	p := MachinePeak(0)
	if p.GFLOPS <= 0 || p.Source != "measured: independent FMAs on every core" {
		t.Fatalf("MachinePeak: %+v", p)
	}
	t.Logf("measured peak %.0f GFLOP/s on %d cores", g, runtime.NumCPU())
}
