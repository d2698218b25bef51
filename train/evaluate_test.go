package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/rundir"
)

// TestFinalEvaluationResumes: a run stopped in its final test evaluation
// resumes there, from the checkpoint written before it, and scores only
// what it had not: the completions eval_progress.jsonl holds are taken as
// they are. Here they are all made wrong before the resume, so the test
// accuracy falls below the straight run's by as many as were right among
// them; the rest of the record is the straight run's, and the progress
// file is gone once the evaluation is recorded.
func TestFinalEvaluationResumes(t *testing.T) {
	cfg := smallRL(t)
	cfg.Model, cfg.Data.Levels, cfg.MaxTokens = worldModel(t), []int{1}, 64
	cfg.Steps, cfg.CheckpointEvery, cfg.EvalProblems, cfg.TestProblems = 2, 0, 8, 700
	straight := filepath.Join(t.TempDir(), "straight")
	if err := Run(context.Background(), cfg, straight, Options{}); err != nil {
		t.Fatal(err)
	}
	want := testEval(t, straight)
	if want.Greedy < 0.2 {
		t.Fatalf("the straight run's test accuracy %.3f leaves too few right answers to tell a resumed evaluation by", want.Greedy)
	}

	run := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // stop the run once the test evaluation has kept a chunk
		for ctx.Err() == nil {
			if b, _ := os.ReadFile(filepath.Join(run, rundir.EvalProgressFile)); strings.Contains(string(b), `"split":"test"`) {
				cancel()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if err := Run(ctx, cfg, run, Options{}); err == nil {
		t.Fatal("the run finished its test evaluation before it was stopped")
	}
	cancel()
	b, err := os.ReadFile(filepath.Join(run, rundir.EvalProgressFile))
	if err != nil {
		t.Fatal(err)
	}
	var kept []byte
	var scored int
	for _, line := range strings.SplitAfter(string(b), "\n") {
		var s rundir.Scored
		if json.Unmarshal([]byte(line), &s) != nil {
			continue
		}
		if s.Split == "test" {
			s.Text = "no answer"
			scored++
		}
		l, _ := json.Marshal(s)
		kept = append(append(kept, l...), '\n')
	}
	if err := os.WriteFile(filepath.Join(run, rundir.EvalProgressFile), kept, 0o644); err != nil {
		t.Fatal(err)
	}
	if scored == 0 || scored >= cfg.TestProblems {
		t.Fatalf("%d test completions kept before the stop, want some and not all", scored)
	}
	if err := Run(context.Background(), cfg, run, Options{Resume: true}); err != nil {
		t.Fatal(err)
	}
	got := testEval(t, run)
	if !(got.Greedy < want.Greedy) || got.Greedy < want.Greedy-float64(scored)/float64(cfg.TestProblems)-1e-9 {
		t.Errorf("resumed test accuracy %.4f against %.4f straight, with %d of %d completions made wrong: the kept ones were not taken",
			got.Greedy, want.Greedy, scored, cfg.TestProblems)
	}
	evals := func(dir string) (n int) {
		r, err := rundir.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Evals)
	}
	if a, b := evals(straight), evals(run); a != b {
		t.Errorf("%d evaluations recorded after the resume, %d in the straight run", b, a)
	}
	if _, err := os.Stat(filepath.Join(run, rundir.EvalProgressFile)); !os.IsNotExist(err) {
		t.Errorf("eval_progress.jsonl left after the evaluation: %v", err)
	}
}

// testEval is a run's test evaluation.
func testEval(t *testing.T, dir string) rundir.Eval {
	t.Helper()
	r, err := rundir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Evals {
		if e.Split == "test" {
			return e
		}
	}
	t.Fatalf("%s has no test evaluation", dir)
	return rundir.Eval{}
}
