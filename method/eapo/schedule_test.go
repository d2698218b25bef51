package eapo

import (
	"math"
	"rlvr/engine/optim"
	"strings"
	"testing"
)

// ranges are the (Start, End) pairs the schedule tests anneal between.
var ranges = []struct{ start, end float64 }{
	{1, 0},       // p(t) from always to never
	{0.9, 0.1},   // a decreasing probability that is not a power of two
	{0.7, 0.05},  //
	{6, 2},       // a turn budget
	{0.25, 0.75}, // increasing
	{0.3, 0.3},   // flat
}

func TestScheduleEnds(t *testing.T) {
	const n = 100
	for _, kind := range optim.ScheduleKinds {
		for _, r := range ranges {
			for _, steps := range []int{0, 1, 7, n / 2, n, 3 * n} {
				s := Schedule{Kind: kind, Start: r.start, End: r.end, Steps: steps}
				if err := s.Check("s"); err != nil {
					t.Fatalf("%+v: %v", s, err)
				}
				horizon := steps
				if horizon == 0 {
					horizon = n
				}
				end := r.end
				if kind == optim.Constant {
					end = r.start
				}
				if got := s.At(0, n); got != r.start {
					t.Errorf("%+v: At(0, %d) = %v, want Start %v", s, n, got, r.start)
				}
				// From the horizon on, the value is End.
				for step := horizon; step <= horizon+5; step++ {
					if got := s.At(step, n); got != end {
						t.Errorf("%+v: At(%d, %d) = %v, want %v", s, step, n, got, end)
					}
				}
			}
		}
	}
}

func TestScheduleBoundedMonotone(t *testing.T) {
	const n = 60
	for _, kind := range optim.ScheduleKinds {
		for _, r := range ranges {
			for _, rate := range []float64{0, 0.5, 5, 40} {
				s := Schedule{Kind: kind, Start: r.start, End: r.end, Rate: rate}
				lo, hi := math.Min(r.start, r.end), math.Max(r.start, r.end)
				prev := s.At(0, n)
				for step := 0; step <= n+10; step++ {
					v := s.At(step, n)
					if math.IsNaN(v) || v < lo || v > hi {
						t.Fatalf("%+v: At(%d, %d) = %v, outside [%v, %v]", s, step, n, v, lo, hi)
					}
					switch {
					case r.start > r.end && v > prev:
						t.Fatalf("%+v: rises at step %d: %v after %v", s, step, v, prev)
					case r.start < r.end && v < prev:
						t.Fatalf("%+v: falls at step %d: %v after %v", s, step, v, prev)
					}
					prev = v
				}
				// A decay that is not constant moves strictly by mid-run.
				if kind != optim.Constant && r.start != r.end {
					if mid := s.At(n/2, n); mid == r.start || mid == r.end {
						t.Errorf("%+v: At(%d, %d) = %v, still at an end", s, n/2, n, mid)
					}
				}
			}
		}
	}
}

func TestScheduleShapes(t *testing.T) {
	// Values of a run of 4 steps from 1 to 0, worked out by hand.
	e5 := math.Exp(-5)
	exp := func(x float64) float64 { return 1 - (1-math.Exp(-5*x))/(1-e5) }
	for _, tt := range []struct {
		kind optim.ScheduleKind
		want []float64 // At(0..4, 4)
	}{
		{optim.Constant, []float64{1, 1, 1, 1, 1}},
		{optim.Linear, []float64{1, 0.75, 0.5, 0.25, 0}},
		{optim.Cosine, []float64{1, (1 + math.Sqrt2/2) / 2, 0.5, (1 - math.Sqrt2/2) / 2, 0}},
		{optim.Exponential, []float64{1, exp(0.25), exp(0.5), exp(0.75), 0}},
	} {
		s := Schedule{Kind: tt.kind, Start: 1, End: 0}
		for step, want := range tt.want {
			if got := s.At(step, 4); math.Abs(got-want) > 1e-12 {
				t.Errorf("%s: At(%d, 4) = %v, want %v", tt.kind, step, got, want)
			}
		}
	}
}

func TestScheduleRunSteps(t *testing.T) {
	for _, kind := range optim.ScheduleKinds {
		for _, n := range []int{1, 2, 10, 37} {
			def := Schedule{Kind: kind, Start: 0.9, End: 0.1}
			same := def
			same.Steps = n
			for step := 0; step <= n+2; step++ {
				if a, b := def.At(step, n), same.At(step, n); a != b {
					t.Errorf("%s: Steps 0 gives %v at step %d of %d, Steps %d gives %v", kind, a, step, n, n, b)
				}
			}
		}
		// A run of no steps has nothing to anneal over.
		s := Schedule{Kind: kind, Start: 0.9, End: 0.1}
		if got := s.At(3, 0); got != 0.9 {
			t.Errorf("%s: At(3, 0) = %v, want Start", kind, got)
		}
		if got := s.Mean(0); got != 0.9 {
			t.Errorf("%s: Mean(0) = %v, want Start", kind, got)
		}
	}
}

func TestScheduleHorizon(t *testing.T) {
	const n = 80
	for _, kind := range optim.ScheduleKinds {
		def := Schedule{Kind: kind, Start: 1, End: 0.1}
		slow, fast := def, def
		slow.Steps, fast.Steps = 2*n, n/3
		for step := 0; step <= n; step++ {
			d, s, f := def.At(step, n), slow.At(step, n), fast.At(step, n)
			if s < d {
				t.Errorf("%s: slower decay %v below the default %v at step %d", kind, s, d, step)
			}
			if f > d {
				t.Errorf("%s: faster decay %v above the default %v at step %d", kind, f, d, step)
			}
			if kind != optim.Constant && step > 0 && step < n/3 && !(f < d && d < s) {
				t.Errorf("%s: step %d: fast %v, default %v, slow %v are not strictly ordered", kind, step, f, d, s)
			}
		}
		// The slower decay has not reached End when the run ends.
		if got := slow.At(n, n); kind != optim.Constant && got <= def.End {
			t.Errorf("%s: slower decay at the run's end is %v, already End", kind, got)
		}
		// Length gives the same decays as a multiple of the run's steps,
		// at any run length.
		slowBy, fastBy := def, def
		slowBy.Length, fastBy.Length = 2, 1.0/3
		for _, runSteps := range []int{n, 3 * n} {
			slow.Steps, fast.Steps = 2*runSteps, int(math.Round(float64(runSteps)/3))
			for step := 0; step <= runSteps; step++ {
				if slowBy.At(step, runSteps) != slow.At(step, runSteps) || fastBy.At(step, runSteps) != fast.At(step, runSteps) {
					t.Fatalf("%s: run of %d, step %d: length 2 and 1/3 give %v and %v, steps %d and %d give %v and %v", kind, runSteps, step,
						slowBy.At(step, runSteps), fastBy.At(step, runSteps), slow.Steps, fast.Steps, slow.At(step, runSteps), fast.At(step, runSteps))
				}
			}
		}
	}
}

func TestScheduleExponentialRate(t *testing.T) {
	const n = 50
	zero := Schedule{Kind: optim.Exponential, Start: 0.8, End: 0.2}
	five, ten := zero, zero
	five.Rate, ten.Rate = 5, 10
	for step := 0; step <= n+3; step++ {
		if a, b := zero.At(step, n), five.At(step, n); a != b {
			t.Errorf("At(%d): Rate 0 gives %v, Rate 5 gives %v", step, a, b)
		}
		// A larger rate front-loads the decay.
		if a, b := five.At(step, n), ten.At(step, n); b > a {
			t.Errorf("At(%d): Rate 10 gives %v, above Rate 5's %v", step, b, a)
		}
	}
	// A vanishing rate is a straight line, not 0/0.
	for _, rate := range []float64{1e-9, 1e-17, 1e-300} {
		s := Schedule{Kind: optim.Exponential, Start: 1, End: 0, Rate: rate}
		if err := s.Check("s"); err != nil {
			t.Fatal(err)
		}
		for step := 0; step <= n; step++ {
			want := 1 - float64(step)/n
			if got := s.At(step, n); math.IsNaN(got) || math.Abs(got-want) > 1e-6 {
				t.Fatalf("Rate %g: At(%d, %d) = %v, want about %v", rate, step, n, got, want)
			}
		}
	}
}

// TestBudgetMatched: the constant schedules spend the annealed ones'
// consultation budget, Σ p(t)·(T(t) − 1), over the run: EAPO's defaults
// over 200 steps (about 146.5 consultations per episode, where matching
// each schedule's mean alone would give 100), budgets p cannot reach
// (p stays at 1), and none at all.
func TestBudgetMatched(t *testing.T) {
	budget := func(accept, turns Schedule, n int) float64 {
		c := Consultation{Accept: accept, Turns: turns, RunSteps: n}
		var b float64
		for step := range n {
			b += c.Acceptance(step) * float64(c.TurnBudget(step)-1)
		}
		return b
	}
	for _, tt := range []struct {
		accept, turns Schedule
		n             int
		p, t          float64
	}{
		{Schedule{Kind: optim.Cosine, Start: 1, End: 0}, Schedule{Kind: optim.Linear, Start: 3, End: 1}, 200, 146.5 / 200, 2},
		{Schedule{Kind: optim.Constant, Start: 1}, Schedule{Kind: optim.Constant, Start: 3}, 50, 1, 3},
		{Schedule{Kind: optim.Constant, Start: 1}, Schedule{Kind: optim.Linear, Start: 5, End: 1}, 40, 1, 3},
		{Schedule{Kind: optim.Cosine, Start: 1, End: 0}, Schedule{Kind: optim.Constant, Start: 1}, 30, 0, 2},
	} {
		a, turns := BudgetMatched(tt.accept, tt.turns, tt.n)
		for step := range tt.n + 3 {
			if a.At(step, tt.n) != a.At(0, tt.n) || turns.At(step, tt.n) != turns.At(0, tt.n) {
				t.Fatalf("%+v: not constant at step %d", tt, step)
			}
		}
		if got := a.At(0, tt.n); math.Abs(got-tt.p) > 0.01 || turns.At(0, tt.n) != tt.t {
			t.Errorf("%+v, %+v: p = %v, T = %v; want about %v and %v", tt.accept, tt.turns, got, turns.At(0, tt.n), tt.p, tt.t)
		}
		want, got := budget(tt.accept, tt.turns, tt.n), budget(a, turns, tt.n)
		if tt.p < 1 && math.Abs(got-want) > 1e-9 {
			t.Errorf("%+v, %+v: budget %v, want %v", tt.accept, tt.turns, got, want)
		}
	}
}

func TestScheduleCheck(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		s    Schedule
		want []string // substrings of the error; nil for none
	}{
		{Schedule{Kind: optim.Constant, Start: 1}, nil},
		{Schedule{Kind: optim.Linear, Start: 1, End: 0, Steps: 10}, nil},
		{Schedule{Kind: optim.Cosine, Start: 0, End: 1}, nil},
		{Schedule{Kind: optim.Exponential, Start: 1, End: 0, Rate: 3}, nil},
		{Schedule{Kind: "step", Start: 1}, []string{"consult.accept.kind", `"step"`}},
		{Schedule{Kind: "Linear", Start: 1}, []string{"consult.accept.kind"}},
		{Schedule{Kind: optim.Linear, Start: 1, Steps: -1}, []string{"consult.accept", "steps -1"}},
		{Schedule{Kind: optim.Exponential, Start: 1, Rate: -2}, []string{"consult.accept", "rate -2"}},
		{Schedule{Kind: optim.Linear, Start: nan}, []string{"consult.accept", "start"}},
		{Schedule{Kind: optim.Linear, Start: 1, End: nan}, []string{"consult.accept", "end"}},
		{Schedule{Kind: optim.Cosine, Start: inf}, []string{"consult.accept", "start"}},
		{Schedule{Kind: optim.Cosine, Start: 1, End: -inf}, []string{"consult.accept", "end"}},
		{Schedule{Kind: optim.Exponential, Start: 1, Rate: nan}, []string{"consult.accept", "rate"}},
		{Schedule{Kind: optim.Exponential, Start: 1, Rate: inf}, []string{"consult.accept", "rate"}},
		{Schedule{Kind: optim.Linear, Start: 1, Length: -1}, []string{"consult.accept", "length -1"}},
		{Schedule{Kind: optim.Linear, Start: 1, Length: nan}, []string{"consult.accept", "length"}},
		{Schedule{Kind: optim.Linear, Start: 1, Length: 2, Steps: 10}, []string{"consult.accept", "both"}},
	} {
		err := tt.s.Check("consult.accept")
		if tt.want == nil {
			if err != nil {
				t.Errorf("Check(%+v): %v", tt.s, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Check(%+v): no error", tt.s)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Check(%+v) = %q, want it to name %q", tt.s, err, w)
			}
		}
	}
}
