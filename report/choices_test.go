package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/method/meml"
	"rlvr/rundir"
)

// chosenRun is a run whose validation is held out of the training file and
// whose test line reports the expert best on it on the whole test file.
func chosenRun(name, seed, best string) *rundir.Run {
	acc := 0.4
	experts := func(e rundir.Eval, rec meml.ExpertRecord) rundir.Eval {
		if err := e.SetRecord(meml.RecordExperts, rec); err != nil {
			panic(err)
		}
		return e
	}
	return &rundir.Run{Name: name, Seed: seed, Evals: []rundir.Eval{
		experts(rundir.Eval{Step: 0, Split: "val", Greedy: 0.1, Source: "held out of the training file"}, meml.ExpertRecord{Experts: map[string]float64{"E0": 0.1, "E2": 0.2}}),
		experts(rundir.Eval{Step: 374, Split: "val", Greedy: 0.3, Source: "held out of the training file"}, meml.ExpertRecord{Experts: map[string]float64{"E0": 0.3, "E2": 0.4}}),
		experts(rundir.Eval{Step: 374, Split: "test", Greedy: 0.35, Problems: 1319, Source: "from the test file", ChosenOn: "validation (200 problems held out of the training file)"},
			meml.ExpertRecord{Experts: map[string]float64{"E0": 0.3, "E2": 0.4}, BestExpert: best, Best: &acc}),
	}}
}

// TestWhereChosenInTable: rlvr report --table reads each run's test line
// and says, below the table, where the numbers were scored and where the
// best expert was chosen; rows that differ are named, and runs whose lines
// do not say add nothing.
func TestWhereChosenInTable(t *testing.T) {
	runs := []*rundir.Run{chosenRun("meml-s1", "1", "E2"), chosenRun("meml-s2", "2", "E0")}
	out, err := Table(runs, "")
	if err != nil {
		t.Fatal(err)
	}
	want := "Reported on test (1,319 problems from the test file); best expert chosen on validation (200 problems held out of the training file)."
	if !strings.Contains(out, "\n"+want+"\n") || !strings.Contains(out, "Every run is scored with the model of its last step") {
		t.Errorf("table without where its numbers come from:\n%s", out)
	}
	if !strings.Contains(out, "| 40.0% [40.0, 40.0] | 40.0% [38.2, 41.9] (2638) |") || !strings.Contains(out, "| E2, E0 |") {
		t.Errorf("table does not report each run's best expert's test accuracy:\n%s", out)
	}

	// Another row scored on other problems is named with its own note.
	other := chosenRun("grpo-s1", "1", "")
	other.Evals[2].ChosenOn, other.Evals[2].Problems = "", 500
	for i := range other.Evals {
		other.Evals[i].Evaluators = nil
	}
	out, err = Table(append(runs, other), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\nmeml: "+strings.ToLower(want[:1])+want[1:]+"\n") || !strings.Contains(out, "\ngrpo: reported on test (500 problems from the test file).\n") {
		t.Errorf("rows with different sources are not named:\n%s", out)
	}

	// Lines that do not say where their problems come from add no note.
	old := chosenRun("old", "1", "E2")
	for i := range old.Evals {
		old.Evals[i].Source, old.Evals[i].ChosenOn = "", ""
	}
	if out, _ = Table([]*rundir.Run{old}, ""); strings.Contains(out, "eported on test") || strings.Contains(out, "last step") {
		t.Errorf("a note for lines that do not say where they come from:\n%s", out)
	}

	// Under an expert named on the command line nothing is chosen on
	// validation.
	under, err := UnderExpert(runs, "E0")
	if err != nil {
		t.Fatal(err)
	}
	out, _ = Table(under, "")
	if strings.Contains(out, "chosen on validation") || !strings.Contains(out, "Reported on test (1,319 problems from the test file).") {
		t.Errorf("under --expert E0:\n%s", out)
	}
}

// TestWhereChosenInHTML: the summary of rlvr report's page says, for a run
// with a test line, where it was scored and where its best expert was
// chosen, and the final evaluation it shows is the test line's.
func TestWhereChosenInHTML(t *testing.T) {
	r := chosenRun("meml", "1", "E2")
	if got, want := WhereChosen(r), "reported on test (1,319 problems from the test file); best expert E2 chosen on validation (200 problems held out of the training file); the model of the last step, 374"; got != want {
		t.Errorf("WhereChosen %q, want %q", got, want)
	}
	r.Dir = t.TempDir()
	if err := Render(r.Dir, r); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(r.Dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"best expert E2 chosen on validation (200 problems held out of the training file)", "35.0%", "test, step 374"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
