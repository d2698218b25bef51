// Package stats is the statistics rlvr reports results with: a mean with
// its 95% interval (Student-t over seeds, Wilson for a proportion) and the
// smallest difference a paired comparison can detect. It is a leaf, so the
// report and the papers' report columns use it without compiling the
// evaluation that produced the numbers (package eval) or the engine.
package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Interval is a mean with a 95% confidence interval.
type Interval struct {
	Mean, Low, High float64
	N               int
}

// Percent writes the interval as a person reads it, "12.5% [8.6, 17.8]",
// its bounds clipped to [0%, 100%] (a Student-t interval of a proportion
// can reach past them).
func (iv Interval) Percent() string {
	return fmt.Sprintf("%.1f%% [%.1f, %.1f]", 100*iv.Mean, 100*max(iv.Low, 0), 100*min(iv.High, 1))
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

// MeanInterval is the mean of xs with its 95% Student-t interval,
// mean ± t(0.975, n−1)·s/√n (for comparing runs over seeds). Low and High
// are NaN for fewer than two values, and Mean too for none.
func MeanInterval(xs []float64) Interval {
	iv := Interval{Mean: math.NaN(), Low: math.NaN(), High: math.NaN(), N: len(xs)}
	if len(xs) == 0 {
		return iv
	}
	iv.Mean = 0
	for _, x := range xs {
		iv.Mean += x
	}
	n := float64(len(xs))
	iv.Mean /= n
	if len(xs) < 2 {
		return iv
	}
	var ss float64
	for _, x := range xs {
		ss += (x - iv.Mean) * (x - iv.Mean)
	}
	half := tQuantile(0.975, len(xs)-1) * math.Sqrt(ss/(n-1)/n)
	iv.Low, iv.High = iv.Mean-half, iv.Mean+half
	return iv
}

// MinDetectable is the minimum detectable effect of a paired comparison
// summarized by MeanInterval: the smallest true mean difference that a
// two-sided t-test at the 5% level finds with 80% power, at the spread of
// the differences observed, (t(0.975, n−1) + t(0.80, n−1))·s/√n. It is NaN
// below three differences, where the spread says too little.
func MinDetectable(iv Interval) float64 {
	if iv.N < 3 || !(iv.High >= iv.Mean) {
		return math.NaN()
	}
	t975 := tQuantile(0.975, iv.N-1)
	se := (iv.High - iv.Mean) / t975
	return (t975 + tQuantile(0.80, iv.N-1)) * se
}

// tQuantile is the p quantile of Student's t distribution with df degrees
// of freedom, from the inverse of the regularized incomplete beta function.
func tQuantile(p float64, df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(p)
}
