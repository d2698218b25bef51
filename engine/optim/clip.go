package optim

import "math"

// GradNorm returns the global L2 norm of grads. It sums squares in float64,
// in a fixed order, so the result is deterministic and does not lose
// precision over millions of elements.
func GradNorm(grads []float32) float64 {
	// Four independent partial sums keep the FPU busy instead of waiting on
	// one long dependency chain; they are combined in a fixed order.
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(grads); i += 4 {
		g := grads[i : i+4 : i+4]
		a, b, c, d := float64(g[0]), float64(g[1]), float64(g[2]), float64(g[3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(grads); i++ {
		x := float64(grads[i])
		s0 += x * x
	}
	return math.Sqrt((s0 + s1) + (s2 + s3))
}

// ClipGradNorm scales grads in place so that their global L2 norm is at most
// maxNorm, and returns the norm before clipping (worth logging either way).
// maxNorm <= 0 disables clipping. A non-finite norm is returned without
// scaling, so that [AdamW.Step] reports the offending element instead of
// seeing every gradient turned into NaN or zero.
func ClipGradNorm(grads []float32, maxNorm float32) (norm float32) {
	n := GradNorm(grads)
	if maxNorm > 0 && n > float64(maxNorm) && !math.IsInf(n, 0) {
		scale := float32(float64(maxNorm) / n)
		for i := range grads {
			grads[i] *= scale
		}
	}
	return float32(n)
}
