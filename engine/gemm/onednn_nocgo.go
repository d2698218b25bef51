//go:build !cgo

package gemm

import "errors"

var errNoCgo = errors.New("gemm: built without cgo, so no bf16 library can be loaded")

func loadOneDNN() (string, error) { return "", errNoCgo }

func openOneDNN() error { return errNoCgo }

// dnnlDesc describes the loaded oneDNN: none without cgo.
const dnnlDesc = ""

func onednnF32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	return errNoCgo
}

func sbgemmName() (string, error) { return "", errNoCgo }

func onednnSerial(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	panic("gemm: oneDNN is not available without cgo")
}

func sbgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	panic("gemm: OpenBLAS is not available without cgo")
}
