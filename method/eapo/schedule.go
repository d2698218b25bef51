package eapo

import (
	"fmt"
	"math"
	"rlvr/engine/optim"
	"slices"
)

// Schedule anneals a value over training steps: Start at step 0, End from
// step Steps on. EAPO anneals the acceptance probability p(t) of expert
// replies and the turn budget this way; a slower decay has a longer
// Steps than the run, a faster one a shorter.
//
// Its shapes are optim's, whose Left the learning rate follows too.
type Schedule struct {
	Kind  optim.ScheduleKind `yaml:"kind"`
	Start float64            `yaml:"start"`
	End   float64            `yaml:"end"`
	// Steps is the decay's length in steps, or Length its length as a
	// multiple of the run's steps (2: a decay twice as slow as the run);
	// neither takes the run's steps.
	Steps  int     `yaml:"steps,omitempty"`
	Length float64 `yaml:"length,omitempty"`
	// Rate is the exponential's: at Steps the gap to End is exp(−Rate)
	// of what it was, and then it closes. 0 means 5.
	Rate float64 `yaml:"rate,omitempty"`
}

// Check reports a schedule that cannot be followed, naming it by name.
func (s Schedule) Check(name string) error {
	if !slices.Contains(optim.ScheduleKinds, s.Kind) {
		return fmt.Errorf("%s.kind %q is not one of %v", name, s.Kind, optim.ScheduleKinds)
	}
	if s.Steps < 0 || s.Rate < 0 || s.Length < 0 {
		return fmt.Errorf("%s: steps %d, length %g and rate %g must not be negative", name, s.Steps, s.Length, s.Rate)
	}
	if math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) || math.IsNaN(s.Length) || s.Length > 1000 {
		return fmt.Errorf("%s: rate %g must be finite, length %g at most 1000", name, s.Rate, s.Length)
	}
	if s.Steps > 0 && s.Length > 0 {
		return fmt.Errorf("%s: steps %d and length %g both set the decay's length", name, s.Steps, s.Length)
	}
	if math.IsNaN(s.Start) || math.IsNaN(s.End) || math.IsInf(s.Start, 0) || math.IsInf(s.End, 0) {
		return fmt.Errorf("%s: start %g and end %g must be finite", name, s.Start, s.End)
	}
	return nil
}

// At is the value at a 0-based step of a run of runSteps steps.
func (s Schedule) At(step, runSteps int) float64 {
	n := s.Steps
	switch {
	case s.Length > 0:
		n = max(1, int(math.Round(s.Length*float64(runSteps))))
	case n <= 0:
		n = runSteps
	}
	if s.Kind == optim.Constant || n <= 0 {
		return s.Start
	}
	// Start and End exactly at either end: End + (Start−End)·1 may round
	// off Start.
	switch left := optim.Left(s.Kind, math.Min(float64(step)/float64(n), 1), s.Rate); {
	case left >= 1:
		return s.Start
	case left <= 0:
		return s.End
	default:
		return s.End + (s.Start-s.End)*left
	}
}

// Mean is the schedule's mean over the steps of a run of runSteps steps:
// its budget per step.
func (s Schedule) Mean(runSteps int) float64 {
	if runSteps <= 0 {
		return s.At(0, 0)
	}
	var sum float64
	for t := range runSteps {
		sum += s.At(t, runSteps)
	}
	return sum / float64(runSteps)
}
