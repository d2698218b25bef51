package rundir

import (
	"fmt"
	"os"
	"path/filepath"

	"rlvr/internal/lockfile"
)

// LockFile is the lock a process holds for as long as it writes a run
// directory.
const LockFile = ".lock"

// Lock claims runDir, creating it, for a process that writes it (a run,
// its resume, an evaluation recorded as a run), until Release or the
// process's end. A second writer is refused with the holder's PID and
// host (a *lockfile.HeldError); readers, such as Load, take no lock.
func Lock(runDir string) (*lockfile.Lock, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("rundir: run directory: %w", err)
	}
	l, err := lockfile.Acquire(filepath.Join(runDir, LockFile))
	if err != nil {
		return nil, fmt.Errorf("rundir: %s is in use: %w", runDir, err)
	}
	return l, nil
}
