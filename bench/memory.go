package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// PeakRSS is the largest resident set this process has had since it
// started, or since the last ResetPeakRSS where Linux allows the reset, in
// bytes; 0 where the system does not say.
func PeakRSS() int64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux counts ru_maxrss in KiB
}

// ResetPeakRSS starts PeakRSS afresh from the current resident set, so a
// measurement's peak excludes what came before it, and reports whether the
// system allowed it (Linux does, through /proc/self/clear_refs).
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// mib renders bytes in MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }
