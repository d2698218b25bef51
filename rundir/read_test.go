package rundir

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
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
		{EvalFile, `{"step":1,"votes":{"E0":"high"}}` + "\n", nil, 1, "evaluators.votes: json: cannot unmarshal string into Go struct field votes.votes"},
		{EvalFile, `{"step":1,"votes":[0.1]}` + "\n", nil, 1, "votes"},
		{EvalFile, `{"step":1,"pick":1}` + "\n", nil, 1, "pick"},
		{EvalFile, `{"step":1,"evaluators":{"votes":{"pick":1}}}` + "\n", nil, 1, "evaluators.votes"},
		{EvalFile, `{"step":1,"evaluators":[1]}` + "\n", nil, 1, "evaluators"},
		{EvalFile, `null` + "\n", nil, 1, "found null"},
		{EvalFile, `{"step":1,"outcomes":"01-"}` + "\n" + `{"step":1,"outcomes":"01x"}` + "\n", nil, 2, `"outcomes": byte 3 is 'x'`},
		{EvalFile, `{"step":1,"problems":4,"outcomes":"01-"}` + "\n", nil, 1, `"outcomes" has 3 problems, "problems" 4`},
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

// votes is an evaluator's record of the kind a part declares, with the
// top-level fields that held it before lines had "evaluators".
type votes struct {
	Votes map[string]float64 `json:"votes,omitempty"`
	Pick  string             `json:"pick,omitempty"`
}

func init() {
	DeclareEvalRecords(EvalRecord{Name: "votes", Part: "voting", Legacy: []string{"votes", "pick"},
		Read: func(raw json.RawMessage) (Reading, error) {
			var v votes
			err := json.Unmarshal(raw, &v)
			return Reading{Variants: v.Votes, Chosen: v.Pick}, err
		}})
}

// TestLoadEvals reads eval.jsonl lines as the loop writes them, with an
// evaluator's record and without, and a line of the old form, whose
// record's fields are at the top, as its new form.
func TestLoadEvals(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, EvalFile), strings.Join([]string{
		`{"step":0,"split":"val","greedy":0.07,"greedy_low":0.04,"greedy_high":0.11,"evaluators":{"votes":{"votes":{"E0":0.07,"E1":0.09}}}}`,
		`{"step":200,"split":"test","greedy":0.1,"greedy_low":0.07,"greedy_high":0.14,"problems":200,"problem_set":"0a1b2c3d4e5f","outcomes":"` + strings.Repeat("01", 100) + `","evaluators":{"votes":{"votes":{"E0":0.1,"E1":0.12}, "pick":"E1"},"other":{"x":[1, 2]}}}`,
		`{"step":200,"split":"test","greedy":0.1,"greedy_low":0.07,"greedy_high":0.14,"votes":{"E0":0.1,"E1":0.12},"problems":200,"problem_set":"0a1b2c3d4e5f","pick":"E1","other":{"x":[1,2]}}`,
		`{"step":200,"split":"val","greedy":0.1,"greedy_low":0.07,"greedy_high":0.14}`,
		`{"step":200,"split":"val","greedy":0.1,"pick":"E0","evaluators":{"votes":{"pick":"E1"}}}`,
	}, "\n")+"\n")
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, test, old, none, both := r.Evals[0], r.Evals[1], r.Evals[2], r.Evals[3], r.Evals[4]
	var rec votes
	if ok, err := v.Record("votes", &rec); !ok || err != nil || fmt.Sprint(rec.Votes) != "map[E0:0.07 E1:0.09]" || rec.Pick != "" || v.Problems != 0 {
		t.Errorf("val line %+v: record %+v %v %v", v, rec, ok, err)
	}
	// Records are kept compact, and one no part declares as it is.
	if got := string(test.Evaluators["votes"]); got != `{"votes":{"E0":0.1,"E1":0.12},"pick":"E1"}` || string(test.Evaluators["other"]) != `{"x":[1,2]}` {
		t.Errorf("test line's records %s", test.Evaluators)
	}
	if test.Problems != 200 || test.ProblemSet != "0a1b2c3d4e5f" || test.Split != "test" || test.Outcomes != strings.Repeat("01", 100) {
		t.Errorf("test line %+v", test)
	}
	// The old form's fields make the record; other fields at the top stay
	// unread.
	old.Evaluators["other"] = test.Evaluators["other"]
	old.Outcomes = test.Outcomes
	if !reflect.DeepEqual(old, test) {
		t.Errorf("old line %+v\nreads otherwise than its new form %+v", old, test)
	}
	if ok, err := none.Record("votes", &rec); ok || err != nil || none.Evaluators != nil {
		t.Errorf("line without records: %v %v %v", ok, err, none.Evaluators)
	}
	if string(both.Evaluators["votes"]) != `{"pick":"E1"}` {
		t.Errorf("a line with a record takes it, not the old fields: %s", both.Evaluators["votes"])
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no training steps") {
		t.Errorf("warnings %q", r.Warnings)
	}
}

// TestSetRecord: a record set is one Load reads back, and a copy of the
// line keeps its own.
func TestSetRecord(t *testing.T) {
	dir := t.TempDir()
	e := Eval{Step: 3, Split: "val", Greedy: 0.5}
	if err := e.SetRecord("votes", votes{Votes: map[string]float64{"E0": 0.25}}); err != nil {
		t.Fatal(err)
	}
	c := e
	if err := c.SetRecord("votes", votes{Pick: "E0"}); err != nil {
		t.Fatal(err)
	}
	if err := AppendEval(dir, e); err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rec votes
	if ok, err := r.Evals[0].Record("votes", &rec); !ok || err != nil || rec.Votes["E0"] != 0.25 || rec.Pick != "" {
		t.Errorf("read back %+v %v %v", rec, ok, err)
	}
	if err := e.SetRecord("nan", math.NaN()); err == nil || !strings.Contains(err.Error(), "nan record") {
		t.Errorf("a record that is not JSON: %v", err)
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
