package dapo

import (
	"context"

	"rlvr/method"
)

// DynamicSampling is DAPO's filter (method.Filter): groups whose answers
// are all correct or all wrong carry no group-relative signal, so they
// are kept out of the objective's batch and more questions are sampled,
// up to MaxRounds extra rounds. It reads the verifier's verdicts, not the
// shaped rewards, as DAPO and verl do.
type DynamicSampling struct {
	MaxRounds int
}

// Keep implements method.Filter: a group whose verdicts differ.
func (DynamicSampling) Keep(g *method.Scored) bool { return !method.ZeroVariance(g.Correct) }

// Rounds implements method.Filter.
func (d DynamicSampling) Rounds() int { return d.MaxRounds }

// OverlongPenalty is DAPO's soft overlong punishment as a shaper: rewards
// fall linearly from 0 to −1 over the last Buffer tokens of MaxTokens.
type OverlongPenalty struct{ MaxTokens, Buffer int }

// MetricOverlongPenalized counts a step's answers the penalty lowered.
const MetricOverlongPenalized = "overlong/penalized"

// Shape implements method.Shaper.
func (o OverlongPenalty) Shape(_ context.Context, sc *method.StepContext, groups []method.Scored) error {
	for gi := range groups {
		g := &groups[gi]
		for i := range g.Trajectories {
			p := Overlong(g.Trajectories[i].PolicyTokens(), o.MaxTokens, o.Buffer)
			g.Rewards[i] += p
			if p < 0 {
				sc.Metrics[MetricOverlongPenalized]++
			}
		}
	}
	return nil
}

// Overlong is DAPO's soft overlong punishment for a response of
// length tokens when responses may be maxLen long: 0 up to maxLen − cache,
// then falling linearly to −1 at maxLen (and −1 beyond).
func Overlong(length, maxLen, cache int) float64 {
	start := maxLen - cache
	switch {
	case length <= start:
		return 0
	case length >= maxLen || cache <= 0:
		return -1
	}
	return float64(start-length) / float64(cache)
}
