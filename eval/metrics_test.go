package eval

import (
	"math"
	"testing"
)

func TestPassAtK(t *testing.T) {
	for _, tc := range []struct {
		n, c, k int
		want    float64
	}{
		{10, 0, 1, 0},
		{10, 10, 5, 1},
		{10, 3, 1, 0.3},
		{4, 1, 2, 0.5},           // 1 − C(3,2)/C(4,2) = 1 − 3/6
		{8, 2, 4, 1 - 15.0/70.0}, // 1 − C(6,4)/C(8,4)
		{32, 1, 32, 1},           // one success among all samples
		{100, 1, 10, 0.1},        // 1 − C(99,10)/C(100,10) = 10/100
	} {
		if got := PassAtK(tc.n, tc.c, tc.k); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want %v", tc.n, tc.c, tc.k, got, tc.want)
		}
	}
	if !math.IsNaN(PassAtK(3, 1, 4)) {
		t.Error("k > n must be NaN")
	}
}

func TestVarianceAndMajority(t *testing.T) {
	if v := Variance(4, 1); v != 0.1875 { // scores 1,0,0,0: mean .25, var .1875
		t.Errorf("Variance(4,1) = %v", v)
	}
	if a, n := Majority([]string{"3", "", "5", "3", "5", "7"}); a != "3" || n != 2 {
		t.Errorf("Majority = %q, %d; want the first of the tied answers", a, n)
	}
	if a, n := Majority([]string{"", ""}); a != "" || n != 0 {
		t.Errorf("Majority of nothing = %q, %d", a, n)
	}
}
