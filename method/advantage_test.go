package method

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestGroupAdvantages(t *testing.T) {
	// Rewards 1,0,0,1: mean .5, unbiased std sqrt(1/3).
	r := []float64{1, 0, 0, 1}
	grpo := GroupAdvantages(r, true, 0)
	sd := math.Sqrt(1.0 / 3)
	for i, want := range []float64{0.5 / sd, -0.5 / sd, -0.5 / sd, 0.5 / sd} {
		if !near(grpo[i], want) {
			t.Fatalf("GRPO advantage %d = %v, want %v", i, grpo[i], want)
		}
	}
	dr := GroupAdvantages(r, false, 0)
	for i, want := range []float64{0.5, -0.5, -0.5, 0.5} {
		if !near(dr[i], want) {
			t.Fatalf("Dr.GRPO advantage %d = %v, want %v", i, dr[i], want)
		}
	}
	// One right answer in eight: GRPO gives it a large advantage, 7/8 over
	// an std of sqrt(1/8).
	one := GroupAdvantages([]float64{1, 0, 0, 0, 0, 0, 0, 0}, true, 1e-4)
	if want := (7.0 / 8) / (math.Sqrt(1.0/8) + 1e-4); !near(one[0], want) {
		t.Fatalf("lone success: %v, want %v", one[0], want)
	}
	// A zero-variance group gives zero advantages, not NaN.
	for _, a := range GroupAdvantages([]float64{1, 1, 1}, true, 1e-4) {
		if a != 0 {
			t.Fatalf("zero-variance group: %v", a)
		}
	}
}

func TestBatchNormalizeAndHelpers(t *testing.T) {
	a := []float64{0.5, -0.5, 1, -1}
	BatchNormalize(a, 0)
	if !near(Mean(a), 0) || !near(StdDev(a), 1) {
		t.Fatalf("normalized batch mean %v std %v", Mean(a), StdDev(a))
	}
	if !ZeroVariance([]float64{1, 1}) || ZeroVariance([]float64{1, 0}) || !ZeroVariance([]float64(nil)) {
		t.Fatal("ZeroVariance")
	}
}
