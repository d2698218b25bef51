package llama2c

import (
	"math"
	"testing"
)

// TestPermuteRoPEEquivalence checks that interleaved RoPE applied to x·Wᵀ
// gives the same values as rotate-half RoPE applied to x·W'ᵀ, where W' is
// PermuteForRotateHalf(W), with element h*hd+2i+t of the former equal to
// element h*hd+t*hd/2+i of the latter, and that attention scores agree.
func TestPermuteRoPEEquivalence(t *testing.T) {
	rng := newRand(7)
	for _, tc := range []struct{ heads, hd, cols int }{
		{1, 2, 1}, {2, 4, 3}, {8, 8, 64}, {3, 16, 5},
	} {
		rows := tc.heads * tc.hd
		w := make([]float32, rows*tc.cols)
		wk := make([]float32, rows*tc.cols)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
			wk[i] = float32(rng.NormFloat64())
		}
		wp := PermuteForRotateHalf(w, tc.heads, tc.hd, tc.cols)
		wkp := PermuteForRotateHalf(wk, tc.heads, tc.hd, tc.cols)
		x := make([]float32, tc.cols)
		x2 := make([]float32, tc.cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			x2[i] = float32(rng.NormFloat64())
		}
		for _, pos := range []int{0, 1, 5, 37, 511} {
			a := make([]float32, rows) // interleaved
			b := make([]float32, rows) // rotate-half
			matmul(a, x, w)
			matmul(b, x, wp)
			ropeInterleaved(a, pos, tc.hd)
			ropeRotateHalf(b, pos, tc.hd)
			for h := range tc.heads {
				for i := range tc.hd / 2 {
					for s := range 2 {
						ai := h*tc.hd + 2*i + s
						bi := h*tc.hd + s*tc.hd/2 + i
						if math.Float32bits(a[ai]) != math.Float32bits(b[bi]) {
							t.Fatalf("%+v pos %d: interleaved[%d] = %v, rotate-half[%d] = %v", tc, pos, ai, a[ai], bi, b[bi])
						}
					}
				}
			}
			// Attention scores between a query at pos and a key at
			// another position are unchanged, up to summation order.
			ka := make([]float32, rows)
			kb := make([]float32, rows)
			matmul(ka, x2, wk)
			matmul(kb, x2, wkp)
			ropeInterleaved(ka, pos/2, tc.hd)
			ropeRotateHalf(kb, pos/2, tc.hd)
			for h := range tc.heads {
				var sa, sb float64
				for i := range tc.hd {
					sa += float64(a[h*tc.hd+i]) * float64(ka[h*tc.hd+i])
					sb += float64(b[h*tc.hd+i]) * float64(kb[h*tc.hd+i])
				}
				if math.Abs(sa-sb) > 1e-9*max(1, math.Abs(sa)) {
					t.Fatalf("%+v pos %d head %d: score %v vs %v", tc, pos, h, sa, sb)
				}
			}
		}
		back := UnpermuteFromRotateHalf(wp, tc.heads, tc.hd, tc.cols)
		for i := range w {
			if back[i] != w[i] {
				t.Fatalf("%+v: Unpermute(Permute(w))[%d] = %v, want %v", tc, i, back[i], w[i])
			}
		}
	}
}

func TestPermuteLayout(t *testing.T) {
	// One head of size 4, one column: rows 0 1 2 3 become 0 2 1 3.
	got := PermuteForRotateHalf([]float32{0, 1, 2, 3, 10, 11, 12, 13}, 2, 4, 1)
	want := []float32{0, 2, 1, 3, 10, 12, 11, 13}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("PermuteForRotateHalf = %v, want %v", got, want)
		}
	}
}

func TestPermutePanics(t *testing.T) {
	for _, tc := range []struct {
		n, heads, hd, cols int
	}{
		{8, 2, 4, 2}, // wrong length
		{6, 1, 3, 2}, // odd head size
		{0, 1, 0, 1}, // zero head size
		{8, -2, 4, -1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%+v: no panic", tc)
				}
			}()
			PermuteForRotateHalf(make([]float32, tc.n), tc.heads, tc.hd, tc.cols)
		}()
	}
}
