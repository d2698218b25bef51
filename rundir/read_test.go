package rundir

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"rlvr/internal/located"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := Load(filepath.Join(root, "nope")); err == nil {
		t.Error("Load of a missing directory succeeded")
	}
	if _, err := Load(root); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Errorf("Load of an empty directory: %v", err)
	}
	good := `{"step":1,"kl":0.1}` + "\n"
	for _, c := range []struct {
		file, content string
		numeric       []string
		line          int
		msg           string
	}{
		{MetricsFile, good + good + "{\"step\":3,\"kl\":0.1\n" + good, nil, 3, "invalid JSON"},
		{MetricsFile, good + "\n" + `{"step":3,"kl":"high"}` + "\n", []string{"kl"}, 3, `"kl": want a number, found a string`},
		{MetricsFile, good + `{"step":2,"kl":true}` + "\n", []string{"kl"}, 2, `"kl": want a number, found a boolean`},
		{MetricsFile, `{"step":1.5}` + "\n", nil, 1, "non-negative integer"},
		{MetricsFile, `{"step":true}` + "\n", nil, 1, "want a number"},
		{MetricsFile, `[1,2]` + "\n", nil, 1, "invalid JSON"},
		{MetricsFile, `null` + "\n", nil, 1, "found null"},
		{MetricsFile, `{"step":1} {"step":2}` + "\n", nil, 1, "more than one value"},
		{EvalFile, `{"step":1,"greedy":0.5}` + "\n" + `{"step":2,"greedy":"x"}` + "\n", nil, 2, "greedy"},
		{EvalFile, `{"step":1,"avg_at_k":[1]}` + "\n", nil, 1, "avg_at_k"},
		{EvalFile, `{"step":1,"problems":1.5}` + "\n", nil, 1, "problems"},
		{EvalFile, `{"step":1,"experts":{"E0":"high"}}` + "\n", nil, 1, "experts"},
		{EvalFile, `{"step":1,"experts":[0.1]}` + "\n", nil, 1, "experts"},
		{EvalFile, `{"step":1,"best_expert":1}` + "\n", nil, 1, "best_expert"},
		{EvalFile, `{"step":1,"best":"x"}` + "\n", nil, 1, "best"},
		{EvalFile, `null` + "\n", nil, 1, "found null"},
	} {
		dir, err := os.MkdirTemp(root, "run")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, c.file)
		writeFile(t, path, c.content)
		_, err = Load(dir, c.numeric...)
		var pe *located.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s %q: err = %v, want a *located.Error", c.file, c.content, err)
			continue
		}
		if pe.File != path || pe.Line != c.line || !strings.Contains(err.Error(), fmt.Sprintf("%s:%d: ", path, c.line)) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %q: err = %v, want %s:%d: …%s…", c.file, c.content, err, path, c.line, c.msg)
		}
	}
}

func TestLoadTolerates(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ConfigFile), "algorithm: [unclosed\n")
	writeFile(t, filepath.Join(dir, MetricsFile), strings.Join([]string{
		`{"step":1,"kl":0.1,"phase":"warmup","extra":2,"flag":true}`,
		`{"step":2,"kl":null,"reward_mean":0.5}`,
		`{"step":3,"kl":0.3}`,
		`{"kl":0.4}`,           // no step: follows step 3
		`{"step":2,"kl":0.25}`, // a resumed run logs step 2 again
		`{"step":5,"kl":0.`,    // being written
	}, "\n"))
	writeFile(t, filepath.Join(dir, EvalFile), `{"greedy":0.5,"maj_at_k":0.2,"before":{"greedy":0.1}}`+"\n"+`{"step":4,"greedy`)
	r, err := Load(dir, "kl")
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, s := range r.Steps {
		steps = append(steps, s.Step)
	}
	if fmt.Sprint(steps) != "[1 2 3 4]" {
		t.Errorf("steps %v, want [1 2 3 4]", steps)
	}
	if xs, ys := r.Series("kl"); fmt.Sprint(xs, ys) != "[1 2 3 4] [0.1 0.25 0.3 0.4]" {
		t.Errorf("kl series %v %v", xs, ys)
	}
	if fmt.Sprint(r.Keys()) != "[extra flag kl]" {
		t.Errorf("keys %v, want [extra flag kl] (reward_mean was logged at the replaced step 2)", r.Keys())
	}
	if v, ok := r.Steps[0].Value("flag"); !ok || v != 1 {
		t.Errorf("flag %v %v, want a boolean read as 1", v, ok)
	}
	if len(r.Evals) != 1 || r.LastStep() != 4 {
		t.Fatalf("%d evals, last step %d; want 1, 4", len(r.Evals), r.LastStep())
	}
	if e := r.Evals[0]; e.Step != -1 || e.Greedy != 0.5 || !math.IsNaN(e.GreedyLow) || !math.IsNaN(e.GreedyHigh) || e.AvgAtK != nil {
		t.Errorf("eval %+v, want step -1, greedy 0.5 and NaN bounds", e)
	}
	all := strings.Join(r.Warnings, "\n")
	for _, w := range []string{ConfigFile, "repeat an earlier step", `without "step"`, MetricsFile + ":6: skipped the incomplete last line", EvalFile + ":2: skipped the incomplete last line"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
	if strings.Contains(all, "phase") {
		t.Errorf("a field that is not a number gave a warning:\n%s", all)
	}
}

// TestLoadEvals reads eval.jsonl lines as the loop writes them, with and
// without expert prompts.
func TestLoadEvals(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, EvalFile), strings.Join([]string{
		`{"step":0,"split":"val","greedy":0.07,"greedy_low":0.04,"greedy_high":0.11,"experts":{"E0":0.07,"E1":0.09},"expert_majority":0.08}`,
		`{"step":200,"split":"test","greedy":0.1,"greedy_low":0.07,"greedy_high":0.14,"experts":{"E0":0.1,"E1":0.12,"E2":0.08},"expert_majority":0.11,"problems":200,"problem_set":"0a1b2c3d4e5f","best_expert":"E1","best":0.12,"best_low":0.08,"best_high":0.17,"delta":-0.01}`,
		`{"step":200,"split":"val","greedy":0.1,"greedy_low":0.07,"greedy_high":0.14}`,
	}, "\n")+"\n")
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, test, old := r.Evals[0], r.Evals[1], r.Evals[2]
	if fmt.Sprint(v.Experts) != "map[E0:0.07 E1:0.09]" || *v.ExpertMajority != 0.08 || v.BestExpert != "" || v.Best != nil || v.Problems != 0 {
		t.Errorf("val line %+v", v)
	}
	if test.Problems != 200 || test.ProblemSet != "0a1b2c3d4e5f" || test.BestExpert != "E1" || *test.Best != 0.12 || *test.BestLow != 0.08 || *test.BestHigh != 0.17 ||
		*test.Delta != -0.01 || *test.ExpertMajority != 0.11 || len(test.Experts) != 3 || test.Split != "test" {
		t.Errorf("test line %+v", test)
	}
	if old.Experts != nil || old.Problems != 0 || old.BestExpert != "" || old.ExpertMajority != nil || old.Best != nil || old.Delta != nil {
		t.Errorf("line without the expert fields %+v", old)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no training steps") {
		t.Errorf("warnings %q", r.Warnings)
	}
}

func TestLoadSamples(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ConfigFile), "algorithm: grpo\nseed: 3\nmodel: runs/base\n")
	var lines []string
	for i := 1; i <= 5; i++ {
		lines = append(lines, fmt.Sprintf(`{"step":%d,"title":"validated meta-experience","text":"experience %d"}`, 10*i, i))
	}
	lines = append(lines,
		`{"text":"no step, no title"}`,
		`{"step":4,"title":"answer","text":`, // malformed
		`{"step":"5","text":"a"}`,
		`{"step":5,"title":{"a":1},"text":"a"}`,
		`{"step":5,"title":"answer"}`,
		`{"step":5,"title":"answer","text":7}`,
		`[1]`,
		`null`,
		``,
	)
	path := filepath.Join(dir, SamplesFile)
	writeFile(t, path, strings.Join(lines, "\n")+"\n")
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Algorithm != "grpo" || r.Seed != "3" || r.Model != "runs/base" {
		t.Errorf("config scalars %q %q %q", r.Algorithm, r.Seed, r.Model)
	}
	if len(r.Samples) != 6 || r.Samples[4].Step != 50 || r.Samples[5].Step != -1 || r.Samples[5].Title != "" || r.Samples[5].Text != "no step, no title" {
		t.Errorf("samples %+v, want 6", r.Samples)
	}
	all := strings.Join(r.Warnings, "\n")
	for _, w := range []struct {
		line int
		msg  string
	}{
		{7, "invalid JSON"},
		{8, "step"},
		{9, "title"},
		{10, `no "text"`},
		{11, "text"},
	} {
		prefix := fmt.Sprintf("%s:%d: skipped: ", path, w.line)
		i := strings.Index(all, prefix)
		if line, _, _ := strings.Cut(all[max(i, 0):], "\n"); i < 0 || !strings.Contains(line, w.msg) {
			t.Errorf("warnings lack %q…%q:\n%s", prefix, w.msg, all)
		}
	}
	if want := path + ": skipped 2 more lines that do not parse"; !strings.Contains(all, want) {
		t.Errorf("warnings lack %q:\n%s", want, all)
	}
}

// TestLoadCompressed reads a run kept with its logs gzip-compressed as the
// same run, and names the compressed file when it is not gzip.
func TestLoadCompressed(t *testing.T) {
	plain, kept := t.TempDir(), t.TempDir()
	logs := map[string]string{
		MetricsFile: `{"step":1,"kl":0.1}` + "\n" + `{"step":2,"kl":0.2}` + "\n",
		EvalFile:    `{"step":2,"split":"test","greedy":0.25,"problems":4}` + "\n",
		SamplesFile: `{"step":2,"title":"M","text":"H:check the carry"}` + "\n",
	}
	for name, content := range logs {
		writeFile(t, filepath.Join(plain, name), content)
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(content))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(kept, name+CompressedSuffix), b.String())
	}
	want, err := Load(plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(kept)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != 2 || got.Steps[1].Values["kl"] != 0.2 || len(got.Evals) != 1 || got.Evals[0].Greedy != 0.25 ||
		len(got.Samples) != 1 || got.Samples[0].Text != want.Samples[0].Text || fmt.Sprint(got.Steps) != fmt.Sprint(want.Steps) {
		t.Errorf("compressed run %+v, want %+v", got, want)
	}

	// A plain log wins over a compressed one.
	writeFile(t, filepath.Join(kept, EvalFile), `{"step":2,"split":"test","greedy":0.5}`+"\n")
	if got, err := Load(kept); err != nil || got.Evals[0].Greedy != 0.5 {
		t.Errorf("with both logs: %v, %+v", err, got)
	}

	bad := t.TempDir()
	path := filepath.Join(bad, MetricsFile+CompressedSuffix)
	writeFile(t, path, `{"step":1}`+"\n")
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a compressed log that is not gzip: %v, want an error naming %s", err, path)
	}
}
