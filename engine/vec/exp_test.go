package vec

import (
	"math"
	"testing"
)

func TestExp32Accuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-103); x < 88.7; x += 0.001237 {
		got, want := float64(Exp32(x)), math.Exp(float64(x))
		if want < 1.2e-38 { // subnormals: absolute error
			if math.Abs(got-want) > 3e-45 {
				t.Fatalf("Exp32(%v) = %v, want %v", x, got, want)
			}
			continue
		}
		rel := math.Abs(got-want) / want
		worst = math.Max(worst, rel)
	}
	if worst > 2.5e-7 {
		t.Fatalf("max relative error %.3g", worst)
	}
	for _, tc := range []struct{ x, want float32 }{{0, 1}, {-200, 0}, {100, float32(math.Inf(1))}} {
		if got := Exp32(tc.x); got != tc.want {
			t.Errorf("Exp32(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if nan := Exp32(float32(math.NaN())); nan == nan {
		t.Error("Exp32(NaN) is not NaN")
	}
}

func BenchmarkExp32(b *testing.B) {
	var s float32
	for i := 0; b.Loop(); i++ {
		s += Exp32(float32(i%100) * -0.05)
	}
	_ = s
}

func BenchmarkMathExp(b *testing.B) {
	var s float64
	for i := 0; b.Loop(); i++ {
		s += math.Exp(float64(i%100) * -0.05)
	}
	_ = s
}
