//go:build !cgo

package gemm

import "errors"

func loadOpenBLAS(string) (string, error) {
	return "", errors.New("gemm: built without cgo, so OpenBLAS cannot be loaded")
}

func openblasSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("gemm: OpenBLAS is not available without cgo")
}
