// Package gemm multiplies row-major float32 matrices near the machine's peak.
//
// Every product in the engine goes through Sgemm:
//
//	C = alpha·op(A)·op(B) + beta·C     op(X) = X or Xᵀ
//
// with C of shape (m, n), op(A) (m, k) and op(B) (k, n), all row-major with
// leading dimensions lda, ldb, ldc (the row strides, in elements). Slices may
// be longer than needed; a shape that does not fit its slice panics, as it is
// a programmer error inside the engine.
//
// The kernel is OpenBLAS's cblas_sgemm when the machine has the library
// (loaded at run time with dlopen, so a plain `go build` needs no BLAS
// headers and the binary still runs where there is none), and gonum's pure-Go
// sgemm otherwise. Backend reports which one runs. OpenBLAS is pinned to one
// thread: Sgemm splits the output across the goroutines of package parallel
// itself, and SgemmSerial runs on the calling goroutine for code that is
// already inside a parallel loop.
//
// Bgemm is the same product in mixed precision, PyTorch's autocast matmul:
// A and B rounded to bfloat16, the sums accumulated in float32 (bf16.go).
// Its kernel is chosen once, on first use, by RLVR_BF16_KERNEL (BF16Kernels):
// oneDNN's matmul or OpenBLAS's cblas_sbgemm, loaded at run time where the
// CPU has AVX512-BF16 or AMX (DetectCPU); an emulation (the inputs rounded,
// then Sgemm) that runs anywhere and is the reference; or none, where bf16
// falls back to float32 with a one-line Notice. BF16Kernel names it.
package gemm

import (
	"fmt"
	"os"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"rlvr/engine/parallel"
)

// serialKernel computes one product on the calling goroutine.
type serialKernel func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

var (
	kernel      serialKernel = gonumSerial
	backendName              = "gonum (pure Go)"
	// selfSplit is false when the kernel parallelizes internally (gonum does),
	// so Sgemm must not split it again.
	selfSplit = false
	loadErr   error
)

func init() {
	if os.Getenv("RLVR_BLAS") == "none" {
		loadErr = fmt.Errorf("gemm: RLVR_BLAS=none")
		return
	}
	name, err := loadOpenBLAS(os.Getenv("RLVR_BLAS"))
	if err != nil {
		loadErr = err
		return
	}
	kernel, backendName, selfSplit = openblasSerial, "OpenBLAS ("+name+", 1 thread per goroutine)", true
}

// Backend names the kernel in use, e.g. "OpenBLAS (libopenblas.so.0, …)" or
// "gonum (pure Go)".
func Backend() string { return backendName }

// UsingBLAS reports whether OpenBLAS was loaded; when it was not, LoadError
// says why.
func UsingBLAS() bool { return selfSplit }

// LoadError is why OpenBLAS could not be loaded, or nil if it was.
func LoadError() error { return loadErr }

// minSplitFLOPs is the product size below which splitting across goroutines
// costs more than it saves.
const minSplitFLOPs = 1 << 18

// Sgemm computes C = alpha·op(A)·op(B) + beta·C, splitting C across the
// goroutines of package parallel. The split depends only on the shape and the
// thread count, so the result is deterministic for a given thread count.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkShapes(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	splitProduct(kernel, selfSplit, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// splitProduct runs kern over blocks of C's rows (or columns, when C is
// wider than tall) on the goroutines of package parallel, or once on the
// calling goroutine when split is false (a kernel that parallelizes
// itself), there is one thread or the product is small.
func splitProduct[T float32 | uint16](kern func(transA, transB bool, m, n, k int, alpha float32, a []T, lda int, b []T, ldb int, beta float32, c []float32, ldc int),
	split, transA, transB bool, m, n, k int, alpha float32, a []T, lda int, b []T, ldb int, beta float32, c []float32, ldc int) {
	if !split || parallel.Threads() == 1 || 2*m*n*k < minSplitFLOPs {
		kern(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if m >= n {
		// Split rows of C (and of op(A)); grain 16 keeps panels aligned to
		// the micro-kernel's row blocking.
		parallel.For(m, 16, func(lo, hi int) {
			aOff := lo * lda
			if transA {
				aOff = lo
			}
			kern(transA, transB, hi-lo, n, k, alpha, a[aOff:], lda, b, ldb, beta, c[lo*ldc:], ldc)
		})
		return
	}
	parallel.For(n, 16, func(lo, hi int) {
		bOff := lo
		if transB {
			bOff = lo * ldb
		}
		kern(transA, transB, m, hi-lo, k, alpha, a, lda, b[bOff:], ldb, beta, c[lo:], ldc)
	})
}

// SgemmSerial is Sgemm on the calling goroutine only, for products inside a
// loop that package parallel already splits.
func SgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkShapes(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	kernel(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// opShapes is the stored shape of A (ar × ac) and of B (br × bc) for a
// product op(A)·op(B) of shape (m, k)·(k, n).
func opShapes(transA, transB bool, m, n, k int) (ar, ac, br, bc int) {
	ar, ac, br, bc = m, k, k, n
	if transA {
		ar, ac = k, m
	}
	if transB {
		br, bc = n, k
	}
	return
}

// checkShapes panics with a precise message when a matrix does not fit its
// slice; BLAS would otherwise read out of bounds.
func checkShapes(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	if m == 0 || n == 0 {
		return
	}
	ar, ac, br, bc := opShapes(transA, transB, m, n, k)
	fits := func(name string, s []float32, rows, cols, ld int) {
		if ld < max(cols, 1) {
			panic(fmt.Sprintf("gemm: ld%s=%d < %d columns", name, ld, cols))
		}
		if rows > 0 && cols > 0 && len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("gemm: %s is %d×%d with ld %d but has %d elements", name, rows, cols, ld, len(s)))
		}
	}
	if k > 0 {
		fits("a", a, ar, ac, lda)
		fits("b", b, br, bc, ldb)
	}
	fits("c", c, m, n, ldc)
}

func gonumSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	if transA {
		ta = blas.Trans
	}
	if transB {
		tb = blas.Trans
	}
	ar, ac, br, bc := opShapes(transA, transB, m, n, k)
	// gonum checks exact slice extents; trim to what the shapes use.
	c = c[:(m-1)*ldc+n]
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	a = a[:(ar-1)*lda+ac]
	b = b[:(br-1)*ldb+bc]
	gonum.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, max(lda, 1), b, max(ldb, 1), beta, c, ldc)
}

// scaleC sets C = beta·C, the whole product when k = 0.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		for j := range row {
			if beta == 0 {
				row[j] = 0
			} else {
				row[j] *= beta
			}
		}
	}
}

// Naive is the reference product: three loops, float32 accumulation in k
// order. Every fast path is tested against it.
func Naive(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += av * bv
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * s
			} else {
				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
			}
		}
	}
}
