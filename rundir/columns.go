package rundir

import (
	"cmp"
	"slices"
)

// Column is a column that a part of a method adds to rlvr report's table
// of rows across seeds, read from the metrics the part logs. A part
// declares its columns where it registers itself (part.Part.Columns), and
// the report walks Columns, so that it tables a part's numbers without
// compiling the part.
type Column struct {
	// Part names the part that declares the column; the columns come in
	// the order of their parts' names.
	Part   string
	Header string
	Kind   ColumnKind
	// Metrics are the metrics.jsonl keys the cell is read from, as Kind
	// says.
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
)

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
