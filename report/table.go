package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"rlvr/internal/stats"
	"rlvr/rundir"
)

// The table of rows across seeds: the runs of one configuration, trained
// under several seeds, summarized in one row with 95% intervals over the
// seeds, as experiment write-ups report them.
//
// A run's numbers come from its final evaluation (see [FinalOf]): the
// test line of eval.jsonl that a run with a test split writes at its end,
//
//	{"step":200,"split":"test","greedy":0.1,"greedy_low":0.07,"greedy_high":0.14,"problems":200,
//	 "evaluators":{"expert_prompts":{"experts":{"E0":0.1,"E1":0.12,"E2":0.08},"expert_majority":0.11,
//	 "best_expert":"E1","best":0.12,"best_low":0.08,"best_high":0.17,"delta":-0.01}}}
//
// or, for a run without one, its last validation line. The evaluators'
// records on it are read through what their parts declare to rundir
// (rundir.EvalRecords): one that asked every problem under prompt
// variants (MEML-GRPO's expert prompts) gives the run's accuracy as that
// of the variant it chose, and the columns the parts declare show the
// rest. Its accuracy before training is the step-0 validation line's,
// under the same variant.

// Row is the runs of one configuration across seeds: the runs whose names
// are the same but for a seed suffix (see [RowName]).
type Row struct {
	Name string
	Runs []*rundir.Run // in the order given to Rows
}

// seedSuffix matches a name ending in a seed suffix: "-seed3", "_seed3",
// "-s3" or "_s3".
var seedSuffix = regexp.MustCompile(`^(.+?)[-_](?:seed|s)(\d+)$`)

// RowName returns a run's name without its trailing seed suffix ("-seed3",
// "_seed3", "-s3", "_s3"): the name of the row the run belongs to.
func RowName(name string) string {
	if m := seedSuffix.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return name
}

// Rows groups runs into rows by [RowName] of their names, the rows in the
// order their first runs appear.
func Rows(runs []*rundir.Run) []Row {
	var rows []Row
	at := map[string]int{}
	for _, r := range runs {
		name := RowName(r.Name)
		i, ok := at[name]
		if !ok {
			i = len(rows)
			at[name] = i
			rows = append(rows, Row{Name: name})
		}
		rows[i].Runs = append(rows[i].Runs, r)
	}
	return rows
}

// SeedOf returns the seed a run is paired by: config.yaml's seed, or
// failing that the number of its name's seed suffix; "" when neither.
func SeedOf(r *rundir.Run) string {
	if s := strings.TrimSpace(r.Seed); s != "" {
		return s
	}
	if m := seedSuffix.FindStringSubmatch(r.Name); m != nil {
		if n, err := strconv.Atoi(m[2]); err == nil {
			return strconv.Itoa(n)
		}
		return m[2]
	}
	return ""
}

// Final is the evaluation that a table reports for a run.
type Final struct {
	// Eval is the evaluation: the run's last test evaluation, or when it
	// has none its last validation evaluation (FromVal).
	Eval    rundir.Eval
	FromVal bool
	// Acc is the run's headline accuracy: that of the variant its
	// evaluation's records report it by when they asked under prompt
	// variants (the best expert), its greedy accuracy otherwise; Low and
	// High bound its 95% interval, NaN when unknown. On a test line the
	// variant is the one the record chose on the final validation
	// evaluation; on a line that names none, the one most accurate on the
	// last validation line, failing that on this one.
	Acc, Low, High float64
	// Variant names that variant, empty for a run without variants, and
	// Variants is each variant's accuracy on the line.
	Variant  string
	Variants map[string]float64
	// Outcomes is the per-problem record of Acc (rundir.Eval.Outcomes):
	// the line's own, or Variant's where the run is reported by a
	// variant, "" where its record kept none.
	Outcomes string
}

// FinalOf returns the evaluation that a table reports for the run, and
// false when it has none: the last test line of eval.jsonl; failing that,
// the last validation line (split "val", or none named), marked FromVal.
func FinalOf(r *rundir.Run) (Final, bool) {
	var test, val *rundir.Eval
	for i := range r.Evals {
		e := &r.Evals[i]
		switch e.Split {
		case "test":
			test = e
		case "val", "":
			val = e
		}
	}
	var f Final
	switch {
	case test != nil:
		f.Eval = *test
	case val != nil:
		f.Eval, f.FromVal = *val, true
	default:
		return Final{}, false
	}
	e := f.Eval
	f.Acc, f.Low, f.High = e.Greedy, e.GreedyLow, e.GreedyHigh
	v, _ := variantsOf(e)
	f.Variants = v.Variants
	switch {
	case v.Chosen != "":
		f.Acc, f.Low, f.High, f.Variant = v.Acc, v.Low, v.High, v.Chosen
	case len(v.Variants) > 0:
		// A line that names no variant: the one most accurate on the
		// last validation line, failing that on this one.
		f.Variant = bestVariant(v.Variants)
		if val != nil && !f.FromVal {
			if w, _ := variantsOf(*val); len(w.Variants) > 0 {
				if name := bestVariant(w.Variants); hasKey(v.Variants, name) {
					f.Variant = name
				}
			}
		}
		f.Acc, f.Low, f.High = v.Variants[f.Variant], math.NaN(), math.NaN()
	}
	if math.IsNaN(f.Acc) {
		return Final{}, false
	}
	f.Outcomes = e.Outcomes
	if f.Variant != "" {
		f.Outcomes = v.VariantOutcomes[f.Variant]
	}
	return f, true
}

// variantsOf reads the first of a line's records, in the order the parts
// declare them, that asked under prompt variants or names a chosen one,
// with the noun of its choice (rundir.EvalRecord.Choice); a zero Reading
// when none did.
func variantsOf(e rundir.Eval) (rundir.Reading, string) {
	for _, d := range rundir.EvalRecords() {
		raw, ok := e.Evaluators[d.Name]
		if !ok {
			continue
		}
		if r, err := d.Read(raw); err == nil && (len(r.Variants) > 0 || r.Chosen != "") {
			return r, d.Choice
		}
	}
	return rundir.Reading{}, ""
}

// valueOf is the value name of the records of part on a line, NaN when
// none has it.
func valueOf(e rundir.Eval, part, name string) float64 {
	for _, d := range rundir.EvalRecords() {
		raw, ok := e.Evaluators[d.Name]
		if d.Part != part || !ok {
			continue
		}
		if r, err := d.Read(raw); err == nil {
			if v, ok := r.Values[name]; ok {
				return v
			}
		}
	}
	return math.NaN()
}

// UnderExpert returns copies of the runs whose headline accuracy is that
// under the prompt variant named expert, rather than under the variant
// chosen on validation: a table of them compares every row under one
// prompt, as MEML-GRPO's Table 4 compares MEML-GRPO (Expert1) with
// Expert1-SFT-GRPO. Each line of a copy that has the variant has its
// records rewritten as if their evaluators had chosen it
// (rundir.EvalRecord.Choose) and no longer says where a choice was made.
// It is an error when a run's final evaluation has no such variant.
func UnderExpert(runs []*rundir.Run, expert string) ([]*rundir.Run, error) {
	out := make([]*rundir.Run, len(runs))
	for i, r := range runs {
		f, ok := FinalOf(r)
		if _, has := f.Variants[expert]; !ok || !has {
			return nil, fmt.Errorf("report: run %s has no final evaluation under expert %q (its experts: %q)", r.Name, expert, sortedNames(f.Variants))
		}
		c := *r
		c.Evals = slices.Clone(r.Evals)
		for j := range c.Evals {
			e := &c.Evals[j]
			chosen, err := choose(*e, expert)
			if err != nil {
				return nil, fmt.Errorf("report: run %s: %w", r.Name, err)
			}
			if chosen != nil {
				// The variant is named here, not chosen on validation.
				e.Evaluators, e.ChosenOn = chosen, ""
			}
		}
		out[i] = &c
	}
	return out, nil
}

// choose returns a line's records with the variant named chosen in each
// that has it, nil when none has.
func choose(e rundir.Eval, variant string) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	for _, d := range rundir.EvalRecords() {
		raw, ok := e.Evaluators[d.Name]
		if !ok || d.Choose == nil {
			continue
		}
		rec, ok, err := d.Choose(raw, variant, e)
		if err != nil {
			return nil, fmt.Errorf("%s record: %w", d.Name, err)
		}
		if !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(e.Evaluators)
		}
		out[d.Name] = rec
	}
	return out, nil
}

// orNaN is *p, or NaN for a field the record lacks.
func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// bestVariant returns the most accurate variant, the first in natural
// order of those tied.
func bestVariant(acc map[string]float64) string {
	names := sortedNames(acc)
	best := names[0]
	for _, n := range names[1:] {
		if acc[n] > acc[best] {
			best = n
		}
	}
	return best
}

// sortedNames are the keys of m in natural order.
func sortedNames(m map[string]float64) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.SortFunc(names, naturalCompare)
	return names
}

// valAccuracy returns the run's accuracy at the validation evaluation
// pick chooses among its validation lines, under variant (greedy when
// variant is empty or absent there); NaN when pick finds none.
func valAccuracy(r *rundir.Run, variant string, pick func(vals []rundir.Eval) *rundir.Eval) float64 {
	var vals []rundir.Eval
	for _, e := range r.Evals {
		if e.Split == "val" || e.Split == "" {
			vals = append(vals, e)
		}
	}
	e := pick(vals)
	if e == nil {
		return math.NaN()
	}
	if v, _ := variantsOf(*e); variant != "" && hasKey(v.Variants, variant) {
		return v.Variants[variant]
	}
	return e.Greedy
}

// atStart picks the step-0 evaluation: the starting model's.
func atStart(vals []rundir.Eval) *rundir.Eval {
	if i := slices.IndexFunc(vals, func(e rundir.Eval) bool { return e.Step == 0 }); i >= 0 {
		return &vals[i]
	}
	return nil
}

// atEnd picks the last evaluation after step 0: what the run ends at.
func atEnd(vals []rundir.Eval) *rundir.Eval {
	for i, e := range slices.Backward(vals) {
		if e.Step != 0 {
			return &vals[i]
		}
	}
	return nil
}

// Summary is a row's numbers. A mean is over the runs that have the value,
// NaN when none has; an stats.Interval's N counts those runs (problems, for
// Pooled), and its Low and High are NaN when there is no interval.
type Summary struct {
	Name string
	Runs int
	// FirstStep and LastStep bound the runs' last steps, -1 when unknown.
	FirstStep, LastStep int

	// Accuracy is the mean of the runs' headline accuracies ([Final.Acc])
	// with a 95% t-interval over seeds.
	Accuracy stats.Interval
	// FromVal counts the runs without a test evaluation, whose last
	// validation evaluation stands in.
	FromVal int
	// Pooled is every run's final problems taken together, with a 95%
	// Wilson interval: successes Σ Acc·problems out of Σ problems. Its
	// Mean is NaN unless every run has a final evaluation that gives its
	// number of problems.
	Pooled stats.Interval

	// Variants names the prompt variants of the runs' final evaluations
	// (the expert prompts), in natural order, and VariantAcc is the mean
	// accuracy under each.
	Variants   []string
	VariantAcc []float64
	// Chosen is each run's Final.Variant (its best expert), in the row's
	// order; empty for a run without one.
	Chosen []string

	// Before is the mean accuracy at step 0 (validation), under each run's
	// chosen variant when it has one.
	Before float64
	// Validation is the mean accuracy at the last validation evaluation,
	// under each run's chosen variant when it has one: what a row is
	// chosen on, as MEL's composed run picks the best single method.
	Validation float64
	// ZeroVariance is the mean over runs of each run's mean
	// zero_variance_frac.
	ZeroVariance float64
	// RolloutFirst and RolloutLast are the mean over runs of each run's
	// mean rollout accuracy (metrics.jsonl's accuracy) over its first and
	// last rolloutWindow steps.
	RolloutFirst, RolloutLast float64
	// StepTime is the mean over runs of each run's median step_s: the
	// median, because a run that shared the cores with others, or waited
	// on a resume, has a few steps hundreds of times its usual.
	StepTime float64
	// AvgAtK is the mean over runs of the final evaluation's avg@k (the
	// sampled answers' mean accuracy, EAPO's Pass@32 mean) with a 95%
	// t-interval, and Variance the mean of its per-problem variance; K is
	// the largest k seen, 0 without sampled answers.
	AvgAtK   stats.Interval
	Variance float64
	K        int
	// PassAtK is the mean over runs of the final evaluation's pass@K with
	// a 95% t-interval (MEL's Pass@8).
	PassAtK stats.Interval
	// Declared are the row's values of the columns the parts declare
	// (rundir.Columns), in their order: for an Ends column the mean over
	// runs of its metric over the first and last rolloutWindow steps (NaN
	// when no run logs it), for a Funnel each metric summed over every
	// step of every run (0 for runs without it), for a FinalMean the mean
	// over runs of its value (NaN when no run's final evaluation has it),
	// for a FinalGap the mean over runs of its value less the run's
	// accuracy with the 95% t-interval's bounds after it, and nothing for
	// Variants and Chosen, which Variants, VariantAcc and Chosen hold.
	Declared [][]float64
}

// rolloutWindow is the number of steps at each end that the rollout
// accuracy is averaged over.
const rolloutWindow = 10

// Summary summarizes the row.
func (row Row) Summary() Summary {
	s := Summary{Name: row.Name, Runs: len(row.Runs), FirstStep: -1, LastStep: -1}
	var acc, before, validation, zeroVar, first, last, stepTime, avgK, passK, variance []float64
	declared := rundir.Columns()
	ends := make([][2][]float64, len(declared)) // an Ends column's first and last means, per run
	finals := make([][]float64, len(declared))  // a final evaluation's values, per run
	s.Declared = make([][]float64, len(declared))
	for i, c := range declared {
		if c.Kind == rundir.Funnel {
			s.Declared[i] = make([]float64, len(c.Metrics))
		}
	}
	byVariant := map[string][]float64{}
	successes, problems, pooled := 0, 0, true
	for _, r := range row.Runs {
		if st := r.LastStep(); st >= 0 {
			if s.FirstStep < 0 || st < s.FirstStep {
				s.FirstStep = st
			}
			s.LastStep = max(s.LastStep, st)
		}
		f, ok := FinalOf(r)
		s.Chosen = append(s.Chosen, f.Variant)
		if ok {
			acc = append(acc, f.Acc)
			if f.FromVal {
				s.FromVal++
			}
			if f.Eval.Problems > 0 {
				successes += int(math.Round(f.Acc * float64(f.Eval.Problems)))
				problems += f.Eval.Problems
			} else {
				pooled = false
			}
			for name, v := range f.Variants {
				byVariant[name] = append(byVariant[name], v)
			}
			for i, c := range declared {
				switch c.Kind {
				case rundir.FinalMean:
					finals[i] = appendFinite(finals[i], valueOf(f.Eval, c.Part, c.Metrics[0]))
				case rundir.FinalGap:
					finals[i] = appendFinite(finals[i], valueOf(f.Eval, c.Part, c.Metrics[0])-f.Acc)
				}
			}
			avgK = appendFinite(avgK, orNaN(f.Eval.AvgAtK))
			variance = appendFinite(variance, orNaN(f.Eval.Variance))
			k, pass := largestPassAtK(f.Eval.PassAtK)
			s.K = max(s.K, k)
			passK = appendFinite(passK, pass)
		} else {
			pooled = false
		}
		before = appendFinite(before, valAccuracy(r, f.Variant, atStart))
		validation = appendFinite(validation, valAccuracy(r, f.Variant, atEnd))
		if _, ys := r.Series(rundir.MetricZeroVarianceFrac); len(ys) > 0 {
			zeroVar = append(zeroVar, mean(ys))
		}
		first, last = appendEnds(first, last, r, rundir.MetricAccuracy)
		if _, ys := r.Series(rundir.MetricStepSeconds); len(ys) > 0 {
			stepTime = append(stepTime, median(ys))
		}
		for i, c := range declared {
			switch c.Kind {
			case rundir.Ends:
				ends[i][0], ends[i][1] = appendEnds(ends[i][0], ends[i][1], r, c.Metrics[0])
			case rundir.Funnel:
				for _, st := range r.Steps { // a step without them adds 0
					for j, m := range c.Metrics {
						s.Declared[i][j] += st.Values[m]
					}
				}
			}
		}
	}
	for i, c := range declared {
		switch c.Kind {
		case rundir.Ends:
			s.Declared[i] = []float64{mean(ends[i][0]), mean(ends[i][1])}
		case rundir.FinalMean:
			s.Declared[i] = []float64{mean(finals[i])}
		case rundir.FinalGap:
			g := stats.MeanInterval(finals[i])
			s.Declared[i] = []float64{g.Mean, g.Low, g.High}
		}
	}
	s.AvgAtK = stats.MeanInterval(avgK)
	s.PassAtK = stats.MeanInterval(passK)
	s.Variance = mean(variance)
	s.Accuracy = stats.MeanInterval(acc)
	s.Pooled = stats.Interval{Mean: math.NaN(), Low: math.NaN(), High: math.NaN()}
	if pooled && problems > 0 {
		s.Pooled = stats.WilsonInterval(successes, problems)
	}
	for name := range byVariant {
		s.Variants = append(s.Variants, name)
	}
	slices.SortFunc(s.Variants, naturalCompare)
	for _, name := range s.Variants {
		s.VariantAcc = append(s.VariantAcc, mean(byVariant[name]))
	}
	s.Before = mean(before)
	s.Validation = mean(validation)
	s.ZeroVariance = mean(zeroVar)
	s.RolloutFirst, s.RolloutLast = mean(first), mean(last)
	s.StepTime = mean(stepTime)
	return s
}

// appendEnds appends the means of a run's metric over its first and last
// rolloutWindow steps, when it logs the metric.
func appendEnds(first, last []float64, r *rundir.Run, metric string) ([]float64, []float64) {
	_, ys := r.Series(metric)
	if len(ys) == 0 {
		return first, last
	}
	return append(first, mean(ys[:min(rolloutWindow, len(ys))])), append(last, mean(ys[max(len(ys)-rolloutWindow, 0):]))
}

func appendFinite(xs []float64, x float64) []float64 {
	if !finite(x) {
		return xs
	}
	return append(xs, x)
}

// Difference is a row's headline accuracy minus a baseline row's, paired by
// seed ([SeedOf]).
type Difference struct {
	// Interval is the mean over the paired seeds of (run − baseline run),
	// with a 95% paired t-interval; N counts the pairs.
	stats.Interval
	// AvgAtK and PassAtK are the same for the sampled answers' mean
	// accuracy and pass@k at the largest k, over the paired seeds whose
	// runs both have them (NaN when none do).
	AvgAtK, PassAtK stats.Interval
	// MDE is the smallest true difference that the paired t-test detects
	// at the 5% level with 80% power, at the spread of these pairs
	// (stats.MinDetectable); NaN below three pairs.
	MDE float64
	// ByProblem is the difference taken problem by problem: on each test
	// problem both rows scored in every pair, the mean over the paired
	// seeds of (run − baseline run) greedy correctness; its mean over the
	// problems, with a 95% t-interval over them (N counts the problems),
	// and ByProblemMDE that test's MDE. It measures how the test problems
	// were drawn, for the seeds as they fell, not the spread from seed to
	// seed, and so has an interval from one seed on. NaN unless every pair
	// kept the outcomes of what it reports (Final.Outcomes).
	ByProblem    stats.Interval
	ByProblemMDE float64
	// Seeds lists the paired seeds, in the row's order.
	Seeds []string
	// LeftOut says, for each run of either row that has no partner, why:
	// "seed 4 (dapo only)".
	LeftOut []string
}

// Paired compares row with base, pairing their runs by seed. A run is left
// out when its seed is unknown, repeats within its row, has no run in the
// other row, or either run of the pair has no final evaluation.
func Paired(row, base Row) Difference {
	type entry struct {
		acc, avg, pass float64
		problems       string // the test problems' fingerprint
		outcomes       string // per problem, Final.Outcomes
		ok             bool
		count          int
	}
	index := func(r Row) (map[string]*entry, []string, []string) {
		m := map[string]*entry{}
		var order, noSeed []string
		for _, run := range r.Runs {
			seed := SeedOf(run)
			if seed == "" {
				noSeed = append(noSeed, run.Name)
				continue
			}
			e := m[seed]
			if e == nil {
				e = &entry{}
				m[seed] = e
				order = append(order, seed)
			}
			e.count++
			f, ok := FinalOf(run)
			e.acc, e.ok, e.problems, e.outcomes = f.Acc, ok, f.Eval.ProblemSet, f.Outcomes
			e.avg = orNaN(f.Eval.AvgAtK)
			_, e.pass = largestPassAtK(f.Eval.PassAtK)
		}
		return m, order, noSeed
	}
	rm, rOrder, rNoSeed := index(row)
	bm, bOrder, bNoSeed := index(base)
	var d Difference
	var diffs, avgs, passes []float64
	var outcomes [][2]string // per pair: the row's and the baseline's
	for _, seed := range rOrder {
		a, b := rm[seed], bm[seed]
		switch {
		case a.count > 1:
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (%d runs in %s)", seed, a.count, row.Name))
		case b == nil:
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (%s only)", seed, row.Name))
		case b.count > 1:
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (%d runs in %s)", seed, b.count, base.Name))
		case !a.ok:
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (no evaluation in %s)", seed, row.Name))
		case !b.ok:
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (no evaluation in %s)", seed, base.Name))
		case a.problems != "" && b.problems != "" && a.problems != b.problems:
			// Paired by problem as well as by seed: a pair scored on
			// different problems would measure the problems.
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (other test problems in %s)", seed, base.Name))
		default:
			d.Seeds = append(d.Seeds, seed)
			diffs = append(diffs, a.acc-b.acc)
			outcomes = append(outcomes, [2]string{a.outcomes, b.outcomes})
			avgs = appendFinite(avgs, a.avg-b.avg)
			passes = appendFinite(passes, a.pass-b.pass)
		}
	}
	for _, seed := range bOrder {
		if rm[seed] == nil {
			d.LeftOut = append(d.LeftOut, fmt.Sprintf("seed %s (%s only)", seed, base.Name))
		}
	}
	for _, name := range append(rNoSeed, bNoSeed...) {
		d.LeftOut = append(d.LeftOut, fmt.Sprintf("%s (no seed)", name))
	}
	d.Interval = stats.MeanInterval(diffs)
	d.AvgAtK, d.PassAtK = stats.MeanInterval(avgs), stats.MeanInterval(passes)
	d.MDE = stats.MinDetectable(d.Interval)
	d.ByProblem = byProblem(outcomes)
	d.ByProblemMDE = stats.MinDetectable(d.ByProblem)
	return d
}

// byProblem is Difference.ByProblem of the pairs' outcomes: NaN unless
// every pair has them, all of one length.
func byProblem(pairs [][2]string) stats.Interval {
	none := stats.MeanInterval(nil)
	if len(pairs) == 0 {
		return none
	}
	n := len(pairs[0][0])
	for _, p := range pairs {
		if n == 0 || len(p[0]) != n || len(p[1]) != n {
			return none
		}
	}
	var perProblem []float64
	for i := range n {
		var sum float64
		scored := true
		for _, p := range pairs {
			a, b := p[0][i], p[1][i]
			if a == '-' || b == '-' {
				scored = false
				break
			}
			sum += float64(a-'0') - float64(b-'0')
		}
		if scored {
			perProblem = append(perProblem, sum/float64(len(pairs)))
		}
	}
	return stats.MeanInterval(perProblem)
}

// largestPassAtK is the largest k of a pass@k map (0 without one) and
// pass@k there, NaN unless k is above 1.
func largestPassAtK(passAtK map[string]float64) (k int, v float64) {
	for key, p := range passAtK {
		if n, err := strconv.Atoi(key); err == nil && n > k {
			k, v = n, p
		}
	}
	if k <= 1 {
		v = math.NaN()
	}
	return k, v
}

// Table returns a markdown table comparing the rows of runs ([Rows]) across
// seeds, with notes below it. With a baseline row name, it adds a column
// "Δ vs baseline": each row's difference from that row, paired by seed
// ([Paired]). It is an error when no row has the baseline's name.
//
// The columns: the row; its runs; their last steps; the headline test
// accuracy, mean over seeds [95% t-interval]; every seed's test problems
// pooled [95% Wilson interval] (problems); the columns the parts declare
// of the final evaluations (MEML-GRPO's: each expert's test accuracy, the
// experts' majority vote, majority − best expert [t-interval], each seed's
// best expert); the sampled answers; the columns the parts declare of the
// metrics; the accuracy at step 0 and at the last validation; the mean
// zero_variance_frac; the rollout accuracy over the first and last 10
// steps; seconds per step; and the difference from the baseline. Columns
// that no row has a value for are left out. A run without a test evaluation contributes its last validation
// evaluation, and its row's accuracy is marked "†".
//
// columns, when given, keeps only those columns, in that order: each names
// the first column whose header is it or, failing that, begins with it
// ("Δ vs" for "Δ vs grpo"). This is how a write-up's table is printed by
// the command it cites, rather than cut from the full one by hand.
func Table(runs []*rundir.Run, baseline string, columns ...string) (string, error) {
	rows := Rows(runs)
	base, err := rowIndex(rows, baseline)
	if err != nil {
		return "", err
	}
	g := newGrid(rows, base)
	if len(columns) > 0 {
		if g, err = g.only(columns); err != nil {
			return "", err
		}
	}
	return g.markdown(), nil
}

// only returns the grid with the named columns alone (see [Table]).
func (g grid) only(columns []string) (grid, error) {
	var keep []int
	for _, name := range columns {
		i := slices.Index(g.Header, name)
		if i < 0 {
			i = slices.IndexFunc(g.Header, func(h string) bool { return strings.HasPrefix(h, name) })
		}
		if i < 0 {
			return g, fmt.Errorf("report: no column %q; the columns are %q", name, g.Header)
		}
		keep = append(keep, i)
	}
	out := grid{Notes: g.Notes}
	for _, i := range keep {
		out.Header = append(out.Header, g.Header[i])
		out.Right = append(out.Right, g.Right[i])
	}
	for _, row := range g.Cells {
		cells := make([]string, len(keep))
		for j, i := range keep {
			cells[j] = row[i]
		}
		out.Cells = append(out.Cells, cells)
	}
	return out, nil
}

// rowIndex returns the index of the row named name, -1 for no name, or an
// error that lists the rows there are.
func rowIndex(rows []Row, name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	if i := slices.IndexFunc(rows, func(r Row) bool { return r.Name == name }); i >= 0 {
		return i, nil
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = fmt.Sprintf("%q", r.Name)
	}
	return -1, fmt.Errorf("report: no row named %q; the rows are %s", name, strings.Join(names, ", "))
}

// grid is a table as text, for markdown and for the HTML page.
type grid struct {
	Header []string
	Right  []bool // the column is numeric
	Cells  [][]string
	Notes  []string
}

// column is one column of a grid being built; optional columns are left out
// when every cell is a dash.
type column struct {
	header   string
	right    bool
	optional bool
	cells    []string
}

const (
	valMark    = "†"
	zeroPoints = 0.0005 // a difference below 0.05 pp prints as 0.0
)

// newGrid lays out the rows; base indexes the baseline row, or is -1.
func newGrid(rows []Row, base int) grid {
	sums := make([]Summary, len(rows))
	for i, r := range rows {
		sums[i] = r.Summary()
	}
	col := func(header string, right, optional bool, cell func(i int, s Summary) string) column {
		c := column{header: header, right: right, optional: optional}
		for i, s := range sums {
			c.cells = append(c.cells, cell(i, s))
		}
		return c
	}
	var notes []string
	cols := []column{
		col("row", false, false, func(_ int, s Summary) string { return s.Name }),
		col("seeds", true, false, func(_ int, s Summary) string { return strconv.Itoa(s.Runs) }),
		col("steps", true, false, func(_ int, s Summary) string {
			switch {
			case s.LastStep < 0:
				return dash
			case s.FirstStep == s.LastStep:
				return strconv.Itoa(s.LastStep)
			}
			return fmt.Sprintf("%d–%d", s.FirstStep, s.LastStep)
		}),
		col("test accuracy", true, false, func(_ int, s Summary) string {
			c := percentInterval(s.Accuracy)
			if s.FromVal > 0 {
				c += valMark
			}
			return c
		}),
		col("pooled", true, true, func(_ int, s Summary) string {
			if math.IsNaN(s.Pooled.Mean) {
				return dash
			}
			return fmt.Sprintf("%s (%d)", percentInterval(s.Pooled), s.Pooled.N)
		}),
	}
	// The parts' columns of the final evaluations, then the sampled
	// answers, then the parts' columns of the metrics.
	declared := func(ofEvaluation bool) {
		for i, c := range rundir.Columns() {
			switch {
			case c.Kind.OfEvaluation() != ofEvaluation:
			case c.Kind == rundir.Variants:
				cols = append(cols, variantColumn(c.Header, sums))
			case c.Kind == rundir.Chosen:
				cols = append(cols, col(c.Header, false, true, func(_ int, s Summary) string { return chosenCell(s.Chosen) }))
			default:
				header := c.Header
				if c.Kind == rundir.Ends {
					header += fmt.Sprintf(", first → last %d steps", rolloutWindow)
				}
				cols = append(cols, col(header, true, true, func(_ int, s Summary) string { return declaredCell(c.Kind, s.Declared[i]) }))
			}
		}
	}
	declared(true)
	cols = append(cols,
		col("sampled mean", true, true, func(_ int, s Summary) string {
			if math.IsNaN(s.AvgAtK.Mean) {
				return dash
			}
			return fmt.Sprintf("%s (n=%d)", percentInterval(s.AvgAtK), s.K)
		}),
		col("pass@k", true, true, func(_ int, s Summary) string {
			if math.IsNaN(s.PassAtK.Mean) {
				return dash
			}
			return fmt.Sprintf("%s (k=%d)", percentInterval(s.PassAtK), s.K)
		}),
		col("variance", true, true, func(_ int, s Summary) string {
			if math.IsNaN(s.Variance) {
				return dash
			}
			return strconv.FormatFloat(s.Variance, 'f', 4, 64)
		}),
	)
	declared(false)
	cols = append(cols,
		col("before", true, true, func(_ int, s Summary) string { return percent(s.Before) }),
		col("validation", true, true, func(_ int, s Summary) string { return percent(s.Validation) }),
		col("zero-var", true, true, func(_ int, s Summary) string { return percent(s.ZeroVariance) }),
		col(fmt.Sprintf("rollout acc, first → last %d steps", rolloutWindow), true, true, func(_ int, s Summary) string {
			return fromTo(s.RolloutFirst, s.RolloutLast)
		}),
		col("s/step", true, true, func(_ int, s Summary) string {
			if math.IsNaN(s.StepTime) {
				return dash
			}
			return strconv.FormatFloat(s.StepTime, 'f', 2, 64)
		}),
	)
	if base >= 0 {
		diffs := make([]Difference, len(rows))
		for i := range rows {
			if i == base {
				continue
			}
			d := Paired(rows[i], rows[base])
			diffs[i] = d
			if len(d.LeftOut) > 0 {
				notes = append(notes, fmt.Sprintf("Δ of %s vs %s: %d paired seeds; left out: %s.", rows[i].Name, rows[base].Name, len(d.Seeds), strings.Join(d.LeftOut, ", ")))
			}
		}
		// An optional column that no row has a value for goes, its
		// baseline's cell with it.
		delta := func(name string, optional bool, of func(Difference) stats.Interval) column {
			some := false
			for i, d := range diffs {
				some = some || i != base && !math.IsNaN(of(d).Mean)
			}
			return col(name+" vs "+rows[base].Name, true, optional, func(i int, _ Summary) string {
				switch {
				case i == base && (some || !optional):
					return "(baseline)"
				case i == base, optional && math.IsNaN(of(diffs[i]).Mean):
					return dash
				}
				return ppInterval(of(diffs[i]))
			})
		}
		// mde is a column of minimum detectable effects, of(d) each.
		mde := func(name string, of func(Difference) float64) column {
			return col(name, true, true, func(i int, _ Summary) string {
				if i == base || math.IsNaN(of(diffs[i])) {
					return dash
				}
				return fmt.Sprintf("%.1f pp", 100*of(diffs[i]))
			})
		}
		cols = append(cols, delta("Δ", false, func(d Difference) stats.Interval { return d.Interval }),
			mde("MDE", func(d Difference) float64 { return d.MDE }),
			delta("Δ by problem", true, func(d Difference) stats.Interval { return d.ByProblem }),
			mde("MDE by problem", func(d Difference) float64 { return d.ByProblemMDE }),
			delta("Δ sampled mean", true, func(d Difference) stats.Interval { return d.AvgAtK }),
			delta("Δ pass@k", true, func(d Difference) stats.Interval { return d.PassAtK }))
	}

	cols = slices.DeleteFunc(cols, func(c column) bool {
		return c.optional && !slices.ContainsFunc(c.cells, func(s string) bool { return s != dash })
	})
	var g grid
	for _, c := range cols {
		g.Header = append(g.Header, c.header)
		g.Right = append(g.Right, c.right)
	}
	for i := range sums {
		row := make([]string, len(cols))
		for j, c := range cols {
			row[j] = c.cells[i]
		}
		g.Cells = append(g.Cells, row)
	}

	legend := "Accuracy: mean over seeds [95% t-interval over seeds]"
	if slices.Contains(g.Header, "pooled") {
		legend += "; pooled: every seed's test problems together [95% Wilson interval] (problems)"
	}
	if base >= 0 {
		legend += fmt.Sprintf("; Δ: mean over seeds of (row − %s) on the same seed and the same test problems [95%% paired t-interval]", rows[base].Name)
		if slices.Contains(g.Header, "MDE") {
			legend += "; MDE: the smallest Δ that test detects at 80% power, at the spread of the paired seeds"
		}
		if slices.Contains(g.Header, "MDE by problem") {
			legend += "; Δ by problem: mean over the test problems of (row − " + rows[base].Name + ") correctness on each, averaged over the paired seeds [95% t-interval over problems], the test problems' sampling error for these seeds, not the seeds' spread; MDE by problem: its smallest detectable Δ at 80% power"
		}
	}
	g.Notes = append(g.Notes, legend+".")
	for _, s := range sums {
		if s.FromVal > 0 {
			g.Notes = append(g.Notes, valMark+" val: no test split — the last validation evaluation stands in for a run without a test evaluation.")
			break
		}
	}
	g.Notes = append(g.Notes, choiceNotes(rows)...)
	g.Notes = append(g.Notes, machineNotes(rows)...)
	for _, s := range sums {
		if missing := s.Runs - s.Accuracy.N; missing > 0 {
			g.Notes = append(g.Notes, fmt.Sprintf("%s: %d of %d runs have no evaluation.", s.Name, missing, s.Runs))
		}
	}
	g.Notes = append(g.Notes, notes...)
	return g
}

// declaredCell writes a row's values of a column a part declared.
func declaredCell(kind rundir.ColumnKind, v []float64) string {
	switch kind {
	case rundir.Ends:
		return fromTo(v[0], v[1])
	case rundir.FinalMean:
		return percent(v[0])
	case rundir.FinalGap:
		return ppInterval(stats.Interval{Mean: v[0], Low: v[1], High: v[2]})
	case rundir.Funnel:
		if len(v) == 0 || v[0] == 0 {
			return dash
		}
		cell := fmt.Sprintf("%.0f", v[0])
		for _, x := range v[1:] {
			cell += fmt.Sprintf(" → %.0f%%", 100*x/v[0])
		}
		return cell
	}
	return dash
}

// fromTo writes "a% → b%", or a dash when a is unknown.
func fromTo(a, b float64) string {
	if math.IsNaN(a) {
		return dash
	}
	return percent(a) + " → " + percent(b)
}

// chosenCell writes each run's chosen variant, "E2, E1, —", or a dash
// when no run has one.
func chosenCell(chosen []string) string {
	if !slices.ContainsFunc(chosen, func(e string) bool { return e != "" }) {
		return dash
	}
	parts := make([]string, len(chosen))
	for i, e := range chosen {
		parts[i] = orDash(e)
	}
	return strings.Join(parts, ", ")
}

// variantColumn writes each variant's mean accuracy as "a / b / c": with
// the variants' names in the header when every row that has variants has
// the same ones, beside each value under header otherwise.
func variantColumn(header string, sums []Summary) column {
	c := column{header: header, right: true, optional: true}
	var names []string
	same := true
	for _, s := range sums {
		if len(s.Variants) == 0 {
			continue
		}
		if names == nil {
			names = s.Variants
		} else if !slices.Equal(names, s.Variants) {
			same = false
		}
	}
	if same && names != nil {
		c.header = strings.Join(names, " / ")
	}
	for _, s := range sums {
		if len(s.Variants) == 0 {
			c.cells = append(c.cells, dash)
			continue
		}
		parts := make([]string, len(s.Variants))
		for i, name := range s.Variants {
			v := strconv.FormatFloat(s.VariantAcc[i]*100, 'f', 1, 64)
			if !same {
				v = name + " " + v
			}
			parts[i] = v
		}
		c.cells = append(c.cells, strings.Join(parts, " / "))
	}
	return c
}

func orDash(s string) string {
	if s == "" {
		return dash
	}
	return s
}

// percentInterval writes "12.0% [7.0, 17.0]", the interval left out when
// unknown, a dash for NaN.
func percentInterval(iv stats.Interval) string {
	if math.IsNaN(iv.Mean) {
		return dash
	}
	if math.IsNaN(iv.Low) || math.IsNaN(iv.High) {
		return percent(iv.Mean)
	}
	return fmt.Sprintf("%s [%s, %s]", percent(iv.Mean), points(iv.Low), points(iv.High))
}

// points writes a fraction in percent without the sign, "7.0" or "−1.2"
// (a minus sign, as in typeset tables).
func points(f float64) string {
	if math.Abs(f) < zeroPoints {
		return "0.0"
	}
	return strings.Replace(strconv.FormatFloat(f*100, 'f', 1, 64), "-", "−", 1)
}

// ppInterval writes a difference of fractions in percentage points,
// "+6.0 pp [+3.5, +8.5]", the interval left out when unknown, a dash for
// NaN.
func ppInterval(iv stats.Interval) string {
	if math.IsNaN(iv.Mean) {
		return dash
	}
	s := signedPoints(iv.Mean) + " pp"
	if !math.IsNaN(iv.Low) && !math.IsNaN(iv.High) {
		s += " [" + signedPoints(iv.Low) + ", " + signedPoints(iv.High) + "]"
	}
	return s
}

// signedPoints writes a fraction in percentage points with its sign, "+6.0"
// or "−1.2" (a minus sign, as in typeset tables); "0.0" when it rounds to 0.
func signedPoints(f float64) string {
	if math.Abs(f) < zeroPoints {
		return "0.0"
	}
	return strings.Replace(fmt.Sprintf("%+.1f", f*100), "-", "−", 1)
}

// markdown writes the grid as a markdown table, then its notes, one
// paragraph each.
func (g grid) markdown() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	line(g.Header)
	rule := make([]string, len(g.Header))
	for i, right := range g.Right {
		rule[i] = "---"
		if right {
			rule[i] = "---:"
		}
	}
	line(rule)
	for _, row := range g.Cells {
		line(row)
	}
	for _, n := range g.Notes {
		b.WriteString("\n" + n + "\n")
	}
	return b.String()
}
