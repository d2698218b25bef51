package optim

import (
	"fmt"
	"math"
	"strings"
)

// ScheduleKind names the shape of a value's curve from its start to its
// end: the learning rate's after warmup, and EAPO's annealed acceptance
// probability and turn budget. It is a string so configs can spell it out.
type ScheduleKind string

// Schedule kinds. The learning rate takes the first three.
const (
	Constant ScheduleKind = "constant" // hold the start
	Linear   ScheduleKind = "linear"   // a straight line from the start to the end
	Cosine   ScheduleKind = "cosine"   // half a cosine: slow, fast, slow
	// Exponential closes the gap to the end by exp(−rate·x), normalized to
	// close at x = 1.
	Exponential ScheduleKind = "exponential"
)

// ScheduleKinds lists the kinds.
var ScheduleKinds = []ScheduleKind{Constant, Linear, Cosine, Exponential}

// Left is the share of the way from a schedule's start to its end still to
// go at progress x in [0, 1] along kind: 1 throughout for Constant, 1 − x
// for Linear, (1 + cos πx)/2 for Cosine, and 1 − (1 − e^(−rate·x))/(1 −
// e^(−rate)) for Exponential (rate 0 means 5). It is 0 at x = 1 exactly
// for all but Constant. An unknown kind is Constant.
func Left(kind ScheduleKind, x, rate float64) float64 {
	switch kind {
	case Linear:
		return 1 - x
	case Cosine:
		return (1 + math.Cos(math.Pi*x)) / 2
	case Exponential:
		if rate == 0 {
			rate = 5
		}
		// Expm1 keeps a tiny rate from rounding to 0/0.
		return 1 - math.Expm1(-rate*x)/math.Expm1(-rate)
	}
	return 1
}

// ParseScheduleKind returns the kind named by s, ignoring case and
// surrounding space.
func ParseScheduleKind(s string) (ScheduleKind, error) {
	k := ScheduleKind(strings.ToLower(strings.TrimSpace(s)))
	if !k.valid() {
		return "", fmt.Errorf("optim: unknown schedule kind %q (want constant, linear or cosine)", s)
	}
	return k, nil
}

func (k ScheduleKind) valid() bool {
	return k == Constant || k == Linear || k == Cosine
}

// Schedule maps an optimizer step to a learning rate. Steps count from 0
// (the first update) and go through two phases:
//
//   - Warmup, step < WarmupSteps: lr = PeakLR * (step+1) / WarmupSteps, so
//     the first update already has a nonzero rate and step WarmupSteps-1
//     reaches PeakLR.
//   - Decay, step >= WarmupSteps: with p = (step-WarmupSteps) /
//     (TotalSteps-WarmupSteps) clamped to [0, 1] and min = PeakLR*MinLRRatio,
//     Constant gives PeakLR, Linear gives min + (PeakLR-min)*(1-p) and Cosine
//     gives min + (PeakLR-min)*(1+cos(pi*p))/2. Both decays start at PeakLR
//     at step WarmupSteps, reach min at step TotalSteps and stay there.
type Schedule struct {
	Kind   ScheduleKind `yaml:"kind" json:"kind"`
	PeakLR float64      `yaml:"peak_lr" json:"peak_lr"`
	// WarmupSteps is the length of the linear warmup; 0 starts at PeakLR.
	WarmupSteps int `yaml:"warmup_steps" json:"warmup_steps"`
	// TotalSteps is the step at which decay reaches its minimum. It must be
	// positive for Linear and Cosine; Constant ignores it, and 0 there means
	// no set length.
	TotalSteps int `yaml:"total_steps" json:"total_steps"`
	// MinLRRatio is the final rate as a fraction of PeakLR, in [0, 1]; 0
	// decays all the way to zero. Constant ignores it.
	MinLRRatio float64 `yaml:"min_lr_ratio" json:"min_lr_ratio"`
}

// LR returns the learning rate for step (see [Schedule]). Negative steps
// count as 0; an unknown Kind behaves as Constant, so call Validate first.
func (s Schedule) LR(step int) float64 {
	step = max(step, 0)
	if step < s.WarmupSteps {
		return s.PeakLR * float64(step+1) / float64(s.WarmupSteps)
	}
	if s.Kind != Linear && s.Kind != Cosine {
		return s.PeakLR
	}
	p := 1.0
	if span := s.TotalSteps - s.WarmupSteps; span > 0 {
		p = min(float64(step-s.WarmupSteps)/float64(span), 1)
	}
	lo := s.PeakLR * s.MinLRRatio
	return lo + (s.PeakLR-lo)*Left(s.Kind, p, 0)
}

// Validate reports every problem with s at once, naming each field and its
// value.
func (s Schedule) Validate() error {
	var probs []string
	if !s.Kind.valid() {
		probs = append(probs, fmt.Sprintf("Kind = %q, want constant, linear or cosine", s.Kind))
	}
	if !(s.PeakLR > 0) || math.IsInf(s.PeakLR, 0) {
		probs = append(probs, fmt.Sprintf("PeakLR = %v, want finite and > 0", s.PeakLR))
	}
	if s.WarmupSteps < 0 {
		probs = append(probs, fmt.Sprintf("WarmupSteps = %d, want >= 0", s.WarmupSteps))
	}
	if s.TotalSteps < 0 {
		probs = append(probs, fmt.Sprintf("TotalSteps = %d, want >= 0", s.TotalSteps))
	}
	if s.TotalSteps == 0 && (s.Kind == Linear || s.Kind == Cosine) {
		probs = append(probs, fmt.Sprintf("TotalSteps = 0, want > 0 for %s decay", s.Kind))
	}
	if s.TotalSteps > 0 && s.WarmupSteps > s.TotalSteps {
		probs = append(probs, fmt.Sprintf("WarmupSteps = %d exceeds TotalSteps = %d", s.WarmupSteps, s.TotalSteps))
	}
	if !(s.MinLRRatio >= 0 && s.MinLRRatio <= 1) {
		probs = append(probs, fmt.Sprintf("MinLRRatio = %v, want in [0, 1]", s.MinLRRatio))
	}
	return problems("schedule", probs)
}
