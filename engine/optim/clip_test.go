package optim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGradNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	big := randSlab(rng, 1001, 3) // odd length exercises the tail loop
	var ss float64
	for _, g := range big {
		ss += float64(g) * float64(g)
	}
	tests := []struct {
		name  string
		grads []float32
		want  float64
	}{
		{"empty", nil, 0},
		{"3-4-5", []float32{3, 4}, 5},
		{"tail", []float32{1, 1, 1, 1, 2, 2, 2, 2, 4}, 6},
		{"random", big, math.Sqrt(ss)},
	}
	for _, tt := range tests {
		if got := GradNorm(tt.grads); math.Abs(got-tt.want) > 1e-12*tt.want {
			t.Errorf("%s: GradNorm = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	tests := []struct {
		name     string
		grads    []float32
		maxNorm  float32
		wantNorm float32
		clipped  bool
	}{
		{"below", []float32{0.3, 0, -0.4}, 1, 0.5, false},
		{"equal", []float32{3, 0, -4}, 5, 5, false},
		{"above", []float32{3, 0, -4}, 1, 5, true},
		{"far above", []float32{3e4, 1, -4e4, 2, 0, 7}, 0.5, 50000.00054, true},
		{"disabled zero", []float32{3, 0, -4}, 0, 5, false},
		{"disabled negative", []float32{3, 0, -4}, -1, 5, false},
		{"NaN left alone", []float32{3, float32(math.NaN()), 4}, 1, float32(math.NaN()), false},
		{"Inf left alone", []float32{3, float32(math.Inf(-1)), 4}, 1, float32(math.Inf(1)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.grads)
			norm := ClipGradNorm(tt.grads, tt.maxNorm)
			bothNaN := math.IsNaN(float64(norm)) && math.IsNaN(float64(tt.wantNorm))
			if norm != tt.wantNorm && !bothNaN && !closeRel(norm, float64(tt.wantNorm), 1e-6, 0) {
				t.Errorf("returned norm %v, want %v", norm, tt.wantNorm)
			}
			if !tt.clipped {
				if !slices.Equal(bits(tt.grads), bits(before)) {
					t.Errorf("grads changed to %v, want unchanged %v", tt.grads, before)
				}
				return
			}
			if got := GradNorm(tt.grads); math.Abs(got-float64(tt.maxNorm)) > 1e-5*float64(tt.maxNorm) {
				t.Errorf("norm after clipping = %v, want %v", got, tt.maxNorm)
			}
			// Clipping rescales; it must not change direction.
			scale := float64(tt.maxNorm) / float64(norm)
			for i, g := range tt.grads {
				if !closeRel(g, float64(before[i])*scale, 1e-6, 1e-30) {
					t.Errorf("grads[%d] = %v, want %v", i, g, float64(before[i])*scale)
				}
			}
		})
	}
}

func TestClipGradNormDoesNotAllocate(t *testing.T) {
	grads := randSlab(rand.New(rand.NewPCG(13, 14)), 1000, 1)
	if a := testing.AllocsPerRun(100, func() { ClipGradNorm(grads, 1) }); a != 0 {
		t.Errorf("ClipGradNorm allocates %v times per call, want 0", a)
	}
}
