// Package eval scores models on tasks: greedy pass@1, pass@k with the
// unbiased estimator, avg@k, maj@k, per-problem variance (EAPO), and
// per-expert-prompt accuracy with the error-overlap table of MEML-GRPO's
// Table 1.
package eval

import (
	"math"
	"sort"
)

// PassAtK is the unbiased estimator of pass@k from n samples of which c are
// correct: 1 − C(n−c, k)/C(n, k) (Chen et al., 2021), computed as a
// product so it stays exact for large n. It is 1 when n−c < k.
func PassAtK(n, c, k int) float64 {
	if k <= 0 || n <= 0 || k > n {
		return math.NaN()
	}
	if n-c < k {
		return 1
	}
	fail := 1.0
	for i := n - c + 1; i <= n; i++ {
		fail *= 1 - float64(k)/float64(i)
	}
	return 1 - fail
}

// Variance is EAPO's per-problem variance of the 0/1 scores of n samples:
// (1/n)·Σ(s − μ)² with μ = c/n, which is μ(1 − μ).
func Variance(n, c int) float64 {
	if n == 0 {
		return math.NaN()
	}
	mu := float64(c) / float64(n)
	return mu * (1 - mu)
}

// Majority returns the most frequent non-empty answer and how often it
// occurs; ties go to the answer seen first.
func Majority(answers []string) (string, int) {
	count := map[string]int{}
	first := map[string]int{}
	for i, a := range answers {
		if a == "" {
			continue
		}
		if _, ok := first[a]; !ok {
			first[a] = i
		}
		count[a]++
	}
	keys := make([]string, 0, len(count))
	for a := range count {
		keys = append(keys, a)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		return first[keys[i]] < first[keys[j]]
	})
	if len(keys) == 0 {
		return "", 0
	}
	return keys[0], count[keys[0]]
}
