package report

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"rlvr/rundir"
)

// chart is a written PNG as the page presents it.
type chart struct {
	File, Title, Caption string
	Wide                 bool // spans the page's grid
}

// series is a run as the charts draw it.
type series struct {
	run   *rundir.Run
	label string
	color color.NRGBA
}

// lineSpec is a metric drawn as a line.
type lineSpec struct {
	key    string
	label  string      // names the line style in the legend when a panel has several
	dashes []vg.Length // nil: solid
}

// panelSpec is one plot of a metric chart.
type panelSpec struct {
	title, ylabel string
	lines         []lineSpec
	format        tickFormat
	zero          bool // the y axis reaches 0
	exact         bool // a schedule, not a measurement: drawn as is, not averaged
}

// metricChart is a chart of per-step metrics.
type metricChart struct {
	file, title, caption string
	panels               []panelSpec
	// cols is the number of columns of panels, 0 meaning one; wide doubles
	// the figure's width, and the chart spans the page's grid.
	cols int
	wide bool
	// titled keeps the title of a panel that is alone in its chart.
	titled bool
}

var dashed = []vg.Length{vg.Points(5), vg.Points(3)}

// The per-step charts, in page order; eval.png follows the first two.
var metricCharts = []metricChart{
	{file: "reward.png", title: "Reward", caption: "Mean reward of the step's rollouts (reward_mean) and the standard deviation of rewards within a group (reward_std).",
		panels: []panelSpec{
			{title: "mean reward", ylabel: "reward", lines: []lineSpec{{key: rundir.MetricRewardMean}}},
			{title: "reward std within groups", ylabel: "std", lines: []lineSpec{{key: rundir.MetricRewardStd}}},
		}},
	{file: "accuracy.png", title: "Training accuracy", caption: "Accuracy of the step's rollouts (accuracy) and the fraction of groups whose rewards are all equal, which give no learning signal (zero_variance_frac).",
		panels: []panelSpec{
			{title: "rollout accuracy", ylabel: "accuracy", lines: []lineSpec{{key: rundir.MetricAccuracy}}, format: percentTicks},
			{title: "groups with zero reward variance", ylabel: "groups", lines: []lineSpec{{key: rundir.MetricZeroVarianceFrac}}, format: percentTicks, zero: true},
		}},
	{file: "clip.png", title: "Clipped tokens", caption: "Fraction of tokens whose probability ratio the objective clipped: above 1+ε (clip_high_frac, solid) and below 1−ε (clip_low_frac, dashed).",
		panels: []panelSpec{
			{ylabel: "tokens clipped", format: percentTicks, zero: true, lines: []lineSpec{
				{key: rundir.MetricClipHighFrac, label: "high (ratio > 1+ε)"},
				{key: rundir.MetricClipLowFrac, label: "low (ratio < 1−ε)", dashes: dashed},
			}},
		}},
	{file: "kl_entropy.png", title: "KL divergence and entropy", caption: "KL divergence of the policy from the reference (kl) and the policy's mean token entropy (entropy).",
		panels: []panelSpec{
			{title: "KL divergence", ylabel: "KL", lines: []lineSpec{{key: rundir.MetricKL}}},
			{title: "entropy", ylabel: "entropy", lines: []lineSpec{{key: rundir.MetricEntropy}}},
		}},
	{file: "length.png", title: "Response length", caption: "Mean length of the step's responses in tokens (response_len_mean).",
		panels: []panelSpec{{ylabel: "tokens", lines: []lineSpec{{key: rundir.MetricResponseLenMean}}}}},
	{file: "grad_norm.png", title: "Gradient norm and learning rate", caption: "Norm of the gradient (grad_norm) and the learning rate (lr, not averaged).",
		panels: []panelSpec{
			{title: "gradient norm", ylabel: "norm", lines: []lineSpec{{key: rundir.MetricGradNorm}}, zero: true},
			{title: "learning rate", ylabel: "lr", lines: []lineSpec{{key: rundir.MetricLR}}, exact: true},
		}},
	{file: "throughput.png", title: "Throughput", caption: "Tokens processed per second (tokens_per_sec).",
		panels: []panelSpec{{ylabel: "tokens / s", lines: []lineSpec{{key: rundir.MetricTokensPerSec}}, zero: true}}},
}

// The time split chart's layers, bottom up.
var timeKeys = []struct {
	key, label string
	color      color.NRGBA
}{
	{rundir.MetricRolloutSeconds, "rollout", color.NRGBA{0x4c, 0x78, 0xa8, 0xe0}},
	{rundir.MetricVerifySeconds, "verify", color.NRGBA{0xf5, 0x85, 0x18, 0xe0}},
	{rundir.MetricLearnSeconds, "learn", color.NRGBA{0x54, 0xa2, 0x4b, 0xe0}},
}

// chartedMetrics are the metrics with a chart of their own: the fixed
// charts' and the time split's.
var chartedMetrics = func() []string {
	keys := []string{rundir.MetricStepSeconds}
	for _, t := range timeKeys {
		keys = append(keys, t.key)
	}
	for _, c := range metricCharts {
		for _, p := range c.panels {
			for _, l := range p.lines {
				keys = append(keys, l.key)
			}
		}
	}
	return keys
}()

// charted reports whether a metric has a chart of its own.
func charted(key string) bool { return slices.Contains(chartedMetrics, key) }

// drawCharts writes every fixed chart with data into outDir.
func drawCharts(outDir string, ss []series) ([]chart, error) {
	var out []chart
	add := func(c *chart, err error) error {
		if err != nil {
			return err
		}
		if c != nil {
			out = append(out, *c)
		}
		return nil
	}
	for i, mc := range metricCharts {
		if err := add(drawMetricChart(outDir, mc, ss)); err != nil {
			return nil, err
		}
		if i == 1 {
			if err := add(drawEvalChart(outDir, ss)); err != nil {
				return nil, err
			}
		}
	}
	if err := add(drawTimeChart(outDir, ss)); err != nil {
		return nil, err
	}
	return out, nil
}

// sanitize makes a metric name safe as part of a file name.
func sanitize(key string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 60 {
			break
		}
	}
	return b.String()
}

func uniqueFile(base string, used map[string]bool) string {
	name := base + ".png"
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s_%d.png", base, i)
	}
	used[name] = true
	return name
}

// emaSpan returns the span of the moving average for series of n points:
// about a tenth of the run.
func emaSpan(n int) int { return min(max(int(math.Round(float64(n)/10)), 1), 200) }

// ema returns the exponential moving average of ys with the given span,
// debiased so that its start is not pulled toward zero.
func ema(ys []float64, span int) []float64 {
	a := 2 / (float64(span) + 1)
	out := make([]float64, len(ys))
	var s, w float64
	for i, y := range ys {
		s = (1-a)*s + a*y
		w = (1-a)*w + a
		out[i] = s / w
	}
	return out
}

// xys pairs the coordinates, leaving out points that overflowed.
func xys(xs, ys []float64) plotter.XYs {
	pts := make(plotter.XYs, 0, len(xs))
	for i := range xs {
		if finite(xs[i]) && finite(ys[i]) {
			pts = append(pts, plotter.XY{X: xs[i], Y: ys[i]})
		}
	}
	return pts
}

// finiteXYs leaves out the points that overflowed.
func finiteXYs(pts plotter.XYs) plotter.XYs {
	out := pts[:0:0]
	for _, p := range pts {
		if finite(p.X) && finite(p.Y) {
			out = append(out, p)
		}
	}
	return out
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func withAlpha(c color.NRGBA, a uint8) color.NRGBA {
	c.A = a
	return c
}

// valueRange returns the range a y axis shows: all the smoothed values and
// the raw ones, except that a few outliers that would squash the rest are
// left out (the lines run off the plot there).
func valueRange(raw, smooth []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range smooth {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(raw) == 0 {
		return lo, hi
	}
	sorted := slices.Clone(raw)
	slices.Sort(sorted)
	q := func(p float64) float64 { return sorted[int(p*float64(len(sorted)-1))] }
	full := sorted[len(sorted)-1] - sorted[0]
	rlo, rhi := sorted[0], sorted[len(sorted)-1]
	if len(sorted) >= 20 {
		if r := q(0.99) - q(0.01); full > 3*r && r > 0 {
			rlo, rhi = q(0.01), q(0.99)
		}
	}
	return math.Min(lo, rlo), math.Max(hi, rhi)
}

// runSeries is one run's values of a metric: a line of a panel.
type runSeries struct {
	run    int // index of the run in the charts' series
	xs, ys []float64
}

// metricSeries returns a line for each run that logged key, in run order.
func metricSeries(ss []series, key string) []runSeries {
	var out []runSeries
	for i, s := range ss {
		if xs, ys := s.run.Series(key); len(xs) > 0 {
			out = append(out, runSeries{run: i, xs: xs, ys: ys})
		}
	}
	return out
}

// stepRange returns the smallest and largest step of the runs' charted data.
func stepRange(ss []series, keys []string) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, st := range s.run.Steps {
			for _, k := range keys {
				if _, ok := st.Values[k]; ok {
					lo, hi = math.Min(lo, float64(st.Step)), math.Max(hi, float64(st.Step))
					break
				}
			}
		}
	}
	return lo, hi
}

// drawMetricChart draws a chart of per-step metrics, or nothing when no run
// has them.
func drawMetricChart(outDir string, mc metricChart, ss []series) (*chart, error) {
	var keys []string
	lines := map[string][]runSeries{}
	maxLen := 0
	for _, p := range mc.panels {
		for _, l := range p.lines {
			keys = append(keys, l.key)
			lines[l.key] = metricSeries(ss, l.key)
			for _, rs := range lines[l.key] {
				maxLen = max(maxLen, len(rs.xs))
			}
		}
	}
	if maxLen == 0 {
		return nil, nil
	}
	span := emaSpan(maxLen)
	smoothing := span >= 2
	xlo, xhi := stepRange(ss, keys)

	cols := max(mc.cols, 1)
	fig := &figure{title: mc.title, cols: cols}
	if mc.wide {
		fig.width = 2 * figWidth
	}
	inChart := make([]bool, len(ss))
	var styles []lineSpec
	for _, ps := range mc.panels {
		p := newPanel(ps.title, ps.ylabel, ps.format)
		var raw, smooth []float64
		var thin, bold []plot.Plotter // drawn in two passes, every run's averages over every run's noise
		has := false
		for _, l := range ps.lines {
			lineHas := false
			for _, rs := range lines[l.key] {
				s, xs, ys := ss[rs.run], rs.xs, rs.ys
				has, lineHas, inChart[rs.run] = true, true, true
				raw = append(raw, ys...)
				sm := ys
				if smoothing && !ps.exact {
					rl, err := plotter.NewLine(xys(xs, ys))
					if err != nil {
						return nil, err
					}
					rl.LineStyle = draw.LineStyle{Color: withAlpha(s.color, 0x48), Width: vg.Points(0.7)}
					thin = append(thin, rl)
					sm = ema(ys, span)
				}
				smooth = append(smooth, sm...)
				el, err := plotter.NewLine(xys(xs, sm))
				if err != nil {
					return nil, err
				}
				el.LineStyle = draw.LineStyle{Color: s.color, Width: vg.Points(1.8), Dashes: l.dashes}
				bold = append(bold, el)
			}
			if lineHas && len(ps.lines) > 1 {
				styles = append(styles, l)
			}
		}
		p.Add(thin...)
		p.Add(bold...)
		if !has {
			continue
		}
		ylo, yhi := valueRange(raw, smooth)
		if ps.zero && ylo >= 0 {
			ylo = 0
		}
		setRange(&p.Y, ylo, yhi)
		setRange(&p.X, xlo, xhi)
		fig.panels = append(fig.panels, p)
	}
	if len(fig.panels) == 1 {
		if !mc.titled {
			fig.panels[0].Title.Text = ""
		}
		fig.panelH = 3.2 * vg.Inch
	} else {
		fig.panelH = 2.5 * vg.Inch
	}
	// The step label goes under the lowest panel of each column.
	for i := 0; i+cols < len(fig.panels); i++ {
		fig.panels[i].X.Label.Text = ""
	}
	fig.legend = runLegend(ss, inChart)
	for _, l := range styles {
		fig.legend = append(fig.legend, legendEntry{l.label, lineThumb{Color: keyColor, Width: vg.Points(1.8), Dashes: l.dashes}})
	}
	if err := fig.save(filepath.Join(outDir, mc.file)); err != nil {
		return nil, err
	}
	caption := mc.caption
	if smoothing {
		caption += fmt.Sprintf(" Thin lines: every step; bold: exponential moving average over about %d steps.", span)
	}
	return &chart{File: mc.file, Title: mc.title, Caption: caption, Wide: mc.wide}, nil
}

// runLegend has an entry for each run drawn.
func runLegend(ss []series, drawn []bool) []legendEntry {
	var l []legendEntry
	for i, s := range ss {
		if drawn[i] {
			l = append(l, legendEntry{s.label, lineThumb{Color: s.color, Width: vg.Points(2.2)}})
		}
	}
	return l
}

// The dashes that tell evaluation splits apart.
var splitDashes = [][]vg.Length{nil, dashed, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

// drawEvalChart draws the evaluations' greedy accuracy with its interval.
func drawEvalChart(outDir string, ss []series) (*chart, error) {
	var splits []string
	for _, s := range ss {
		for _, e := range s.run.Evals {
			if e.Step >= 0 && !math.IsNaN(e.Greedy) && !slices.Contains(splits, e.Split) {
				splits = append(splits, e.Split)
			}
		}
	}
	p := newPanel("", "greedy accuracy", percentTicks)
	lo, hi := math.Inf(1), math.Inf(-1)
	xlo, xhi := math.Inf(1), math.Inf(-1)
	extend := func(x float64, ys ...float64) {
		xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
		for _, y := range ys {
			if !math.IsNaN(y) {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	drawn := make([]bool, len(ss))
	var haveBand bool
	// Intervals overlap, the more so the more runs: fainter then.
	bandAlpha := uint8(0x30)
	switch {
	case len(ss) > 4:
		bandAlpha = 0x12
	case len(ss) > 2:
		bandAlpha = 0x1c
	}
	for i, s := range ss {
		for si, split := range splits {
			var evals []rundir.Eval
			for _, e := range s.run.Evals {
				if e.Split == split && e.Step >= 0 && !math.IsNaN(e.Greedy) {
					evals = append(evals, e)
				}
			}
			if len(evals) == 0 {
				continue
			}
			drawn[i] = true
			slices.SortStableFunc(evals, func(a, b rundir.Eval) int { return a.Step - b.Step })
			var line, upper, lower plotter.XYs
			for _, e := range evals {
				x := float64(e.Step)
				line = append(line, plotter.XY{X: x, Y: e.Greedy})
				extend(x, e.Greedy, e.GreedyLow, e.GreedyHigh)
				if !math.IsNaN(e.GreedyLow) && !math.IsNaN(e.GreedyHigh) {
					upper = append(upper, plotter.XY{X: x, Y: e.GreedyHigh})
					lower = append(lower, plotter.XY{X: x, Y: e.GreedyLow})
				}
			}
			if len(upper) >= 2 {
				ring := slices.Clone(upper)
				for j := len(lower) - 1; j >= 0; j-- {
					ring = append(ring, lower[j])
				}
				band, err := plotter.NewPolygon(finiteXYs(ring))
				if err != nil {
					return nil, err
				}
				band.Color = withAlpha(s.color, bandAlpha)
				band.LineStyle.Width = 0
				p.Add(band)
				haveBand = true
			}
			l, sc, err := plotter.NewLinePoints(finiteXYs(line))
			if err != nil {
				return nil, err
			}
			l.LineStyle = draw.LineStyle{Color: s.color, Width: vg.Points(1.8), Dashes: splitDashes[si%len(splitDashes)]}
			sc.GlyphStyle = draw.GlyphStyle{Color: s.color, Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}
			p.Add(l, sc)
		}
	}
	if !slices.Contains(drawn, true) {
		return nil, nil
	}
	setRange(&p.Y, lo, hi)
	setRange(&p.X, xlo, xhi)
	fig := &figure{title: "Evaluation accuracy", cols: 1, panels: []*plot.Plot{p}, panelH: 3.2 * vg.Inch}
	fig.legend = runLegend(ss, drawn)
	if len(splits) > 1 {
		for si, split := range splits {
			name := split
			if name == "" {
				name = "(no split)"
			}
			fig.legend = append(fig.legend, legendEntry{"split " + name, lineThumb{Color: keyColor, Width: vg.Points(1.8), Dashes: splitDashes[si%len(splitDashes)]}})
		}
	}
	if err := fig.save(filepath.Join(outDir, "eval.png")); err != nil {
		return nil, err
	}
	caption := "Greedy accuracy at each periodic evaluation (eval.jsonl)"
	if haveBand {
		caption += ", shaded over its 95% interval"
	}
	caption += "."
	return &chart{File: "eval.png", Title: "Evaluation accuracy", Caption: caption}, nil
}

// drawTimeChart draws, for each run, the seconds per step spent in rollout,
// verification and learning as stacked areas, with the whole step's time.
func drawTimeChart(outDir string, ss []series) (*chart, error) {
	type layered struct {
		s      series
		xs     []float64
		layers [][]float64 // cumulative tops, smoothed
		total  plotter.XYs
	}
	var runs []layered
	maxLen := 0
	for _, s := range ss {
		n := 0
		for _, st := range s.run.Steps {
			for _, t := range timeKeys {
				if _, ok := st.Values[t.key]; ok {
					n++
					break
				}
			}
		}
		maxLen = max(maxLen, n)
	}
	if maxLen == 0 {
		return nil, nil
	}
	span := emaSpan(maxLen)
	top := 0.0
	for _, s := range ss {
		var xs []float64
		comps := make([][]float64, len(timeKeys))
		var tx, ty []float64
		for _, st := range s.run.Steps {
			if v, ok := st.Values[rundir.MetricStepSeconds]; ok {
				tx, ty = append(tx, float64(st.Step)), append(ty, v)
			}
			timed := false
			for _, t := range timeKeys {
				_, ok := st.Values[t.key]
				timed = timed || ok
			}
			if !timed {
				continue
			}
			xs = append(xs, float64(st.Step))
			for j, t := range timeKeys {
				comps[j] = append(comps[j], st.Values[t.key]) // 0 when absent
			}
		}
		if len(xs) == 0 {
			continue
		}
		l := layered{s: s, xs: xs}
		cum := make([]float64, len(xs))
		for j := range timeKeys {
			sm := ema(comps[j], span)
			next := make([]float64, len(xs))
			for i := range xs {
				next[i] = cum[i] + math.Max(sm[i], 0)
				if finite(next[i]) {
					top = math.Max(top, next[i])
				}
			}
			l.layers = append(l.layers, next)
			cum = next
		}
		if len(tx) > 0 {
			sm := ema(ty, span)
			l.total = xys(tx, sm)
			for _, v := range sm {
				if finite(v) {
					top = math.Max(top, v)
				}
			}
		}
		runs = append(runs, l)
	}
	xlo, xhi := stepRange(ss, []string{rundir.MetricRolloutSeconds, rundir.MetricVerifySeconds, rundir.MetricLearnSeconds, rundir.MetricStepSeconds})
	cols := min(len(runs), 3)
	fig := &figure{title: "Time per step", cols: cols, panelH: 2.6 * vg.Inch}
	if cols > 1 {
		fig.width = 2 * figWidth
	} else {
		fig.panelH = 3.2 * vg.Inch
	}
	haveTotal := false
	for _, l := range runs {
		title := ""
		if len(runs) > 1 {
			title = l.s.label
		}
		p := newPanel(title, "seconds per step", plainTicks)
		bottom := make([]float64, len(l.xs))
		for j, t := range timeKeys {
			ring := xys(l.xs, l.layers[j])
			for i := len(l.xs) - 1; i >= 0; i-- {
				ring = append(ring, plotter.XY{X: l.xs[i], Y: bottom[i]})
			}
			if len(l.xs) == 1 { // a lone step: a sliver, so that it shows
				ring = plotter.XYs{{X: l.xs[0] - 0.5, Y: bottom[0]}, {X: l.xs[0] - 0.5, Y: l.layers[j][0]}, {X: l.xs[0] + 0.5, Y: l.layers[j][0]}, {X: l.xs[0] + 0.5, Y: bottom[0]}}
			}
			poly, err := plotter.NewPolygon(finiteXYs(ring))
			if err != nil {
				return nil, err
			}
			poly.Color = t.color
			poly.LineStyle.Width = 0
			p.Add(poly)
			bottom = l.layers[j]
		}
		if len(l.total) > 0 {
			tl, err := plotter.NewLine(l.total)
			if err != nil {
				return nil, err
			}
			tl.LineStyle = draw.LineStyle{Color: inkColor, Width: vg.Points(1.3), Dashes: dashed}
			p.Add(tl)
			haveTotal = true
		}
		setRange(&p.Y, 0, top)
		setRange(&p.X, xlo, xhi)
		fig.panels = append(fig.panels, p)
	}
	for _, t := range timeKeys {
		fig.legend = append(fig.legend, legendEntry{t.label, boxThumb{t.color}})
	}
	if haveTotal {
		fig.legend = append(fig.legend, legendEntry{"whole step (step_s)", lineThumb{Color: inkColor, Width: vg.Points(1.3), Dashes: dashed}})
	}
	if err := fig.save(filepath.Join(outDir, "time_split.png")); err != nil {
		return nil, err
	}
	caption := "Seconds per step spent generating rollouts (time_rollout_s), verifying them (time_verify_s) and learning from them (time_learn_s), stacked"
	if haveTotal {
		caption += "; the dashed line is the whole step (step_s), whose excess over the stack is overhead"
	}
	if len(runs) > 1 {
		caption += "; one panel per run, on a common scale"
	}
	if span >= 2 {
		caption += fmt.Sprintf(". All smoothed by an exponential moving average over about %d steps.", span)
	} else {
		caption += "."
	}
	return &chart{File: "time_split.png", Title: "Time per step", Caption: caption, Wide: cols > 1}, nil
}
