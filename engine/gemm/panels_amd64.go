//go:build cgo && amd64

package gemm

/*
#cgo CFLAGS: -O3
#cgo noescape rlvr_panels
#cgo nocallback rlvr_panels
#include <immintrin.h>
#include <stdint.h>

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
// rows of 16, float32, or bf16 bits when BF): two accumulators per row
// (named, so they stay in registers), one broadcast of x per row and k.
// Each element is a chain of FMAs over k from zero, whatever R is. A bf16
// row of the panel is widened exactly (the bits shifted into the high half
// of a float32) as it is loaded, so the panels stream half the bytes.
#define RL_ROW(r) if (R > r) { __m256 a = _mm256_broadcast_ss(x + r * ldx + k); \
	c0##r = _mm256_fmadd_ps(a, b0, c0##r); c1##r = _mm256_fmadd_ps(a, b1, c1##r); }
AVX2 static INLINE void rl_tile(const int R, const int BF, float* o, long ldo, long cols, const float* x, long ldx,
		const void* b, long K, int acc) {
	__m256 z = _mm256_setzero_ps();
	__m256 c00 = z, c10 = z, c01 = z, c11 = z, c02 = z, c12 = z, c03 = z, c13 = z, c04 = z, c14 = z, c05 = z, c15 = z;
	for (long k = 0; k < K; k++) {
		__m256 b0, b1;
		if (BF) {
			__m256i w = _mm256_loadu_si256((const __m256i*)((const uint16_t*)b + 16 * k));
			b0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(w)), 16));
			b1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(w, 1)), 16));
		} else {
			b0 = _mm256_loadu_ps((const float*)b + 16 * k);
			b1 = _mm256_loadu_ps((const float*)b + 16 * k + 8);
		}
		RL_ROW(0) RL_ROW(1) RL_ROW(2) RL_ROW(3) RL_ROW(4) RL_ROW(5)
	}
	if (R > 0) rl_store(o, c00, c10, cols, acc);
	if (R > 1) rl_store(o + ldo, c01, c11, cols, acc);
	if (R > 2) rl_store(o + 2 * ldo, c02, c12, cols, acc);
	if (R > 3) rl_store(o + 3 * ldo, c03, c13, cols, acc);
	if (R > 4) rl_store(o + 4 * ldo, c04, c14, cols, acc);
	if (R > 5) rl_store(o + 5 * ldo, c05, c15, cols, acc);
}

#define RL_TILE(R, BF, name) AVX2 static void name(float* o, long ldo, long cols, const float* x, long ldx, const void* b, long K, int acc) \
	{ rl_tile(R, BF, o, ldo, cols, x, ldx, b, K, acc); }
RL_TILE(6, 0, rl_tile6) RL_TILE(5, 0, rl_tile5) RL_TILE(4, 0, rl_tile4) RL_TILE(3, 0, rl_tile3) RL_TILE(2, 0, rl_tile2) RL_TILE(1, 0, rl_tile1)
RL_TILE(6, 1, rl_tile6h) RL_TILE(5, 1, rl_tile5h) RL_TILE(4, 1, rl_tile4h) RL_TILE(3, 1, rl_tile3h) RL_TILE(2, 1, rl_tile2h) RL_TILE(1, 1, rl_tile1h)

typedef void (*rl_tile_fn)(float*, long, long, const float*, long, const void*, long, int);
static const rl_tile_fn rl_tiles[2][7] = {
	{0, rl_tile1, rl_tile2, rl_tile3, rl_tile4, rl_tile5, rl_tile6},
	{0, rl_tile1h, rl_tile2h, rl_tile3h, rl_tile4h, rl_tile5h, rl_tile6h},
};


// The AVX-512 kernel: a panel's 16 columns are one zmm, so a tile holds up
// to 12 rows, each one accumulator; the weights a k step loads are shared
// by twice as many rows as in the AVX2 tile, and each FMA does twice the
// work. Each element is the same chain of fused multiply-adds over k from
// zero as in the AVX2 kernel, so the two give the same bits.
#define AVX512 __attribute__((target("avx512f")))

AVX512 static INLINE void rl_store512(float* y, __m512 c, long cols, int acc) {
	__mmask16 mask = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
	if (acc) c = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), c);
	_mm512_mask_storeu_ps(y, mask, c);
}

#define RL_ROW512(r) if (R > r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + k]), b, c##r);
AVX512 static INLINE void rl_tile512(const int R, const int BF, float* o, long ldo, long cols, const float* x, long ldx,
		const void* w, long K, int acc) {
	__m512 z = _mm512_setzero_ps();
	__m512 c0 = z, c1 = z, c2 = z, c3 = z, c4 = z, c5 = z, c6 = z, c7 = z, c8 = z, c9 = z, c10 = z, c11 = z;
	for (long k = 0; k < K; k++) {
		__m512 b;
		if (BF) {
			__m256i h = _mm256_loadu_si256((const __m256i*)((const uint16_t*)w + 16 * k));
			b = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
		} else {
			b = _mm512_loadu_ps((const float*)w + 16 * k);
		}
		RL_ROW512(0) RL_ROW512(1) RL_ROW512(2) RL_ROW512(3) RL_ROW512(4) RL_ROW512(5)
		RL_ROW512(6) RL_ROW512(7) RL_ROW512(8) RL_ROW512(9) RL_ROW512(10) RL_ROW512(11)
	}
	__m512 cs[12] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};
	for (int r = 0; r < R; r++) rl_store512(o + r * ldo, cs[r], cols, acc);
}

#define RL_TILE512(R, BF, name) AVX512 static void name(float* o, long ldo, long cols, const float* x, long ldx, const void* b, long K, int acc) \
	{ rl_tile512(R, BF, o, ldo, cols, x, ldx, b, K, acc); }
#define RL_TILES512(BF, s) RL_TILE512(1, BF, rl_t512_1##s) RL_TILE512(2, BF, rl_t512_2##s) RL_TILE512(3, BF, rl_t512_3##s) \
	RL_TILE512(4, BF, rl_t512_4##s) RL_TILE512(5, BF, rl_t512_5##s) RL_TILE512(6, BF, rl_t512_6##s) RL_TILE512(7, BF, rl_t512_7##s) \
	RL_TILE512(8, BF, rl_t512_8##s) RL_TILE512(9, BF, rl_t512_9##s) RL_TILE512(10, BF, rl_t512_10##s) \
	RL_TILE512(11, BF, rl_t512_11##s) RL_TILE512(12, BF, rl_t512_12##s)
RL_TILES512(0, f) RL_TILES512(1, h)

static const rl_tile_fn rl_tiles512[2][13] = {
	{0, rl_t512_1f, rl_t512_2f, rl_t512_3f, rl_t512_4f, rl_t512_5f, rl_t512_6f, rl_t512_7f, rl_t512_8f, rl_t512_9f, rl_t512_10f, rl_t512_11f, rl_t512_12f},
	{0, rl_t512_1h, rl_t512_2h, rl_t512_3h, rl_t512_4h, rl_t512_5h, rl_t512_6h, rl_t512_7h, rl_t512_8h, rl_t512_9h, rl_t512_10h, rl_t512_11h, rl_t512_12h},
};

// rlvr_panels multiplies m rows of x by panels [p0, p1) of b (float32,
// or bf16 bits when bf) into out, rows in blocks of mc so a block of x
// stays in L2 while the panels pass, with the AVX-512 tiles (12 rows)
// when wide, else the AVX2 tiles (6 rows).
static void rlvr_panels(float* out, long ldo, const float* x, long ldx, long m, const void* b,
		long K, long N, long p0, long p1, int acc, long mc, int bf, int wide) {
	const rl_tile_fn* tiles = wide ? rl_tiles512[bf ? 1 : 0] : rl_tiles[bf ? 1 : 0];
	long th = wide ? 12 : 6, esize = bf ? 2 : 4;
	for (long r0 = 0; r0 < m; r0 += mc) {
		long r1 = r0 + mc < m ? r0 + mc : m;
		for (long q = p0; q < p1; q++) {
			const char* bq = (const char*)b + q * K * 16 * esize;
			long cols = N - 16 * q < 16 ? N - 16 * q : 16;
			long r = r0;
			for (; r + th <= r1; r += th) tiles[th](out + r * ldo + 16 * q, ldo, cols, x + r * ldx, ldx, bq, K, acc);
			if (r1 > r) tiles[r1 - r](out + r * ldo + 16 * q, ldo, cols, x + r * ldx, ldx, bq, K, acc);
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

// panels512 chooses the AVX-512 tiles where the CPU has AVX-512; a
// variable so that a test can compare them with the AVX2 tiles.
var panels512 = cpu.X86.HasAVX512F

func panelsC(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	fp := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
	var b unsafe.Pointer
	if p.BF16 {
		b = unsafe.Pointer(unsafe.SliceData(p.data16))
	} else {
		b = unsafe.Pointer(unsafe.SliceData(p.data))
	}
	C.rlvr_panels(fp(out), C.long(ldo), fp(x), C.long(ldx), C.long(m), b, C.long(p.K), C.long(p.N),
		C.long(p0), C.long(p1), cbool(accumulate), panelRows, cbool(p.BF16), cbool(panels512))
}
