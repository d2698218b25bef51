package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rlvr/internal/flagcheck"
	"rlvr/rundir"
)

// Options are rlvr report's settings, a field for each of its flags and
// the run directories it is given (the command binds them and prints
// what Run returns): the page, or the tables for write-ups. Validate
// reports every problem with them at once, naming the flags; Run
// validates, loads the runs and renders them. The options are read,
// never written.
type Options struct {
	Runs []string // the RUN_DIR arguments
	// Out is the page's directory (default: the first run's); Table and
	// Blocks print tables instead of a page.
	Out      string
	Table    bool     // --table: the markdown table of rows across seeds
	Baseline string   // --baseline: the row the others are compared with
	Expert   string   // --expert: the expert prompt every row is reported under
	Columns  []string // --column: the table's columns kept, in order
	Blocks   int      // --blocks: Metrics per block of this many steps
	Metrics  []string // --metrics, with Blocks
	Compute  bool     // --compute: each run's recorded wall time and core-hours

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
}

// Output is what rlvr report prints: the page's path, or the tables.
type Output struct {
	Page   string // the page written ("" with tables)
	Tables string // the --table, --blocks and --compute tables, without a page
}

// Validate reports every problem with the options at once, each naming
// its flag or run directory.
func (o *Options) Validate() error {
	var c flagcheck.Check
	if len(o.Runs) == 0 {
		c.Problem("no run directory")
	}
	for _, dir := range o.Runs {
		if st, err := os.Stat(dir); err != nil {
			c.Problem("run directory %s: %v", dir, flagcheck.StatProblem(err))
		} else if !st.IsDir() {
			c.Problem("run directory %s is a file, not a directory", dir)
		}
	}
	if o.Out != "" && !o.Table {
		c.OutDir("out", o.Out, true)
	}
	if o.Given.Has("blocks") && o.Blocks < 1 {
		c.Add("blocks", "%d: a block is at least one step", o.Blocks)
	}
	if len(o.Columns) > 0 && !o.Table {
		c.Add("column", "needs --table")
	}
	if o.Given.Has("expert") && !o.Table {
		c.Add("expert", "needs --table")
	} else {
		c.NonEmpty("expert", o.Expert, o.Given.Has("expert"))
	}
	if o.Given.Has("metrics") && o.Blocks == 0 {
		c.Add("metrics", "needs --blocks")
	}
	for _, m := range o.Metrics {
		if strings.TrimSpace(m) == "" {
			c.Add("metrics", "an empty metric name")
			break
		}
	}
	if !o.Table && o.Blocks == 0 && o.Given.Has("baseline") {
		c.Add("baseline", "needs --table or --blocks")
	} else {
		c.NonEmpty("baseline", o.Baseline, o.Given.Has("baseline"))
	}
	return c.Err()
}

// Run validates the options, loads the runs and, with Table or Blocks,
// returns their tables; otherwise it writes the page and returns its
// path.
func (o *Options) Run() (*Output, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	runs := make([]*rundir.Run, len(o.Runs))
	for i, dir := range o.Runs {
		r, err := Load(dir)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	if o.Expert != "" {
		var err error
		if runs, err = UnderExpert(runs, o.Expert); err != nil {
			return nil, fmt.Errorf("--expert: %w", err)
		}
	}
	if o.Table || o.Blocks > 0 || o.Compute {
		t, err := o.tables(runs)
		if err != nil {
			return nil, err
		}
		return &Output{Tables: t}, nil
	}
	out := o.Out
	if out == "" {
		out = o.Runs[0]
	}
	if err := Render(out, runs...); err != nil {
		return nil, err
	}
	return &Output{Page: filepath.Join(out, HTMLFile)}, nil
}

// tables is, with Table, the markdown table of the runs' rows, then, with
// Blocks, the per-block tables of the metrics. Table and Blocks say which
// rows, columns or metrics there are when one named is not there.
func (o *Options) tables(runs []*rundir.Run) (string, error) {
	var parts []string
	if o.Table {
		t, err := Table(runs, o.Baseline, o.Columns...)
		if err != nil {
			return "", fmt.Errorf("--baseline or --column: %w", err)
		}
		parts = append(parts, t)
	}
	if o.Blocks > 0 {
		t, err := Blocks(runs, o.Metrics, o.Blocks, o.Baseline)
		if err != nil {
			return "", err
		}
		parts = append(parts, t)
	}
	if o.Compute {
		parts = append(parts, Compute(runs))
	}
	return strings.Join(parts, "\n"), nil
}
