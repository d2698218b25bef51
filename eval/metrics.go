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

// Interval is a mean with a 95% confidence interval.
type Interval struct {
	Mean, Low, High float64
	N               int
}

// WilsonInterval is the 95% Wilson score interval of a proportion of
// successes out of n, which behaves at 0% and 100% where the normal
// approximation does not.
func WilsonInterval(successes, n int) Interval {
	if n == 0 {
		return Interval{Mean: math.NaN(), Low: math.NaN(), High: math.NaN()}
	}
	const z = 1.959963984540054
	p := float64(successes) / float64(n)
	nn := float64(n)
	den := 1 + z*z/nn
	center := (p + z*z/(2*nn)) / den
	half := z * math.Sqrt(p*(1-p)/nn+z*z/(4*nn*nn)) / den
	return Interval{Mean: p, Low: math.Max(0, center-half), High: math.Min(1, center+half), N: n}
}

// MeanInterval is the mean of xs with a 95% t-interval (for comparing runs
// over seeds).
func MeanInterval(xs []float64) Interval {
	n := len(xs)
	if n == 0 {
		return Interval{Mean: math.NaN(), Low: math.NaN(), High: math.NaN()}
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n == 1 {
		return Interval{Mean: mean, Low: mean, High: mean, N: 1}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	se := math.Sqrt(ss / float64(n-1) / float64(n))
	t := tQuantile975(n - 1)
	return Interval{Mean: mean, Low: mean - t*se, High: mean + t*se, N: n}
}

// tQuantile975 is Student's t 97.5% quantile for df degrees of freedom.
func tQuantile975(df int) float64 {
	table := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086}
	if df < len(table) {
		return table[df]
	}
	return 1.96 + 2.4/float64(df) // within 0.5% of the exact value beyond 20
}
