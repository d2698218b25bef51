package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rlvr/engine/model"
	"rlvr/eval"
	"rlvr/rundir"
	"rlvr/train"
)

// TestResumeWhileTrainingIsRefused starts `rlvr train`, and while it runs
// `rlvr train --resume` on its directory: the resume exits non-zero naming
// the running process, whose metrics keep their steps in order.
func TestResumeWhileTrainingIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RLVR_CACHE", filepath.Join(dir, "cache"))
	model := filepath.Join(dir, "model")
	saveByteModel(t, model)
	run := filepath.Join(dir, "run")
	args := []string{"train", "--model", model, "--levels", "0", "--steps", "400", "--prompts", "2", "--group-size", "2",
		"--max-tokens", "16", "--eval-problems", "2", "--eval-every", "0", "--checkpoint-every", "1", "--run", run}
	var first bytes.Buffer
	training := startRLVR(t, &first, args...)
	metrics := filepath.Join(run, rundir.MetricsFile)
	for deadline := time.Now().Add(60 * time.Second); lines(metrics) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("training never logged two steps:\n%s", first.String())
		}
	}
	var second bytes.Buffer
	err := startRLVR(t, &second, append(args, "--resume")...).Wait()
	training.Process.Signal(syscall.SIGINT)
	if werr := training.Wait(); werr != nil {
		t.Fatalf("the first run exited with %v:\n%s", werr, first.String())
	}
	want := fmt.Sprintf("%s is in use: locked by PID %d on host", run, training.Process.Pid)
	if err == nil || !strings.Contains(second.String(), want) {
		t.Fatalf("resume while the run goes on: %v, want %q in:\n%s", err, want, second.String())
	}
	b, rerr := os.ReadFile(metrics)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m struct {
			Step int `json:"step"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.Step != i+1 {
			t.Fatalf("metrics line %d is step %d (%v): %s", i+1, m.Step, err, line)
		}
	}
}

// TestRecordEvaluationLocks: an evaluation is not recorded into a run
// directory another process holds, nor over one recorded meanwhile.
func TestRecordEvaluationLocks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	lock, err := rundir.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := &eval.Report{Seconds: 42}
	machine := train.MachineRecord(0, model.FP32, model.FP32)
	err = recordEvaluation(dir, []string{"rlvr", "eval"}, "m", 1, machine, nil, rep)
	if err == nil || !strings.Contains(err.Error(), "is in use: locked by PID") {
		t.Fatalf("recording into a held directory: %v", err)
	}
	lock.Release()
	if err := recordEvaluation(dir, []string{"rlvr", "eval"}, "m", 1, machine, nil, rep); err != nil {
		t.Fatal(err)
	}
	// The record says what the evaluation computed with, and how long it took.
	if r, err := rundir.Load(dir); err != nil || len(r.Machines) != 1 || r.Machines[0] != machine {
		t.Fatalf("the recorded run's machine lines: %+v (%v), want [%+v]", r.Machines, err, machine)
	} else if len(r.Evals) != 1 || r.Evals[0].Seconds != 42 {
		t.Fatalf("the recorded evaluation: %+v, want one of 42 s", r.Evals)
	}
	err = recordEvaluation(dir, []string{"rlvr", "eval"}, "m", 1, machine, nil, rep)
	if err == nil || !strings.Contains(err.Error(), "was given an evaluation") {
		t.Fatalf("recording twice: %v", err)
	}
}
