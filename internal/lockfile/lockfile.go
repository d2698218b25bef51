// Package lockfile keeps a second process from writing what one process
// writes: a run directory, a model being pretrained into the cache. The
// lock is an exclusive flock(2) on a file that records its holder (PID,
// host, command), so that a refused process can say who holds it.
//
// The open file holds the lock: a process that ends, killed -9 included,
// releases it, and the next Acquire takes it over. The file itself is
// never removed, since a process that opened it before the removal would
// lock a file nobody else sees any more.
//
// A record naming another host is the exception: a filesystem shared
// between hosts may not pass flock between them, and a process on another
// host cannot be checked from here, so such a lock is refused with the
// path to remove when its holder is known to have ended.
package lockfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Holder is what a lock file records of the process holding it.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since"`
}

// String is the holder as a refusal names it.
func (h Holder) String() string {
	if h.PID == 0 {
		return "another process (it has not recorded its PID yet)"
	}
	s := fmt.Sprintf("PID %d on host %s", h.PID, h.Host)
	var about []string
	if h.Command != "" {
		about = append(about, h.Command)
	}
	if !h.Since.IsZero() {
		about = append(about, "since "+h.Since.Format(time.DateTime))
	}
	if len(about) > 0 {
		s += " (" + strings.Join(about, ", ") + ")"
	}
	return s
}

// HeldError refuses a lock that another process holds.
type HeldError struct {
	Path   string // the lock file
	Holder Holder
	// OtherHost is set when the record names another host: its holder
	// may have ended without this host being able to tell.
	OtherHost bool
}

func (e *HeldError) Error() string {
	if e.OtherHost {
		return fmt.Sprintf("locked by %s, which cannot be checked from this host: if that process has ended, remove %s and try again", e.Holder, e.Path)
	}
	return fmt.Sprintf("locked by %s", e.Holder)
}

// Lock is a held lock file. Release it once; a nil Lock releases nothing.
type Lock struct {
	f *os.File
}

// maxCommand bounds the command line a record keeps.
const maxCommand = 200

// Acquire locks the file at path, creating it, or refuses with a
// *HeldError when another process holds it. A record left by a process
// of this host that has ended is taken over.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	flocked := true
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		h := readHolder(f)
		f.Close()
		return nil, &HeldError{Path: path, Holder: h}
	case errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
		// A filesystem without flock: the record alone decides.
		flocked = false
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("lockfile: locking %s: %w", path, err)
	}
	if h := readHolder(f); h.PID != 0 {
		held := h.Host != host
		if !held && !flocked {
			held = h.PID == os.Getpid() || alive(h.PID)
		}
		// Otherwise flock granted the lock, so the recorded process
		// (ended, or a reused PID) holds nothing: taken over.
		if held {
			f.Close()
			return nil, &HeldError{Path: path, Holder: h, OtherHost: h.Host != host}
		}
	}
	cmd := strings.Join(os.Args, " ")
	if len(cmd) > maxCommand {
		cmd = cmd[:maxCommand] + "…"
	}
	b, _ := json.Marshal(Holder{PID: os.Getpid(), Host: host, Command: cmd, Since: time.Now().Round(time.Second)})
	if err := writeRecord(f, append(b, '\n')); err != nil {
		f.Close()
		return nil, fmt.Errorf("lockfile: %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Wait is Acquire that waits, checking every interval, while another
// process of this host holds the lock; waiting, if not nil, is told once
// who it waits for. A lock recorded by another host is refused at once.
func Wait(ctx context.Context, path string, interval time.Duration, waiting func(*HeldError)) (*Lock, error) {
	told := false
	for {
		l, err := Acquire(path)
		var held *HeldError
		if !errors.As(err, &held) || held.OtherHost {
			return l, err
		}
		if !told && waiting != nil {
			waiting(held)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lockfile: waiting for %s: %w", path, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Release empties the record, so that no later Acquire mistakes it for a
// live holder on another host, and unlocks the file by closing it.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Truncate(0)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// readHolder reads the record of f; an empty or unreadable one (a holder
// between locking and writing it) is the zero Holder.
func readHolder(f *os.File) Holder {
	var h Holder
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err != nil || json.Unmarshal(b, &h) != nil || h.PID <= 0 {
		return Holder{}
	}
	return h
}

// writeRecord replaces f's contents with b and syncs it.
func writeRecord(f *os.File, b []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Sync()
}

// alive reports whether a process of this host has the PID: signal 0
// checks without sending anything, and EPERM is a process of another user.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
