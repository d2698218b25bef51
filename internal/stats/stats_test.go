package stats

import (
	"math"
	"testing"
)

func TestIntervals(t *testing.T) {
	w := WilsonInterval(0, 20)
	if w.Low != 0 || w.High < 0.1 || w.High > 0.2 {
		t.Errorf("Wilson(0/20) = %+v", w)
	}
	// t(0.975, 2) is 4.303 in the 3-decimal table; the exact quantile is
	// within the table's rounding of it.
	m := MeanInterval([]float64{0.5, 0.6, 0.7})
	if math.Abs(m.Mean-0.6) > 1e-12 || math.Abs(m.High-m.Mean-4.303*0.1/math.Sqrt(3)) > 0.0005*0.1/math.Sqrt(3) {
		t.Errorf("MeanInterval = %+v", m)
	}
}

// TestTQuantile checks the t quantile against closed forms (df 1, 2, and
// df 3 through its CDF) and against the 3-decimal textbook table.
func TestTQuantile(t *testing.T) {
	if got, want := tQuantile(0.975, 1), math.Tan(0.475*math.Pi); !near(got, want, 1e-9) {
		t.Errorf("t(0.975, 1) = %.12f, want %.12f", got, want)
	}
	if got, want := tQuantile(0.975, 2), 0.95/math.Sqrt(2*0.975*0.025); !near(got, want, 1e-9) {
		t.Errorf("t(0.975, 2) = %.12f, want %.12f", got, want)
	}
	x := tQuantile(0.975, 3) / math.Sqrt(3)
	if cdf := 0.5 + (x/(1+x*x)+math.Atan(x))/math.Pi; !near(cdf, 0.975, 1e-12) {
		t.Errorf("F3(t(0.975, 3)) = %.15f, want 0.975", cdf)
	}
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	for i, want := range table {
		if got := math.Round(tQuantile(0.975, i+1)*1000) / 1000; got != want {
			t.Errorf("t(0.975, %d) = %.3f, want %.3f", i+1, got, want)
		}
	}
	if got := tQuantile(0.975, 1000); !near(got, 1.962, 0.0005) {
		t.Errorf("t(0.975, 1000) = %.4f, want 1.962", got)
	}
}

func TestIntervalPercent(t *testing.T) {
	for _, tc := range []struct {
		iv   Interval
		want string
	}{
		{WilsonInterval(25, 200), "12.5% [8.6, 17.8]"},
		{Interval{Mean: 0.01, Low: -0.02, High: 0.04}, "1.0% [0.0, 4.0]"},
		{Interval{Mean: 0.99, Low: 0.97, High: 1.03}, "99.0% [97.0, 100.0]"},
	} {
		if got := tc.iv.Percent(); got != tc.want {
			t.Errorf("%+v.Percent() = %q, want %q", tc.iv, got, tc.want)
		}
	}
}

// TestMinDetectable checks the minimum detectable effect against Student-t
// table values: t(0.975, 4) = 2.776445 and t(0.80, 4) = 0.940965.
func TestMinDetectable(t *testing.T) {
	xs := []float64{0.01, 0.03, 0.02, 0.05, 0.04} // s = 0.0158114, s/√5 = 0.00707107
	want := (2.776445 + 0.940965) * 0.00707107
	if got := MinDetectable(MeanInterval(xs)); math.Abs(got-want) > 1e-6 {
		t.Errorf("MDE %v, want %v", got, want)
	}
	for _, few := range [][]float64{nil, {0.1}, {0.1, 0.2}} {
		if got := MinDetectable(MeanInterval(few)); !math.IsNaN(got) {
			t.Errorf("MDE of %v: %v, want NaN", few, got)
		}
	}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }
