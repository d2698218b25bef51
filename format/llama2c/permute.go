package llama2c

import "fmt"

// PermuteForRotateHalf reorders the rows of a query or key projection
// from llama2.c's RoPE convention to the Hugging Face Llama one and returns
// the result in a new slice.
//
// w is a row-major (heads*headDim, cols) matrix, one block of headDim rows
// per head. run.c rotates the interleaved pairs (x[2i], x[2i+1]) of each
// head by the angle pos*θ_i, θ_i = RopeTheta^(-2i/headDim), while Hugging
// Face's rotate-half RoPE rotates the pairs (x[i], x[i+headDim/2]) by the
// same angles. Within every head the output holds the even rows of w
// first, then the odd rows:
//
//	out[h*headDim + i]           = w[h*headDim + 2i]
//	out[h*headDim + headDim/2+i] = w[h*headDim + 2i + 1]    for i < headDim/2
//
// so (x·Wᵀ) rotated with interleaved pairs, and x·W'ᵀ rotated by halves,
// hold the same values, only in this order. Applied to both q_proj and
// k_proj it leaves every attention score q·k unchanged (up to float
// summation order), so a rotate-half engine reproduces run.c. This is the
// permutation of Hugging Face's convert_llama_weights_to_hf.py and
// llama2.c's export.py (view(heads, headDim/2, 2, cols).transpose(1, 2)).
//
// It panics if headDim is odd or non-positive or if len(w) is not
// heads*headDim*cols.
func PermuteForRotateHalf(w []float32, heads, headDim, cols int) []float32 {
	checkPermute("PermuteForRotateHalf", w, heads, headDim, cols)
	out := make([]float32, len(w))
	half := headDim / 2
	for h := 0; h < heads; h++ {
		base := h * headDim
		for i := 0; i < half; i++ {
			for t := 0; t < 2; t++ {
				src, dst := base+2*i+t, base+t*half+i
				copy(out[dst*cols:(dst+1)*cols], w[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

// UnpermuteFromRotateHalf is the inverse of [PermuteForRotateHalf]: it
// returns the rows of a Hugging Face q_proj or k_proj matrix in
// llama2.c's interleaved order, in a new slice. It panics on the same
// arguments as PermuteForRotateHalf.
func UnpermuteFromRotateHalf(w []float32, heads, headDim, cols int) []float32 {
	checkPermute("UnpermuteFromRotateHalf", w, heads, headDim, cols)
	out := make([]float32, len(w))
	half := headDim / 2
	for h := 0; h < heads; h++ {
		base := h * headDim
		for i := 0; i < half; i++ {
			for t := 0; t < 2; t++ {
				src, dst := base+t*half+i, base+2*i+t
				copy(out[dst*cols:(dst+1)*cols], w[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

func checkPermute(fn string, w []float32, heads, headDim, cols int) {
	if heads < 0 || cols < 0 || headDim <= 0 || headDim%2 != 0 {
		panic(fmt.Sprintf("llama2c.%s: bad dimensions heads=%d headDim=%d cols=%d", fn, heads, headDim, cols))
	}
	if n := heads * headDim * cols; n != len(w) {
		panic(fmt.Sprintf("llama2c.%s: len(w) is %d, want heads*headDim*cols = %d", fn, len(w), n))
	}
}
