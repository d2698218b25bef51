package report

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"rlvr/rundir"
)

// Where a run's reported numbers come from: the test line of eval.jsonl
// says where its problems come from (source) and where the choice an
// evaluator reports on it was made (chosen_on: the best expert, on the
// final validation), as a training run writes them; the record that made
// the choice names it (rundir.EvalRecord.Choice). The model scored is
// always the last step's: rlvr chooses no checkpoint.

// WhereChosen says where a run's final test evaluation comes from and
// where the choice it reports was made, "reported on test (1,319 problems
// from the test file); best expert E2 chosen on validation (200 problems
// held out of the training file); the model of the last step, 374"; ""
// when the run has no test line that says so (one written before the
// lines said where their problems come from, or a run without a test
// split).
func WhereChosen(r *rundir.Run) string {
	f, ok := FinalOf(r)
	if !ok || f.FromVal || f.Eval.Source == "" && f.Eval.ChosenOn == "" {
		return ""
	}
	s := whereFrom(f.Eval, f.Variant)
	if f.Eval.Step >= 0 {
		s += "; the model of the last step, " + strconv.Itoa(f.Eval.Step)
	}
	return s
}

// whereFrom says where a test line's problems come from and where its
// choice was made; chosen names the variant chosen, "" to leave it out.
func whereFrom(e rundir.Eval, chosen string) string {
	var of []string
	if e.Problems > 0 {
		of = append(of, countOf(e.Problems, "problem"))
	}
	if e.Source != "" {
		of = append(of, e.Source)
	}
	s := "reported on test"
	if len(of) > 0 {
		s += " (" + strings.Join(of, " ") + ")"
	}
	if e.ChosenOn != "" {
		_, noun := variantsOf(e)
		s += "; " + cmp.Or(noun, "choice") + " "
		if chosen != "" {
			s += chosen + " "
		}
		s += "chosen on " + e.ChosenOn
	}
	return s
}

// countOf writes n things with thousands separators: "1,319 problems".
func countOf(n int, thing string) string {
	s := strconv.Itoa(n)
	if n >= 1000 || n <= -1000 {
		s = formatCount(float64(n))
	}
	if n != 1 {
		thing += "s"
	}
	return s + " " + thing
}

// choiceNotes are the table's notes on where its rows' numbers come from:
// one per distinct statement, naming its rows unless every row shares it.
// Rows whose test lines do not say are left out.
func choiceNotes(rows []Row) []string {
	var notes, order []string
	rowsOf := map[string][]string{}
	for _, row := range rows {
		for _, r := range row.Runs {
			f, ok := FinalOf(r)
			if !ok || f.FromVal || f.Eval.Source == "" && f.Eval.ChosenOn == "" {
				continue
			}
			s := whereFrom(f.Eval, "")
			if _, seen := rowsOf[s]; !seen {
				order = append(order, s)
			}
			if !slices.Contains(rowsOf[s], row.Name) {
				rowsOf[s] = append(rowsOf[s], row.Name)
			}
		}
	}
	for _, s := range order {
		text := strings.ToUpper(s[:1]) + s[1:]
		if len(order) > 1 || len(rowsOf[s]) < len(rows) {
			text = strings.Join(rowsOf[s], ", ") + ": " + s
		}
		notes = append(notes, text+".")
	}
	if len(notes) > 0 {
		notes = append(notes, "Every run is scored with the model of its last step: no checkpoint is chosen.")
	}
	return notes
}
