package rundir

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestAppend pins the logs' bytes: keys of a metrics line sorted, an eval
// line's fields in order without the absent ones, HTML characters escaped.
func TestAppend(t *testing.T) {
	dir := t.TempDir()
	acc := 0.25
	for step := 1; step <= 2; step++ {
		if err := AppendMetrics(dir, map[string]float64{StepField: float64(step), "reward_mean": 0.5, "loss/pg": -1e-7}); err != nil {
			t.Fatal(err)
		}
	}
	if err := AppendEval(dir, Eval{Step: 2, Split: "test", Greedy: 0.5, GreedyLow: 0.1, GreedyHigh: 0.9, Problems: 4, AvgAtK: &acc, PassAtK: map[string]float64{"8": 0.75}}); err != nil {
		t.Fatal(err)
	}
	if err := AppendSample(dir, Sample{Step: 2, Title: "meta-experience", Text: "a<b & c>d\n"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{MetricsFile, `{"loss/pg":-1e-7,"reward_mean":0.5,"step":1}` + "\n" + `{"loss/pg":-1e-7,"reward_mean":0.5,"step":2}` + "\n"},
		{EvalFile, `{"step":2,"split":"test","greedy":0.5,"greedy_low":0.1,"greedy_high":0.9,"problems":4,"avg_at_k":0.25,"pass_at_k":{"8":0.75}}` + "\n"},
		{SamplesFile, `{"step":2,"title":"meta-experience","text":"a\u003cb \u0026 c\u003ed\n"}` + "\n"},
	} {
		if got := readFile(t, filepath.Join(dir, c.file)); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.file, got, c.want)
		}
	}
}

func TestTruncateLogs(t *testing.T) {
	dir := t.TempDir()
	for step := 0; step <= 3; step++ {
		if step > 0 {
			AppendMetrics(dir, map[string]float64{StepField: float64(step)})
		}
		AppendEval(dir, Eval{Step: step, Split: "val"})
	}
	path := filepath.Join(dir, MetricsFile)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":2,"kl":0.1`) // a killed run's partial line
	f.Close()
	if err := TruncateLogs(dir, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, path), "{\"step\":1}\n{\"step\":2}\n"; got != want {
		t.Errorf("metrics %q, want %q", got, want)
	}
	r, err := Load(dir)
	if err != nil || len(r.Evals) != 3 || r.Evals[2].Step != 2 {
		t.Errorf("evals after truncating at 2: %+v, %v", r.Evals, err)
	}
	if err := TruncateLogs(dir, 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "" {
		t.Errorf("metrics after truncating at 0: %q, want none", got)
	}
	// The starting model's evaluation stays: a run killed in it resumes.
	r, err = Load(dir)
	if err != nil || len(r.Evals) != 1 || r.Evals[0].Step != 0 {
		t.Errorf("evals after truncating at 0: %+v, %v", r.Evals, err)
	}
}

func TestCheckpoints(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []int{12, 3} {
		if err := os.Mkdir(CheckpointDir(dir, step), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"ckpt-000020.tmp", "ckpt-latest", "other"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range Files {
		writeFile(t, filepath.Join(dir, f), "")
	}
	ckpts, err := Checkpoints(dir)
	want := []string{filepath.Join(dir, "ckpt-000003"), filepath.Join(dir, "ckpt-000012")}
	if err != nil || !slices.Equal(ckpts, want) {
		t.Errorf("checkpoints %v, %v; want %v", ckpts, err, want)
	}
	if err := Clear(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "other" {
		t.Errorf("after Clear: %v, want only other", entries)
	}
}
