package optim

import (
	"fmt"
	"math"
	"strings"
)

// ScheduleKind names the shape of the learning-rate curve after warmup. It
// is a string so configs can spell it out.
type ScheduleKind string

// Schedule kinds.
const (
	Constant ScheduleKind = "constant" // hold PeakLR
	Linear   ScheduleKind = "linear"   // straight line from PeakLR to the minimum
	Cosine   ScheduleKind = "cosine"   // half cosine from PeakLR to the minimum
)

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
	if s.Kind == Linear {
		return lo + (s.PeakLR-lo)*(1-p)
	}
	return lo + (s.PeakLR-lo)*(1+math.Cos(math.Pi*p))/2
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
