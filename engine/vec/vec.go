// Package vec holds the engine's elementwise hot loops — softmax rows,
// SwiGLU and GeGLU, attention over a KV cache — in two forms: plain Go, the
// reference, and C compiled for AVX2/FMA, used when the binary is built
// with cgo on amd64 and the CPU has both. Go does not vectorize loops, and
// these are where a step spends its time outside matrix products.
//
// Every function behaves the same in both forms up to float32 rounding
// (the C exponential and the Go one share their polynomial; sums are
// accumulated in a different order). Slices must be long enough for the
// shapes given; a wrong shape is a programmer error.
package vec

// Accelerated reports whether the AVX2 C kernels are in use.
func Accelerated() bool { return accelerated }

// SoftmaxCausal turns each of the T rows of p (row length L, row stride
// L) into probabilities over its first past+i+1 entries (row i attends to
// keys 0..past+i) and zeroes the rest.
func SoftmaxCausal(p []float32, T, L, past int) { SoftmaxWindow(p, T, L, past, 0) }

// SoftmaxWindow is SoftmaxCausal with a sliding window: when window is
// positive, row i attends only to the keys j with past+i − j < window, and
// the entries before them are zeroed too.
func SoftmaxWindow(p []float32, T, L, past, window int) {
	if accelerated {
		softmaxCausalC(p, T, L, past, window)
		return
	}
	softmaxCausalGo(p, T, L, past, window)
}

// windowStart is the first key a query at position q sees: 0 without a
// window, else the first of the last window positions up to q.
func windowStart(q, window int) int {
	if window <= 0 {
		return 0
	}
	return max(0, q-window+1)
}

// SwiGLU computes out = silu(g)⊙u and sig = σ(g) for N rows of gu =
// [g (F) | u (F)].
func SwiGLU(out, sig, gu []float32, N, F int) {
	if accelerated {
		swigluC(out, sig, gu, N, F)
		return
	}
	swigluGo(out, sig, gu, N, F)
}

// GeGLU computes out = gelu_tanh(g)⊙u for N rows of gu = [g (F) | u (F)],
// with GELU's tanh approximation 0.5·g·(1 + tanh(z)), z = β·(g + κ·g³),
// written as g·σ(2z); it saves sig = σ(2z) for the backward.
func GeGLU(out, sig, gu []float32, N, F int) {
	if accelerated {
		gegluC(out, sig, gu, N, F)
		return
	}
	gegluGo(out, sig, gu, N, F)
}

// GeGLUBackward adds dout's gradient into dgu = [dg | du] for N rows:
// gelu'(g) = s + g·s·(1 − s)·2β·(1 + 3κ·g²) with s = σ(2z).
func GeGLUBackward(dgu, dout, gu, sig []float32, N, F int) {
	if accelerated {
		gegluBackwardC(dgu, dout, gu, sig, N, F)
		return
	}
	gegluBackwardGo(dgu, dout, gu, sig, N, F)
}

// GELU's tanh approximation, as PyTorch's gelu(x, approximate="tanh"):
// β = √(2/π), κ = 0.044715; the kernels use 2β, since
// 0.5·(1 + tanh(z)) = σ(2z).
const (
	geluTwoBeta = float32(2 * 0.7978845608028654)
	geluKappa   = float32(0.044715)
)

// SwiGLUBackward adds dout's gradient into dgu = [dg | du] for N rows.
func SwiGLUBackward(dgu, dout, gu, sig []float32, N, F int) {
	if accelerated {
		swigluBackwardC(dgu, dout, gu, sig, N, F)
		return
	}
	swigluBackwardGo(dgu, dout, gu, sig, N, F)
}

// ExpShiftSum writes dst[i] = exp(src[i] − shift) and returns the sum in
// float64.
func ExpShiftSum(dst, src []float32, shift float32) float64 {
	if accelerated && len(src) >= 16 {
		return expShiftSumC(dst, src, shift)
	}
	return expShiftSumGo(dst, src, shift)
}

// Max returns the largest value of x, which is not empty, or NaN if x
// holds one.
func Max(x []float32) float32 {
	if accelerated && len(x) >= 64 {
		return maxC(x)
	}
	return maxGo(x)
}

// SearchCumulative returns the first index i with u < p[0] + … + p[i],
// summing in float64, or the last index with p[i] > 0 if the whole sum is
// not above u (u drawn against a sum accumulated in another order may land
// just past it). It is
// inverse-CDF sampling over unnormalized probabilities p ≥ 0: the partial
// sums are taken 64 at a time, so the scan is a few adds per block until
// the block holding the answer.
func SearchCumulative(p []float32, u float64) int {
	var c float64
	i := 0
	for ; i+64 <= len(p); i += 64 {
		b := sum64(p[i : i+64])
		if u < c+b {
			break
		}
		c += b
	}
	for ; i < len(p); i++ {
		c += float64(p[i])
		if u < c {
			return i
		}
	}
	for i = len(p) - 1; i > 0 && p[i] == 0; i-- {
	}
	return i
}

// DecodeAttention attends one new query per sequence to its cached keys
// and values. q holds S rows (stride qStride) of H heads of hd values;
// sequence s uses cache slot slot[s] and its first n[s] positions (the
// last of them the query's own), or with a positive window only the last
// window of those; head h reads the key/value head h/(H/KV). Keys are
// stored transposed per slot, (KV, hd, capacity); values per slot as (KV,
// capacity, hd). out gets S rows (stride outStride) of H·hd values.
// scratch holds at least 4·max(n) floats.
func DecodeAttention(out []float32, outStride int, q []float32, qStride int, k, v []float32, capacity int, slot, n []int32, H, KV, hd int, scale float32, window int, scratch []float32) {
	if accelerated {
		decodeAttentionC(out, outStride, q, qStride, k, v, capacity, slot, n, H, KV, hd, scale, window, scratch)
		return
	}
	decodeAttentionGo(out, outStride, q, qStride, k, v, capacity, slot, n, H, KV, hd, scale, window, scratch)
}
