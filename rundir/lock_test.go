package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rlvr/internal/lockfile"
)

// TestLockRefusesSecondWriter: Lock makes the directory, a second Lock is
// refused naming the directory and the holder's PID, and Release lets the
// next writer in.
func TestLockRefusesSecondWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	var held *lockfile.HeldError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), dir+" is in use") || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second writer: %v", err)
	}
	l.Release()
	l, err = Lock(dir)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l.Release()
}
