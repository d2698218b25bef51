package report

import (
	"fmt"
	"math"

	"rlvr/rundir"
)

// RunCompute is what a run recorded of the time it took: its training
// steps' wall time (metrics.jsonl's step_s), its evaluations' (eval.jsonl's
// seconds) and its cold start's, and the threads it ran on.
type RunCompute struct {
	Name string
	CPU  string // the processor of its last start; "" when unrecorded
	// Threads are its last start's (machine.jsonl), 0 when unrecorded.
	Threads int
	// Steps counts the steps that logged a wall time, StepMedian is their
	// median (NaN with none).
	Steps      int
	StepMedian float64
	// StepSeconds, EvalSeconds and ColdStartSeconds are wall times.
	StepSeconds, EvalSeconds, ColdStartSeconds float64
	// Evals counts the evaluations, Timed those that recorded a time.
	Evals, Timed int
}

// Wall is the run's recorded wall time, in seconds.
func (c RunCompute) Wall() float64 { return c.StepSeconds + c.EvalSeconds + c.ColdStartSeconds }

// CoreHours is the wall time times the threads, NaN where the threads
// are not recorded.
func (c RunCompute) CoreHours() float64 {
	if c.Threads == 0 {
		return math.NaN()
	}
	return c.Wall() * float64(c.Threads) / 3600
}

// ComputeOf reads a run's recorded time.
func ComputeOf(r *rundir.Run) RunCompute {
	c := RunCompute{Name: r.Name, ColdStartSeconds: r.ColdStartSeconds, Evals: len(r.Evals)}
	if n := len(r.Machines); n > 0 {
		c.CPU, c.Threads = r.Machines[n-1].CPU, r.Machines[n-1].Threads
	}
	_, steps := r.Series(rundir.MetricStepSeconds)
	for _, v := range steps {
		c.StepSeconds += v
	}
	c.Steps, c.StepMedian = len(steps), median(steps)
	for _, e := range r.Evals {
		if e.Seconds > 0 {
			c.Timed++
			c.EvalSeconds += e.Seconds
		}
	}
	return c
}

// Compute is rlvr report --compute: a markdown table of each run's
// recorded wall time, split into steps, evaluations and cold start, with
// its core-hours where the run recorded its threads, and their total.
// What a run did not record (evaluations written before their time was
// kept, threads before machine.jsonl) is a dash, and the totals say so.
func Compute(runs []*rundir.Run) string {
	g := grid{
		Header: []string{"run", "processor", "threads", "steps", "median step", "steps (h)", "evaluations (h)", "cold start (h)", "wall (h)", "core-hours"},
		Right:  []bool{false, false, true, true, true, true, true, true, true, true},
	}
	var total RunCompute
	coreHours, untimed, unthreaded := 0.0, 0, 0
	for _, r := range runs {
		c := ComputeOf(r)
		evals := dash
		if c.Timed > 0 {
			evals = hours(c.EvalSeconds)
		}
		if c.Timed < c.Evals {
			untimed += c.Evals - c.Timed
			if c.Timed > 0 {
				evals += fmt.Sprintf(" (%d of %d)", c.Timed, c.Evals)
			}
		}
		threads, ch := dash, dash
		if c.Threads > 0 {
			threads, ch = fmt.Sprint(c.Threads), fmt.Sprintf("%.2f", c.CoreHours())
			coreHours += c.CoreHours()
		} else {
			unthreaded++
		}
		g.Cells = append(g.Cells, []string{c.Name, orDash(c.CPU), threads, fmt.Sprint(c.Steps), seconds(c.StepMedian),
			hours(c.StepSeconds), evals, coldStartHours(c.ColdStartSeconds), hours(c.Wall()), ch})
		total.Steps += c.Steps
		total.StepSeconds += c.StepSeconds
		total.EvalSeconds += c.EvalSeconds
		total.ColdStartSeconds += c.ColdStartSeconds
		total.Evals += c.Evals
	}
	evals := dash
	if untimed < total.Evals {
		evals = hours(total.EvalSeconds)
	}
	ch := fmt.Sprintf("%.2f", coreHours)
	switch {
	case unthreaded == len(runs):
		ch = dash
	case unthreaded > 0:
		ch += fmt.Sprintf(" (%d of %d runs)", len(runs)-unthreaded, len(runs))
	}
	g.Cells = append(g.Cells, []string{fmt.Sprintf("all %d runs", len(runs)), "", "", fmt.Sprint(total.Steps), "",
		hours(total.StepSeconds), evals, coldStartHours(total.ColdStartSeconds), hours(total.Wall()), ch})
	g.Notes = append(g.Notes, "Wall time as the runs recorded it: each training step's step_s, each evaluation's seconds and the cold start's; core-hours are a run's wall time times the threads of its last start (machine.jsonl).")
	if untimed > 0 {
		g.Notes = append(g.Notes, fmt.Sprintf("Evaluations without a time (written before it was kept), counted as none: %d; the totals are lower bounds.", untimed))
	}
	if unthreaded > 0 {
		g.Notes = append(g.Notes, fmt.Sprintf("Runs without threads (no machine.jsonl), whose core-hours are not counted: %d.", unthreaded))
	}
	return g.markdown()
}

// hours writes seconds as hours.
func hours(s float64) string { return fmt.Sprintf("%.2f", s/3600) }

// seconds writes a duration in seconds, or a dash for NaN.
func seconds(s float64) string {
	if math.IsNaN(s) {
		return dash
	}
	return fmt.Sprintf("%.0f s", s)
}

// coldStartHours is hours, or a dash for a run without a cold start.
func coldStartHours(s float64) string {
	if s == 0 {
		return dash
	}
	return hours(s)
}
