package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"rlvr/internal/stats"
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
//
// A metric named A-B, where A and B are logged metrics and A-B is not, is
// their difference at each step that logs both: a write-up's "consulting
// episodes were right this much more often than the others", with its
// spread over seeds.
//
// With a baseline row, each metric's table is followed by one of each other
// row's difference from the baseline per block, paired by seed ([SeedOf]):
// the mean over the seeds both rows have of (row − baseline), with a 95%
// paired t-interval.
func Blocks(runs []*rundir.Run, metrics []string, every int, baseline string) (string, error) {
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
	values := make([]func(rundir.Step) (float64, bool), len(metrics))
	for i, m := range metrics {
		var ok bool
		if values[i], ok = stepValue(m, logged); !ok {
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
	base, err := rowIndex(rows, baseline)
	if err != nil {
		return "", err
	}
	var starts []int // each block's first step
	for lo := 1; lo <= last; lo += every {
		starts = append(starts, lo)
	}
	var b strings.Builder
	for i, m := range metrics {
		if i > 0 {
			b.WriteString("\n")
		}
		// means[r][k]: row r's seeds' means over block k, computed once
		// for the row's line and for its difference from the baseline.
		means := make([][][]seedMean, len(rows))
		for r, row := range rows {
			for _, lo := range starts {
				means[r] = append(means[r], blockMeans(row, values[i], lo, lo+every-1))
			}
		}
		g := grid{Header: []string{m}, Right: []bool{false}}
		for _, lo := range starts {
			g.Header = append(g.Header, fmt.Sprintf("steps %d–%d", lo, min(lo+every-1, last)))
			g.Right = append(g.Right, true)
		}
		for r, row := range rows {
			cells := []string{row.Name}
			for k := range starts {
				cells = append(cells, blockCell(means[r][k], len(row.Runs)))
			}
			g.Cells = append(g.Cells, cells)
		}
		g.Notes = []string{fmt.Sprintf("%s: the mean over seeds of each seed's mean over the block's steps [95%% t-interval over seeds].", m)}
		b.WriteString(g.markdown())
		if base < 0 {
			continue
		}
		d := grid{Header: append([]string{"Δ " + m + " vs " + rows[base].Name}, g.Header[1:]...), Right: g.Right}
		for r, row := range rows {
			if r == base {
				continue
			}
			cells := []string{row.Name}
			for k := range starts {
				cells = append(cells, blockDifference(means[r][k], means[base][k], len(row.Runs)))
			}
			d.Cells = append(d.Cells, cells)
		}
		d.Notes = []string{fmt.Sprintf("Δ: the mean over the seeds both rows ran of (row − %s), each seed's block means [95%% paired t-interval].", rows[base].Name)}
		b.WriteString("\n" + d.markdown())
	}
	return b.String(), nil
}

// seedMean is one run's mean of a metric over a block, with the seed it is
// paired by ([SeedOf]).
type seedMean struct {
	seed string
	mean float64
}

// stepValue returns how a metric is read from a step, false where the
// step lacks it: a logged field, or A-B for logged fields A and B (a name
// with one '-' that is not logged itself). It reports false when the
// metric is neither.
func stepValue(metric string, logged map[string]bool) (func(rundir.Step) (float64, bool), bool) {
	if logged[metric] {
		return func(st rundir.Step) (float64, bool) {
			v, ok := st.Values[metric]
			return v, ok
		}, true
	}
	a, b, cut := strings.Cut(metric, "-")
	if !cut || strings.Contains(b, "-") || !logged[a] || !logged[b] {
		return nil, false
	}
	return func(st rundir.Step) (float64, bool) {
		x, okA := st.Values[a]
		y, okB := st.Values[b]
		return x - y, okA && okB
	}, true
}

// blockMeans returns the means of a row's runs over steps lo–hi, in run
// order, leaving out the runs that log none there.
func blockMeans(row Row, value func(rundir.Step) (float64, bool), lo, hi int) []seedMean {
	var means []seedMean
	for _, r := range row.Runs {
		if v, ok := blockMean(r, value, lo, hi); ok {
			means = append(means, seedMean{SeedOf(r), v})
		}
	}
	return means
}

// blockMean returns a run's mean of a step value over steps lo–hi, and
// false when no step there has it.
func blockMean(r *rundir.Run, value func(rundir.Step) (float64, bool), lo, hi int) (float64, bool) {
	var sum float64
	n := 0
	for _, st := range r.Steps {
		if st.Step < lo || st.Step > hi {
			continue
		}
		if v, ok := value(st); ok && finite(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// blockCell writes a row's block: the mean of its seeds' block means with
// their t-interval.
func blockCell(means []seedMean, seeds int) string {
	if len(means) == 0 {
		return dash
	}
	values := make([]float64, len(means))
	for i, sm := range means {
		values[i] = sm.mean
	}
	return intervalCell(values, number, seeds)
}

// blockDifference writes a row's block less the baseline's, paired by
// seed, in the order of the row's runs.
func blockDifference(means, base []seedMean, seeds int) string {
	var diffs []float64
	for _, sm := range means {
		if i := slices.IndexFunc(base, func(b seedMean) bool { return b.seed == sm.seed }); i >= 0 {
			diffs = append(diffs, sm.mean-base[i].mean)
		}
	}
	if len(diffs) == 0 {
		return dash
	}
	return intervalCell(diffs, signedNumber, seeds)
}

// intervalCell writes the mean of per-seed values with its t-interval, each
// written by format, and how many of the row's seeds they are when not all.
func intervalCell(perSeed []float64, format func(float64) string, seeds int) string {
	iv := stats.MeanInterval(perSeed)
	s := format(iv.Mean)
	if !math.IsNaN(iv.Low) {
		s += " [" + format(iv.Low) + ", " + format(iv.High) + "]"
	}
	if len(perSeed) < seeds {
		s += fmt.Sprintf(" (%d of %d seeds)", len(perSeed), seeds)
	}
	return s
}

// number writes a metric's value to three significant digits, with a
// typeset minus sign.
func number(f float64) string {
	return strings.Replace(strconv.FormatFloat(f, 'g', 3, 64), "-", "−", 1)
}

// signedNumber writes a difference as number does, with its sign.
func signedNumber(f float64) string {
	if f >= 0 {
		return "+" + number(f)
	}
	return number(f)
}
