package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"rlvr/rundir"
)

// The charts of the metrics that no fixed chart draws: whatever a training
// method logs, such as loss/pg or expert/E1/accuracy. Each metric has a
// panel, and the panels are grouped into figures by the metric's prefix.

// maxExtraPanels bounds the panels of one figure; a larger group is split
// into figures of about equal size.
const maxExtraPanels = 9

// otherGroup gathers the metrics without a prefix.
const otherGroup = "other"

// groupTitles name the prefixes that the training methods use; another
// prefix is its own title.
var groupTitles = map[string]string{
	"loss":     "Loss terms",
	"data":     "Data",
	"expert":   "Experts",
	"mutual":   "Mutual learning",
	"buffer":   "Experience buffer",
	"consult":  "Consultation",
	"mel":      "MEL",
	otherGroup: "Other metrics",
}

// drawExtraCharts writes a chart for each group of the metrics that no fixed
// chart draws.
func drawExtraCharts(outDir string, ss []series) ([]chart, error) {
	var out []chart
	for _, mc := range extraCharts(ss, extraKeys(ss)) {
		c, err := drawMetricChart(outDir, mc, ss)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	return out, nil
}

// extraKeys returns, in natural order, the numeric metrics of the runs that
// no fixed chart draws: those outside the fixed charts, and step_s when a
// run logs it without the time split whose chart would show it.
func extraKeys(ss []series) []string {
	var keys []string
	for _, s := range ss {
		split := hasTimeSplit(s.run)
		for _, k := range s.run.Keys() {
			if (!charted(k) || k == rundir.MetricStepSeconds && !split) && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, naturalCompare)
	return keys
}

// hasTimeSplit reports whether a step of the run has one of the time split's
// metrics.
func hasTimeSplit(r *rundir.Run) bool {
	for _, st := range r.Steps {
		for _, t := range timeKeys {
			if _, ok := st.Values[t.key]; ok {
				return true
			}
		}
	}
	return false
}

// metricGroup returns the group of a metric: the part of its name before the
// first slash, or otherGroup when there is none.
func metricGroup(key string) string {
	if i := strings.IndexByte(key, '/'); i > 0 {
		return key[:i]
	}
	return otherGroup
}

// groupTitle returns the title of a group's figures.
func groupTitle(group string) string {
	if t, ok := groupTitles[group]; ok {
		return t
	}
	t := strings.NewReplacer("_", " ", "-", " ").Replace(group)
	r, n := utf8.DecodeRuneInString(t)
	return string(unicode.ToUpper(r)) + t[n:]
}

// extraCharts lays out the charts of keys, which are in order: a panel per
// key, and a figure per group of keys, or several figures for a group of
// more than maxExtraPanels. The named groups come in order, otherGroup last.
func extraCharts(ss []series, keys []string) []metricChart {
	var groups []string
	byGroup := map[string][]string{}
	for _, k := range keys {
		g := metricGroup(k)
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], k)
	}
	slices.SortStableFunc(groups, func(a, b string) int {
		if (a == otherGroup) != (b == otherGroup) {
			if a == otherGroup {
				return 1
			}
			return -1
		}
		return naturalCompare(a, b)
	})
	var out []metricChart
	used := map[string]bool{}
	for _, g := range groups {
		ks := byGroup[g]
		n := (len(ks) + maxExtraPanels - 1) / maxExtraPanels
		caption := fmt.Sprintf("Metrics logged under %s/ in %s, one panel each.", g, rundir.MetricsFile)
		if g == otherGroup {
			caption = fmt.Sprintf("Other metrics logged in %s, one panel each.", rundir.MetricsFile)
		}
		start := 0
		for i := range n {
			size := len(ks) / n
			if i < len(ks)%n {
				size++
			}
			chunk := ks[start : start+size]
			start += size
			mc := metricChart{file: uniqueFile("metrics_"+sanitize(g), used), title: groupTitle(g), caption: caption, titled: true}
			for _, k := range chunk {
				if n := len(metricSeries(ss, k)); n > 0 && n < len(ss) {
					mc.caption += " A run that did not log a metric has no line in its panel."
					break
				}
			}
			if n > 1 {
				mc.title += fmt.Sprintf(" (%d of %d)", i+1, n)
			}
			mc.cols, mc.wide = extraLayout(len(chunk))
			for _, k := range chunk {
				mc.panels = append(mc.panels, extraPanel(ss, k))
			}
			out = append(out, mc)
		}
	}
	return out
}

// extraLayout returns the columns of a figure of n panels and whether it is
// wide: one or two panels stack in a figure as wide as the fixed charts',
// more fill rows of three, or a square of four, across the page.
func extraLayout(n int) (cols int, wide bool) {
	switch {
	case n <= 2:
		return 1, false
	case n == 4:
		return 2, true
	}
	return 3, true
}

// extraPanel returns the panel of the metric key. A fraction (accuracy,
// …_frac) whose values are all in [0, 1] is shown as a percentage from 0.
func extraPanel(ss []series, key string) panelSpec {
	last := key[strings.LastIndexByte(key, '/')+1:]
	if last == "" {
		last = key
	}
	p := panelSpec{title: key, ylabel: last, lines: []lineSpec{{key: key}}}
	if last == "accuracy" || strings.HasSuffix(last, "_frac") || strings.HasSuffix(last, "_fraction") {
		unit := true
		for _, rs := range metricSeries(ss, key) {
			for _, v := range rs.ys {
				unit = unit && v >= 0 && v <= 1
			}
		}
		if unit {
			p.format, p.zero = percentTicks, true
		}
	}
	return p
}

// naturalCompare orders strings as text, but runs of digits by their value,
// so that expert/E2 comes before expert/E10.
func naturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			x, y := strings.TrimLeft(a[si:i], "0"), strings.TrimLeft(b[sj:j], "0")
			if c := cmp.Compare(len(x), len(y)); c != 0 {
				return c
			}
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
			continue
		}
		if c := cmp.Compare(a[i], b[j]); c != 0 {
			return c
		}
		i, j = i+1, j+1
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b) // E01 and E1, say
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
