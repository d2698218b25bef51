//go:build cgo && amd64

package gemm

/*
#cgo CFLAGS: -O3
#cgo noescape rlvr_panels
#cgo nocallback rlvr_panels
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE inline __attribute__((always_inline))

// rl_store writes (or adds) one row of a tile: cols ≤ 16 outputs.
AVX2 static INLINE void rl_store(float* y, __m256 c0, __m256 c1, long cols, int acc) {
	if (cols == 16) {
		if (acc) {
			c0 = _mm256_add_ps(_mm256_loadu_ps(y), c0);
			c1 = _mm256_add_ps(_mm256_loadu_ps(y + 8), c1);
		}
		_mm256_storeu_ps(y, c0);
		_mm256_storeu_ps(y + 8, c1);
		return;
	}
	float t[16];
	_mm256_storeu_ps(t, c0);
	_mm256_storeu_ps(t + 8, c1);
	for (long j = 0; j < cols; j++) y[j] = acc ? y[j] + t[j] : t[j];
}

// rl_tile computes R ≤ 6 rows × 16 columns of x·Wᵀ over one panel b (K
// rows of 16): two accumulators per row (named, so they stay in
// registers), one broadcast of x per row and k. Each element is a chain of
// FMAs over k from zero, whatever R is.
#define RL_ROW(r) if (R > r) { __m256 a = _mm256_broadcast_ss(x + r * ldx + k); \
	c0##r = _mm256_fmadd_ps(a, b0, c0##r); c1##r = _mm256_fmadd_ps(a, b1, c1##r); }
AVX2 static INLINE void rl_tile(const int R, float* o, long ldo, long cols, const float* x, long ldx,
		const float* b, long K, int acc) {
	__m256 z = _mm256_setzero_ps();
	__m256 c00 = z, c10 = z, c01 = z, c11 = z, c02 = z, c12 = z, c03 = z, c13 = z, c04 = z, c14 = z, c05 = z, c15 = z;
	for (long k = 0; k < K; k++) {
		__m256 b0 = _mm256_loadu_ps(b + 16 * k), b1 = _mm256_loadu_ps(b + 16 * k + 8);
		RL_ROW(0) RL_ROW(1) RL_ROW(2) RL_ROW(3) RL_ROW(4) RL_ROW(5)
	}
	if (R > 0) rl_store(o, c00, c10, cols, acc);
	if (R > 1) rl_store(o + ldo, c01, c11, cols, acc);
	if (R > 2) rl_store(o + 2 * ldo, c02, c12, cols, acc);
	if (R > 3) rl_store(o + 3 * ldo, c03, c13, cols, acc);
	if (R > 4) rl_store(o + 4 * ldo, c04, c14, cols, acc);
	if (R > 5) rl_store(o + 5 * ldo, c05, c15, cols, acc);
}

AVX2 static void rl_tile6(float* o, long ldo, long cols, const float* x, long ldx, const float* b, long K, int acc) { rl_tile(6, o, ldo, cols, x, ldx, b, K, acc); }
AVX2 static void rl_tile5(float* o, long ldo, long cols, const float* x, long ldx, const float* b, long K, int acc) { rl_tile(5, o, ldo, cols, x, ldx, b, K, acc); }
AVX2 static void rl_tile4(float* o, long ldo, long cols, const float* x, long ldx, const float* b, long K, int acc) { rl_tile(4, o, ldo, cols, x, ldx, b, K, acc); }
AVX2 static void rl_tile3(float* o, long ldo, long cols, const float* x, long ldx, const float* b, long K, int acc) { rl_tile(3, o, ldo, cols, x, ldx, b, K, acc); }
AVX2 static void rl_tile2(float* o, long ldo, long cols, const float* x, long ldx, const float* b, long K, int acc) { rl_tile(2, o, ldo, cols, x, ldx, b, K, acc); }
AVX2 static void rl_tile1(float* o, long ldo, long cols, const float* x, long ldx, const float* b, long K, int acc) { rl_tile(1, o, ldo, cols, x, ldx, b, K, acc); }

// rlvr_panels multiplies m rows of x by panels [p0, p1) of b into out,
// rows in blocks of mc so a block of x stays in L2 while the panels pass.
AVX2 static void rlvr_panels(float* out, long ldo, const float* x, long ldx, long m, const float* b,
		long K, long N, long p0, long p1, int acc, long mc) {
	for (long r0 = 0; r0 < m; r0 += mc) {
		long r1 = r0 + mc < m ? r0 + mc : m;
		for (long q = p0; q < p1; q++) {
			const float* bq = b + q * K * 16;
			long cols = N - 16 * q < 16 ? N - 16 * q : 16;
			long r = r0;
			for (; r + 6 <= r1; r += 6) rl_tile6(out + r * ldo + 16 * q, ldo, cols, x + r * ldx, ldx, bq, K, acc);
			float* o = out + r * ldo + 16 * q;
			const float* xr = x + r * ldx;
			switch (r1 - r) {
			case 5: rl_tile5(o, ldo, cols, xr, ldx, bq, K, acc); break;
			case 4: rl_tile4(o, ldo, cols, xr, ldx, bq, K, acc); break;
			case 3: rl_tile3(o, ldo, cols, xr, ldx, bq, K, acc); break;
			case 2: rl_tile2(o, ldo, cols, xr, ldx, bq, K, acc); break;
			case 1: rl_tile1(o, ldo, cols, xr, ldx, bq, K, acc); break;
			}
		}
	}
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var panelsAccelerated = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func panelsC(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	fp := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
	C.rlvr_panels(fp(out), C.long(ldo), fp(x), C.long(ldx), C.long(m), fp(p.data), C.long(p.K), C.long(p.N),
		C.long(p0), C.long(p1), cbool(accumulate), panelRows)
}
