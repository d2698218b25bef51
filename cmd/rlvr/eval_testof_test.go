package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/report"
	"rlvr/rundir"
)

// TestEvalTestOfRun trains two steps on the world, then scores the run's
// final checkpoint with --test-of: the same problems (fingerprint and
// count), the same greedy accuracy and the same sampled answers' scores
// as the run's own test line. --run records it as a run that rlvr
// report pairs with the trained one by seed and problem, at a difference
// of zero; a second --run into the same directory is refused.
func TestEvalTestOfRun(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "world.yaml")
	if err := os.WriteFile(config, []byte(`algorithm: grpo
data: {levels: [2, 4]}
steps: 2
prompts_per_step: 4
group_size: 4
max_tokens: 64
eval_problems: 3
test_problems: 8
eval_samples: 4
lr: 0.005
seed: 7
`), 0o644); err != nil {
		t.Fatal(err)
	}
	trained := filepath.Join(dir, "trained-seed7")
	if _, stderr, err := execute(t, context.Background(), "train", "--config", config, "--run", trained, "--threads", "1"); err != nil {
		t.Fatalf("rlvr train: %v\n%s", err, stderr)
	}
	scored := filepath.Join(dir, "scored-seed7")
	rep, _ := evalJSON(t, "--test-of", trained, "--model", rundir.CheckpointDir(trained, 2), "--run", scored, "--threads", "1")
	if rep.K != 4 {
		t.Errorf("--test-of took k = %d, want the run's eval_samples 4", rep.K)
	}
	runs := make([]*rundir.Run, 2)
	for i, d := range []string{trained, scored} {
		r, err := report.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	want, ok := report.FinalOf(runs[0])
	got, ok2 := report.FinalOf(runs[1])
	if !ok || !ok2 || want.FromVal || got.FromVal {
		t.Fatalf("no test lines: %v %v", ok, ok2)
	}
	w, g := want.Eval, got.Eval
	if g.ProblemSet == "" || g.ProblemSet != w.ProblemSet || g.Problems != w.Problems || g.Greedy != w.Greedy ||
		len(w.Outcomes) != w.Problems || g.Outcomes != w.Outcomes ||
		*g.AvgAtK != *w.AvgAtK || g.PassAtK["4"] != w.PassAtK["4"] || *g.Variance != *w.Variance {
		t.Errorf("--test-of scored %+v, the run %+v", g, w)
	}
	if *w.AvgAtK == 0 || *w.AvgAtK == 1 {
		t.Errorf("avg@4 = %v: the sampled answers should be neither all right nor all wrong, or the seed would go unchecked", *w.AvgAtK)
	}
	d := report.Paired(report.Row{Name: "scored", Runs: runs[1:]}, report.Row{Name: "trained", Runs: runs[:1]})
	if len(d.Seeds) != 1 || d.Seeds[0] != "7" || d.Mean != 0 || d.ByProblem.Mean != 0 || d.ByProblem.N != w.Problems || len(d.LeftOut) != 0 {
		t.Errorf("paired: seeds %v, mean %v, left out %v", d.Seeds, d.Mean, d.LeftOut)
	}
	// Without --model, the run's starting model: a run that starts from
	// the trained checkpoint is scored with it, not with the world's.
	ckpt := rundir.CheckpointDir(trained, 2)
	tuned := filepath.Join(dir, "tuned-seed7")
	if _, stderr, err := execute(t, context.Background(), "train", "--config", config, "--model", ckpt, "--run", tuned, "--threads", "1"); err != nil {
		t.Fatalf("rlvr train: %v\n%s", err, stderr)
	}
	own, _ := evalJSON(t, "--test-of", tuned, "--threads", "1")
	named, _ := evalJSON(t, "--test-of", tuned, "--model", ckpt, "--threads", "1")
	world1, _ := evalJSON(t, "--test-of", tuned, "--world", "1", "--threads", "1")
	if own.Greedy != named.Greedy || own.AvgAtK != named.AvgAtK || own.Problems != 16 {
		t.Errorf("--test-of without --model scored %+v, with the run's starting model %+v", own.Greedy, named.Greedy)
	}
	if world1.Greedy == named.Greedy && world1.AvgAtK == named.AvgAtK {
		t.Errorf("the trained checkpoint scores as the world model does (%v, %v): the test cannot tell them apart", named.Greedy, named.AvgAtK)
	}
	_, stderr, err := execute(t, context.Background(), "eval", "--test-of", trained, "--run", scored, "--threads", "1")
	if err == nil || !strings.Contains(err.Error(), "already holds an evaluation") {
		t.Errorf("a second --run into %s: err = %v\n%s", scored, err, stderr)
	}
	_, _, err = execute(t, context.Background(), "eval", "--test-of", trained, "--levels", "3", "--threads", "1")
	if err == nil || !strings.Contains(err.Error(), "--test-of draws the problems") {
		t.Errorf("--levels beside --test-of: err = %v", err)
	}
}
