package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run the rlvr command itself in a child process (the
// test binary, re-executed with RLVR_MAIN_ARGS), so that real signals can
// be sent to it.
func TestMain(m *testing.M) {
	if args := os.Getenv("RLVR_MAIN_ARGS"); args != "" {
		os.Args = append([]string{"rlvr"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runUntil starts rlvr with args, sends SIGINT once ready reports true,
// and returns its output and exit error.
func runUntil(t *testing.T, args []string, ready func() bool) (string, error) {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "RLVR_MAIN_ARGS="+strings.Join(args, "\x1f"))
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatalf("never ready:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	child.Process.Signal(syscall.SIGINT)
	err := child.Wait()
	return out.String(), err
}

func lines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
	}
	return n
}

// TestSIGINTCheckpointsTraining interrupts `rlvr train` and `rlvr sft`
// mid-run: each finishes its step, checkpoints, exits 0 and says how to
// resume; resuming finishes the run.
func TestSIGINTCheckpointsTraining(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RLVR_CACHE", filepath.Join(dir, "cache"))
	model := filepath.Join(dir, "model")
	saveByteModel(t, model)
	for _, cmd := range []string{"train", "sft"} {
		run := filepath.Join(dir, cmd)
		args := []string{cmd, "--model", model, "--levels", "0", "--steps", "400", "--prompts", "2", "--group-size", "2",
			"--max-tokens", "16", "--eval-problems", "2", "--eval-every", "0", "--checkpoint-every", "0", "--run", run}
		out, err := runUntil(t, args, func() bool { return lines(filepath.Join(run, "metrics.jsonl")) >= 2 })
		if err != nil {
			t.Fatalf("%s exited with %v:\n%s", cmd, err, out)
		}
		if !strings.Contains(out, "continue with: rlvr "+cmd+" --run "+run+" --resume") {
			t.Fatalf("%s printed no resume line:\n%s", cmd, out)
		}
		n := lines(filepath.Join(run, "metrics.jsonl"))
		if n >= 400 || !fileExists(filepath.Join(run, fmt.Sprintf("ckpt-%06d", n), "state.json")) {
			t.Fatalf("%s: %d steps logged, checkpoint of the last one missing", cmd, n)
		}
	}
}

// TestSIGINTCheckpointsPretraining interrupts `rlvr pretrain --out DIR`:
// it writes its state and exits 0; the same command continues it.
func TestSIGINTCheckpointsPretraining(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "pre")
	args := []string{"pretrain", "--steps", "100000", "--batch-tokens", "256", "--eval", "1", "--out", out}
	started := time.Now()
	text, err := runUntil(t, args, func() bool { return time.Since(started) > 1500*time.Millisecond })
	if err != nil {
		t.Fatalf("pretrain exited with %v:\n%s", err, text)
	}
	if !strings.Contains(text, "run the same command again to continue") || !fileExists(filepath.Join(out, "pretrain-state.json")) ||
		!fileExists(filepath.Join(out, "optimizer.safetensors")) {
		t.Fatalf("no resumable state:\n%s", text)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
