package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/rundir"
)

// TestEvaluationResumes: a run stopped in an evaluation resumes there and
// scores only what it had not: the completions eval_progress.jsonl holds
// are taken as they are. Here they are all made wrong before the resume,
// so the accuracy falls below the straight run's by as many as were right
// among them; the rest of the record is the straight run's, and the
// progress file is gone once the evaluation is recorded. Two evaluations:
//   - the final test, resumed from the checkpoint written before it;
//   - the starting model's validation, resumed without any checkpoint:
//     the run's start is its config, and its steps, made after the
//     resume, are the straight run's.
func TestEvaluationResumes(t *testing.T) {
	for _, c := range []struct {
		name  string
		split string
		step  int
	}{{"final test", "test", 2}, {"starting validation", "val", 0}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallRL(t)
			cfg.Model, cfg.Data.Levels, cfg.MaxTokens = worldModel(t), []int{1}, 64
			cfg.Steps, cfg.CheckpointEvery, cfg.EvalProblems, cfg.TestProblems = 2, 0, 8, 700
			problems := cfg.TestProblems
			if c.split == "val" {
				cfg.EvalProblems, cfg.TestProblems = 700, 8
				problems = cfg.EvalProblems
			}
			straight := filepath.Join(t.TempDir(), "straight")
			if err := Run(context.Background(), cfg, straight, Options{}); err != nil {
				t.Fatal(err)
			}
			want := evalOf(t, straight, c.split, c.step)
			if want.Greedy < 0.2 {
				t.Fatalf("the straight run's %s accuracy %.3f leaves too few right answers to tell a resumed evaluation by", c.split, want.Greedy)
			}

			run := filepath.Join(t.TempDir(), "run")
			ctx, cancel := context.WithCancel(context.Background())
			mark := fmt.Sprintf(`"split":%q`, c.split)
			go func() { // stop the run once the evaluation has kept a chunk
				for ctx.Err() == nil {
					if b, _ := os.ReadFile(filepath.Join(run, rundir.EvalProgressFile)); strings.Contains(string(b), mark) {
						cancel()
					}
					time.Sleep(time.Millisecond)
				}
			}()
			if err := Run(ctx, cfg, run, Options{}); err == nil {
				t.Fatalf("the run finished its %s evaluation before it was stopped", c.split)
			}
			cancel()
			if c.step == 0 {
				if ckpts, _ := rundir.Checkpoints(run); len(ckpts) > 0 {
					t.Fatalf("a checkpoint (%v) before the first step", ckpts)
				}
			}
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
				if s.Split == c.split && s.Step == c.step {
					s.Text = "no answer"
					scored++
				}
				l, _ := json.Marshal(s)
				kept = append(append(kept, l...), '\n')
			}
			if err := os.WriteFile(filepath.Join(run, rundir.EvalProgressFile), kept, 0o644); err != nil {
				t.Fatal(err)
			}
			if scored == 0 || scored >= problems {
				t.Fatalf("%d %s completions kept before the stop, want some and not all", scored, c.split)
			}
			if err := Run(context.Background(), cfg, run, Options{Resume: true}); err != nil {
				t.Fatal(err)
			}
			got := evalOf(t, run, c.split, c.step)
			if !(want.Seconds > 0) || !(got.Seconds > 0) {
				t.Errorf("%s evaluation times %v s straight and %v s resumed, want both recorded", c.split, want.Seconds, got.Seconds)
			}
			if !(got.Greedy < want.Greedy) || got.Greedy < want.Greedy-float64(scored)/float64(problems)-1e-9 {
				t.Errorf("resumed %s accuracy %.4f against %.4f straight, with %d of %d completions made wrong: the kept ones were not taken",
					c.split, got.Greedy, want.Greedy, scored, problems)
			}
			load := func(dir string) *rundir.Run {
				r, err := rundir.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			a, r := load(straight), load(run)
			if len(a.Evals) != len(r.Evals) {
				t.Errorf("%d evaluations recorded after the resume, %d in the straight run", len(r.Evals), len(a.Evals))
			}
			metrics := func(dir string) []map[string]float64 { return stable(t, filepath.Join(dir, rundir.MetricsFile)) }
			if ok, diff := metricsWithin(metrics(straight), metrics(run), 0); !ok {
				t.Errorf("the steps after the resume differ from the straight run's: %s", diff)
			}
			if _, err := os.Stat(filepath.Join(run, rundir.EvalProgressFile)); !os.IsNotExist(err) {
				t.Errorf("eval_progress.jsonl left after the evaluation: %v", err)
			}
		})
	}
}

// evalOf is a run's evaluation of split after step.
func evalOf(t *testing.T, dir, split string, step int) rundir.Eval {
	t.Helper()
	r, err := rundir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Evals {
		if e.Split == split && e.Step == step {
			return e
		}
	}
	t.Fatalf("%s has no %s evaluation after step %d", dir, split, step)
	return rundir.Eval{}
}
