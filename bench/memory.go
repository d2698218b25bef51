package bench

import "syscall"

// PeakRSS is the largest resident set this process has had since it
// started, in bytes (getrusage's ru_maxrss, which Linux counts in KiB);
// 0 where the system does not say.
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

// mib renders bytes in MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }
