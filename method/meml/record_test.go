package meml

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rlvr/eval"
	"rlvr/internal/stats"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
)

// keptRun is a MEML-GRPO run kept in results/, whose eval.jsonl was
// written before lines had "evaluators"; oldTestLine is its test line.
const (
	keptRun     = "../../results/meml-grpo-world2/meml-grpo-seed1"
	oldTestLine = `{"step":200,"split":"test","greedy":0.436,"greedy_low":0.4055679635294317,"greedy_high":0.46692186155671933,"experts":{"E0":0.444,"E1":0.444,"E2":0.442},"expert_majority":0.443,"problems":1000,"problem_set":"2c2670f3987d","best_expert":"E0","best":0.444,"best_low":0.4134777594602898,"best_high":0.4749508374900924,"delta":-0.0010000000000000009}`
)

// loadEvals writes lines as a run's eval.jsonl and loads them.
func loadEvals(t *testing.T, lines ...string) []rundir.Eval {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rundir.EvalFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := rundir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r.Evals
}

// TestOldLinesReadAsNew: a test line written before lines had
// "evaluators", its expert fields at the top, reads exactly as the line
// ExpertEvaluator writes today for the same evaluation, its record under
// "evaluators".
func TestOldLinesReadAsNew(t *testing.T) {
	x := &ExpertEvaluator{Variants: []method.Variant{{Name: "E0"}, {Name: "E1"}, {Name: "E2"}}}
	report := func(majority float64, acc ...stats.Interval) *eval.Report {
		rep := &eval.Report{ExpertMajority: &stats.Interval{Mean: majority}}
		for i, a := range acc {
			rep.Experts = append(rep.Experts, eval.ExpertResult{Name: x.Variants[i].Name, Accuracy: a})
		}
		return rep
	}
	// The run's last validation (E0 best), then its test evaluation.
	var val rundir.Eval
	if err := x.Record(&part.Evaluation{Split: "val"}, report(0.45, stats.Interval{Mean: 0.45}, stats.Interval{Mean: 0.445}, stats.Interval{Mean: 0.44}), &val); err != nil {
		t.Fatal(err)
	}
	test := rundir.Eval{Step: 200, Split: "test", Greedy: 0.436, GreedyLow: 0.4055679635294317, GreedyHigh: 0.46692186155671933,
		Problems: 1000, ProblemSet: "2c2670f3987d"}
	rep := report(0.443, stats.Interval{Mean: 0.444, Low: 0.4134777594602898, High: 0.4749508374900924}, stats.Interval{Mean: 0.444}, stats.Interval{Mean: 0.442})
	if err := x.Record(&part.Evaluation{Split: "test"}, rep, &test); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := rundir.AppendEval(dir, test); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(filepath.Join(dir, rundir.EvalFile))
	if err != nil {
		t.Fatal(err)
	}
	newLine := strings.TrimSpace(string(written))
	if !strings.Contains(newLine, `"evaluators":{"expert_prompts":{"experts":{"E0":0.444,`) || strings.Contains(newLine, `,"experts"`) {
		t.Fatalf("the line written today: %s", newLine)
	}
	evals := loadEvals(t, oldTestLine, newLine)
	old, now := evals[0], evals[1]
	if !reflect.DeepEqual(old, now) {
		t.Errorf("the old line reads as\n%+v\nits new form as\n%+v", old, now)
	}
	if string(old.Evaluators[RecordExperts]) != string(now.Evaluators[RecordExperts]) {
		t.Errorf("records %s and %s", old.Evaluators[RecordExperts], now.Evaluators[RecordExperts])
	}
	rec, ok, err := ExpertRecordOf(old)
	if !ok || err != nil || rec.BestExpert != "E0" || *rec.Best != 0.444 || *rec.BestHigh != 0.4749508374900924 || *rec.Majority != 0.443 ||
		*rec.Delta != -0.0010000000000000009 || len(rec.Experts) != 3 || rec.Experts["E2"] != 0.442 {
		t.Errorf("the old line's record %+v (%v, %v)", rec, ok, err)
	}
}

// TestKeptRunReads: every line of a kept run of the old form has its
// record, the test line with its best expert.
func TestKeptRunReads(t *testing.T) {
	if _, err := os.Stat(keptRun); err != nil {
		t.Skipf("no kept run: %v", err)
	}
	r, err := rundir.Load(keptRun)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Evals) < 2 {
		t.Fatalf("%d lines", len(r.Evals))
	}
	for i, e := range r.Evals {
		rec, ok, err := ExpertRecordOf(e)
		if !ok || err != nil || len(rec.Experts) != 3 || rec.Majority == nil || (rec.BestExpert != "") != (e.Split == "test") {
			t.Errorf("line %d (%s, step %d): record %+v (%v, %v)", i+1, e.Split, e.Step, rec, ok, err)
		}
	}
	last := r.Evals[len(r.Evals)-1]
	if want := loadEvals(t, oldTestLine)[0]; !reflect.DeepEqual(last, want) {
		t.Errorf("the kept run's test line is not oldTestLine:\n%+v\n%+v", last, want)
	}
}

// TestExpertRecordReading: rlvr report reads the experts as variants, the
// best expert as the one chosen and the majority vote as a value, and
// --expert names another expert the best.
func TestExpertRecordReading(t *testing.T) {
	evals := loadEvals(t, oldTestLine, `{"step":200,"split":"val","greedy":0.45,"experts":{"E0":0.45,"E1":0.445},"expert_majority":0.45}`)
	test, val := evals[0], evals[1]
	r, err := expertRecord.Read(test.Evaluators[RecordExperts])
	if err != nil || len(r.Variants) != 3 || r.Chosen != "E0" || r.Acc != 0.444 || r.Low != 0.4134777594602898 || r.Values[ValueMajority] != 0.443 {
		t.Errorf("test reading %+v, %v", r, err)
	}
	r, err = expertRecord.Read(val.Evaluators[RecordExperts])
	if err != nil || r.Chosen != "" || !math.IsNaN(r.Acc) || r.Variants["E1"] != 0.445 {
		t.Errorf("validation reading %+v, %v", r, err)
	}

	raw, ok, err := expertRecord.Choose(test.Evaluators[RecordExperts], "E2", test)
	if !ok || err != nil {
		t.Fatalf("choose E2: %v %v", ok, err)
	}
	r, _ = expertRecord.Read(raw)
	w := stats.WilsonInterval(442, 1000)
	if r.Chosen != "E2" || r.Acc != 0.442 || r.Low != w.Low || r.High != w.High {
		t.Errorf("test line under E2: %+v, want 0.442 [%v, %v]", r, w.Low, w.High)
	}
	majority, e2 := 0.443, 0.442
	if x, _, _ := ExpertRecordOf(rundir.Eval{Evaluators: map[string]json.RawMessage{RecordExperts: raw}}); x.Delta == nil || *x.Delta != majority-e2 {
		t.Errorf("test line under E2: %+v", x)
	}
	// A validation line names the expert, with its accuracy alone.
	raw, ok, _ = expertRecord.Choose(val.Evaluators[RecordExperts], "E1", val)
	if r, _ = expertRecord.Read(raw); !ok || r.Chosen != "E1" || r.Acc != 0.445 || !math.IsNaN(r.Low) {
		t.Errorf("validation line under E1: %+v", r)
	}
	if _, ok, err := expertRecord.Choose(val.Evaluators[RecordExperts], "E2", val); ok || err != nil {
		t.Errorf("a line without E2 chose it: %v %v", ok, err)
	}
}

// TestRecordKeepsExpertOutcomes: the test line keeps each expert prompt's
// outcome per problem, so that a run reported by its best expert is
// compared problem by problem on that expert's answers; validation lines,
// scored every few steps, do not.
func TestRecordKeepsExpertOutcomes(t *testing.T) {
	x := &ExpertEvaluator{Variants: []method.Variant{{Name: "E0"}, {Name: "E1"}}}
	rep := &eval.Report{Experts: []eval.ExpertResult{
		{Name: "E0", Accuracy: stats.Interval{Mean: 0.5}, Outcomes: "10"},
		{Name: "E1", Accuracy: stats.Interval{Mean: 1}, Outcomes: "11"},
	}}
	var val, test rundir.Eval
	if err := x.Record(&part.Evaluation{Split: "val"}, rep, &val); err != nil {
		t.Fatal(err)
	}
	if err := x.Record(&part.Evaluation{Split: "test"}, rep, &test); err != nil {
		t.Fatal(err)
	}
	if v, _, err := ExpertRecordOf(val); err != nil || v.Outcomes != nil {
		t.Errorf("the validation record keeps outcomes %v (%v), want none", v.Outcomes, err)
	}
	rec, _, err := ExpertRecordOf(test)
	if err != nil || rec.BestExpert != "E1" || !reflect.DeepEqual(rec.Outcomes, map[string]string{"E0": "10", "E1": "11"}) {
		t.Fatalf("the test record: best %q, outcomes %v (%v)", rec.BestExpert, rec.Outcomes, err)
	}
	r, err := readExperts(test.Evaluators[RecordExperts])
	if err != nil || r.Chosen != "E1" || r.VariantOutcomes["E1"] != "11" {
		t.Errorf("read for the report: chosen %q, outcomes %v (%v)", r.Chosen, r.VariantOutcomes, err)
	}
}
