//go:build cgo && amd64

package bench

/*
#cgo CFLAGS: -O2
#cgo noescape rlvr_fma_probe
#cgo nocallback rlvr_fma_probe
#include <immintrin.h>

// rlvr_fma_probe runs n iterations of twelve independent 8-wide FMA
// chains (enough to cover the FMA latency on two pipes) and returns the
// float32 operations done; the chains' sum is kept so nothing is elided.
__attribute__((target("avx2,fma"))) static double rlvr_fma_probe(long n, float* sink) {
	__m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f);
	__m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
	__m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
	__m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
	for (long i = 0; i < n; i++) {
		a0 = _mm256_fmadd_ps(a0, x, y); a1 = _mm256_fmadd_ps(a1, x, y); a2 = _mm256_fmadd_ps(a2, x, y);
		a3 = _mm256_fmadd_ps(a3, x, y); a4 = _mm256_fmadd_ps(a4, x, y); a5 = _mm256_fmadd_ps(a5, x, y);
		a6 = _mm256_fmadd_ps(a6, x, y); a7 = _mm256_fmadd_ps(a7, x, y); a8 = _mm256_fmadd_ps(a8, x, y);
		a9 = _mm256_fmadd_ps(a9, x, y); a10 = _mm256_fmadd_ps(a10, x, y); a11 = _mm256_fmadd_ps(a11, x, y);
	}
	__m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
		_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
			_mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
	_mm256_storeu_ps(sink, s);
	return (double)n * 12 * 16;
}
*/
import "C"

import "golang.org/x/sys/cpu"

var fmaProbeAvailable = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func fmaProbe(n int) float64 {
	var sink [8]float32
	return float64(C.rlvr_fma_probe(C.long(n), (*C.float)(&sink[0])))
}
