package bench

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestPeakRSSReset checks the peak follows a large allocation and, where
// the system allows the reset, forgets it once the memory is returned.
func TestPeakRSSReset(t *testing.T) {
	const size = 256 << 20
	big := make([]byte, size)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	peak := PeakRSS()
	if peak < size {
		t.Fatalf("peak %d bytes after touching %d", peak, size)
	}
	runtime.KeepAlive(big)
	big = nil
	runtime.GC()
	debug.FreeOSMemory()
	if !ResetPeakRSS() {
		t.Skip("this system does not let the peak be reset")
	}
	if after := PeakRSS(); after > peak-size/2 {
		t.Fatalf("peak %d bytes after the reset, %d before, with %d bytes returned", after, peak, size)
	}
}
