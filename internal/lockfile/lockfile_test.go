package lockfile

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// holdEnv names the lock file the helper process holds.
const holdEnv = "LOCKFILE_TEST_HOLD"

// TestHelperHold is not a test: run as a child process with holdEnv set,
// it takes the lock, says "held" and keeps it until it is killed.
func TestHelperHold(t *testing.T) {
	path := os.Getenv(holdEnv)
	if path == "" {
		t.Skip("the helper of TestAnotherProcessHolds")
	}
	if _, err := Acquire(path); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(time.Hour)
}

// holdInChild starts a process that holds the lock at path, and returns
// it once it does.
func holdInChild(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("the helper process said %q: %v", line, err)
	}
	return cmd
}

// TestAnotherProcessHolds: a second process is refused with the holder's
// PID and host; once the holder is killed -9, the lock is taken over.
func TestAnotherProcessHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	child := holdInChild(t, path)
	_, err := Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire while another process holds the lock: %v", err)
	}
	host, _ := os.Hostname()
	pid := strconv.Itoa(child.Process.Pid)
	if msg := err.Error(); !strings.Contains(msg, "PID "+pid) || !strings.Contains(msg, host) || held.OtherHost {
		t.Fatalf("the refusal does not name the holder, PID %s on %s: %v", pid, host, msg)
	}
	child.Process.Signal(os.Kill)
	child.Wait()
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	defer l.Release()
	if h := record(t, path); h.PID != os.Getpid() {
		t.Fatalf("the record names PID %d, want this process's %d", h.PID, os.Getpid())
	}
}

// TestSecondLockInProcess: two locks of one file in one process exclude
// each other too, and Release lets the next one in.
func TestSecondLockInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	if err == nil || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Acquire: %v", err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if h := record(t, path); h.PID != 0 {
		t.Fatalf("Release left the record %+v", h)
	}
	second, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	second.Release()
	var none *Lock
	if err := none.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestStaleRecordIsTakenOver: a record of an ended process of this host,
// with no flock held (the process was killed), is no lock.
func TestStaleRecordIsTakenOver(t *testing.T) {
	ended := exec.Command(os.Args[0], "-test.run=^$")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	path := filepath.Join(t.TempDir(), "lock")
	writeHolder(t, path, Holder{PID: ended.Process.Pid, Host: host, Command: "rlvr train", Since: time.Now()})
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("a stale lock of PID %d was not taken over: %v", ended.Process.Pid, err)
	}
	defer l.Release()
	if h := record(t, path); h.PID != os.Getpid() || h.Host != host {
		t.Fatalf("record after the takeover: %+v", h)
	}
}

// TestOtherHostIsRefused: a record of another host is refused, saying how
// to break it.
func TestOtherHostIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	writeHolder(t, path, Holder{PID: 4242, Host: "elsewhere.invalid", Since: time.Now()})
	_, err := Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || !held.OtherHost {
		t.Fatalf("Acquire over another host's record: %v", err)
	}
	for _, want := range []string{"PID 4242", "elsewhere.invalid", "remove " + path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if _, err := Wait(context.Background(), path, time.Millisecond, nil); !errors.As(err, &held) {
		t.Fatalf("Wait over another host's record: %v", err)
	}
}

// TestWait waits for a holder to release, and stops when its context ends.
func TestWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	first, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, path, time.Millisecond, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
	told := make(chan *HeldError, 1)
	got := make(chan error, 1)
	go func() {
		l, err := Wait(context.Background(), path, time.Millisecond, func(h *HeldError) { told <- h })
		l.Release()
		got <- err
	}()
	if h := <-told; h.Holder.PID != os.Getpid() {
		t.Fatalf("told of %+v", h.Holder)
	}
	first.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func writeHolder(t *testing.T, path string, h Holder) {
	t.Helper()
	b, _ := json.Marshal(h)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func record(t *testing.T, path string) Holder {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h Holder
	if len(b) > 0 {
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return h
}
