//go:build cgo && amd64

package gemm

/*
#cgo CFLAGS: -O3
#cgo noescape rlvr_to_bf16
#cgo nocallback rlvr_to_bf16
#cgo noescape rlvr_to_bf16_transposed
#cgo nocallback rlvr_to_bf16_transposed
#include <immintrin.h>
#include <stdint.h>

#define AVX2 __attribute__((target("avx2")))

// rl_round8 rounds eight float32s (as bits) to bf16 exactly as
// Float32ToBF16 does: to nearest, ties to even, NaNs kept quiet. The
// result is in the high half of each 32-bit lane.
AVX2 static inline __m256i rl_round8(__m256i u) {
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
	__m256i q = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
	return _mm256_blendv_epi8(r, q, nan);
}

// rl_round1 is rl_round8 for one value, the bits in the low half.
static inline uint16_t rl_round1(const float* p) {
	uint32_t u;
	__builtin_memcpy(&u, p, 4);
	if ((u & 0x7fffffff) > 0x7f800000) u |= 0x00400000;
	else u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

// rlvr_to_bf16 rounds n float32s of src to bf16: bits into dst16, or, when
// dst16 is null, bf16 values kept as float32 into dst32.
AVX2 static void rlvr_to_bf16(uint16_t* dst16, float* dst32, const float* src, long n) {
	long i = 0;
	if (dst16) {
		for (; i + 16 <= n; i += 16) {
			__m256i a = _mm256_srli_epi32(rl_round8(_mm256_loadu_si256((const __m256i*)(src + i))), 16);
			__m256i b = _mm256_srli_epi32(rl_round8(_mm256_loadu_si256((const __m256i*)(src + i + 8))), 16);
			// packus works within 128-bit lanes; permute puts a's then b's halves in order.
			__m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
			_mm256_storeu_si256((__m256i*)(dst16 + i), p);
		}
	} else {
		for (; i + 8 <= n; i += 8) {
			__m256i r = _mm256_and_si256(rl_round8(_mm256_loadu_si256((const __m256i*)(src + i))), _mm256_set1_epi32((int)0xffff0000));
			_mm256_storeu_si256((__m256i*)(dst32 + i), r);
		}
	}
	for (; i < n; i++) {
		uint32_t u = (uint32_t)rl_round1(src + i) << 16;
		if (dst16) dst16[i] = (uint16_t)(u >> 16);
		else __builtin_memcpy(dst32 + i, &u, 4);
	}
}


// rlvr_to_bf16_transposed rounds columns [c0, c1) of the rows × cols
// matrix src (row stride ld) to bf16 bits into dst, the transpose (cols ×
// rows, tight): eight by eight blocks, each rounded, transposed in
// registers and packed to 16 bits, so both sides stream.
AVX2 static void rlvr_to_bf16_transposed(uint16_t* dst, const float* src, long rows, long ld, long c0, long c1) {
	long r8 = rows & ~7L, j = c0;
	for (; j + 8 <= c1; j += 8) {
		for (long i = 0; i < r8; i += 8) {
			__m256i v[8];
			for (int t = 0; t < 8; t++)
				v[t] = _mm256_srli_epi32(rl_round8(_mm256_loadu_si256((const __m256i*)(src + (i + t) * ld + j))), 16);
			__m256i a0 = _mm256_unpacklo_epi32(v[0], v[1]), a1 = _mm256_unpackhi_epi32(v[0], v[1]);
			__m256i a2 = _mm256_unpacklo_epi32(v[2], v[3]), a3 = _mm256_unpackhi_epi32(v[2], v[3]);
			__m256i a4 = _mm256_unpacklo_epi32(v[4], v[5]), a5 = _mm256_unpackhi_epi32(v[4], v[5]);
			__m256i a6 = _mm256_unpacklo_epi32(v[6], v[7]), a7 = _mm256_unpackhi_epi32(v[6], v[7]);
			__m256i b0 = _mm256_unpacklo_epi64(a0, a2), b1 = _mm256_unpackhi_epi64(a0, a2);
			__m256i b2 = _mm256_unpacklo_epi64(a1, a3), b3 = _mm256_unpackhi_epi64(a1, a3);
			__m256i b4 = _mm256_unpacklo_epi64(a4, a6), b5 = _mm256_unpackhi_epi64(a4, a6);
			__m256i b6 = _mm256_unpacklo_epi64(a5, a7), b7 = _mm256_unpackhi_epi64(a5, a7);
			// Row t of the transpose: column j+t of rows i..i+7.
			__m256i t0 = _mm256_permute2x128_si256(b0, b4, 0x20), t4 = _mm256_permute2x128_si256(b0, b4, 0x31);
			__m256i t1 = _mm256_permute2x128_si256(b1, b5, 0x20), t5 = _mm256_permute2x128_si256(b1, b5, 0x31);
			__m256i t2 = _mm256_permute2x128_si256(b2, b6, 0x20), t6 = _mm256_permute2x128_si256(b2, b6, 0x31);
			__m256i t3 = _mm256_permute2x128_si256(b3, b7, 0x20), t7 = _mm256_permute2x128_si256(b3, b7, 0x31);
			__m256i tr[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
			for (int t = 0; t < 8; t++) {
				__m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(tr[t], tr[t]), 0xd8);
				_mm_storeu_si128((__m128i*)(dst + (j + t) * rows + i), _mm256_castsi256_si128(p));
			}
		}
		for (long i = r8; i < rows; i++)
			for (int t = 0; t < 8; t++) dst[(j + t) * rows + i] = rl_round1(src + i * ld + j + t);
	}
	for (; j < c1; j++)
		for (long i = 0; i < rows; i++) dst[j * rows + i] = rl_round1(src + i * ld + j);
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var roundAccelerated = cpu.X86.HasAVX2

// roundC rounds src into dst (bf16 bits, or bf16 values in float32) with
// the AVX2 kernel: Float32ToBF16 eight lanes at a time.
func roundC[T float32 | uint16](dst []T, src []float32) {
	if len(src) == 0 {
		return
	}
	s := (*C.float)(unsafe.Pointer(unsafe.SliceData(src)))
	var zero T
	switch any(zero).(type) {
	case uint16:
		C.rlvr_to_bf16((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), nil, s, C.long(len(src)))
	default:
		C.rlvr_to_bf16(nil, (*C.float)(unsafe.Pointer(unsafe.SliceData(dst))), s, C.long(len(src)))
	}
}

// roundTransposedC rounds columns [lo, hi) of the rows × cols matrix src
// (row stride ld) to bf16 bits into dst, its transpose (cols × rows).
func roundTransposedC(dst []uint16, src []float32, rows, ld, lo, hi int) {
	if rows == 0 || hi <= lo {
		return
	}
	C.rlvr_to_bf16_transposed((*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(dst))), (*C.float)(unsafe.Pointer(unsafe.SliceData(src))),
		C.long(rows), C.long(ld), C.long(lo), C.long(hi))
}
