package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"rlvr/eval"
	"rlvr/rundir"
)

// Blocks tables a training metric's course: for each metric, one markdown
// table with a line per row of runs across seeds ([Rows]) and a column per
// block of `every` steps (steps 1–every, every+1–2·every, …; the last block
// ends at the largest step of any run). A cell is the mean over the row's
// seeds of each seed's mean over the block's steps that log the metric,
// with a 95% t-interval over those seeds; a seed that logs nothing in the
// block does not count, and the cell says how many did when not all. This
// is how a write-up says how fast a method learned, or how often it
// consulted, per stage of the run, with the spread across seeds.
func Blocks(runs []*rundir.Run, metrics []string, every int) (string, error) {
	if every < 1 {
		return "", fmt.Errorf("report: blocks of %d steps: need at least 1", every)
	}
	if len(metrics) == 0 {
		return "", fmt.Errorf("report: blocks: no metric named")
	}
	last := 0
	logged := map[string]bool{}
	for _, r := range runs {
		last = max(last, r.LastStep())
		for _, k := range r.Keys() {
			logged[k] = true
		}
	}
	for _, m := range metrics {
		if !logged[m] {
			keys := make([]string, 0, len(logged))
			for k := range logged {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return "", fmt.Errorf("report: blocks: no run logs the metric %q; the runs log %s", m, strings.Join(keys, ", "))
		}
	}
	if last < 1 {
		return "", fmt.Errorf("report: blocks: the runs log no training step")
	}
	rows := Rows(runs)
	var b strings.Builder
	for i, m := range metrics {
		if i > 0 {
			b.WriteString("\n")
		}
		g := grid{Header: []string{m}, Right: []bool{false}}
		for lo := 1; lo <= last; lo += every {
			g.Header = append(g.Header, fmt.Sprintf("steps %d–%d", lo, min(lo+every-1, last)))
			g.Right = append(g.Right, true)
		}
		for _, row := range rows {
			cells := []string{row.Name}
			for lo := 1; lo <= last; lo += every {
				cells = append(cells, blockCell(row, m, lo, lo+every-1))
			}
			g.Cells = append(g.Cells, cells)
		}
		g.Notes = []string{fmt.Sprintf("%s: the mean over seeds of each seed's mean over the block's steps [95%% t-interval over seeds].", m)}
		b.WriteString(g.markdown())
	}
	return b.String(), nil
}

// blockCell writes a row's metric over steps lo–hi: the mean of its seeds'
// block means with their t-interval.
func blockCell(row Row, metric string, lo, hi int) string {
	var perSeed []float64
	for _, r := range row.Runs {
		var sum float64
		n := 0
		for _, st := range r.Steps {
			if st.Step < lo || st.Step > hi {
				continue
			}
			if v, ok := st.Values[metric]; ok && finite(v) {
				sum += v
				n++
			}
		}
		if n > 0 {
			perSeed = append(perSeed, sum/float64(n))
		}
	}
	if len(perSeed) == 0 {
		return dash
	}
	iv := eval.MeanInterval(perSeed)
	s := number(iv.Mean)
	if !math.IsNaN(iv.Low) {
		s += " [" + number(iv.Low) + ", " + number(iv.High) + "]"
	}
	if len(perSeed) < len(row.Runs) {
		s += fmt.Sprintf(" (%d of %d seeds)", len(perSeed), len(row.Runs))
	}
	return s
}

// number writes a metric's value to three significant digits, with a
// typeset minus sign.
func number(f float64) string {
	return strings.Replace(strconv.FormatFloat(f, 'g', 3, 64), "-", "−", 1)
}
