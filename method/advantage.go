// Package method is the one place where training methods differ. A
// [Method] gets a step's questions and a [StepContext] — the current policy's
// sampler, the prompt renderer, the verifier, the step's seed — and returns
// a [Batch] of loss [Term]s; how questions become trajectories (prompt
// variants, single- or multi-turn episodes, extra generation passes), how
// they are scored and shaped, and which terms train is the method's
// business, so the training loop never asks which method runs.
//
// [RL] is the GRPO core, with a seam for each kind of guidance part: prompt
// [Variant]s, a [Rollout], reward [Shaper]s, a [Filter], an [Objective]
// (the GRPO [Family], including MEML-GRPO's REINFORCE on max(A, 0)) and
// [Extra] terms. The parts themselves are packages of their own, one per
// paper (method/meml, method/eapo, method/mel, method/dapo), chosen from
// the registry in method/part; this package has only the KL in the reward
// ([RewardKL]), which every algorithm may take. [Supervised] is SFT. Parts
// that keep state across steps implement [Stateful], and the loop
// checkpoints it. This file holds the advantage and reward-shaping math
// they share.
package method

import "math"

// GroupAdvantages returns r − mean(r) for one group, divided by the
// group's standard deviation (unbiased, as TRL computes it) plus eps when
// normalize is set (GRPO) and left undivided otherwise (Dr.GRPO, which
// removes the bias toward low-variance questions).
func GroupAdvantages(rewards []float64, normalize bool, eps float64) []float64 {
	n := len(rewards)
	out := make([]float64, n)
	if n == 0 {
		return out
	}
	mean := Mean(rewards)
	for i, r := range rewards {
		out[i] = r - mean
	}
	if normalize {
		sd := StdDev(rewards)
		for i := range out {
			out[i] /= sd + eps
		}
	}
	return out
}

// BatchNormalize divides advantages by the standard deviation over the
// whole batch (REINFORCE++'s global normalization, applied after a
// group-mean baseline) and centers them on the batch mean.
func BatchNormalize(adv []float64, eps float64) {
	if len(adv) == 0 {
		return
	}
	mean, sd := Mean(adv), StdDev(adv)
	for i := range adv {
		adv[i] = (adv[i] - mean) / (sd + eps)
	}
}

// Mean is the arithmetic mean (NaN for none).
func Mean(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// StdDev is the unbiased sample standard deviation (0 for fewer than two).
func StdDev(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	m := Mean(x)
	var ss float64
	for _, v := range x {
		ss += (v - m) * (v - m)
	}
	return math.Sqrt(ss / float64(len(x)-1))
}

// ZeroVariance reports whether every reward, or every verdict, of a group
// is the same: such a group carries no GRPO signal (DAPO drops it and
// samples more).
func ZeroVariance[T comparable](rewards []T) bool {
	for _, r := range rewards[min(1, len(rewards)):] {
		if r != rewards[0] {
			return false
		}
	}
	return true
}
