//go:build cgo && amd64

package vec

/*
#cgo CFLAGS: -O3
#cgo noescape rlvr_softmax_causal
#cgo nocallback rlvr_softmax_causal
#cgo noescape rlvr_swiglu
#cgo nocallback rlvr_swiglu
#cgo noescape rlvr_swiglu_bwd
#cgo nocallback rlvr_swiglu_bwd
#cgo noescape rlvr_geglu
#cgo nocallback rlvr_geglu
#cgo noescape rlvr_geglu_bwd
#cgo nocallback rlvr_geglu_bwd
#cgo noescape rlvr_exp_shift_sum
#cgo nocallback rlvr_exp_shift_sum
#cgo noescape rlvr_decode_attention
#cgo noescape rlvr_max
#cgo nocallback rlvr_max
#cgo nocallback rlvr_decode_attention
#cgo noescape rlvr_decode_attention512
#cgo nocallback rlvr_decode_attention512
#include <string.h>
#include <stdint.h>
#include <immintrin.h>
#include <math.h>

#define AVX2 __attribute__((target("avx2,fma")))

// Subnormal floats (tiny attention weights times values, say) take a
// microcode assist of ~100 cycles each on x86; the kernels run with
// flush-to-zero and denormals-are-zero, restoring the caller's mode after.
#define FTZ_BEGIN unsigned int rl_csr = _mm_getcsr(); _mm_setcsr(rl_csr | 0x8040);
#define FTZ_END _mm_setcsr(rl_csr);

// rl_exp is Exp32's polynomial (Cephes expf) for one value; rl_exp8 is the
// same for eight. Inputs are clamped to the float32 range of e^x.
AVX2 static inline float rl_exp(float x) {
	x = x < -87.33654f ? -87.33654f : x;
	x = x > 88.72283f ? 88.72283f : x;
	float t = x * 1.44269504088896341f;
	float k = (float)(int32_t)(t + (t >= 0 ? 0.5f : -0.5f));
	float r = x - k * 0.693359375f - k * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	int32_t bits = ((int32_t)k + 127) << 23;
	float scale;
	memcpy(&scale, &bits, 4);
	return p * scale;
}

AVX2 static inline __m256 rl_exp8(__m256 x) {
	x = _mm256_max_ps(x, _mm256_set1_ps(-87.33654f));
	x = _mm256_min_ps(x, _mm256_set1_ps(88.72283f));
	__m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

AVX2 static inline float hsum8(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2 static inline float hmax8(__m256 v) {
	__m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_max_ps(s, _mm_movehl_ps(s, s));
	s = _mm_max_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// rl_softmax_row turns row[0..valid) into probabilities.
AVX2 static inline void rl_softmax_row(float* restrict row, long valid) {
	long j = 0;
	float m = row[0];
	if (valid >= 8) {
		__m256 vm = _mm256_loadu_ps(row);
		for (j = 8; j + 8 <= valid; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + j));
		m = hmax8(vm);
	}
	for (; j < valid; j++) m = row[j] > m ? row[j] : m;
	__m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
	for (j = 0; j + 8 <= valid; j += 8) {
		__m256 e = rl_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
		_mm256_storeu_ps(row + j, e);
		vs = _mm256_add_ps(vs, e);
	}
	float sum = hsum8(vs);
	for (; j < valid; j++) { float e = rl_exp(row[j] - m); row[j] = e; sum += e; }
	float inv = 1.0f / sum;
	__m256 vi = _mm256_set1_ps(inv);
	for (j = 0; j + 8 <= valid; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), vi));
	for (; j < valid; j++) row[j] *= inv;
}

// rl_window_start is the first key a query at position q sees: 0 without
// a window, else the first of the last `window` positions up to q.
static inline long rl_window_start(long q, long window) {
	if (window <= 0 || q - window + 1 < 0) return 0;
	return q - window + 1;
}

AVX2 static void rlvr_softmax_causal(float* p, long T, long L, long past, long window) {
	FTZ_BEGIN
	for (long i = 0; i < T; i++) {
		float* row = p + i * L;
		long valid = past + i + 1, start = rl_window_start(past + i, window);
		rl_softmax_row(row + start, valid - start);
		for (long j = 0; j < start; j++) row[j] = 0;
		for (long j = valid; j < L; j++) row[j] = 0;
	}
	FTZ_END
}

AVX2 static void rlvr_swiglu(float* restrict out, float* restrict sig, const float* restrict gu, long N, long F) {
	FTZ_BEGIN
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	for (long n = 0; n < N; n++) {
		const float* g = gu + n * 2 * F;
		const float* u = g + F;
		float* y = out + n * F;
		float* s = sig + n * F;
		long i = 0;
		for (; i + 8 <= F; i += 8) {
			__m256 vg = _mm256_loadu_ps(g + i);
			__m256 sg = _mm256_div_ps(one, _mm256_add_ps(one, rl_exp8(_mm256_sub_ps(zero, vg))));
			_mm256_storeu_ps(s + i, sg);
			_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(vg, sg), _mm256_loadu_ps(u + i)));
		}
		for (; i < F; i++) {
			float sg = 1.0f / (1.0f + rl_exp(-g[i]));
			s[i] = sg;
			y[i] = g[i] * sg * u[i];
		}
	}
	FTZ_END
}

AVX2 static void rlvr_swiglu_bwd(float* restrict dgu, const float* restrict dout, const float* restrict gu, const float* restrict sig, long N, long F) {
	FTZ_BEGIN
	for (long n = 0; n < N; n++) {
		const float* g = gu + n * 2 * F;
		const float* u = g + F;
		float* dg = dgu + n * 2 * F;
		float* du = dg + F;
		const float* dy = dout + n * F;
		const float* s = sig + n * F;
		for (long i = 0; i < F; i++) {
			du[i] += dy[i] * g[i] * s[i];
			dg[i] += dy[i] * u[i] * s[i] * (1.0f + g[i] * (1.0f - s[i]));
		}
	}
	FTZ_END
}

// GELU's tanh approximation as g·σ(2β·(g + κ·g³)); see vec.GeGLU.
#define RL_GELU_2BETA 1.5957691216057308f
#define RL_GELU_KAPPA 0.044715f

AVX2 static void rlvr_geglu(float* restrict out, float* restrict sig, const float* restrict gu, long N, long F) {
	FTZ_BEGIN
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	const __m256 b2 = _mm256_set1_ps(RL_GELU_2BETA), k = _mm256_set1_ps(RL_GELU_KAPPA);
	for (long n = 0; n < N; n++) {
		const float* g = gu + n * 2 * F;
		const float* u = g + F;
		float* y = out + n * F;
		float* s = sig + n * F;
		long i = 0;
		for (; i + 8 <= F; i += 8) {
			__m256 x = _mm256_loadu_ps(g + i);
			__m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
			__m256 z = _mm256_mul_ps(b2, _mm256_add_ps(x, _mm256_mul_ps(k, x3)));
			__m256 sg = _mm256_div_ps(one, _mm256_add_ps(one, rl_exp8(_mm256_sub_ps(zero, z))));
			_mm256_storeu_ps(s + i, sg);
			_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(x, sg), _mm256_loadu_ps(u + i)));
		}
		for (; i < F; i++) {
			float x = g[i];
			float sg = 1.0f / (1.0f + rl_exp(-(RL_GELU_2BETA * (x + RL_GELU_KAPPA * (x * x * x)))));
			s[i] = sg;
			y[i] = x * sg * u[i];
		}
	}
	FTZ_END
}

AVX2 static void rlvr_geglu_bwd(float* restrict dgu, const float* restrict dout, const float* restrict gu, const float* restrict sig, long N, long F) {
	FTZ_BEGIN
	for (long n = 0; n < N; n++) {
		const float* g = gu + n * 2 * F;
		const float* u = g + F;
		float* dg = dgu + n * 2 * F;
		float* du = dg + F;
		const float* dy = dout + n * F;
		const float* s = sig + n * F;
		for (long i = 0; i < F; i++) {
			float x = g[i];
			du[i] += dy[i] * x * s[i];
			dg[i] += dy[i] * u[i] * (s[i] + x * s[i] * (1.0f - s[i]) * RL_GELU_2BETA * (1.0f + 3.0f * RL_GELU_KAPPA * x * x));
		}
	}
	FTZ_END
}

AVX2 static double rlvr_exp_shift_sum(float* restrict dst, const float* restrict src, long n, float shift) {
	FTZ_BEGIN
	__m256 vs = _mm256_set1_ps(shift);
	__m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 e = rl_exp8(_mm256_sub_ps(_mm256_loadu_ps(src + i), vs));
		_mm256_storeu_ps(dst + i, e);
		acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	double lanes[4];
	_mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
	double sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
	for (; i < n; i++) { dst[i] = rl_exp(src[i] - shift); sum += dst[i]; }
	FTZ_END
	return sum;
}

// rlvr_max returns the largest of x[0..n), or NaN if any is NaN (as Go's
// max does), with four independent accumulators.
AVX2 static float rlvr_max(const float* restrict x, long n) {
	__m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0, nan = _mm256_setzero_ps();
	long i = 0;
	for (; i + 32 <= n; i += 32) {
		__m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
		__m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
		m0 = _mm256_max_ps(m0, a); m1 = _mm256_max_ps(m1, b);
		m2 = _mm256_max_ps(m2, c); m3 = _mm256_max_ps(m3, d);
		nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c, d, _CMP_UNORD_Q)));
	}
	float lanes[8], m = -INFINITY;
	_mm256_storeu_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
	for (int l = 0; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
	int bad = _mm256_movemask_ps(nan) != 0;
	for (; i < n; i++) {
		bad |= x[i] != x[i];
		m = x[i] > m ? x[i] : m;
	}
	return bad ? NAN : m;
}

AVX2 static inline float rl_dot(const float* restrict a, const float* restrict b, long n) {
	__m256 acc = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
	float d = hsum8(acc);
	for (; i < n; i++) d += a[i] * b[i];
	return d;
}

// rl_scores writes p[j] = scale·(q·k_j) for j < L, where key j's values
// are kt[i·capacity + j] (keys stored transposed): four blocks of eight
// keys at a time, one FMA per head dimension and block, so four
// independent chains (and four streams of loads) are in flight, then
// eight at a time, no horizontal sums.
AVX2 static void rl_scores(float* restrict p, const float* restrict q, const float* restrict kt, long capacity, long L, long hd, float scale) {
	long j = 0;
	__m256 vs = _mm256_set1_ps(scale);
	for (; j + 32 <= L; j += 32) {
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		for (long i = 0; i < hd; i++) {
			__m256 w = _mm256_set1_ps(q[i]);
			const float* row = kt + i * capacity + j;
			a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row), a0);
			a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + 8), a1);
			a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + 16), a2);
			a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + 24), a3);
		}
		_mm256_storeu_ps(p + j, _mm256_mul_ps(a0, vs));
		_mm256_storeu_ps(p + j + 8, _mm256_mul_ps(a1, vs));
		_mm256_storeu_ps(p + j + 16, _mm256_mul_ps(a2, vs));
		_mm256_storeu_ps(p + j + 24, _mm256_mul_ps(a3, vs));
	}
	for (; j + 8 <= L; j += 8) {
		__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
		long i = 0;
		for (; i + 2 <= hd; i += 2) {
			a0 = _mm256_fmadd_ps(_mm256_set1_ps(q[i]), _mm256_loadu_ps(kt + i * capacity + j), a0);
			a1 = _mm256_fmadd_ps(_mm256_set1_ps(q[i + 1]), _mm256_loadu_ps(kt + (i + 1) * capacity + j), a1);
		}
		for (; i < hd; i++) a0 = _mm256_fmadd_ps(_mm256_set1_ps(q[i]), _mm256_loadu_ps(kt + i * capacity + j), a0);
		_mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_add_ps(a0, a1), vs));
	}
	for (; j < L; j++) {
		float d = 0;
		for (long i = 0; i < hd; i++) d += q[i] * kt[i * capacity + j];
		p[j] = d * scale;
	}
}

// rl_mix_n is rl_mix for heads of exactly C·8 values (C a constant after
// inlining, so the accumulators are registers): two keys per iteration
// into two accumulator sets for narrow heads, so enough FMA chains are
// independent.
AVX2 static inline __attribute__((always_inline)) void rl_mix_n(const int C, float* restrict o, const float* restrict p,
		const float* restrict v, long stride, long L) {
	__m256 a[8], b[8];
	for (int c = 0; c < C; c++) a[c] = b[c] = _mm256_setzero_ps();
	long j = 0;
	if (C <= 4) {
		for (; j + 2 <= L; j += 2) {
			__m256 p0 = _mm256_set1_ps(p[j]), p1 = _mm256_set1_ps(p[j + 1]);
			for (int c = 0; c < C; c++) {
				a[c] = _mm256_fmadd_ps(p0, _mm256_loadu_ps(v + j * stride + 8 * c), a[c]);
				b[c] = _mm256_fmadd_ps(p1, _mm256_loadu_ps(v + (j + 1) * stride + 8 * c), b[c]);
			}
		}
	}
	for (; j < L; j++) {
		__m256 pj = _mm256_set1_ps(p[j]);
		for (int c = 0; c < C; c++) a[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + j * stride + 8 * c), a[c]);
	}
	for (int c = 0; c < C; c++) _mm256_storeu_ps(o + 8 * c, _mm256_add_ps(a[c], b[c]));
}

// rl_mix writes o = Σ_j p[j]·v_j (hd a multiple of 8, at most 128), with
// one accumulator per 8 columns and, for narrow heads, four per column
// block so the FMAs do not wait on each other. The common head sizes run
// a specialization whose accumulators stay in registers.
AVX2 static void rl_mix(float* restrict o, const float* restrict p, const float* restrict v, long stride, long L, long hd) {
	switch (hd) {
	case 32: rl_mix_n(4, o, p, v, stride, L); return;
	case 64: rl_mix_n(8, o, p, v, stride, L); return;
	}
	if (hd > 128) {
		// Wide heads (Gemma 3's 256) in blocks of 64 values, each a pass
		// over the keys with its accumulators in registers; the last block
		// takes the remainder.
		long b = 0;
		for (; b + 64 <= hd; b += 64) rl_mix_n(8, o + b, p, v + b, stride, L);
		if (b < hd) rl_mix(o + b, p, v + b, stride, L, hd - b);
		return;
	}
	long chunks = hd / 8;
	__m256 acc[16];
	for (long c = 0; c < chunks; c++) acc[c] = _mm256_setzero_ps();
	long j = 0;
	if (chunks == 1) {
		__m256 a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
		for (; j + 4 <= L; j += 4) {
			acc[0] = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * stride), acc[0]);
			a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[j + 1]), _mm256_loadu_ps(v + (j + 1) * stride), a1);
			a2 = _mm256_fmadd_ps(_mm256_set1_ps(p[j + 2]), _mm256_loadu_ps(v + (j + 2) * stride), a2);
			a3 = _mm256_fmadd_ps(_mm256_set1_ps(p[j + 3]), _mm256_loadu_ps(v + (j + 3) * stride), a3);
		}
		acc[0] = _mm256_add_ps(_mm256_add_ps(acc[0], a1), _mm256_add_ps(a2, a3));
	}
	for (; j < L; j++) {
		__m256 pj = _mm256_set1_ps(p[j]);
		for (long c = 0; c < chunks; c++) acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + j * stride + 8 * c), acc[c]);
	}
	for (long c = 0; c < chunks; c++) _mm256_storeu_ps(o + 8 * c, acc[c]);
}

// rl_scores2 is rl_scores for two query heads sharing their keys: each
// key block is loaded once for both.
// It also returns each head's largest score in *m0 and *m1.
AVX2 static void rl_scores2(float* restrict p0, float* restrict p1, const float* restrict q0, const float* restrict q1,
		const float* restrict kt, long capacity, long L, long hd, float scale, float* m0, float* m1) {
	long j = 0;
	__m256 vs = _mm256_set1_ps(scale);
	__m256 x0 = _mm256_set1_ps(-3.0e38f), x1 = x0;
	// Four key blocks at a time: eight independent FMA chains hide the
	// FMA latency.
	for (; j + 32 <= L; j += 32) {
		__m256 a[4], b[4];
		for (int r = 0; r < 4; r++) a[r] = b[r] = _mm256_setzero_ps();
		for (long i = 0; i < hd; i++) {
			__m256 w0 = _mm256_set1_ps(q0[i]), w1 = _mm256_set1_ps(q1[i]);
			const float* row = kt + i * capacity + j;
			for (int r = 0; r < 4; r++) {
				__m256 kv = _mm256_loadu_ps(row + 8 * r);
				a[r] = _mm256_fmadd_ps(w0, kv, a[r]);
				b[r] = _mm256_fmadd_ps(w1, kv, b[r]);
			}
		}
		for (int r = 0; r < 4; r++) {
			a[r] = _mm256_mul_ps(a[r], vs);
			b[r] = _mm256_mul_ps(b[r], vs);
			x0 = _mm256_max_ps(x0, a[r]);
			x1 = _mm256_max_ps(x1, b[r]);
			_mm256_storeu_ps(p0 + j + 8 * r, a[r]);
			_mm256_storeu_ps(p1 + j + 8 * r, b[r]);
		}
	}
	for (; j + 8 <= L; j += 8) {
		__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
		for (long i = 0; i < hd; i++) {
			__m256 kv = _mm256_loadu_ps(kt + i * capacity + j);
			a0 = _mm256_fmadd_ps(_mm256_set1_ps(q0[i]), kv, a0);
			a1 = _mm256_fmadd_ps(_mm256_set1_ps(q1[i]), kv, a1);
		}
		a0 = _mm256_mul_ps(a0, vs);
		a1 = _mm256_mul_ps(a1, vs);
		x0 = _mm256_max_ps(x0, a0);
		x1 = _mm256_max_ps(x1, a1);
		_mm256_storeu_ps(p0 + j, a0);
		_mm256_storeu_ps(p1 + j, a1);
	}
	float y0 = hmax8(x0), y1 = hmax8(x1);
	for (; j < L; j++) {
		float d0 = 0, d1 = 0;
		for (long i = 0; i < hd; i++) { d0 += q0[i] * kt[i * capacity + j]; d1 += q1[i] * kt[i * capacity + j]; }
		p0[j] = d0 * scale;
		p1[j] = d1 * scale;
		y0 = p0[j] > y0 ? p0[j] : y0;
		y1 = p1[j] > y1 ? p1[j] : y1;
	}
	*m0 = y0;
	*m1 = y1;
}

// rl_exp_row replaces row[0..L) by exp(row − m) and returns the sum: a
// softmax whose normalization is left to the caller.
AVX2 static inline float rl_exp_row(float* restrict row, long L, float m) {
	__m256 vm = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
	long j = 0;
	for (; j + 8 <= L; j += 8) {
		__m256 e = rl_exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
		_mm256_storeu_ps(row + j, e);
		vs = _mm256_add_ps(vs, e);
	}
	float sum = hsum8(vs);
	for (; j < L; j++) { float e = rl_exp(row[j] - m); row[j] = e; sum += e; }
	return sum;
}

// rl_mix2 is rl_mix for two heads sharing their values (hd a multiple of 8,
// at most 32): each value row is loaded once for both.
// The outputs are scaled by s0 and s1 (the softmax normalizations).
AVX2 static void rl_mix2(float* restrict o0, float* restrict o1, const float* restrict p0, const float* restrict p1,
		const float* restrict v, long L, long hd, float s0, float s1) {
	long chunks = hd / 8;
	__m256 a[4], b[4];
	for (long c = 0; c < chunks; c++) a[c] = b[c] = _mm256_setzero_ps();
	long j = 0;
	if (chunks == 1) {
		// Narrow heads: four rows at a time into separate accumulators, so
		// the FMAs do not wait on each other.
		__m256 a1 = _mm256_setzero_ps(), a2 = a1, a3 = a1, b1 = a1, b2 = a1, b3 = a1;
		for (; j + 4 <= L; j += 4) {
			__m256 x0 = _mm256_loadu_ps(v + j * hd), x1 = _mm256_loadu_ps(v + (j + 1) * hd);
			__m256 x2 = _mm256_loadu_ps(v + (j + 2) * hd), x3 = _mm256_loadu_ps(v + (j + 3) * hd);
			a[0] = _mm256_fmadd_ps(_mm256_set1_ps(p0[j]), x0, a[0]);
			a1 = _mm256_fmadd_ps(_mm256_set1_ps(p0[j + 1]), x1, a1);
			a2 = _mm256_fmadd_ps(_mm256_set1_ps(p0[j + 2]), x2, a2);
			a3 = _mm256_fmadd_ps(_mm256_set1_ps(p0[j + 3]), x3, a3);
			b[0] = _mm256_fmadd_ps(_mm256_set1_ps(p1[j]), x0, b[0]);
			b1 = _mm256_fmadd_ps(_mm256_set1_ps(p1[j + 1]), x1, b1);
			b2 = _mm256_fmadd_ps(_mm256_set1_ps(p1[j + 2]), x2, b2);
			b3 = _mm256_fmadd_ps(_mm256_set1_ps(p1[j + 3]), x3, b3);
		}
		a[0] = _mm256_add_ps(_mm256_add_ps(a[0], a1), _mm256_add_ps(a2, a3));
		b[0] = _mm256_add_ps(_mm256_add_ps(b[0], b1), _mm256_add_ps(b2, b3));
	}
	for (; j < L; j++) {
		__m256 w0 = _mm256_set1_ps(p0[j]), w1 = _mm256_set1_ps(p1[j]);
		for (long c = 0; c < chunks; c++) {
			__m256 x = _mm256_loadu_ps(v + j * hd + 8 * c);
			a[c] = _mm256_fmadd_ps(w0, x, a[c]);
			b[c] = _mm256_fmadd_ps(w1, x, b[c]);
		}
	}
	__m256 v0 = _mm256_set1_ps(s0), v1 = _mm256_set1_ps(s1);
	for (long c = 0; c < chunks; c++) {
		_mm256_storeu_ps(o0 + 8 * c, _mm256_mul_ps(a[c], v0));
		_mm256_storeu_ps(o1 + 8 * c, _mm256_mul_ps(b[c], v1));
	}
}

AVX2 static void rlvr_decode_attention(float* out, long out_stride, const float* q, long q_stride,
		const float* k, const float* v, long capacity, const int32_t* slot, const int32_t* n, long S,
		long H, long KV, long hd, float scale, long window, float* p) {
	FTZ_BEGIN
	long rep = H / KV, kvw = KV * hd;
	int wide = hd % 8 == 0;
	int pairs = rep == 2 && hd % 8 == 0 && hd <= 32; // both heads of a group in one pass
	for (long s = 0; s < S; s++) {
		// Only keys [start, n) are seen: the cache from start on, L long.
		long start = rl_window_start(n[s] - 1, window), L = n[s] - start;
		if (pairs) {
			for (long g = 0; g < KV; g++) {
				const float* q0 = q + s * q_stride + 2 * g * hd;
				const float* kt = k + (slot[s] * kvw + g * hd) * capacity + start;
				const float* vb = v + (slot[s] * kvw + g * hd) * capacity + start * hd;
				float* o0 = out + s * out_stride + 2 * g * hd;
				float m0, m1;
				rl_scores2(p, p + L, q0, q0 + hd, kt, capacity, L, hd, scale, &m0, &m1);
				float s0 = rl_exp_row(p, L, m0), s1 = rl_exp_row(p + L, L, m1);
				rl_mix2(o0, o0 + hd, p, p + L, vb, L, hd, 1.0f / s0, 1.0f / s1);
			}
			continue;
		}
		for (long h = 0; h < H; h++) {
			long g = h / rep;
			const float* qh = q + s * q_stride + h * hd;
			const float* kt = k + (slot[s] * kvw + g * hd) * capacity + start;
			const float* vb = v + (slot[s] * kvw + g * hd) * capacity + start * hd;
			float* o = out + s * out_stride + h * hd;
			rl_scores(p, qh, kt, capacity, L, hd, scale);
			rl_softmax_row(p, L);
			if (wide) {
				rl_mix(o, p, vb, hd, L, hd);
				continue;
			}
			for (long i = 0; i < hd; i++) {
				float acc = 0;
				for (long j = 0; j < L; j++) acc += p[j] * vb[j * hd + i];
				o[i] = acc;
			}
		}
	}
	FTZ_END
}
#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#define INLINE inline __attribute__((always_inline))

// rl_group_scores512 writes p[r·L + j] = scale·(q_r·k_j) for the G query
// heads r < G (q_r = q + r·hd) that share the keys kt (transposed, stride
// capacity), and m[r], each head's largest score: every key block is
// loaded once for all G heads, in blocks of 64 keys, the last ones masked.
AVX512 static INLINE void rl_group_scores512(const int G, float* restrict p, const float* restrict q, const float* restrict kt,
		long capacity, long L, long hd, float scale, float* m) {
	__m512 vs = _mm512_set1_ps(scale), top[4];
	for (int r = 0; r < G; r++) top[r] = _mm512_set1_ps(-3.0e38f);
	for (long j = 0; j < L; j += 64) {
		__mmask16 mk[4];
		for (int b = 0; b < 4; b++) {
			long left = L - j - 16 * b;
			mk[b] = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
		}
		__m512 a[4][4];
		for (int r = 0; r < G; r++)
			for (int b = 0; b < 4; b++) a[r][b] = _mm512_setzero_ps();
		for (long i = 0; i < hd; i++) {
			const float* row = kt + i * capacity + j;
			// The rows are capacity apart, too many streams for the
			// hardware prefetcher: the next block's lines are asked for
			// now.
			if (j + 64 < L) {
				_mm_prefetch((const char*)(row + 64), _MM_HINT_T0);
				_mm_prefetch((const char*)(row + 80), _MM_HINT_T0);
				_mm_prefetch((const char*)(row + 96), _MM_HINT_T0);
				_mm_prefetch((const char*)(row + 112), _MM_HINT_T0);
			}
			__m512 kv[4];
			for (int b = 0; b < 4; b++) kv[b] = _mm512_maskz_loadu_ps(mk[b], row + 16 * b);
			for (int r = 0; r < G; r++) {
				__m512 w = _mm512_set1_ps(q[r * hd + i]);
				for (int b = 0; b < 4; b++) a[r][b] = _mm512_fmadd_ps(w, kv[b], a[r][b]);
			}
		}
		for (int r = 0; r < G; r++) {
			for (int b = 0; b < 4; b++) {
				a[r][b] = _mm512_mul_ps(a[r][b], vs);
				top[r] = _mm512_mask_max_ps(top[r], mk[b], top[r], a[r][b]);
				_mm512_mask_storeu_ps(p + r * L + j + 16 * b, mk[b], a[r][b]);
			}
		}
	}
	for (int r = 0; r < G; r++) m[r] = _mm512_reduce_max_ps(top[r]);
}

// rl_group_mix512 writes o_r[0..16C) = w[r]·Σ_j p_r[j]·v_j for the G heads
// r < G (p_r = p + r·L, o_r = o + r·hd) that share the values v (rows of
// stride hd): every value row is loaded once for all G heads.
AVX512 static INLINE void rl_group_mix512(const int G, const int C, float* restrict o, const float* restrict p,
		const float* restrict v, long L, long hd, const float* w) {
	__m512 acc[4][4];
	for (int r = 0; r < G; r++)
		for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
	for (long j = 0; j < L; j++) {
		__m512 x[4];
		for (int c = 0; c < C; c++) x[c] = _mm512_loadu_ps(v + j * hd + 16 * c);
		for (int r = 0; r < G; r++) {
			__m512 pj = _mm512_set1_ps(p[r * L + j]);
			for (int c = 0; c < C; c++) acc[r][c] = _mm512_fmadd_ps(pj, x[c], acc[r][c]);
		}
	}
	for (int r = 0; r < G; r++) {
		__m512 vw = _mm512_set1_ps(w[r]);
		for (int c = 0; c < C; c++) _mm512_storeu_ps(o + r * hd + 16 * c, _mm512_mul_ps(acc[r][c], vw));
	}
}

// rl_group512 is one sequence's attention for G heads sharing a key/value
// head (hd a multiple of 16): scores, an unnormalized softmax per head,
// then the values mixed 64 columns at a time, each block of columns a pass
// over the values with its accumulators in registers.
AVX512 static INLINE void rl_group512(const int G, float* o, const float* q, const float* kt, const float* vb,
		long capacity, long L, long hd, float scale, float* p) {
	float m[4], w[4];
	rl_group_scores512(G, p, q, kt, capacity, L, hd, scale, m);
	for (int r = 0; r < G; r++) w[r] = 1.0f / rl_exp_row(p + r * L, L, m[r]);
	long c = 0;
	for (; c + 64 <= hd; c += 64) rl_group_mix512(G, 4, o + c, p, vb + c, L, hd, w);
	switch ((hd - c) / 16) {
	case 1: rl_group_mix512(G, 1, o + c, p, vb + c, L, hd, w); break;
	case 2: rl_group_mix512(G, 2, o + c, p, vb + c, L, hd, w); break;
	case 3: rl_group_mix512(G, 3, o + c, p, vb + c, L, hd, w); break;
	}
}

AVX512 static void rl_group512_1(float* o, const float* q, const float* kt, const float* vb, long capacity, long L, long hd, float scale, float* p) {
	rl_group512(1, o, q, kt, vb, capacity, L, hd, scale, p);
}
AVX512 static void rl_group512_2(float* o, const float* q, const float* kt, const float* vb, long capacity, long L, long hd, float scale, float* p) {
	rl_group512(2, o, q, kt, vb, capacity, L, hd, scale, p);
}
AVX512 static void rl_group512_3(float* o, const float* q, const float* kt, const float* vb, long capacity, long L, long hd, float scale, float* p) {
	rl_group512(3, o, q, kt, vb, capacity, L, hd, scale, p);
}
AVX512 static void rl_group512_4(float* o, const float* q, const float* kt, const float* vb, long capacity, long L, long hd, float scale, float* p) {
	rl_group512(4, o, q, kt, vb, capacity, L, hd, scale, p);
}

// rlvr_decode_attention512 is rlvr_decode_attention for heads of a
// multiple of 16 values on AVX-512: the query heads of a key/value head go
// through its keys and values together, up to four at a time, so a group
// of rep heads reads its cache ⌈rep/4⌉ times instead of rep times. p holds
// 4·max(n) floats.
AVX512 static void rlvr_decode_attention512(float* out, long out_stride, const float* q, long q_stride,
		const float* k, const float* v, long capacity, const int32_t* slot, const int32_t* n, long S,
		long H, long KV, long hd, float scale, long window, float* p) {
	FTZ_BEGIN
	long rep = H / KV, kvw = KV * hd;
	for (long s = 0; s < S; s++) {
		long start = rl_window_start(n[s] - 1, window), L = n[s] - start;
		for (long g = 0; g < KV; g++) {
			const float* kt = k + (slot[s] * kvw + g * hd) * capacity + start;
			const float* vb = v + (slot[s] * kvw + g * hd) * capacity + start * hd;
			for (long h = g * rep; h < (g + 1) * rep; h += 4) {
				const float* qh = q + s * q_stride + h * hd;
				float* o = out + s * out_stride + h * hd;
				switch ((g + 1) * rep - h < 4 ? (g + 1) * rep - h : 4) {
				case 1: rl_group512_1(o, qh, kt, vb, capacity, L, hd, scale, p); break;
				case 2: rl_group512_2(o, qh, kt, vb, capacity, L, hd, scale, p); break;
				case 3: rl_group512_3(o, qh, kt, vb, capacity, L, hd, scale, p); break;
				default: rl_group512_4(o, qh, kt, vb, capacity, L, hd, scale, p); break;
				}
			}
		}
	}
	FTZ_END
}
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var accelerated = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// grouped512 selects rlvr_decode_attention512 where it applies; a
// variable so that tests compare it with the AVX2 kernel.
var grouped512 = accelerated && cpu.X86.HasAVX512F

func fp(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

func softmaxCausalC(p []float32, T, L, past, window int) {
	_ = p[T*L-1]
	C.rlvr_softmax_causal(fp(p), C.long(T), C.long(L), C.long(past), C.long(window))
}

func swigluC(out, sig, gu []float32, N, F int) {
	if N == 0 {
		return
	}
	_, _, _ = out[N*F-1], sig[N*F-1], gu[N*2*F-1]
	C.rlvr_swiglu(fp(out), fp(sig), fp(gu), C.long(N), C.long(F))
}

func swigluBackwardC(dgu, dout, gu, sig []float32, N, F int) {
	if N == 0 {
		return
	}
	_, _, _, _ = dgu[N*2*F-1], dout[N*F-1], gu[N*2*F-1], sig[N*F-1]
	C.rlvr_swiglu_bwd(fp(dgu), fp(dout), fp(gu), fp(sig), C.long(N), C.long(F))
}

func gegluC(out, sig, gu []float32, N, F int) {
	if N == 0 {
		return
	}
	_, _, _ = out[N*F-1], sig[N*F-1], gu[N*2*F-1]
	C.rlvr_geglu(fp(out), fp(sig), fp(gu), C.long(N), C.long(F))
}

func gegluBackwardC(dgu, dout, gu, sig []float32, N, F int) {
	if N == 0 {
		return
	}
	_, _, _, _ = dgu[N*2*F-1], dout[N*F-1], gu[N*2*F-1], sig[N*F-1]
	C.rlvr_geglu_bwd(fp(dgu), fp(dout), fp(gu), fp(sig), C.long(N), C.long(F))
}

func expShiftSumC(dst, src []float32, shift float32) float64 {
	_ = dst[len(src)-1]
	return float64(C.rlvr_exp_shift_sum(fp(dst), fp(src), C.long(len(src)), C.float(shift)))
}

func maxC(x []float32) float32 { return float32(C.rlvr_max(fp(x), C.long(len(x)))) }

func decodeAttentionC(out []float32, outStride int, q []float32, qStride int, k, v []float32, capacity int, slot, n []int32, H, KV, hd int, scale float32, window int, scratch []float32) {
	S := len(slot)
	if S == 0 {
		return
	}
	// Bounds the C loop relies on, checked once here.
	kvw := KV * hd
	maxSlot, maxN := 0, 0
	for s := range slot {
		maxSlot, maxN = max(maxSlot, int(slot[s])), max(maxN, int(n[s]))
	}
	if maxN > capacity {
		panic("vec: attention length exceeds the cache capacity")
	}
	_, _ = k[(maxSlot+1)*kvw*capacity-1], v[(maxSlot+1)*kvw*capacity-1]
	_, _ = out[(S-1)*outStride+H*hd-1], q[(S-1)*qStride+H*hd-1]
	if grouped512 && hd%16 == 0 {
		_ = scratch[4*maxN-1]
		C.rlvr_decode_attention512(fp(out), C.long(outStride), fp(q), C.long(qStride), fp(k), fp(v), C.long(capacity),
			(*C.int32_t)(unsafe.Pointer(&slot[0])), (*C.int32_t)(unsafe.Pointer(&n[0])), C.long(S),
			C.long(H), C.long(KV), C.long(hd), C.float(scale), C.long(window), fp(scratch))
		return
	}
	_ = scratch[2*maxN-1]
	C.rlvr_decode_attention(fp(out), C.long(outStride), fp(q), C.long(qStride), fp(k), fp(v), C.long(capacity),
		(*C.int32_t)(unsafe.Pointer(&slot[0])), (*C.int32_t)(unsafe.Pointer(&n[0])), C.long(S),
		C.long(H), C.long(KV), C.long(hd), C.float(scale), C.long(window), fp(scratch))
}
