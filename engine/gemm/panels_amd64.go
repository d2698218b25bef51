//go:build cgo && amd64

package gemm

/*
#cgo CFLAGS: -O3
#cgo noescape rlvr_panels
#cgo nocallback rlvr_panels
#cgo noescape rlvr_panels_amx
#cgo nocallback rlvr_panels_amx
#include <errno.h>
#include <immintrin.h>
#include <stdint.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE inline __attribute__((always_inline))

// rl_store writes (or adds) one row of a tile: cols ≤ 16 outputs, each
// first multiplied by its feature's scale when s is not NULL (int8
// panels), fused with the add when adding. A partial row goes through a
// full one on the stack, so that it rounds as a full row does.
AVX2 static INLINE void rl_store(float* y, __m256 c0, __m256 c1, long cols, int acc, const float* s) {
	float t[16] = {0};
	float* d = cols == 16 ? y : t;
	if (cols < 16 && acc) for (long j = 0; j < cols; j++) t[j] = y[j];
	if (s) {
		__m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
		if (acc) {
			c0 = _mm256_fmadd_ps(c0, s0, _mm256_loadu_ps(d));
			c1 = _mm256_fmadd_ps(c1, s1, _mm256_loadu_ps(d + 8));
		} else {
			c0 = _mm256_mul_ps(c0, s0);
			c1 = _mm256_mul_ps(c1, s1);
		}
	} else if (acc) {
		c0 = _mm256_add_ps(_mm256_loadu_ps(d), c0);
		c1 = _mm256_add_ps(_mm256_loadu_ps(d + 8), c1);
	}
	_mm256_storeu_ps(d, c0);
	_mm256_storeu_ps(d + 8, c1);
	if (cols < 16) for (long j = 0; j < cols; j++) y[j] = t[j];
}

// The kinds of panel (Go's PanelKind): float32, bf16 bits, int8.
enum { RL_F32, RL_BF16, RL_INT8 };

// rl_load reads row k of a panel w of kind KIND as 16 float32 values,
// exactly: bf16 bits shifted into the high half, int8 converted.
AVX2 static INLINE void rl_load(const int KIND, const void* w, long k, __m256* b0, __m256* b1) {
	if (KIND == RL_INT8) {
		__m128i q = _mm_loadu_si128((const __m128i*)((const int8_t*)w + 16 * k));
		*b0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
		*b1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
	} else if (KIND == RL_BF16) {
		__m256i h = _mm256_loadu_si256((const __m256i*)((const uint16_t*)w + 16 * k));
		*b0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
		*b1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
	} else {
		*b0 = _mm256_loadu_ps((const float*)w + 16 * k);
		*b1 = _mm256_loadu_ps((const float*)w + 16 * k + 8);
	}
}

// rl_tile computes R ≤ 6 rows × 16 columns of x·Wᵀ over one panel b (K
// rows of 16, of kind KIND): two accumulators per row (named, so they stay
// in registers), one broadcast of x per row and k. Each element is a chain
// of FMAs over k from zero, whatever R is. A bf16 row of the panel is
// widened exactly (the bits shifted into the high half of a float32) as it
// is loaded, so the panels stream half the bytes; an int8 row is converted
// exactly, a quarter of the bytes, and each feature's sum multiplied by its
// scale s once at the end.
#define RL_ROW(r) if (R > r) { __m256 a = _mm256_broadcast_ss(x + r * ldx + k); \
	c0##r = _mm256_fmadd_ps(a, b0, c0##r); c1##r = _mm256_fmadd_ps(a, b1, c1##r); }
AVX2 static INLINE void rl_tile(const int R, const int KIND, float* o, long ldo, long cols, const float* x, long ldx,
		const void* b, const float* s, long K, int acc) {
	__m256 z = _mm256_setzero_ps();
	__m256 c00 = z, c10 = z, c01 = z, c11 = z, c02 = z, c12 = z, c03 = z, c13 = z, c04 = z, c14 = z, c05 = z, c15 = z;
	for (long k = 0; k < K; k++) {
		__m256 b0, b1;
		rl_load(KIND, b, k, &b0, &b1);
		RL_ROW(0) RL_ROW(1) RL_ROW(2) RL_ROW(3) RL_ROW(4) RL_ROW(5)
	}
	if (R > 0) rl_store(o, c00, c10, cols, acc, s);
	if (R > 1) rl_store(o + ldo, c01, c11, cols, acc, s);
	if (R > 2) rl_store(o + 2 * ldo, c02, c12, cols, acc, s);
	if (R > 3) rl_store(o + 3 * ldo, c03, c13, cols, acc, s);
	if (R > 4) rl_store(o + 4 * ldo, c04, c14, cols, acc, s);
	if (R > 5) rl_store(o + 5 * ldo, c05, c15, cols, acc, s);
}

#define RL_TILE(R, KIND, name) AVX2 static void name(float* o, long ldo, long cols, const float* x, long ldx, const void* b, const float* s, long K, int acc) \
	{ rl_tile(R, KIND, o, ldo, cols, x, ldx, b, s, K, acc); }
#define RL_TILES(KIND, t) RL_TILE(1, KIND, rl_tile1##t) RL_TILE(2, KIND, rl_tile2##t) RL_TILE(3, KIND, rl_tile3##t) \
	RL_TILE(4, KIND, rl_tile4##t) RL_TILE(5, KIND, rl_tile5##t) RL_TILE(6, KIND, rl_tile6##t)
RL_TILES(RL_F32, f) RL_TILES(RL_BF16, h) RL_TILES(RL_INT8, q)

typedef void (*rl_tile_fn)(float*, long, long, const float*, long, const void*, const float*, long, int);
static const rl_tile_fn rl_tiles[3][7] = {
	{0, rl_tile1f, rl_tile2f, rl_tile3f, rl_tile4f, rl_tile5f, rl_tile6f},
	{0, rl_tile1h, rl_tile2h, rl_tile3h, rl_tile4h, rl_tile5h, rl_tile6h},
	{0, rl_tile1q, rl_tile2q, rl_tile3q, rl_tile4q, rl_tile5q, rl_tile6q},
};

// The AVX-512 kernel: a panel's 16 columns are one zmm, so a tile holds up
// to 12 rows, each one accumulator; the weights a k step loads are shared
// by twice as many rows as in the AVX2 tile, and each FMA does twice the
// work. Each element is the same chain of fused multiply-adds over k from
// zero as in the AVX2 kernel, so the two give the same bits.
#define AVX512 __attribute__((target("avx512f")))

AVX512 static INLINE void rl_store512(float* y, __m512 c, long cols, int acc, const float* s) {
	__mmask16 mask = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
	if (s) {
		__m512 sv = _mm512_loadu_ps(s);
		c = acc ? _mm512_fmadd_ps(c, sv, _mm512_maskz_loadu_ps(mask, y)) : _mm512_mul_ps(c, sv);
	} else if (acc) {
		c = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), c);
	}
	_mm512_mask_storeu_ps(y, mask, c);
}

// rl_load512 is rl_load for the AVX-512 tiles: a panel row in one zmm.
AVX512 static INLINE __m512 rl_load512(const int KIND, const char* w, long k) {
	if (KIND == RL_INT8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)((const int8_t*)w + 16 * k))));
	if (KIND == RL_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)((const uint16_t*)w + 16 * k))), 16));
	return _mm512_loadu_ps((const float*)w + 16 * k);
}

#define RL_ROW512(r) if (R > r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + k]), b, c##r);
AVX512 static INLINE void rl_tile512(const int R, const int KIND, float* o, long ldo, long cols, const float* x, long ldx,
		const void* w, const float* s, long K, int acc) {
	__m512 z = _mm512_setzero_ps();
	__m512 c0 = z, c1 = z, c2 = z, c3 = z, c4 = z, c5 = z, c6 = z, c7 = z, c8 = z, c9 = z, c10 = z, c11 = z;
	for (long k = 0; k < K; k++) {
		__m512 b = rl_load512(KIND, (const char*)w, k);
		RL_ROW512(0) RL_ROW512(1) RL_ROW512(2) RL_ROW512(3) RL_ROW512(4) RL_ROW512(5)
		RL_ROW512(6) RL_ROW512(7) RL_ROW512(8) RL_ROW512(9) RL_ROW512(10) RL_ROW512(11)
	}
	__m512 cs[12] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};
	for (int r = 0; r < R; r++) rl_store512(o + r * ldo, cs[r], cols, acc, s);
}

#define RL_TILE512(R, KIND, name) AVX512 static void name(float* o, long ldo, long cols, const float* x, long ldx, const void* b, const float* s, long K, int acc) \
	{ rl_tile512(R, KIND, o, ldo, cols, x, ldx, b, s, K, acc); }
#define RL_TILES512(BF, s) RL_TILE512(1, BF, rl_t512_1##s) RL_TILE512(2, BF, rl_t512_2##s) RL_TILE512(3, BF, rl_t512_3##s) \
	RL_TILE512(4, BF, rl_t512_4##s) RL_TILE512(5, BF, rl_t512_5##s) RL_TILE512(6, BF, rl_t512_6##s) RL_TILE512(7, BF, rl_t512_7##s) \
	RL_TILE512(8, BF, rl_t512_8##s) RL_TILE512(9, BF, rl_t512_9##s) RL_TILE512(10, BF, rl_t512_10##s) \
	RL_TILE512(11, BF, rl_t512_11##s) RL_TILE512(12, BF, rl_t512_12##s)
RL_TILES512(RL_F32, f) RL_TILES512(RL_BF16, h) RL_TILES512(RL_INT8, q)

static const rl_tile_fn rl_tiles512[3][13] = {
	{0, rl_t512_1f, rl_t512_2f, rl_t512_3f, rl_t512_4f, rl_t512_5f, rl_t512_6f, rl_t512_7f, rl_t512_8f, rl_t512_9f, rl_t512_10f, rl_t512_11f, rl_t512_12f},
	{0, rl_t512_1h, rl_t512_2h, rl_t512_3h, rl_t512_4h, rl_t512_5h, rl_t512_6h, rl_t512_7h, rl_t512_8h, rl_t512_9h, rl_t512_10h, rl_t512_11h, rl_t512_12h},
	{0, rl_t512_1q, rl_t512_2q, rl_t512_3q, rl_t512_4q, rl_t512_5q, rl_t512_6q, rl_t512_7q, rl_t512_8q, rl_t512_9q, rl_t512_10q, rl_t512_11q, rl_t512_12q},
};

// A tile of few rows has few accumulators, one chain of dependent FMAs
// each, and waits on their latency rather than on the weights. The quad
// tiles take 4 panels at once, so that one row (AVX2) or up to 3 (AVX-512)
// still keep 8 to 12 chains in flight. Each element is the same chain over
// k from zero as in the one-panel tiles, so the bits do not change.

// rl_quad is one row × 4 panels with the AVX2 tiles' arithmetic: w is the
// first panel, the others follow every ps bytes; s the first panel's
// scales (int8) or NULL; ncols the columns from the first panel on.
AVX2 static INLINE void rl_quad(const int KIND, float* o, long ncols, const float* x, const char* w, long ps,
		const float* s, long K, int acc) {
	__m256 z = _mm256_setzero_ps();
	__m256 c00 = z, c10 = z, c01 = z, c11 = z, c02 = z, c12 = z, c03 = z, c13 = z;
	for (long k = 0; k < K; k++) {
		__m256 a = _mm256_broadcast_ss(x + k), b0, b1;
		rl_load(KIND, w, k, &b0, &b1); c00 = _mm256_fmadd_ps(a, b0, c00); c10 = _mm256_fmadd_ps(a, b1, c10);
		rl_load(KIND, w + ps, k, &b0, &b1); c01 = _mm256_fmadd_ps(a, b0, c01); c11 = _mm256_fmadd_ps(a, b1, c11);
		rl_load(KIND, w + 2 * ps, k, &b0, &b1); c02 = _mm256_fmadd_ps(a, b0, c02); c12 = _mm256_fmadd_ps(a, b1, c12);
		rl_load(KIND, w + 3 * ps, k, &b0, &b1); c03 = _mm256_fmadd_ps(a, b0, c03); c13 = _mm256_fmadd_ps(a, b1, c13);
	}
	long c3 = ncols - 48 < 16 ? ncols - 48 : 16;
	rl_store(o, c00, c10, 16, acc, s);
	rl_store(o + 16, c01, c11, 16, acc, s ? s + 16 : 0);
	rl_store(o + 32, c02, c12, 16, acc, s ? s + 32 : 0);
	rl_store(o + 48, c03, c13, c3, acc, s ? s + 48 : 0);
}

#define RL_QUAD(KIND, name) AVX2 static void name(float* o, long ldo, long ncols, const float* x, long ldx, const char* w, long ps, \
		const float* s, long K, int acc) { rl_quad(KIND, o, ncols, x, w, ps, s, K, acc); }
RL_QUAD(RL_F32, rl_quad_f) RL_QUAD(RL_BF16, rl_quad_h) RL_QUAD(RL_INT8, rl_quad_q)

// rl_quad512 is R ≤ 3 rows × 4 panels with the AVX-512 tiles' arithmetic.
#define RL_QROW512(r) if (R > r) { __m512 a = _mm512_set1_ps(x[r * ldx + k]); c##r##0 = _mm512_fmadd_ps(a, b0, c##r##0); \
	c##r##1 = _mm512_fmadd_ps(a, b1, c##r##1); c##r##2 = _mm512_fmadd_ps(a, b2, c##r##2); c##r##3 = _mm512_fmadd_ps(a, b3, c##r##3); }
AVX512 static INLINE void rl_quad512(const int R, const int KIND, float* o, long ldo, long ncols, const float* x, long ldx,
		const char* w, long ps, const float* s, long K, int acc) {
	__m512 z = _mm512_setzero_ps();
	__m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z, c21 = z, c22 = z, c23 = z;
	for (long k = 0; k < K; k++) {
		__m512 b0 = rl_load512(KIND, w, k), b1 = rl_load512(KIND, w + ps, k), b2 = rl_load512(KIND, w + 2 * ps, k),
			b3 = rl_load512(KIND, w + 3 * ps, k);
		RL_QROW512(0) RL_QROW512(1) RL_QROW512(2)
	}
	long c3 = ncols - 48 < 16 ? ncols - 48 : 16;
	__m512 cs[3][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}};
	for (int r = 0; r < R; r++)
		for (int p = 0; p < 4; p++) rl_store512(o + r * ldo + 16 * p, cs[r][p], p == 3 ? c3 : 16, acc, s ? s + 16 * p : 0);
}

#define RL_QUAD512(R, KIND, name) AVX512 static void name(float* o, long ldo, long ncols, const float* x, long ldx, const char* w, \
		long ps, const float* s, long K, int acc) { rl_quad512(R, KIND, o, ldo, ncols, x, ldx, w, ps, s, K, acc); }
#define RL_QUADS512(KIND, t) RL_QUAD512(1, KIND, rl_q512_1##t) RL_QUAD512(2, KIND, rl_q512_2##t) RL_QUAD512(3, KIND, rl_q512_3##t)
RL_QUADS512(RL_F32, f) RL_QUADS512(RL_BF16, h) RL_QUADS512(RL_INT8, q)

typedef void (*rl_quad_fn)(float*, long, long, const float*, long, const char*, long, const float*, long, int);
static const rl_quad_fn rl_quads[3][2] = {{0, rl_quad_f}, {0, rl_quad_h}, {0, rl_quad_q}};
static const rl_quad_fn rl_quads512[3][4] = {
	{0, rl_q512_1f, rl_q512_2f, rl_q512_3f},
	{0, rl_q512_1h, rl_q512_2h, rl_q512_3h},
	{0, rl_q512_1q, rl_q512_2q, rl_q512_3q},
};

// The AVX512-BF16 tiles: bf16 panels in pair layout (Panels.pairs, as
// the AMX tiles read them), each 32-bit lane of a panel row one feature's
// weights at k = 2i and 2i + 1, and rows of x rounded to bf16 and read as
// 32-bit words, the pair at 2i and 2i + 1 of the row (x and ldx count
// words, K the k pairs). VDPBF16PS adds both products of a pair into each
// accumulator: each element is one chain over the pairs in order from
// zero, whatever the rows beside it, so the tiles are batch-invariant as
// the FMA tiles are, with the shape of the AVX-512 FMA tiles (12 rows × 1
// panel, 3 rows × 4 panels) and twice their products per instruction.
#define DOT __attribute__((target("avx512f,avx512bf16")))

// rl_pair broadcasts word k of a row of x: its bf16 pair at 2k, 2k + 1.
DOT static INLINE __m512bh rl_pair(const float* x, long k) { return (__m512bh)_mm512_set1_epi32(((const int*)x)[k]); }

// rl_pairs512 is panel row k (16 features × 2 k) of a pair-layout panel.
DOT static INLINE __m512bh rl_pairs512(const char* w, long k) { return (__m512bh)_mm512_loadu_si512(w + 64 * k); }

#define RL_DROW(r) if (R > r) c##r = _mm512_dpbf16_ps(c##r, rl_pair(x + r * ldx, k), b);
DOT static INLINE void rl_dtile(const int R, float* o, long ldo, long cols, const float* x, long ldx, const void* w, long K, int acc) {
	__m512 z = _mm512_setzero_ps();
	__m512 c0 = z, c1 = z, c2 = z, c3 = z, c4 = z, c5 = z, c6 = z, c7 = z, c8 = z, c9 = z, c10 = z, c11 = z;
	for (long k = 0; k < K; k++) {
		__m512bh b = rl_pairs512((const char*)w, k);
		RL_DROW(0) RL_DROW(1) RL_DROW(2) RL_DROW(3) RL_DROW(4) RL_DROW(5)
		RL_DROW(6) RL_DROW(7) RL_DROW(8) RL_DROW(9) RL_DROW(10) RL_DROW(11)
	}
	__m512 cs[12] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};
	for (int r = 0; r < R; r++) rl_store512(o + r * ldo, cs[r], cols, acc, 0);
}

#define RL_DTILE(R, name) DOT static void name(float* o, long ldo, long cols, const float* x, long ldx, const void* b, const float* s, long K, int acc) \
	{ rl_dtile(R, o, ldo, cols, x, ldx, b, K, acc); }
RL_DTILE(1, rl_d1) RL_DTILE(2, rl_d2) RL_DTILE(3, rl_d3) RL_DTILE(4, rl_d4) RL_DTILE(5, rl_d5) RL_DTILE(6, rl_d6)
RL_DTILE(7, rl_d7) RL_DTILE(8, rl_d8) RL_DTILE(9, rl_d9) RL_DTILE(10, rl_d10) RL_DTILE(11, rl_d11) RL_DTILE(12, rl_d12)
static const rl_tile_fn rl_dtiles[13] = {0, rl_d1, rl_d2, rl_d3, rl_d4, rl_d5, rl_d6, rl_d7, rl_d8, rl_d9, rl_d10, rl_d11, rl_d12};

// rl_dquad is R ≤ 3 rows × 4 panels with the AVX512-BF16 tiles' arithmetic.
#define RL_DQROW(r) if (R > r) { __m512bh a = rl_pair(x + r * ldx, k); c##r##0 = _mm512_dpbf16_ps(c##r##0, a, b0); \
	c##r##1 = _mm512_dpbf16_ps(c##r##1, a, b1); c##r##2 = _mm512_dpbf16_ps(c##r##2, a, b2); c##r##3 = _mm512_dpbf16_ps(c##r##3, a, b3); }
DOT static INLINE void rl_dquad(const int R, float* o, long ldo, long ncols, const float* x, long ldx, const char* w, long ps, long K, int acc) {
	__m512 z = _mm512_setzero_ps();
	__m512 c00 = z, c01 = z, c02 = z, c03 = z, c10 = z, c11 = z, c12 = z, c13 = z, c20 = z, c21 = z, c22 = z, c23 = z;
	for (long k = 0; k < K; k++) {
		__m512bh b0 = rl_pairs512(w, k), b1 = rl_pairs512(w + ps, k), b2 = rl_pairs512(w + 2 * ps, k), b3 = rl_pairs512(w + 3 * ps, k);
		RL_DQROW(0) RL_DQROW(1) RL_DQROW(2)
	}
	long c3 = ncols - 48 < 16 ? ncols - 48 : 16;
	__m512 cs[3][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23}};
	for (int r = 0; r < R; r++)
		for (int p = 0; p < 4; p++) rl_store512(o + r * ldo + 16 * p, cs[r][p], p == 3 ? c3 : 16, acc, 0);
}

#define RL_DQUAD(R, name) DOT static void name(float* o, long ldo, long ncols, const float* x, long ldx, const char* w, \
		long ps, const float* s, long K, int acc) { rl_dquad(R, o, ldo, ncols, x, ldx, w, ps, K, acc); }
RL_DQUAD(1, rl_dq1) RL_DQUAD(2, rl_dq2) RL_DQUAD(3, rl_dq3)
static const rl_quad_fn rl_dquads[4] = {0, rl_dq1, rl_dq2, rl_dq3};

// RL_PAIRS is the kind rlvr_panels is given for pair-layout bf16 panels
// multiplied on the AVX512-BF16 tiles: x then holds bf16 pairs as words.
enum { RL_PAIRS = 3 };

// rlvr_panels multiplies m rows of x by panels [p0, p1) of b (of kind
// kind; an int8 panel's features scaled by s) into out, rows in blocks of
// mc so a block of x stays in L2 while the panels pass, with the AVX-512
// tiles (12 rows) when wide, else the AVX2 tiles (6 rows), and with the
// AVX512-BF16 tiles for kind RL_PAIRS (wide, K and ldx counting pairs).
// Rows left over by the full tiles go through the quad tiles where there
// are few enough of them and 4 panels to take.
static void rlvr_panels(float* out, long ldo, const float* x, long ldx, long m, const void* b, const float* s,
		long K, long N, long p0, long p1, int acc, long mc, int kind, int wide) {
	const rl_tile_fn* tiles = kind == RL_PAIRS ? rl_dtiles : wide ? rl_tiles512[kind] : rl_tiles[kind];
	const rl_quad_fn* quads = kind == RL_PAIRS ? rl_dquads : wide ? rl_quads512[kind] : rl_quads[kind];
	long th = wide ? 12 : 6, qh = wide ? 3 : 1, esize = kind == RL_INT8 ? 1 : kind == RL_BF16 ? 2 : 4;
	long ps = K * 16 * esize; // a panel's bytes (a pair of bf16 is 4)
	for (long r0 = 0; r0 < m; r0 += mc) {
		long r1 = r0 + mc < m ? r0 + mc : m;
		long rest = (r1 - r0) % th, rr = r1 - rest; // the rows the full tiles leave, from rr
		for (long q = p0; q < p1;) {
			long np = rest > 0 && rest <= qh && q + 4 <= p1 ? 4 : 1;
			for (long p = q; p < q + np; p++) {
				const char* bp = (const char*)b + p * ps;
				const float* sp = kind == RL_INT8 ? s + 16 * p : 0;
				long cols = N - 16 * p < 16 ? N - 16 * p : 16;
				for (long r = r0; r < rr; r += th) tiles[th](out + r * ldo + 16 * p, ldo, cols, x + r * ldx, ldx, bp, sp, K, acc);
				if (rest > 0 && np == 1) tiles[rest](out + rr * ldo + 16 * p, ldo, cols, x + rr * ldx, ldx, bp, sp, K, acc);
			}
			if (np == 4)
				quads[rest](out + rr * ldo + 16 * q, ldo, N - 16 * q, x + rr * ldx, ldx, (const char*)b + q * ps, ps,
					kind == RL_INT8 ? s + 16 * q : 0, K, acc);
			q += np;
		}
	}
}

// The AMX tiles: bf16 panels in pair layout (Panels.amx) multiplied with
// TDPBF16PS. A panel of Kp/2 rows of 16 features × 2 consecutive k is one
// B tile per 32 k; 16 rows of x, rounded to bf16 and zero-padded to Kp
// columns and to a multiple of 16 rows, are one A tile. Each output row
// is computed from its own row of x only, k in chunks of 32 in order, so
// a row's result does not depend on the rows beside it, the panels'
// grouping or the thread count.
#define AMX __attribute__((target("amx-tile,amx-bf16")))

// rlvr_amx_request asks Linux for the AMX tile state, which it grants a
// process only on request; 0 when granted.
static int rlvr_amx_request(void) {
#ifdef __linux__
	return syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 0 : errno; // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
#else
	return ENOSYS;
#endif
}
typedef struct {
	uint8_t palette, start;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} __attribute__((packed)) rl_tilecfg;

// rl_amx_store writes (or adds) rows [0, rows) and columns [0, cols) of a
// 16 × 16 tile stored in t.
static inline void rl_amx_store(float* y, long ldo, const float* t, long rows, long cols, int acc) {
	for (long i = 0; i < rows; i++)
		for (long j = 0; j < cols; j++) y[i * ldo + j] = acc ? y[i * ldo + j] + t[16 * i + j] : t[16 * i + j];
}

// rlvr_panels_amx multiplies m rows of xb (bf16, rows of Kp, padded as
// above) by panels [p0, p1) of b into out: four panels at a time, each
// row block of 16 under them while their 4 × Kp × 32 bytes stay in L2.
AMX static void rlvr_panels_amx(float* out, long ldo, const uint16_t* xb, long m, const uint16_t* b, long Kp, long N,
		long p0, long p1, int acc) {
	// Fewer than 16 rows (a decoding step of few streams) configure A and
	// C tiles of that many rows: the unit then computes only those.
	long ar = m < 16 ? m : 16;
	rl_tilecfg cfg = {0};
	cfg.palette = 1;
	for (int i = 0; i < 8; i++) {
		cfg.rows[i] = i == 0 || i >= 4 ? ar : 16;
		cfg.colsb[i] = 64;
	}
	_tile_loadconfig(&cfg);
	float t[4][256];
	long ps = Kp * 16; // a panel's bf16 values
	for (long q = p0; q < p1; q += 4) {
		long g = p1 - q < 4 ? p1 - q : 4;
		const uint16_t* w = b + q * ps;
		for (long r = 0; r < m; r += 16) {
			const uint16_t* a = xb + r * Kp;
			long rows = m - r < 16 ? m - r : 16;
			if (g == 4) {
				_tile_zero(4);
				_tile_zero(5);
				_tile_zero(6);
				_tile_zero(7);
				for (long kc = 0; kc < Kp; kc += 32) {
					_tile_loadd(0, a + kc, Kp * 2);
					_tile_loadd(1, w + kc * 16, 64);
					_tile_loadd(2, w + ps + kc * 16, 64);
					_tile_loadd(3, w + 2 * ps + kc * 16, 64);
					_tile_dpbf16ps(4, 0, 1);
					_tile_dpbf16ps(5, 0, 2);
					_tile_dpbf16ps(6, 0, 3);
					_tile_loadd(1, w + 3 * ps + kc * 16, 64);
					_tile_dpbf16ps(7, 0, 1);
				}
				_tile_stored(4, t[0], 64);
				_tile_stored(5, t[1], 64);
				_tile_stored(6, t[2], 64);
				_tile_stored(7, t[3], 64);
			} else {
				for (long j = 0; j < g; j++) {
					_tile_zero(4);
					for (long kc = 0; kc < Kp; kc += 32) {
						_tile_loadd(0, a + kc, Kp * 2);
						_tile_loadd(1, w + j * ps + kc * 16, 64);
						_tile_dpbf16ps(4, 0, 1);
					}
					_tile_stored(4, t[j], 64);
				}
			}
			for (long j = 0; j < g; j++) {
				long f = 16 * (q + j), cols = N - f < 16 ? N - f : 16;
				rl_amx_store(out + r * ldo + f, ldo, t[j], rows, cols, acc);
			}
		}
	}
	_tile_release();
}
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/cpu"
)

var panelsAccelerated = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// amxUsable says whether the AMX tiles can run here: the CPU has AMX-BF16
// and Linux granted the process the tile state, which it gives only on
// request (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), once.
var amxUsable = sync.OnceValue(func() error {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return errNoAMX
	}
	if errno := C.rlvr_amx_request(); errno != 0 {
		return fmt.Errorf("gemm: the system refused the AMX tile state (arch_prctl: %v)", syscall.Errno(errno))
	}
	return nil
})

func panelsAMXC(out []float32, ldo int, xb []uint16, m int, p *Panels, p0, p1 int, accumulate bool) {
	C.rlvr_panels_amx((*C.float)(unsafe.Pointer(unsafe.SliceData(out))), C.long(ldo), (*C.uint16_t)(unsafe.SliceData(xb)),
		C.long(m), (*C.uint16_t)(unsafe.SliceData(p.data16)), C.long(p.kp), C.long(p.N), C.long(p0), C.long(p1), cbool(accumulate))
}

// dotUsable says whether the AVX512-BF16 tiles can run here.
var dotUsable = sync.OnceValue(func() error {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 {
		return errNoDot
	}
	return nil
})

// panelsDotC multiplies m rows of xb (bf16, rows of p.kp) by panels
// [p0, p1) of p, in pair layout, on the AVX512-BF16 tiles.
func panelsDotC(out []float32, ldo int, xb []uint16, m int, p *Panels, p0, p1 int, accumulate bool) {
	words := (*C.float)(unsafe.Pointer(unsafe.SliceData(xb))) // pairs of bf16, read as 32-bit words
	C.rlvr_panels((*C.float)(unsafe.Pointer(unsafe.SliceData(out))), C.long(ldo), words, C.long(p.kp/2), C.long(m),
		unsafe.Pointer(unsafe.SliceData(p.data16)), nil, C.long(p.kp/2), C.long(p.N), C.long(p0), C.long(p1),
		cbool(accumulate), panelRows, C.RL_PAIRS, 1)
}

// panels512 chooses the AVX-512 tiles where the CPU has AVX-512; a
// variable so that a test can compare them with the AVX2 tiles.
var panels512 = cpu.X86.HasAVX512F

func panelsC(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	fp := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
	var b unsafe.Pointer
	var s *C.float
	switch p.Kind {
	case PanelsBF16:
		b = unsafe.Pointer(unsafe.SliceData(p.data16))
	case PanelsInt8:
		b, s = unsafe.Pointer(unsafe.SliceData(p.data8)), fp(p.scale)
	default:
		b = unsafe.Pointer(unsafe.SliceData(p.data))
	}
	C.rlvr_panels(fp(out), C.long(ldo), fp(x), C.long(ldx), C.long(m), b, s, C.long(p.K), C.long(p.N),
		C.long(p0), C.long(p1), cbool(accumulate), panelRows, C.int(p.Kind), cbool(panels512))
}
