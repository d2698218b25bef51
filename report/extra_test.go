package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"rlvr/rundir"
)

// writeMetrics writes metrics.jsonl with a record per step from 1 to steps,
// each made by rec.
func writeMetrics(t *testing.T, dir string, steps int, rec func(step int, rng *rand.Rand) map[string]any) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(steps), 3))
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for step := 1; step <= steps; step++ {
		r := rec(step, rng)
		r["step"] = step
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, rundir.MetricsFile), b.String())
}

// methodRun is a run of a method that logs metrics of its own beside a
// few fixed ones, with text, lists and objects among them.
func methodRun(step int, rng *rand.Rand) map[string]any {
	p := float64(step) / 40
	r := map[string]any{
		"reward_mean":               0.3 + 0.3*p + 0.05*rng.NormFloat64(),
		"grad_norm":                 0.8 + 0.2*rng.Float64(),
		"step_s":                    2 + 0.2*rng.Float64(),
		"time_rollout_s":            1.2,
		"loss/pg":                   -0.05 + 0.02*rng.NormFloat64(),
		"loss/kl":                   0.01 * p,
		"data/skipped_long_prompts": rng.IntN(4),
		"data/epoch":                step / 15,
		"mutual/fired":              rng.IntN(3) == 0,
		"consult/call_rate":         0.2 + 0.1*rng.Float64(),
		"skipped_update":            step%9 == 0,
		"resampled":                 rng.IntN(3),
		"phase":                     "rl",
		"histogram":                 []any{1, 2, 3},
		"detail":                    map[string]any{"a": 1},
		"consult/a_metric_with_a_name_far_too_long_to_fit_on_its_panel_whatever_the_layout": rng.Float64(),
	}
	for e := 1; e <= 6; e++ {
		r[fmt.Sprintf("expert/E%d/accuracy", e)] = math.Min(1, 0.2+0.1*float64(e)*p+0.05*rng.Float64())
		r[fmt.Sprintf("expert/E%d/zero_variance_frac", e)] = 0.4 - 0.2*p + 0.05*rng.Float64()
	}
	return r
}

// melRun logs another set of metrics, sharing only loss/pg with methodRun.
func melRun(step int, rng *rand.Rand) map[string]any {
	p := float64(step) / 40
	return map[string]any{
		"reward_mean": 0.25 + 0.4*p + 0.05*rng.NormFloat64(),
		"step_s":      3 + 0.3*rng.Float64(),
		"loss/pg":     -0.03 + 0.02*rng.NormFloat64(),
		"loss/nll":    2.5 - p + 0.1*rng.NormFloat64(),
		"mel/pairs":   rng.IntN(20),
		"buffer/fill": math.Min(1, 0.05*float64(step)),
	}
}

// sftRun logs only what supervised fine-tuning has.
func sftRun(step int, rng *rand.Rand) map[string]any {
	return map[string]any{
		"loss/nll":  3/math.Sqrt(float64(step)) + 0.05*rng.Float64(),
		"grad_norm": 1 + 0.3*rng.Float64(),
		"lr":        1e-5,
		"step_s":    0.4 + 0.05*rng.Float64(),
	}
}

func loadRuns(t *testing.T, dirs ...string) []*rundir.Run {
	t.Helper()
	var runs []*rundir.Run
	for _, d := range dirs {
		r, err := Load(d)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

func seriesOf(runs []*rundir.Run) []series {
	ss := make([]series, len(runs))
	for i, r := range runs {
		ss[i] = series{run: r, label: r.Name, color: palette[i]}
	}
	return ss
}

func TestExtraCharts(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, b := filepath.Join(root, "method"), filepath.Join(root, "mel")
	writeMetrics(t, a, 40, methodRun)
	writeMetrics(t, b, 40, melRun)
	runs := loadRuns(t, a, b)
	if len(runs[0].Warnings) != 0 {
		t.Errorf("text, lists and objects in metrics.jsonl gave warnings: %q", runs[0].Warnings)
	}
	ss := seriesOf(runs)

	type fig struct {
		file, title string
		cols        int
		wide        bool
		keys        []string
	}
	var got []fig
	for _, mc := range extraCharts(ss, extraKeys(ss)) {
		f := fig{file: mc.file, title: mc.title, cols: mc.cols, wide: mc.wide}
		for _, p := range mc.panels {
			f.keys = append(f.keys, p.lines[0].key)
		}
		got = append(got, f)
	}
	experts := func(from, to int) []string {
		var ks []string
		for e := from; e <= to; e++ {
			ks = append(ks, fmt.Sprintf("expert/E%d/accuracy", e), fmt.Sprintf("expert/E%d/zero_variance_frac", e))
		}
		return ks
	}
	want := []fig{
		{"metrics_buffer.png", "Experience buffer", 1, false, []string{"buffer/fill"}},
		{"metrics_consult.png", "Consultation", 1, false, []string{"consult/a_metric_with_a_name_far_too_long_to_fit_on_its_panel_whatever_the_layout", "consult/call_rate"}},
		{"metrics_data.png", "Data", 1, false, []string{"data/epoch", "data/skipped_long_prompts"}},
		{"metrics_expert.png", "Experts (1 of 2)", 3, true, experts(1, 3)},
		{"metrics_expert_2.png", "Experts (2 of 2)", 3, true, experts(4, 6)},
		{"metrics_loss.png", "Loss terms", 3, true, []string{"loss/kl", "loss/nll", "loss/pg"}},
		{"metrics_mel.png", "MEL", 1, false, []string{"mel/pairs"}},
		{"metrics_mutual.png", "Mutual learning", 1, false, []string{"mutual/fired"}},
		// step_s: the mel run has no time split to show it in.
		{"metrics_other.png", "Other metrics", 3, true, []string{"resampled", "skipped_update", "step_s"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("extra charts:\n%v\nwant\n%v", got, want)
	}
	const absent = "A run that did not log a metric has no line"
	if c := extraCharts(ss, []string{"loss/nll"})[0].caption; !strings.Contains(c, absent) {
		t.Errorf("the caption of a metric one run lacks does not say so: %q", c)
	}
	if c := extraCharts(ss, []string{"loss/pg"})[0].caption; strings.Contains(c, absent) {
		t.Errorf("the caption of a metric every run logged says one lacks it: %q", c)
	}

	// A panel has a line for each run that logged its metric, with the
	// run's values, booleans as 0 and 1.
	for _, c := range []struct {
		key  string
		runs []int
		want []float64 // the first run's first values
	}{
		{"loss/pg", []int{0, 1}, nil},
		{"loss/nll", []int{1}, nil},
		{"expert/E3/accuracy", []int{0}, nil},
		{"step_s", []int{0, 1}, nil},
		{"skipped_update", []int{0}, []float64{0, 0, 0, 0, 0, 0, 0, 0, 1, 0}},
		{"data/epoch", []int{0}, []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"phase", nil, nil},
		{"histogram", nil, nil},
		{"detail", nil, nil},
		{"absent", nil, nil},
	} {
		lines := metricSeries(ss, c.key)
		var idx []int
		for _, l := range lines {
			idx = append(idx, l.run)
			wantX, wantY := ss[l.run].run.Series(c.key)
			if len(l.xs) != 40 || !slices.Equal(l.xs, wantX) || !slices.Equal(l.ys, wantY) {
				t.Errorf("%s, run %d: %d points, want the run's 40", c.key, l.run, len(l.xs))
			}
		}
		if !slices.Equal(idx, c.runs) {
			t.Errorf("%s: lines of runs %v, want %v", c.key, idx, c.runs)
		}
		if c.want != nil && len(lines) > 0 && !slices.Equal(lines[0].ys[:len(c.want)], c.want) {
			t.Errorf("%s: values %v, want %v…", c.key, lines[0].ys[:len(c.want)], c.want)
		}
	}

	// Fractions in [0, 1] read as percentages.
	for _, c := range []struct {
		key     string
		percent bool
	}{
		{"expert/E1/accuracy", true},
		{"expert/E1/zero_variance_frac", true},
		{"buffer/fill", false},
		{"consult/call_rate", false},
	} {
		if p := extraPanel(ss, c.key); (p.format == percentTicks) != c.percent {
			t.Errorf("%s: percent ticks %v, want %v", c.key, p.format == percentTicks, c.percent)
		}
	}

	out := filepath.Join(root, "out")
	if err := Render(out, runs...); err != nil {
		t.Fatal(err)
	}
	page := readPage(t, out)
	more := strings.Index(page, "<h2>More metrics</h2>")
	if more < 0 || more < strings.LastIndex(page, `src="reward.png"`) {
		t.Fatal("report.html lacks the More metrics section after the fixed charts")
	}
	for _, f := range want {
		if !strings.Contains(page[more:], `src="`+f.file+`"`) {
			t.Errorf("More metrics does not show %s", f.file)
		}
		checkPNG(t, filepath.Join(out, f.file))
	}
	for _, f := range []string{"reward.png", "grad_norm.png", "time_split.png"} {
		if i := strings.Index(page, `src="`+f+`"`); i < 0 || i > more {
			t.Errorf("report.html does not show %s among the fixed charts", f)
		}
	}
	if strings.Contains(page, "metrics_phase") || strings.Contains(page, "metrics_detail") || strings.Contains(page, "Warnings") {
		t.Error("report.html charts or warns about metrics that are not numbers")
	}
}

func readPage(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExtraChartLayout(t *testing.T) {
	for _, c := range []struct {
		keys  int
		sizes []int // panels of each figure
		cols  []int
	}{
		{1, []int{1}, []int{1}},
		{2, []int{2}, []int{1}},
		{3, []int{3}, []int{3}},
		{4, []int{4}, []int{2}},
		{9, []int{9}, []int{3}},
		{10, []int{5, 5}, []int{3, 3}},
		{19, []int{7, 6, 6}, []int{3, 3, 3}},
	} {
		var keys []string
		for i := range c.keys {
			keys = append(keys, fmt.Sprintf("g/k%d", i))
		}
		slices.SortFunc(keys, naturalCompare)
		var sizes, cols []int
		var all []string
		for _, mc := range extraCharts(nil, keys) {
			sizes, cols = append(sizes, len(mc.panels)), append(cols, mc.cols)
			for _, p := range mc.panels {
				all = append(all, p.title)
			}
		}
		if !slices.Equal(sizes, c.sizes) || !slices.Equal(cols, c.cols) || !slices.Equal(all, keys) {
			t.Errorf("%d keys: figures of %v panels in %v columns holding %v, want %v in %v", c.keys, sizes, cols, all, c.sizes, c.cols)
		}
	}
}

func TestExtraNames(t *testing.T) {
	keys := []string{"loss/pg", "expert/E10/accuracy", "b", "expert/E2/accuracy", "expert/E01/accuracy", "expert/E1/accuracy", "a10", "a9", "/x", "Zeta/y"}
	slices.SortFunc(keys, naturalCompare)
	if got := fmt.Sprint(keys); got != "[/x Zeta/y a9 a10 b expert/E01/accuracy expert/E1/accuracy expert/E2/accuracy expert/E10/accuracy loss/pg]" {
		t.Errorf("natural order %s", got)
	}
	for _, c := range []struct{ key, group, title string }{
		{"loss/pg", "loss", "Loss terms"},
		{"expert/E1/accuracy", "expert", "Experts"},
		{"kl_to_ref", otherGroup, "Other metrics"},
		{"/x", otherGroup, "Other metrics"},
		{"policy_stats/x", "policy_stats", "Policy stats"},
		{"été/x", "été", "Été"},
	} {
		if g := metricGroup(c.key); g != c.group || groupTitle(g) != c.title {
			t.Errorf("%s: group %q titled %q, want %q titled %q", c.key, g, groupTitle(g), c.group, c.title)
		}
	}
	// fitText keeps what fits, else as much of both ends as fits.
	sty := sans(11.5, true, inkColor)
	long := "expert/E1/zero_variance_frac"
	for _, c := range []struct {
		s     string
		width vg.Length
		cut   bool
	}{
		{"loss/pg", 200, false},
		{long, sty.Width(long), false},
		{long, sty.Width(long) - 1, true},
		{long, sty.Width("expert/…_frac"), true},
		{long, 1, true},
		{"", 0, false},
	} {
		got := fitText(sty, c.s, c.width)
		if !c.cut {
			if got != c.s {
				t.Errorf("fitText(%q, %v) = %q, want it whole", c.s, c.width, got)
			}
			continue
		}
		front, back, ok := strings.Cut(got, "…")
		more := func(k int) string { // with k more runes kept
			r := []rune(c.s)
			n := len([]rune(front)) + len([]rune(back)) + k
			return string(r[:(n+1)/2]) + "…" + string(r[len(r)-n/2:])
		}
		if !ok || !strings.HasPrefix(c.s, front) || !strings.HasSuffix(c.s, back) || len(front)-len(back) > 1 || len(back) > len(front) {
			t.Errorf("fitText(%q, %v) = %q, want its ends around an ellipsis", c.s, c.width, got)
		}
		if w := sty.Width(got); w > c.width && got != "…" || sty.Width(more(1)) <= c.width {
			t.Errorf("fitText(%q, %v) = %q, %v wide: want the longest that fits", c.s, c.width, got, w)
		}
	}
}

func TestRenderSFTRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "sft")
	writeMetrics(t, dir, 30, sftRun)
	runs := loadRuns(t, dir)
	if err := Render(dir, runs...); err != nil {
		t.Fatal(err)
	}
	page := readPage(t, dir)
	if strings.Contains(page, "NaN") || strings.Contains(page, "Inf") {
		t.Error("report.html shows NaN or Inf")
	}
	// Steps, then the evaluations and tokens/s it lacks, then its step time.
	if !strings.Contains(page, `<td class="num">30</td>
<td class="num">—</td>
<td class="num">—</td>
<td class="num">—</td>
<td class="num">0.4`) {
		t.Error("the summary does not show 30 steps, dashes for the evaluations and the step time")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
		if strings.HasSuffix(e.Name(), ".png") {
			checkPNG(t, filepath.Join(dir, e.Name()))
			if !strings.Contains(page, `src="`+e.Name()+`"`) {
				t.Errorf("report.html does not show %s", e.Name())
			}
		}
	}
	// No chart without data: grad_norm.png has the gradient norm and the
	// learning rate, the rest are the run's own metrics, step_s among them.
	if want := "[grad_norm.png metrics.jsonl metrics_loss.png metrics_other.png report.html]"; fmt.Sprint(files) != want {
		t.Errorf("the run directory holds %v, want %s", files, want)
	}
	ss := seriesOf(runs)
	if got := fmt.Sprint(extraKeys(ss)); got != "[loss/nll step_s]" {
		t.Errorf("extra keys %s, want [loss/nll step_s]", got)
	}
}

func TestRenderDisjointRuns(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, b, c := filepath.Join(root, "sft"), filepath.Join(root, "mel"), filepath.Join(root, "grpo")
	writeMetrics(t, a, 20, sftRun)
	writeMetrics(t, b, 30, melRun)
	writeRun(t, c, synth{algorithm: "grpo", seed: 1, steps: 25, evalEvery: 5, config: true})
	runs := loadRuns(t, a, b, c)
	out := filepath.Join(root, "out")
	if err := Render(out, runs...); err != nil {
		t.Fatal(err)
	}
	page := readPage(t, out)
	if strings.Contains(page, "NaN") {
		t.Error("report.html shows NaN")
	}
	ss := seriesOf(runs)
	for _, c := range []struct {
		key  string
		runs []int
	}{
		{"loss/nll", []int{0, 1}},
		{"mel/pairs", []int{1}},
		{"resampled", []int{2}},
		{"step_s", []int{0, 1, 2}},
	} {
		var idx []int
		for _, l := range metricSeries(ss, c.key) {
			idx = append(idx, l.run)
		}
		if !slices.Equal(idx, c.runs) {
			t.Errorf("%s: lines of runs %v, want %v", c.key, idx, c.runs)
		}
	}
	for _, f := range append(standardCharts, "metrics_buffer.png", "metrics_loss.png", "metrics_mel.png", "metrics_other.png") {
		if !strings.Contains(page, `src="`+f+`"`) {
			t.Errorf("report.html does not show %s", f)
		}
		checkPNG(t, filepath.Join(out, f))
	}
}

func TestSamples(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	writeMetrics(t, dir, 5, sftRun)
	var lines []string
	for i := 1; i <= 5; i++ {
		lines = append(lines, fmt.Sprintf(`{"step":%d,"title":"validated meta-experience","text":"experience %d: <b>keep</b> & check\nsecond line"}`, 10*i, i))
	}
	lines = append(lines,
		`{"step":3,"title":"answer","text":"`+strings.Repeat("x", sampleRunes+7)+`"}`,
		`{"text":"no step, no title"}`,
		`{"step":4,"title":"answer","text":`, // malformed: skipped
	)
	path := filepath.Join(dir, rundir.SamplesFile)
	writeFile(t, path, strings.Join(lines, "\n")+"\n")
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) != 7 {
		t.Errorf("loaded %d samples, want 7", len(r.Samples))
	}

	out := filepath.Join(root, "out")
	if err := Render(out, r); err != nil {
		t.Fatal(err)
	}
	page := readPage(t, out)
	samples := strings.Index(page, "<h2>Samples</h2>")
	if samples < 0 || samples > strings.Index(page, "<h2>Configs</h2>") {
		t.Fatal("report.html lacks the Samples section before the configs")
	}
	for _, w := range []string{
		"validated meta-experience", "the last 3 of 5", "step 50",
		"experience 5: &lt;b&gt;keep&lt;/b&gt; &amp; check\nsecond line",
		"experience 3:", "answer", "… 7 more characters", "(untitled)", "no step, no title",
	} {
		if !strings.Contains(page[samples:], w) {
			t.Errorf("the samples lack %q", w)
		}
	}
	if strings.Contains(page, "experience 2:") || strings.Contains(page, "<b>keep") {
		t.Error("report.html shows a sample beyond the last 3, or one unescaped")
	}

	// No samples.jsonl, no section.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if r, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if err := Render(out, r); err != nil {
		t.Fatal(err)
	}
	if page := readPage(t, out); strings.Contains(page, "<h2>Samples</h2>") {
		t.Error("report.html has a Samples section without samples.jsonl")
	}
}
