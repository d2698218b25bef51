package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/rundir"
)

// TestCompute: --compute adds up what each run recorded of its time (its
// steps' step_s, its evaluations' seconds, its cold start's), turns it into
// core-hours by the threads of its last start, and says what it could not
// count: an evaluation without a time, a run without machine.jsonl, a cold
// start record that does not read.
func TestCompute(t *testing.T) {
	root := t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	timed := filepath.Join(root, "eapo-seed1")
	write(timed, rundir.MetricsFile, `{"step":1,"step_s":1000}`+"\n"+`{"step":2,"step_s":2000}`+"\n"+`{"step":3,"step_s":4000}`+"\n")
	write(timed, rundir.EvalFile, `{"step":0,"split":"val","greedy":0.1,"greedy_low":0,"greedy_high":0.2,"seconds":1800}`+"\n"+
		`{"step":3,"split":"test","greedy":0.1,"greedy_low":0,"greedy_high":0.2}`+"\n")
	write(timed, rundir.ColdStartFile, `{"parts":["consultation"],"seconds":3600}`+"\n")
	write(timed, rundir.MachineFile, `{"step":0,"cpu":"Intel Xeon family 6 model 143","threads":1}`+"\n"+
		`{"step":2,"cpu":"AMD EPYC family 25 model 17","threads":2}`+"\n")
	old := filepath.Join(root, "grpo-seed1")
	write(old, rundir.MetricsFile, `{"step":1,"step_s":3600}`+"\n")
	write(old, rundir.ColdStartFile, `{"seconds":"an hour"}`)

	var runs []*rundir.Run
	for _, dir := range []string{timed, old} {
		r, err := rundir.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	// 7000 s of steps, 1800 of evaluation, 3600 of cold start: 12400 s on
	// the last start's 2 threads.
	c := ComputeOf(runs[0])
	if c.Wall() != 12400 || c.CoreHours() != 12400*2/3600.0 || c.StepMedian != 2000 || c.Timed != 1 || c.Evals != 2 || c.CPU != "AMD EPYC family 25 model 17" {
		t.Errorf("the timed run: %+v, wall %v s, %v core-hours", c, c.Wall(), c.CoreHours())
	}
	if !strings.Contains(strings.Join(runs[1].Warnings, "\n"), rundir.ColdStartFile) || runs[1].ColdStartSeconds != 0 {
		t.Errorf("a cold start record without a number of seconds: %v s, warnings %q", runs[1].ColdStartSeconds, runs[1].Warnings)
	}

	got := Compute(runs)
	for _, want := range []string{
		"| eapo-seed1 | AMD EPYC family 25 model 17 | 2 | 3 | 2000 s | 1.94 | 0.50 (1 of 2) | 1.00 | 3.44 | 6.89 |",
		"| grpo-seed1 | — | — | 1 | 3600 s | 1.00 | — | — | 1.00 | — |",
		"| all 2 runs |  |  | 4 |  | 2.94 | 0.50 | 1.00 | 4.44 | 6.89 (1 of 2 runs) |",
		"Evaluations without a time (written before it was kept), counted as none: 1;",
		"Runs without threads (no machine.jsonl), whose core-hours are not counted: 1.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("--compute lacks %q:\n%s", want, got)
		}
	}
	if got := Compute(runs[1:]); !strings.Contains(got, "| all 1 runs |  |  | 1 |  | 1.00 | — | — | 1.00 | — |") {
		t.Errorf("--compute of runs none of which recorded threads or an evaluation's time:\n%s", got)
	}
}
