package rundir

import (
	"cmp"
	"slices"
)

// Column is a column that a part of a method adds to rlvr report's table
// of rows across seeds, read from the metrics the part logs or from the
// records its evaluators write in the runs' final evaluations
// ([EvalRecord]). A part declares its columns where it registers itself
// (part.Part.Columns), and the report walks Columns, so that it tables a
// part's numbers without compiling the part.
type Column struct {
	// Part names the part that declares the column; the columns come in
	// the order of their parts' names.
	Part   string
	Header string
	Kind   ColumnKind
	// Metrics are the metrics.jsonl keys the cell is read from, as Kind
	// says; for FinalMean and FinalGap, the names of values of the part's
	// records (Reading.Values).
	Metrics []string
}

// ColumnKind says how a column's metrics become a row's cell.
type ColumnKind int

const (
	// Ends: the mean over the row's runs of each run's mean of Metrics[0]
	// over its first and last steps, "40.0% → 2.0%"; the header gains the
	// number of steps.
	Ends ColumnKind = iota
	// Funnel: each of Metrics summed over every step of every run, the
	// first as a count and each other as its share of the first,
	// "120 → 90% → 40%" (pairs drawn, parsed, validated).
	Funnel

	// The kinds below read the runs' final evaluations (the line a table
	// reports a run by) rather than the metrics; the report places them
	// after its accuracy columns, the others after the sampled answers.

	// Variants: the mean over the row's runs of each prompt variant's
	// accuracy in the records ([Reading.Variants]), "12.0 / 17.0 / 16.3";
	// the header becomes the variants' names, "E0 / E1 / E2", when every
	// row that has variants has the same ones, and each value is named
	// otherwise.
	Variants
	// Chosen: each run's chosen variant, the one its accuracy is under
	// ([Reading.Chosen]), in the row's order: "E2, E1, E1".
	Chosen
	// FinalMean: the mean over the row's runs of the value Metrics[0], as
	// a percentage.
	FinalMean
	// FinalGap: the mean over the row's runs of the value Metrics[0] less
	// the run's accuracy, in percentage points with a 95% t-interval over
	// the runs ("majority vote − best expert").
	FinalGap
)

// OfEvaluation says whether the kind reads the final evaluations.
func (k ColumnKind) OfEvaluation() bool { return k >= Variants }

// columns are the declared columns, in the order of their parts' names.
var columns []Column

// DeclareColumns adds a part's columns to those rlvr report tables. It is
// called from a part's registration, at init, and is not safe for
// concurrent use.
func DeclareColumns(cols ...Column) {
	for _, c := range cols {
		i, _ := slices.BinarySearchFunc(columns, c, func(a, b Column) int { return cmp.Compare(a.Part, b.Part) })
		for i < len(columns) && columns[i].Part == c.Part {
			i++ // a part's columns keep their order
		}
		columns = slices.Insert(columns, i, c)
	}
}

// Columns returns the declared columns in order.
func Columns() []Column { return slices.Clone(columns) }
