package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"rlvr/internal/atomicfile"
	"rlvr/internal/stats"
	"rlvr/report"
	"rlvr/rundir"
	"rlvr/scripts/peers/docblock"
)

func tableCmd(args []string) error {
	fs := flag.NewFlagSet("table", flag.ExitOnError)
	out := fs.String("out", "runs/peers/trl", "the folder run wrote")
	doc := fs.String("doc", "docs/peers.md", "the page whose trl blocks are rewritten")
	blocks := fs.String("blocks", "trl", "the prefix of the doc's blocks the tables go to (PREFIX-timing, …)")
	fs.Parse(args)
	return table(*out, *doc, *blocks)
}

// finished is a run with its record and its per-step metrics.
type finished struct {
	rec runRecord
	run *rundir.Run
}

// table writes the trl blocks of doc, reward.svg and report/ from the runs
// under out.
func table(out, doc, blocks string) error {
	var s settings
	if err := readJSON(filepath.Join(out, "settings.json"), &s); err != nil {
		return err
	}
	recs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "run.json"))
	if len(recs) == 0 {
		return fmt.Errorf("%s: no finished run", out)
	}
	byKey := map[string][]finished{} // engine/loss → runs, by seed
	var all []*rundir.Run
	for _, path := range recs {
		var f finished
		if err := readJSON(path, &f.rec); err != nil {
			return err
		}
		r, err := report.Load(filepath.Dir(path))
		if err != nil {
			return err
		}
		f.run = r
		all = append(all, r)
		k := f.rec.Engine + "/" + f.rec.Loss
		byKey[k] = append(byKey[k], f)
	}
	for _, fs := range byKey {
		slices.SortFunc(fs, func(a, b finished) int { return a.rec.Seed - b.rec.Seed })
	}
	timing, reward := timingTable(&s, byKey), rewardTable(&s, byKey)
	acc := "Held-out accuracy: not scored yet (`TRL_PHASE=score scripts/peers.sh trl`).\n"
	start, err := greedyByID(filepath.Join(out, "start.samples.jsonl"))
	switch {
	case err == nil:
		acc = accuracyTable(&s, byKey, start)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	agree, err := agreementTable(&s, byKey)
	if err != nil {
		return err
	}
	if err := rewardPlot(filepath.Join(out, "reward.svg"), &s, byKey); err != nil {
		return err
	}
	if err := report.Render(filepath.Join(out, "report"), all...); err != nil {
		return err
	}
	return docblock.Replace(doc, map[string]string{blocks + "-timing": timing, blocks + "-accuracy": acc, blocks + "-reward": reward, blocks + "-agreement": agree})
}

// medianOf is the median of a metric over the steps of runs, the first
// step (warm-up) left out when there are others.
func medianOf(runs []finished, value func(rundir.Step) (float64, bool)) float64 {
	return medianWhere(runs, func(finished, rundir.Step) bool { return true }, value)
}

// medianWhere is medianOf over the steps that keep selects.
func medianWhere(runs []finished, keep func(finished, rundir.Step) bool, value func(rundir.Step) (float64, bool)) float64 {
	var xs []float64
	for _, f := range runs {
		for i, st := range f.run.Steps {
			if i == 0 && len(f.run.Steps) > 1 || !keep(f, st) {
				continue
			}
			if v, ok := value(st); ok && !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

func metric(key string) func(rundir.Step) (float64, bool) {
	return func(st rundir.Step) (float64, bool) { return st.Value(key) }
}

// rolloutTokensPerSec is the tokens a step generated over its rollout time:
// TRL counts them (tokens_generated); rlvr's are its mean response length
// times the answers of a step.
func rolloutTokensPerSec(answers int) func(rundir.Step) (float64, bool) {
	return func(st rundir.Step) (float64, bool) {
		t, ok := st.Value("time_rollout_s")
		if !ok || t <= 0 {
			return 0, false
		}
		if n, ok := st.Value("tokens_generated"); ok {
			return n / t, true
		}
		l, ok := st.Value("response_len_mean")
		return l * float64(answers) / t, ok
	}
}

func timingTable(s *settings, byKey map[string][]finished) string {
	var b strings.Builder
	b.WriteString("| loss | trainer | runs | steps without signal | step s | step s (steps that updated) | rollout s | verify s | learn s (steps that updated) | rollout tokens/s | peak RSS MiB |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, loss := range s.Losses {
		var row [2][7]float64
		for ei, engine := range engines {
			runs := byKey[engine+"/"+loss]
			if len(runs) == 0 {
				continue
			}
			var rss []float64
			for _, f := range runs {
				rss = append(rss, float64(f.rec.PeakRSS)/(1<<20))
			}
			slices.Sort(rss)
			row[ei] = [7]float64{medianOf(runs, metric("step_s")), medianWhere(runs, updated, metric("step_s")), medianOf(runs, metric("time_rollout_s")), medianOf(runs, metric("time_verify_s")),
				medianWhere(runs, updated, metric("time_learn_s")), medianOf(runs, rolloutTokensPerSec(s.PromptsPerStep*s.Group)), rss[len(rss)-1]}
			r := row[ei]
			fmt.Fprintf(&b, "| %s | %s | %d | %d of %d | %.2f | %.2f | %.2f | %.3f | %.2f | %.0f | %.0f |\n", loss, trainerName(engine), len(runs), noSignal(runs), steps(runs),
				r[0], r[1], r[2], r[3], r[4], r[5], r[6])
		}
		if len(byKey["rlvr/"+loss]) > 0 && len(byKey["trl/"+loss]) > 0 {
			fmt.Fprintf(&b, "| %s | rlvr / TRL |  |  |", loss)
			for i := range row[0] {
				fmt.Fprintf(&b, " %s |", ratio(row[0][i], row[1][i]))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// updated tells whether a step ran a learning pass. rlvr skips it when no
// group had both right and wrong answers (skipped_update); TRL runs forward
// and backward on a zero loss all the same, so learning times compare only
// over steps that updated.
func updated(f finished, st rundir.Step) bool {
	v, ok := st.Value("skipped_update")
	return !ok || v != 1
}

// noSignal counts the steps of runs whose rewards gave no signal: rlvr's
// skipped updates, and TRL's steps whose rewards were all equal (a lower
// bound, as TRL records the spread over the whole batch, not per group).
func noSignal(runs []finished) int {
	n := 0
	for _, f := range runs {
		for _, st := range f.run.Steps {
			rewardStd, _ := st.Value("reward_std")
			if !updated(f, st) || f.rec.Engine == "trl" && rewardStd == 0 {
				n++
			}
		}
	}
	return n
}

func steps(runs []finished) int {
	n := 0
	for _, f := range runs {
		n += len(f.run.Steps)
	}
	return n
}

func trainerName(engine string) string {
	if engine == "trl" {
		return "TRL"
	}
	return engine
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// accuracyTable is each trainer's held-out greedy accuracy before and
// after, pooled over seeds (every seed's run scored on the same problems),
// with the problems that changed from the starting model's answer.
func accuracyTable(s *settings, byKey map[string][]finished, start map[string]bool) string {
	startRight := 0
	for _, ok := range start {
		if ok {
			startRight++
		}
	}
	w := stats.WilsonInterval(startRight, len(start))
	var b strings.Builder
	fmt.Fprintf(&b, "Starting model: %s on %d problems.\n\n", w.Percent(), len(start))
	b.WriteString("| loss | trainer | runs | held-out after (95% Wilson, pooled over seeds) | wrong → right | right → wrong |\n")
	b.WriteString("| --- | --- | ---: | --- | ---: | ---: |\n")
	for _, loss := range s.Losses {
		for _, engine := range engines {
			runs := byKey[engine+"/"+loss]
			if len(runs) == 0 {
				continue
			}
			right, n, gained, lost, scored := 0, 0, 0, 0, 0
			for _, f := range runs {
				if f.rec.EvalFile == "" {
					continue // trained, not scored yet
				}
				scored++
				end, err := greedyByID(f.rec.EvalFile)
				if err != nil {
					fmt.Fprintf(os.Stderr, "trl: %v\n", err)
					continue
				}
				for id, ok := range end {
					n++
					if ok {
						right++
					}
					switch before, seen := start[id]; {
					case seen && ok && !before:
						gained++
					case seen && !ok && before:
						lost++
					}
				}
			}
			if scored == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %d |\n", loss, trainerName(engine), scored, stats.WilsonInterval(right, n).Percent(), gained, lost)
		}
	}
	return b.String()
}

// agreementTable is rlvr's learning minus TRL's for each loss type, paired
// by seed (a seed fixes the questions and their order for both trainers):
// the mean rollout reward over a run's steps, and the held-out greedy
// accuracy after training, the latter also paired by problem (every run is
// scored on the same problems). The per-problem interval counts the
// problems' spread only; the per-seed one, over few seeds, also the
// training's randomness.
func agreementTable(s *settings, byKey map[string][]finished) (string, error) {
	var b strings.Builder
	b.WriteString("| loss | seeds | mean reward, rlvr − TRL (by seed) | MDE | held-out after, rlvr − TRL (by seed) | MDE | held-out after, rlvr − TRL (by seed and problem) | MDE |\n")
	b.WriteString("| --- | ---: | --- | ---: | --- | ---: | --- | ---: |\n")
	for _, loss := range s.Losses {
		trl := map[int]finished{}
		for _, f := range byKey["trl/"+loss] {
			trl[f.rec.Seed] = f
		}
		var rewardDiffs, accDiffs, problemDiffs []float64
		var seeds []string
		for _, a := range byKey["rlvr/"+loss] {
			t, ok := trl[a.rec.Seed]
			if !ok {
				continue
			}
			seeds = append(seeds, fmt.Sprint(a.rec.Seed))
			rewardDiffs = append(rewardDiffs, meanReward(a)-meanReward(t))
			if a.rec.EvalFile == "" || t.rec.EvalFile == "" {
				continue
			}
			ra, err := greedyByID(a.rec.EvalFile)
			if err != nil {
				return "", err
			}
			rt, err := greedyByID(t.rec.EvalFile)
			if err != nil {
				return "", err
			}
			var seedDiffs []float64
			for id, okA := range ra {
				okT, seen := rt[id]
				if !seen {
					return "", fmt.Errorf("%s: problem %s is not in %s", a.rec.EvalFile, id, t.rec.EvalFile)
				}
				seedDiffs = append(seedDiffs, b2f(okA)-b2f(okT))
			}
			problemDiffs = append(problemDiffs, seedDiffs...)
			accDiffs = append(accDiffs, stats.MeanInterval(seedDiffs).Mean)
		}
		if len(seeds) == 0 {
			continue
		}
		rw, acc, prob := stats.MeanInterval(rewardDiffs), stats.MeanInterval(accDiffs), stats.MeanInterval(problemDiffs)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", loss, strings.Join(seeds, ","),
			signed(rw, 1, "%+.3f", ""), mde(rw, 1, "%.3f"), signed(acc, 100, "%+.1f", " pp"), mde(acc, 100, "%.1f pp"), signed(prob, 100, "%+.1f", " pp"), mde(prob, 100, "%.1f pp"))
	}
	return b.String(), nil
}

// meanReward is a run's mean rollout reward over its steps.
func meanReward(f finished) float64 {
	var sum float64
	n := 0
	for _, st := range f.run.Steps {
		if v, ok := st.Value("reward_mean"); ok && !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	return sum / float64(n)
}

func b2f(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// signed formats an interval's mean and bounds scaled by scale, then
// unit; "-" when there is none.
func signed(iv stats.Interval, scale float64, format, unit string) string {
	switch {
	case math.IsNaN(iv.Mean):
		return "-"
	case math.IsNaN(iv.Low):
		return fmt.Sprintf(format+unit, scale*iv.Mean)
	}
	return fmt.Sprintf(format+unit+" ["+format+", "+format+"]", scale*iv.Mean, scale*iv.Low, scale*iv.High)
}

// mde formats an interval's minimum detectable effect at 80% power.
func mde(iv stats.Interval, scale float64, format string) string {
	m := stats.MinDetectable(iv)
	if math.IsNaN(m) {
		return "-"
	}
	return fmt.Sprintf(format, scale*m)
}

// rewardCurve is a trainer's mean rollout reward per step with its 95%
// interval over seeds.
func rewardCurve(runs []finished, steps int) []stats.Interval {
	out := make([]stats.Interval, steps)
	for i := range steps {
		var xs []float64
		for _, f := range runs {
			if i < len(f.run.Steps) {
				if v, ok := f.run.Steps[i].Value("reward_mean"); ok {
					xs = append(xs, v)
				}
			}
		}
		out[i] = stats.MeanInterval(xs)
	}
	return out
}

func rewardTable(s *settings, byKey map[string][]finished) string {
	var b strings.Builder
	b.WriteString("| step |")
	var cols [][]stats.Interval
	for _, loss := range s.Losses {
		for _, engine := range engines {
			fmt.Fprintf(&b, " %s %s |", loss, trainerName(engine))
			cols = append(cols, rewardCurve(byKey[engine+"/"+loss], s.Steps))
		}
	}
	b.WriteString("\n| ---: |" + strings.Repeat(" ---: |", len(cols)) + "\n")
	for i := range s.Steps {
		fmt.Fprintf(&b, "| %d |", i+1)
		for _, c := range cols {
			switch v := c[i]; {
			case math.IsNaN(v.Mean):
				b.WriteString(" - |")
			case math.IsNaN(v.Low):
				fmt.Fprintf(&b, " %.3f |", v.Mean)
			default:
				fmt.Fprintf(&b, " %.3f ± %.3f |", v.Mean, (v.High-v.Low)/2)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// rewardPlot draws, per loss type, both trainers' mean reward per step with
// its 95% band over seeds.
func rewardPlot(path string, s *settings, byKey map[string][]finished) error {
	colors := map[string]color.NRGBA{"rlvr": {0x4c, 0x78, 0xa8, 0xff}, "trl": {0xe4, 0x57, 0x56, 0xff}}
	var row []*plot.Plot
	for _, loss := range s.Losses {
		p := plot.New()
		p.Title.Text = loss
		p.X.Label.Text = "step"
		p.Y.Label.Text = "mean reward"
		for _, engine := range engines {
			curve := rewardCurve(byKey[engine+"/"+loss], s.Steps)
			var line, lo, hi plotter.XYs
			for i, v := range curve {
				if math.IsNaN(v.Mean) {
					continue
				}
				line = append(line, plotter.XY{X: float64(i + 1), Y: v.Mean})
				if !math.IsNaN(v.Low) {
					lo = append(lo, plotter.XY{X: float64(i + 1), Y: v.Low})
					hi = append(hi, plotter.XY{X: float64(i + 1), Y: v.High})
				}
			}
			if len(line) == 0 {
				continue
			}
			c := colors[engine]
			if len(lo) > 1 {
				band := append(slices.Clone(lo), reversed(hi)...)
				poly, err := plotter.NewPolygon(band)
				if err != nil {
					return err
				}
				poly.Color = color.NRGBA{c.R, c.G, c.B, 0x40}
				poly.LineStyle.Width = 0
				p.Add(poly)
			}
			l, err := plotter.NewLine(line)
			if err != nil {
				return err
			}
			l.Color, l.Width = c, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(trainerName(engine), l)
		}
		p.Legend.Top = true
		row = append(row, p)
	}
	const w, h = 4 * vg.Inch, 3 * vg.Inch
	img := vgsvg.New(w*vg.Length(len(row)), h)
	canvases := plot.Align([][]*plot.Plot{row}, draw.Tiles{Rows: 1, Cols: len(row)}, draw.New(img))
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, buf.Bytes())
}

func reversed(xys plotter.XYs) plotter.XYs {
	out := slices.Clone(xys)
	slices.Reverse(out)
	return out
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}
