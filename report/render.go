package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"rlvr/rundir"
)

// HTMLFile is the name of the page Render writes.
const HTMLFile = "report.html"

// Render writes report.html and its charts' PNGs into outDir, creating it if
// need be. The page compares the runs: a summary table (and the table of
// [Table] when some row has several seeds), one chart per group of
// metrics with every run overlaid (per-step values thin, their moving average
// bold), then a panel for every other metric a run logged, grouped by the
// metric's prefix (loss/…, expert/…), the last samples of each run and each
// run's config. A chart that no run has data for is left
// out.
func Render(outDir string, runs ...*rundir.Run) error {
	if len(runs) == 0 {
		return errors.New("report: no runs to render")
	}
	if slices.Contains(runs, nil) {
		return errors.New("report: nil run")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	labels := runLabels(runs)
	colors := runColors(runs)
	ss := make([]series, len(runs))
	for i, r := range runs {
		ss[i] = series{run: r, label: labels[i], color: colors[i]}
	}
	charts, err := drawCharts(outDir, ss)
	if err != nil {
		return err
	}
	more, err := drawExtraCharts(outDir, ss)
	if err != nil {
		return err
	}
	page := newPage(ss, charts)
	page.MoreCharts = more
	if rows := Rows(runs); slices.ContainsFunc(rows, func(r Row) bool { return len(r.Runs) >= 2 }) {
		g := newGrid(rows, -1)
		page.Seeds = &g
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, page); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(outDir, HTMLFile), buf.Bytes(), 0o644)
}

// runLabels names the runs, falling back on the algorithm and seed, then on a
// number, to tell apart runs of the same name.
func runLabels(runs []*rundir.Run) []string {
	labels := make([]string, len(runs))
	count := map[string]int{}
	for i, r := range runs {
		labels[i] = strings.TrimSpace(r.Name)
		if labels[i] == "" {
			labels[i] = algorithmSeed(r)
		}
		if labels[i] == "" {
			labels[i] = fmt.Sprintf("run %d", i+1)
		}
		count[labels[i]]++
	}
	for i, r := range runs {
		if count[labels[i]] > 1 {
			if alt := algorithmSeed(r); alt != "" {
				labels[i] = alt
			}
		}
	}
	seen := map[string]int{}
	for i := range labels {
		seen[labels[i]]++
		if n := seen[labels[i]]; n > 1 {
			labels[i] = fmt.Sprintf("%s (%d)", labels[i], n)
		}
	}
	return labels
}

func algorithmSeed(r *rundir.Run) string {
	switch {
	case r.Algorithm != "" && r.Seed != "":
		return r.Algorithm + " seed " + r.Seed
	case r.Algorithm != "":
		return r.Algorithm
	case r.Seed != "":
		return "seed " + r.Seed
	}
	return ""
}

// palette is Tableau's ten colors, the default of matplotlib.
var palette = []color.NRGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x7f, 0x7f, 0x7f, 0xff},
}

// shades vary a color for the runs that share it.
var shades = []float64{0, -0.35, 0.4, -0.6, 0.6}

// runColors gives each run a color. When the runs repeat algorithms (several
// seeds each), an algorithm has one hue and its runs shades of it.
func runColors(runs []*rundir.Run) []color.NRGBA {
	group := make([]int, len(runs)) // hue
	within := make([]int, len(runs))
	var algos []string
	byAlgo := true
	for _, r := range runs {
		if r.Algorithm == "" {
			byAlgo = false
		}
		if !slices.Contains(algos, r.Algorithm) {
			algos = append(algos, r.Algorithm)
		}
	}
	byAlgo = byAlgo && len(algos) < len(runs)
	n := map[int]int{}
	for i, r := range runs {
		if byAlgo {
			group[i] = slices.Index(algos, r.Algorithm)
		} else {
			group[i] = i
		}
		within[i] = n[group[i]]
		n[group[i]]++
	}
	out := make([]color.NRGBA, len(runs))
	for i := range runs {
		g := group[i]
		k := within[i] + g/len(palette)*2 // beyond ten hues, shade them
		out[i] = shade(palette[g%len(palette)], shades[k%len(shades)])
	}
	return out
}

// shade mixes c toward white (f > 0) or black (f < 0).
func shade(c color.NRGBA, f float64) color.NRGBA {
	mix := func(v uint8) uint8 {
		x := float64(v)
		if f > 0 {
			x += (255 - x) * f
		} else {
			x *= 1 + f
		}
		return uint8(math.Round(x))
	}
	return color.NRGBA{mix(c.R), mix(c.G), mix(c.B), c.A}
}

func cssColor(c color.NRGBA) template.CSS {
	return template.CSS(fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B))
}

// page is what the template shows.
type page struct {
	Title, Subtitle string
	Runs            []runView
	ShowAlgorithm   bool
	ShowSeed        bool
	ShowModel       bool
	Charts          []chart
	MoreCharts      []chart  // of the metrics beyond the fixed charts
	Seeds           *grid    // rows across seeds, when some row has several runs
	Choices         []string // where each run's final numbers and choices come from
	Samples         []runSamples
	Warnings        []string
	Generated       string
}

// runSamples is a run's last samples of each title.
type runSamples struct {
	Label, Path string
	Color       template.CSS
	Groups      []sampleGroup
}

type sampleGroup struct {
	Title, Note string
	Entries     []sampleEntry
}

type sampleEntry struct {
	Step, Text, Cut string
}

// The samples shown: the last few of each title, each cut to a length.
const (
	samplesShown = 3
	sampleRunes  = 4000
)

type runView struct {
	Label, Dir              string
	Color                   template.CSS
	Algorithm, Seed, Model  string
	Steps                   string
	Final, FinalCI, FinalAt string
	Best, BestCI, BestAt    string
	Before, After, Delta    string
	DeltaClass, ChangeAt    string
	StepTime                string
	Split                   []share
	TokensPerSec            string
	Config                  string
	// Machines are the run's starts, each with what it computed with.
	Machines []string
}

type share struct {
	Name, Pct string
	Style     template.CSS
}

const dash = "—"

func newPage(ss []series, charts []chart) *page {
	p := &page{Charts: charts, Generated: time.Now().Format("2006-01-02 15:04")}
	models := map[string]bool{}
	for _, s := range ss {
		r := s.run
		p.ShowAlgorithm = p.ShowAlgorithm || r.Algorithm != ""
		p.ShowSeed = p.ShowSeed || r.Seed != ""
		models[r.Model] = true
		v := runView{Label: s.label, Dir: r.Dir, Color: cssColor(s.color), Algorithm: r.Algorithm, Seed: r.Seed, Model: r.Model, Config: r.Config}
		for _, m := range r.Machines {
			line := fmt.Sprintf("from step %d: %s, %d threads", m.Step, m.Engine(), m.Threads)
			if m.Revision != "" {
				line += ", rlvr " + m.Revision
			}
			v.Machines = append(v.Machines, line)
		}
		v.Steps = dash
		if n := len(r.Steps); n > 0 {
			v.Steps = strconv.Itoa(r.Steps[n-1].Step)
		}
		v.fillEval(r)
		v.fillTime(r)
		if xs, ys := r.Series(rundir.MetricTokensPerSec); len(xs) > 0 {
			v.TokensPerSec = formatCount(mean(ys))
		} else {
			v.TokensPerSec = dash
		}
		p.Runs = append(p.Runs, v)
		if w := WhereChosen(r); w != "" {
			p.Choices = append(p.Choices, s.label+": "+w+".")
		}
		for _, w := range r.Warnings {
			p.Warnings = append(p.Warnings, s.label+": "+w)
		}
	}
	p.ShowModel = len(models) > 1

	switch first := ss[0].run; {
	case len(ss) == 1:
		p.Title = "Training report: " + ss[0].label
		var parts []string
		if first.Algorithm != "" {
			parts = append(parts, "algorithm "+first.Algorithm)
		}
		if first.Seed != "" {
			parts = append(parts, "seed "+first.Seed)
		}
		if first.Model != "" {
			parts = append(parts, "model "+first.Model)
		}
		p.Subtitle = strings.Join(parts, " · ")
		p.ShowAlgorithm, p.ShowSeed = false, false
	default:
		p.Title = fmt.Sprintf("Training report: %d runs", len(ss))
		var algos []string
		for _, s := range ss {
			if a := s.run.Algorithm; a != "" && !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
		var parts []string
		if len(algos) > 0 {
			parts = append(parts, strings.Join(algos, " vs "))
		}
		if !p.ShowModel && first.Model != "" {
			parts = append(parts, "model "+first.Model)
		}
		p.Subtitle = strings.Join(parts, " · ")
	}
	if len(ss) == 1 && p.Subtitle == "" {
		p.Subtitle = ss[0].run.Dir
	}
	for _, s := range ss {
		if v, ok := newRunSamples(s); ok {
			p.Samples = append(p.Samples, v)
		}
	}
	return p
}

// newRunSamples gathers the last samplesShown samples of each title of a
// run, titles in the order they first appear; false when it has none.
func newRunSamples(s series) (runSamples, bool) {
	r := s.run
	if len(r.Samples) == 0 {
		return runSamples{}, false
	}
	v := runSamples{Label: s.label, Path: filepath.Join(r.Dir, rundir.SamplesFile), Color: cssColor(s.color)}
	var titles []string
	byTitle := map[string][]rundir.Sample{}
	for _, x := range r.Samples {
		if _, ok := byTitle[x.Title]; !ok {
			titles = append(titles, x.Title)
		}
		byTitle[x.Title] = append(byTitle[x.Title], x)
	}
	for _, t := range titles {
		all := byTitle[t]
		g := sampleGroup{Title: t}
		if g.Title == "" {
			g.Title = "(untitled)"
		}
		shown := all[max(len(all)-samplesShown, 0):]
		if len(all) > len(shown) {
			g.Note = fmt.Sprintf("the last %d of %d", len(shown), len(all))
		}
		for _, x := range shown {
			e := sampleEntry{Text: x.Text}
			if x.Step >= 0 {
				e.Step = "step " + strconv.Itoa(x.Step)
			}
			if runes := []rune(x.Text); len(runes) > sampleRunes {
				e.Text = string(runes[:sampleRunes])
				e.Cut = fmt.Sprintf("… %d more characters", len(runes)-sampleRunes)
			}
			g.Entries = append(g.Entries, e)
		}
		v.Groups = append(v.Groups, g)
	}
	return v, true
}

// fillEval summarizes the evaluations of the split evaluated last.
func (v *runView) fillEval(r *rundir.Run) {
	v.Final, v.Best, v.Before, v.After = dash, dash, dash, dash
	var split string
	var evals []rundir.Eval
	for i := len(r.Evals) - 1; i >= 0; i-- {
		if !math.IsNaN(r.Evals[i].Greedy) {
			split = r.Evals[i].Split
			break
		}
	}
	for _, e := range r.Evals {
		if e.Split == split && !math.IsNaN(e.Greedy) {
			evals = append(evals, e)
		}
	}
	if len(evals) > 0 {
		slices.SortStableFunc(evals, func(a, b rundir.Eval) int { return a.Step - b.Step })
		final, best := evals[len(evals)-1], evals[0]
		for _, e := range evals {
			if e.Greedy > best.Greedy {
				best = e
			}
		}
		v.Final, v.FinalCI, v.FinalAt = percent(final.Greedy), interval(final), where(final)
		v.Best, v.BestCI, v.BestAt = percent(best.Greedy), interval(best), where(best)
	}
	// Before and after: the evaluations of the starting model (step 0)
	// and the last.
	var before, after *rundir.Eval
	if len(evals) > 1 && evals[0].Step == 0 {
		before, after = &evals[0], &evals[len(evals)-1]
		v.ChangeAt = fmt.Sprintf("%s, step 0 → %d", rundir.EvalFile, after.Step)
	}
	if after != nil {
		v.After = percent(after.Greedy)
	}
	if before != nil && after != nil && !math.IsNaN(before.Greedy) {
		v.Before = percent(before.Greedy)
		d := (after.Greedy - before.Greedy) * 100
		v.Delta = fmt.Sprintf("%+.1f pp", d)
		switch {
		case d > 0:
			v.DeltaClass = "up"
		case d < 0:
			v.DeltaClass = "down"
		}
	}
}

// fillTime summarizes the time a step takes and how it splits.
func (v *runView) fillTime(r *rundir.Run) {
	v.StepTime = dash
	var sums [3]float64
	var counted int
	for _, st := range r.Steps {
		timed := false
		for j, t := range timeKeys {
			if x, ok := st.Values[t.key]; ok {
				sums[j] += x
				timed = true
			}
		}
		if timed {
			counted++
		}
	}
	_, steps := r.Series(rundir.MetricStepSeconds)
	total := 0.0
	switch {
	case len(steps) > 0:
		total = mean(steps)
	case counted > 0:
		total = (sums[0] + sums[1] + sums[2]) / float64(counted)
	default:
		return
	}
	v.StepTime = formatSeconds(total)
	if counted == 0 || total <= 0 {
		return
	}
	rest := 1.0
	for j, t := range timeKeys {
		f := sums[j] / float64(counted) / total
		rest -= f
		v.Split = append(v.Split, newShare(t.label, f, t.color))
	}
	if rest > 0.005 {
		v.Split = append(v.Split, newShare("other", rest, color.NRGBA{0xbb, 0xbb, 0xbb, 0xff}))
	}
}

func newShare(name string, f float64, c color.NRGBA) share {
	f = math.Min(math.Max(f, 0), 1)
	return share{Name: name, Pct: fmt.Sprintf("%.0f%%", f*100),
		Style: template.CSS(fmt.Sprintf("width:%.2f%%;background:%s", f*100, cssColor(c)))}
}

// mean is the mean of xs, NaN when there are none.
func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// median is the middle of xs (the mean of the two middle values for an
// even count), NaN for none; xs is left as it is.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percent writes a fraction as a percentage, or a dash for NaN.
func percent(f float64) string {
	if math.IsNaN(f) {
		return dash
	}
	return fmt.Sprintf("%.1f%%", f*100)
}

// interval writes an evaluation's 95% interval, or nothing.
func interval(e rundir.Eval) string {
	if math.IsNaN(e.GreedyLow) || math.IsNaN(e.GreedyHigh) {
		return ""
	}
	return fmt.Sprintf("%.1f–%.1f%%", e.GreedyLow*100, e.GreedyHigh*100)
}

func where(e rundir.Eval) string {
	var parts []string
	if e.Split != "" {
		parts = append(parts, e.Split)
	}
	if e.Step >= 0 {
		parts = append(parts, "step "+strconv.Itoa(e.Step))
	}
	return strings.Join(parts, ", ")
}

func formatSeconds(s float64) string {
	switch a := math.Abs(s); {
	case a < 10:
		return fmt.Sprintf("%.2f s", s)
	case a < 100:
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}

// formatCount writes a rate with thousands separators.
func formatCount(f float64) string {
	if math.Abs(f) < 100 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	s := strconv.FormatFloat(math.Abs(math.Round(f)), 'f', 0, 64)
	var b strings.Builder
	if f < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(",")
		}
		b.WriteRune(c)
	}
	return b.String()
}

//go:embed report.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New(HTMLFile).Parse(pageSource))
