//go:build !(cgo && amd64)

package gemm

const roundAccelerated = false

func roundC[T float32 | uint16](dst []T, src []float32) { panic("gemm: no C rounding kernel") }

func roundTransposedC(dst []uint16, src []float32, rows, ld, lo, hi int) {
	panic("gemm: no C rounding kernel")
}
