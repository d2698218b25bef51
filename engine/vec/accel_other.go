//go:build !(cgo && amd64)

package vec

const accelerated = false

func softmaxCausalC(p []float32, T, L, past, window int)     { panic("vec: no C kernels") }
func swigluC(out, sig, gu []float32, N, F int)               { panic("vec: no C kernels") }
func swigluBackwardC(dgu, dout, gu, sig []float32, N, F int) { panic("vec: no C kernels") }
func gegluC(out, sig, gu []float32, N, F int)                { panic("vec: no C kernels") }
func gegluBackwardC(dgu, dout, gu, sig []float32, N, F int)  { panic("vec: no C kernels") }
func expShiftSumC(dst, src []float32, shift float32) float64 { panic("vec: no C kernels") }
func maxC(x []float32) float32                               { panic("vec: no C kernels") }
func decodeAttentionC(out []float32, outStride int, q []float32, qStride int, k, v []float32, capacity int, slot, n []int32, H, KV, hd int, scale float32, window int, scratch []float32) {
	panic("vec: no C kernels")
}
