package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/internal/stats"
	_ "rlvr/method/mel"  // declares the meta-experience column the tables show
	_ "rlvr/method/meml" // declares the expert prompts' record and columns
	"rlvr/rundir"
)

// seedRun describes a run directory of the table's fixture.
type seedRun struct {
	name, seed string // the directory's name; config.yaml's seed ("" for none)
	evals      []string
	// The metrics of steps 1..20: accuracy offset + step/100, and
	// constant zero_variance_frac and step_s.
	offset, zeroVar, stepS float64
}

func writeSeedRun(t *testing.T, root string, r seedRun) string {
	t.Helper()
	dir := filepath.Join(root, r.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if r.seed != "" {
		writeFile(t, filepath.Join(dir, rundir.ConfigFile), "algorithm: grpo\nseed: "+r.seed+"\n")
	}
	var m strings.Builder
	for step := 1; step <= 20; step++ {
		fmt.Fprintf(&m, `{"step":%d,"accuracy":%g,"zero_variance_frac":%g,"step_s":%g}`+"\n", step, r.offset+float64(step)/100, r.zeroVar, r.stepS)
	}
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), m.String())
	writeFile(t, filepath.Join(dir, rundir.EvalFile), strings.Join(r.evals, "\n")+"\n")
	return dir
}

// grpoRun is a run without experts: greedy accuracy before at step 0, and
// on the test split at the end.
func grpoRun(name, seed string, before, test float64, zeroVar, stepS float64) seedRun {
	return seedRun{name: name, seed: seed, zeroVar: zeroVar, stepS: stepS, evals: []string{
		fmt.Sprintf(`{"step":0,"split":"val","greedy":%g,"greedy_low":0.01,"greedy_high":0.2}`, before),
		`{"step":20,"split":"val","greedy":0.5}`,
		fmt.Sprintf(`{"step":20,"split":"test","greedy":%g,"greedy_low":0.01,"greedy_high":0.3,"problems":200}`, test),
	}}
}

// The fixture's numbers, by seed. grpo: greedy test accuracy 10, 12, 14%
// of 200 problems; before 6, 7, 8%. meml: experts E0–E2; best expert E1,
// E1, E2 at 15, 19, 20% of 200 problems; majority 14, 17, 21%.
func fixtureRuns(t *testing.T) (root string, runs []*rundir.Run) {
	t.Helper()
	root = t.TempDir()
	meml := func(name, seed, before, last, test string) seedRun {
		return seedRun{name: name, seed: seed, offset: 0.2, zeroVar: 0.2, stepS: 4, evals: []string{
			`{"step":0,"split":"val","greedy":0.05,"experts":` + before + `,"expert_majority":0.05}`,
			`{"step":20,"split":"val","greedy":0.1,"experts":` + last + `,"expert_majority":0.1}`,
			test,
		}}
	}
	specs := []seedRun{
		grpoRun("grpo-s1", "1", 0.06, 0.10, 0.3, 1),
		// Listed out of seed order, so that pairing by position would
		// pair the wrong runs.
		meml("meml-s3", "3", `{"E0":0.05,"E1":0.06,"E2":0.09}`, `{"E0":0.1,"E1":0.1,"E2":0.2}`,
			`{"step":20,"split":"test","greedy":0.1,"problems":200,"experts":{"E0":0.12,"E1":0.17,"E2":0.2},"expert_majority":0.21,"best_expert":"E2","best":0.2,"best_low":0.15,"best_high":0.26,"delta":0.01}`),
		grpoRun("grpo_seed2", "2", 0.07, 0.12, 0.4, 2),
		meml("meml_s1", "1", `{"E0":0.05,"E1":0.07,"E2":0.06}`, `{"E0":0.1,"E1":0.2,"E2":0.1}`,
			`{"step":20,"split":"test","greedy":0.1,"problems":200,"experts":{"E0":0.11,"E1":0.15,"E2":0.13},"expert_majority":0.14,"best_expert":"E1","best":0.15,"best_low":0.11,"best_high":0.21,"delta":-0.01}`),
		meml("meml-seed2", "2", `{"E0":0.06,"E1":0.08,"E2":0.07}`, `{"E0":0.1,"E1":0.2,"E2":0.1}`,
			`{"step":20,"split":"test","greedy":0.1,"problems":200,"experts":{"E0":0.13,"E1":0.19,"E2":0.16},"expert_majority":0.17,"best_expert":"E1","best":0.19,"best_low":0.14,"best_high":0.25,"delta":-0.02}`),
		grpoRun("grpo-seed3", "3", 0.08, 0.14, 0.5, 3),
	}
	for _, s := range specs {
		runs = append(runs, load(t, writeSeedRun(t, root, s)))
	}
	return root, runs
}

func load(t *testing.T, dir string) *rundir.Run {
	t.Helper()
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// declared is the index of the declared column of a header in
// rundir.Columns and in Summary.Declared.
func declared(t *testing.T, header string) int {
	t.Helper()
	for i, c := range rundir.Columns() {
		if c.Header == header {
			return i
		}
	}
	t.Fatalf("no declared column %q", header)
	return -1
}

func TestRowName(t *testing.T) {
	for name, want := range map[string]string{
		"grpo-seed3": "grpo", "grpo_seed3": "grpo", "grpo-s3": "grpo", "grpo_s12": "grpo",
		"meml-lr3-s1": "meml-lr3", "grpo-s1-s2": "grpo-s1",
		"grpo": "grpo", "s3": "s3", "-s3": "-s3", "grpo-s3x": "grpo-s3x", "grpo-seed": "grpo-seed",
		"grpo-steps3": "grpo-steps3", "grpo-S3": "grpo-S3",
	} {
		if got := RowName(name); got != want {
			t.Errorf("RowName(%q) = %q, want %q", name, got, want)
		}
	}
	for _, c := range []struct{ name, seed, want string }{
		{"grpo-s07", "", "7"}, {"grpo-s07", "42", "42"}, {"grpo", "", ""}, {"grpo", " 5 ", "5"},
	} {
		if got := SeedOf(&rundir.Run{Name: c.name, Seed: c.seed}); got != c.want {
			t.Errorf("SeedOf(%q, seed %q) = %q, want %q", c.name, c.seed, got, c.want)
		}
	}
}

func TestRows(t *testing.T) {
	_, runs := fixtureRuns(t)
	rows := Rows(runs)
	var got []string
	for _, r := range rows {
		var names []string
		for _, run := range r.Runs {
			names = append(names, run.Name)
		}
		got = append(got, r.Name+":"+strings.Join(names, ","))
	}
	want := "grpo:grpo-s1,grpo_seed2,grpo-seed3 meml:meml-s3,meml_s1,meml-seed2"
	if strings.Join(got, " ") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
}

func TestSummary(t *testing.T) {
	_, runs := fixtureRuns(t)
	rows := Rows(runs)
	t2 := 0.95 / math.Sqrt(2*0.975*0.025) // t(0.975, 2), in closed form
	const tol = 1e-9

	g := rows[0].Summary()
	// Mean of 10, 12, 14%: 12%; s = 2%, half-width t·s/√3.
	if half := t2 * 0.02 / math.Sqrt(3); g.Accuracy.N != 3 || !near(g.Accuracy.Mean, 0.12, tol) ||
		!near(g.Accuracy.Low, 0.12-half, tol) || !near(g.Accuracy.High, 0.12+half, tol) {
		t.Errorf("grpo accuracy %+v, want 0.12 ± %.6f over 3", g.Accuracy, half)
	}
	if !near(g.Accuracy.High-g.Accuracy.Mean, 0.049682754, 1e-9) {
		t.Errorf("grpo half-width %.9f, want 0.049682754", g.Accuracy.High-g.Accuracy.Mean)
	}
	// Pooled: 20 + 24 + 28 = 72 of 600 problems, Wilson by hand.
	if p := g.Pooled; p.N != 600 || !near(p.Mean, 0.12, tol) || !near(p.Low, 0.0963859, 1e-6) || !near(p.High, 0.1484490, 1e-6) {
		t.Errorf("grpo pooled %+v, want 72/600 [0.0963859, 0.1484490]", p)
	}
	mv, gap := declared(t, "MV"), declared(t, "MV − best")
	if g.Variants != nil || !math.IsNaN(g.Declared[mv][0]) || !math.IsNaN(g.Declared[gap][0]) {
		t.Errorf("grpo has no experts: %+v", g)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"before", g.Before, 0.07},
		{"validation", g.Validation, 0.5},
		{"zero variance", g.ZeroVariance, 0.4},
		{"rollout first", g.RolloutFirst, 0.055},
		{"rollout last", g.RolloutLast, 0.155},
		{"step time", g.StepTime, 2},
	} {
		if !near(c.got, c.want, tol) {
			t.Errorf("grpo %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if g.Runs != 3 || g.FirstStep != 20 || g.LastStep != 20 || g.FromVal != 0 {
		t.Errorf("grpo %+v", g)
	}

	m := rows[1].Summary()
	// 15, 19, 20%: mean 18%, s² = (9 + 1 + 4)/2 · 1e-4.
	if half := t2 * math.Sqrt(7e-4/3); !near(m.Accuracy.Mean, 0.18, tol) || !near(m.Accuracy.High-m.Accuracy.Mean, half, tol) {
		t.Errorf("meml accuracy %+v, want 0.18 ± %.6f", m.Accuracy, half)
	}
	if p := m.Pooled; p.N != 600 || !near(p.Mean, 108.0/600, tol) || !near(p.Low, 0.1513253, 1e-6) || !near(p.High, 0.2127462, 1e-6) {
		t.Errorf("meml pooled %+v, want 108/600 [0.1513253, 0.2127462]", p)
	}
	if fmt.Sprint(m.Variants) != "[E0 E1 E2]" || !near(m.VariantAcc[0], 0.12, tol) || !near(m.VariantAcc[1], 0.17, tol) || !near(m.VariantAcc[2], 0.49/3, tol) {
		t.Errorf("meml experts %v %v", m.Variants, m.VariantAcc)
	}
	// Majority 21, 14, 17%; delta +1, −1, −2 pp.
	if d := m.Declared[gap]; !near(m.Declared[mv][0], 0.52/3, tol) || !near(d[0], -0.02/3, tol) || !near(d[2]-d[0], 0.037945830, 1e-9) {
		t.Errorf("meml majority %v, delta %v", m.Declared[mv], d)
	}
	if fmt.Sprint(m.Chosen) != "[E2 E1 E1]" {
		t.Errorf("meml best experts %v, want [E2 E1 E1] (in the row's order)", m.Chosen)
	}
	// Before: the step-0 accuracy under each run's best expert, 9, 7, 8%,
	// not the greedy 5%.
	if !near(m.Before, 0.08, tol) {
		t.Errorf("meml before %v, want 0.08", m.Before)
	}
	// Validation: the last validation accuracy under the same experts,
	// 20% each, not the greedy 10%.
	if !near(m.Validation, 0.2, tol) {
		t.Errorf("meml validation %v, want 0.2", m.Validation)
	}
}

func TestPaired(t *testing.T) {
	_, runs := fixtureRuns(t)
	rows := Rows(runs)
	d := Paired(rows[1], rows[0])
	// By seed: 15−10, 19−12, 20−14 = 5, 7, 6 pp: mean 6, s = 1 pp. By
	// position (20−10, 15−12, 19−14) the half-width would be 9.0 pp.
	half := 0.95 / math.Sqrt(2*0.975*0.025) * 0.01 / math.Sqrt(3)
	if d.N != 3 || !near(d.Mean, 0.06, 1e-9) || !near(d.Low, 0.06-half, 1e-9) || !near(d.High, 0.06+half, 1e-9) {
		t.Errorf("paired %+v, want 0.06 ± %.6f", d.Interval, half)
	}
	if fmt.Sprint(d.Seeds) != "[3 1 2]" || d.LeftOut != nil {
		t.Errorf("seeds %v, left out %v", d.Seeds, d.LeftOut)
	}
	if self := Paired(rows[0], rows[0]); self.Mean != 0 || self.Low != 0 || self.High != 0 {
		t.Errorf("a row against itself: %+v", self.Interval)
	}
}

func TestTable(t *testing.T) {
	_, runs := fixtureRuns(t)
	got, err := Table(runs, "grpo")
	if err != nil {
		t.Fatal(err)
	}
	want := `| row | seeds | steps | test accuracy | pooled | E0 / E1 / E2 | MV | MV − best | best expert | before | validation | zero-var | rollout acc, first → last 10 steps | s/step | Δ vs grpo | MDE |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| grpo | 3 | 20 | 12.0% [7.0, 17.0] | 12.0% [9.6, 14.8] (600) | — | — | — | — | 7.0% | 50.0% | 40.0% | 5.5% → 15.5% | 2.00 | (baseline) | — |
| meml | 3 | 20 | 18.0% [11.4, 24.6] | 18.0% [15.1, 21.3] (600) | 12.0 / 17.0 / 16.3 | 17.3% | −0.7 pp [−4.5, +3.1] | E2, E1, E1 | 8.0% | 20.0% | 20.0% | 25.5% → 35.5% | 4.00 | +6.0 pp [+3.5, +8.5] | 3.1 pp |

Accuracy: mean over seeds [95% t-interval over seeds]; pooled: every seed's test problems together [95% Wilson interval] (problems); Δ: mean over seeds of (row − grpo) on the same seed and the same test problems [95% paired t-interval]; MDE: the smallest Δ that test detects at 80% power, at the spread of the paired seeds.
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	_, err = Table(runs, "dapo")
	if err == nil || !strings.Contains(err.Error(), `no row named "dapo"; the rows are "grpo", "meml"`) {
		t.Errorf("unknown baseline: %v", err)
	}

	// Columns by header or its start, in the order asked, with the notes.
	got, err = Table(runs, "grpo", "Δ vs", "row", "MV")
	if err != nil {
		t.Fatal(err)
	}
	want = `| Δ vs grpo | row | MV |
| ---: | --- | ---: |
| (baseline) | grpo | — |
| +6.0 pp [+3.5, +8.5] | meml | 17.3% |
`
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "\nAccuracy: mean over seeds") {
		t.Errorf("columns Δ vs, row, MV:\n%s\nwant it to begin:\n%s", got, want)
	}
	_, err = Table(runs, "grpo", "row", "Pass@1")
	if err == nil || !strings.Contains(err.Error(), `no column "Pass@1"; the columns are ["row" "seeds"`) {
		t.Errorf("unknown column: %v", err)
	}
}

// TestTableFallback: a run without a test evaluation stands in with its
// last validation evaluation, marked; it has no partner in the baseline,
// and a row whose runs carry no expert or step metrics keeps only the
// columns it has values for.
func TestTableFallback(t *testing.T) {
	root, runs := fixtureRuns(t)
	s4 := seedRun{name: "meml-s4", seed: "4", offset: 0.2, zeroVar: 0.2, stepS: 4, evals: []string{
		`{"step":0,"split":"val","greedy":0.05,"experts":{"E0":0.04,"E1":0.1,"E2":0.05}}`,
		`{"step":10,"split":"val","greedy":0.05,"experts":{"E0":0.2,"E1":0.1,"E2":0.1}}`,
		`{"step":20,"split":"val","greedy":0.06,"experts":{"E0":0.10,"E1":0.16,"E2":0.12},"expert_majority":0.15}`,
	}}
	runs = append(runs, load(t, writeSeedRun(t, root, s4)))

	f, ok := FinalOf(runs[len(runs)-1])
	if !ok || !f.FromVal || f.Variant != "E1" || f.Acc != 0.16 || f.Variants["E2"] != 0.12 || f.Eval.Step != 20 {
		t.Errorf("fallback final %+v", f)
	}
	m := Rows(runs)[1].Summary()
	// 15, 19, 20, 16%: mean 17.5%, s² = (6.25 + 2.25 + 6.25 + 2.25)/3 · 1e-4,
	// t(0.975, 3) = 3.182446.
	if half := 3.182446305 * math.Sqrt(17e-4/3/4); m.Runs != 4 || m.FromVal != 1 || !near(m.Accuracy.Mean, 0.175, 1e-9) || !near(m.Accuracy.High-m.Accuracy.Mean, half, 1e-9) {
		t.Errorf("meml with a val-only run: %+v, want 0.175 ± %.6f, 1 from val", m.Accuracy, half)
	}
	if !math.IsNaN(m.Pooled.Mean) {
		t.Errorf("pooled %+v, want none (meml-s4 has no problem count)", m.Pooled)
	}
	// meml-s4 before: E1, its best expert on the last validation, at step 0.
	if !near(m.Before, (0.09+0.07+0.08+0.1)/4, 1e-9) {
		t.Errorf("before %v", m.Before)
	}

	got, err := Table(runs, "grpo")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| meml | 4 | 20 | 17.5% [13.7, 21.3]† | — |",
		"| E2, E1, E1, E1 |",
		"\n† val: no test split",
		"\nΔ of meml vs grpo: 3 paired seeds; left out: seed 4 (meml only).\n",
		"| +6.0 pp [+3.5, +8.5] |", // seed 4 left out of the pairing
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}

	// Runs with nothing but greedy evaluations: the optional columns go.
	bare := t.TempDir()
	for i, acc := range []float64{0.3, 0.5} {
		dir := filepath.Join(bare, fmt.Sprintf("sft-s%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, rundir.EvalFile), fmt.Sprintf(`{"step":5,"split":"test","greedy":%g}`+"\n", acc))
	}
	bareRuns := []*rundir.Run{load(t, filepath.Join(bare, "sft-s1")), load(t, filepath.Join(bare, "sft-s2"))}
	got, err = Table(bareRuns, "")
	if err != nil {
		t.Fatal(err)
	}
	// Two seeds: 40% ± t(0.975, 1)·0.1/√2.
	want := "| row | seeds | steps | test accuracy |\n| --- | ---: | ---: | ---: |\n| sft | 2 | 5 | 40.0% [−87.1, 167.1] |\n"
	if !strings.HasPrefix(got, want) || strings.Contains(got, "†") || strings.Contains(got, "Δ") {
		t.Errorf("table:\n%s\nwant it to start:\n%s", got, want)
	}
}

func TestPairedLeftOut(t *testing.T) {
	withEval := func(name, seed string, acc float64) *rundir.Run {
		return &rundir.Run{Name: name, Seed: seed, Evals: []rundir.Eval{{Step: 1, Split: "test", Greedy: acc}}}
	}
	row := Row{Name: "a", Runs: []*rundir.Run{
		withEval("a-s1", "1", 0.5), withEval("a-s2", "", 0.6), // seed 2 from the name
		withEval("a-x", "", 0.1),                                // no seed
		withEval("a-s3", "3", 0.2), withEval("a-s3b", "3", 0.3), // seed 3 twice
		{Name: "a-s5", Seed: "5"}, // no evaluation
	}}
	base := Row{Name: "b", Runs: []*rundir.Run{
		withEval("b-s1", "1", 0.25), withEval("b-s2", "2", 0.4), withEval("b-s3", "3", 0.1),
		withEval("b-s4", "4", 0.1), withEval("b-s5", "5", 0.1),
	}}
	d := Paired(row, base)
	if fmt.Sprint(d.Seeds) != "[1 2]" || !near(d.Mean, 0.225, 1e-12) {
		t.Errorf("paired seeds %v, mean %v; want [1 2], 0.225", d.Seeds, d.Mean)
	}
	want := "seed 3 (2 runs in a); seed 5 (no evaluation in a); seed 4 (b only); a-x (no seed)"
	if got := strings.Join(d.LeftOut, "; "); got != want {
		t.Errorf("left out:\n%s\nwant:\n%s", got, want)
	}
}

// TestPairedByProblem leaves out a seed whose two runs were scored on
// different test problems, and pairs runs whose problems agree or are not
// recorded (older runs).
func TestPairedByProblem(t *testing.T) {
	withEval := func(name, seed string, acc float64, problems string) *rundir.Run {
		return &rundir.Run{Name: name, Seed: seed, Evals: []rundir.Eval{{Step: 1, Split: "test", Greedy: acc, ProblemSet: problems}}}
	}
	row := Row{Name: "a", Runs: []*rundir.Run{withEval("a1", "1", 0.5, "abc"), withEval("a2", "2", 0.6, "def"), withEval("a3", "3", 0.7, "")}}
	base := Row{Name: "b", Runs: []*rundir.Run{withEval("b1", "1", 0.25, "abc"), withEval("b2", "2", 0.4, "xyz"), withEval("b3", "3", 0.5, "ghi")}}
	d := Paired(row, base)
	if fmt.Sprint(d.Seeds) != "[1 3]" || fmt.Sprint(d.LeftOut) != "[seed 2 (other test problems in b)]" {
		t.Errorf("paired %v, left out %v", d.Seeds, d.LeftOut)
	}
	if !math.IsNaN(d.MDE) {
		t.Errorf("MDE %v from two pairs, want NaN", d.MDE)
	}
}

// TestPairedOutcomes takes the difference problem by problem: per
// problem the mean over the paired seeds, then the t-interval over the
// problems both rows scored in every pair; and none when a pair lacks its
// outcomes.
func TestPairedOutcomes(t *testing.T) {
	withEval := func(name, seed, outcomes string) *rundir.Run {
		return &rundir.Run{Name: name, Seed: seed, Evals: []rundir.Eval{{Step: 1, Split: "test", Greedy: 0.5, ProblemSet: "abc", Outcomes: outcomes}}}
	}
	row := Row{Name: "a", Runs: []*rundir.Run{withEval("a1", "1", "1101-"), withEval("a2", "2", "11000")}}
	base := Row{Name: "b", Runs: []*rundir.Run{withEval("b1", "1", "01010"), withEval("b2", "2", "0100-")}}
	d := Paired(row, base)
	// Problems 1–4 are scored in both pairs (5 is not): per problem
	// (1+1)/2, (0+0)/2, (0+0)/2, (0+0)/2 = 1, 0, 0, 0.
	want := stats.MeanInterval([]float64{1, 0, 0, 0})
	if d.ByProblem != want || d.ByProblem.N != 4 || d.ByProblemMDE != stats.MinDetectable(want) || math.IsNaN(d.ByProblemMDE) {
		t.Errorf("by problem %+v (MDE %v), want %+v", d.ByProblem, d.ByProblemMDE, want)
	}
	base.Runs[1] = withEval("b2", "2", "")
	if d := Paired(row, base); !math.IsNaN(d.ByProblem.Mean) || d.N != 2 {
		t.Errorf("a pair without outcomes: by problem %+v, %d pairs", d.ByProblem, d.N)
	}
}

// TestPairedByChosenExpert: a run reported by the expert prompt chosen on
// validation is compared problem by problem on that expert's outcomes,
// not on the plain prompt's; and by none where its record kept none.
func TestPairedByChosenExpert(t *testing.T) {
	meml := func(name, plain, record string) *rundir.Run {
		return &rundir.Run{Name: name, Seed: "1", Evals: []rundir.Eval{{Step: 1, Split: "test", Greedy: 0.5, ProblemSet: "abc", Outcomes: plain,
			Evaluators: map[string]json.RawMessage{"expert_prompts": json.RawMessage(record)}}}}
	}
	base := Row{Name: "grpo", Runs: []*rundir.Run{{Name: "grpo-s1", Seed: "1", Evals: []rundir.Eval{{Step: 1, Split: "test", Greedy: 0.5, ProblemSet: "abc", Outcomes: "1100"}}}}}
	// The plain prompt ties the baseline problem by problem; E1, the best
	// expert, is right on none of the four.
	withOutcomes := meml("meml-s1", "1100", `{"experts":{"E0":0.5,"E1":0},"best_expert":"E1","best":0,"outcomes":{"E0":"1100","E1":"0000"}}`)
	f, ok := FinalOf(withOutcomes)
	if !ok || f.Variant != "E1" || f.Acc != 0 || f.Outcomes != "0000" {
		t.Fatalf("FinalOf: %+v (%v), want E1's accuracy 0 and outcomes 0000", f, ok)
	}
	d := Paired(Row{Name: "meml", Runs: []*rundir.Run{withOutcomes}}, base)
	if want := stats.MeanInterval([]float64{-1, -1, 0, 0}); d.ByProblem != want || d.Mean != -0.5 {
		t.Errorf("by problem %+v (Δ %v), want %+v and Δ −0.5: E1's outcomes against the baseline's", d.ByProblem, d.Mean, want)
	}
	without := meml("meml-s1", "1100", `{"experts":{"E0":0.5,"E1":0},"best_expert":"E1","best":0}`)
	if d := Paired(Row{Name: "meml", Runs: []*rundir.Run{without}}, base); !math.IsNaN(d.ByProblem.Mean) || d.Mean != -0.5 {
		t.Errorf("a best expert without its outcomes: by problem %+v (Δ %v), want none beside Δ −0.5", d.ByProblem, d.Mean)
	}
	// Reported under E0 (rlvr report --expert E0), the same run pairs on E0's.
	under, err := UnderExpert([]*rundir.Run{withOutcomes}, "E0")
	if err != nil {
		t.Fatal(err)
	}
	if d := Paired(Row{Name: "meml", Runs: under}, base); d.ByProblem.Mean != 0 || d.ByProblem.N != 4 {
		t.Errorf("under E0: by problem %+v, want 0 over 4 problems", d.ByProblem)
	}
}

func TestRenderSeedRows(t *testing.T) {
	_, runs := fixtureRuns(t)
	out := t.TempDir()
	if err := Render(out, runs...); err != nil {
		t.Fatal(err)
	}
	page := readPage(t, out)
	for _, want := range []string{"<h2>Rows across seeds</h2>", "18.0% [11.4, 24.6]", "E2, E1, E1", "<th class=\"num\">E0 / E1 / E2</th>"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// One run per row: no such section.
	out = t.TempDir()
	if err := Render(out, runs[0], runs[1]); err != nil {
		t.Fatal(err)
	}
	if page := readPage(t, out); strings.Contains(page, "Rows across seeds") {
		t.Error("report.html has rows across seeds with one run per row")
	}
}

func ExampleTable() {
	root, err := os.MkdirTemp("", "runs")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	// Two algorithms, three seeds each, evaluated on 100 test problems.
	var runs []*rundir.Run
	for _, algo := range []string{"grpo", "dapo"} {
		for seed := 1; seed <= 3; seed++ {
			dir := filepath.Join(root, fmt.Sprintf("%s-s%d", algo, seed))
			os.Mkdir(dir, 0o755)
			os.WriteFile(filepath.Join(dir, rundir.ConfigFile), fmt.Appendf(nil, "algorithm: %s\nseed: %d\n", algo, seed), 0o644)
			acc := 0.05 + 0.01*float64(seed)
			if algo == "dapo" {
				acc += 0.02 + 0.01*float64(seed%2)
			}
			os.WriteFile(filepath.Join(dir, rundir.EvalFile), fmt.Appendf(nil,
				`{"step":0,"split":"val","greedy":0.05}`+"\n"+`{"step":100,"split":"test","greedy":%g,"problems":100}`+"\n", acc), 0o644)
			run, err := Load(dir)
			if err != nil {
				panic(err)
			}
			runs = append(runs, run)
		}
	}
	table, err := Table(runs, "grpo")
	if err != nil {
		panic(err)
	}
	fmt.Print(table)
	// Output:
	// | row | seeds | steps | test accuracy | pooled | before | Δ vs grpo | MDE |
	// | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
	// | grpo | 3 | 100 | 7.0% [4.5, 9.5] | 7.0% [4.6, 10.5] (300) | 5.0% | (baseline) | — |
	// | dapo | 3 | 100 | 9.7% [6.8, 12.5] | 9.7% [6.8, 13.5] (300) | 5.0% | +2.7 pp [+1.2, +4.1] | 1.8 pp |
	//
	// Accuracy: mean over seeds [95% t-interval over seeds]; pooled: every seed's test problems together [95% Wilson interval] (problems); Δ: mean over seeds of (row − grpo) on the same seed and the same test problems [95% paired t-interval]; MDE: the smallest Δ that test detects at 80% power, at the spread of the paired seeds.
}

// TestTableMEL: the pass@k column and MEL's yield, summed over steps and
// runs, appear for rows that have them.
func TestTableMEL(t *testing.T) {
	root := t.TempDir()
	var runs []*rundir.Run
	for i, name := range []string{"grpo-s1", "mel-s1", "grpo-s2", "mel-s2"} {
		seed := fmt.Sprint(1 + i/2)
		dir := writeSeedRun(t, root, seedRun{name: name, seed: seed, stepS: 1, evals: []string{
			fmt.Sprintf(`{"step":20,"split":"test","greedy":0.%d,"problems":200,"avg_at_k":0.%d,"pass_at_k":{"1":0.2,"8":0.%d}}`, 1+i, 2+i, 5+i),
		}})
		if strings.HasPrefix(name, "mel") {
			var m strings.Builder
			for step := 1; step <= 20; step++ {
				fmt.Fprintf(&m, `{"step":%d,"accuracy":0.1,"mel/pairs":10,"mel/parsed":8,"mel/validated":%d}`+"\n", step, 2+i/2*2)
			}
			writeFile(t, filepath.Join(dir, rundir.MetricsFile), m.String())
		}
		runs = append(runs, load(t, dir))
	}
	got, err := Table(runs, "grpo")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| pass@k | meta-experiences: pairs → parsed → validated |",
		"| grpo | 2 | 20 | 20.0% [−107.1, 147.1] | 20.0% [16.4, 24.2] (400) | 30.0% [−97.1, 157.1] (n=8) | 60.0% [−67.1, 187.1] (k=8) | — |",
		"| 70.0% [−57.1, 197.1] (k=8) | 400 → 80% → 30% |",
		"| Δ vs grpo | Δ sampled mean vs grpo | Δ pass@k vs grpo |",
		"| +10.0 pp [+10.0, +10.0] | +10.0 pp [+10.0, +10.0] | +10.0 pp [+10.0, +10.0] |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestUnderExpert: every row reported under one expert prompt, its
// interval Wilson's over the test problems, majority − best against that
// expert; a run without the expert is refused by name.
func TestUnderExpert(t *testing.T) {
	_, runs := fixtureRuns(t)
	var meml []*rundir.Run
	for _, r := range runs {
		if RowName(r.Name) == "meml" {
			meml = append(meml, r)
		}
	}
	under, err := UnderExpert(meml, "E0")
	if err != nil {
		t.Fatal(err)
	}
	// E0 on test: 12, 11, 13% (seeds 3, 1, 2); at step 0: 5, 5, 6%.
	s := Rows(under)[0].Summary()
	if !near(s.Accuracy.Mean, 0.12, 1e-9) || !near(s.Before, 0.16/3, 1e-9) || fmt.Sprint(s.Chosen) != "[E0 E0 E0]" {
		t.Errorf("under E0: accuracy %v, before %v, experts %v; want 12%%, 5.3%%, E0 each", s.Accuracy.Mean, s.Before, s.Chosen)
	}
	// Majority − E0: 21−12, 14−11, 17−13 = 9, 3, 4 pp.
	if gap := s.Declared[declared(t, "MV − best")][0]; !near(gap, 0.16/3, 1e-9) {
		t.Errorf("majority − E0 %v, want 5.3 pp", gap)
	}
	f, _ := FinalOf(under[0])
	w := stats.WilsonInterval(24, 200)
	if f.Low != w.Low || f.High != w.High {
		t.Errorf("seed 3's interval [%v, %v], want Wilson's [%v, %v]", f.Low, f.High, w.Low, w.High)
	}
	if orig, _ := FinalOf(meml[0]); orig.Variant != "E2" || orig.Acc != 0.2 {
		t.Errorf("the runs given changed: %+v", orig)
	}
	if _, err := UnderExpert(runs, "E0"); err == nil || !strings.Contains(err.Error(), `run grpo-s1 has no final evaluation under expert "E0"`) {
		t.Errorf("a run without experts: %v", err)
	}
	if _, err := UnderExpert(meml, "E7"); err == nil || !strings.Contains(err.Error(), `(its experts: ["E0" "E1" "E2"])`) {
		t.Errorf("an expert no run has: %v", err)
	}
}

// TestStepTimeIsTheMedian: a run's seconds per step is its median step,
// so that a few steps spent waiting on shared cores or on a resume do not
// stand for the run (the mean here would be 6.0 s).
func TestStepTimeIsTheMedian(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "grpo-s1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var m strings.Builder
	for step := 1; step <= 20; step++ {
		s := 1.0 + float64(step%2)/10 // 1.0 and 1.1, alternating
		if step == 1 {
			s = 100 // the step that waited
		}
		fmt.Fprintf(&m, `{"step":%d,"step_s":%g}`+"\n", step, s)
	}
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), m.String())
	writeFile(t, filepath.Join(dir, rundir.EvalFile), `{"step":20,"split":"test","greedy":0.1,"problems":10}`+"\n")
	s := Rows([]*rundir.Run{load(t, dir)})[0].Summary()
	if !near(s.StepTime, 1.05, 1e-9) {
		t.Errorf("step time %v, want the median 1.05", s.StepTime)
	}
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of none is not NaN")
	}
}
