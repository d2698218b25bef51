// Package gradcheck compares analytic gradients against central finite
// differences. Every backward pass and every loss term in the engine is
// checked with it.
package gradcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Options bound a check. The zero value checks every coordinate with step
// 1e-2 and tolerances suited to float32 forwards.
type Options struct {
	Step float64 // finite-difference step h; 0 means 1e-2
	// Coordinates is how many randomly chosen coordinates to check; 0 or
	// more than len(x) means all of them.
	Coordinates int
	// Atol and Rtol bound each coordinate: |analytic − numeric| ≤ Atol +
	// Rtol·max(|analytic|, |numeric|). Zero means 2e-3 and 2e-2.
	Atol, Rtol float64
	Seed       uint64 // picks the coordinates
}

// Check perturbs x[i] by ±h, evaluates loss, and compares
// (loss(x+h) − loss(x−h)) / 2h with analytic[i]. loss must read x each time
// it is called. x is restored afterwards. It returns an error naming the
// worst coordinate when any is out of tolerance, and the largest absolute
// difference seen.
func Check(name string, x, analytic []float32, loss func() float64, o Options) (maxDiff float64, err error) {
	if len(x) != len(analytic) {
		return 0, fmt.Errorf("gradcheck %s: %d values but %d gradients", name, len(x), len(analytic))
	}
	h := o.Step
	if h == 0 {
		h = 1e-2
	}
	atol, rtol := o.Atol, o.Rtol
	if atol == 0 {
		atol = 2e-3
	}
	if rtol == 0 {
		rtol = 2e-2
	}
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	if o.Coordinates > 0 && o.Coordinates < len(x) {
		r := rand.New(rand.NewPCG(o.Seed, 17))
		r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		idx = idx[:o.Coordinates]
	}
	worst, worstI, worstA, worstN := 0.0, -1, 0.0, 0.0
	for _, i := range idx {
		orig := x[i]
		x[i] = orig + float32(h)
		up := loss()
		x[i] = orig - float32(h)
		down := loss()
		x[i] = orig
		// Divide by the perturbation float32 actually applied.
		step := float64(orig+float32(h)) - float64(orig-float32(h))
		num := (up - down) / step
		a := float64(analytic[i])
		d := math.Abs(a - num)
		maxDiff = math.Max(maxDiff, d)
		excess := d - (atol + rtol*math.Max(math.Abs(a), math.Abs(num)))
		if excess > 0 && (worstI < 0 || excess > worst) || math.IsNaN(d) {
			worst, worstI, worstA, worstN = excess, i, a, num
		}
	}
	if worstI >= 0 {
		return maxDiff, fmt.Errorf("gradcheck %s: coordinate %d: analytic %.6g, numeric %.6g (max |diff| %.3g)", name, worstI, worstA, worstN, maxDiff)
	}
	return maxDiff, nil
}

// Dot returns Σ r[i]·y[i] in float64: the scalar loss whose gradient with
// respect to y is r, used to check a backward pass with dout = r.
func Dot(r, y []float32) float64 {
	var s float64
	for i := range r {
		s += float64(r[i]) * float64(y[i])
	}
	return s
}
