//go:build cgo

package gemm

/*
#cgo LDFLAGS: -ldl
#cgo noescape rlvr_sgemm
#cgo nocallback rlvr_sgemm
#cgo noescape rlvr_sgemv
#cgo nocallback rlvr_sgemv
#cgo noescape rlvr_sbgemm
#cgo nocallback rlvr_sbgemm
#include <dlfcn.h>
#include <stdlib.h>
#include <stdint.h>

typedef void (*rlvr_cblas_sgemm_t)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
typedef void (*rlvr_cblas_sgemv_t)(int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
typedef void (*rlvr_set_threads_t)(int);
typedef void (*rlvr_cblas_sbgemm_t)(int, int, int, int, int, int, float, const uint16_t*, int, const uint16_t*, int, float, float*, int);

static rlvr_cblas_sgemm_t rlvr_sgemm_ptr;
static rlvr_cblas_sgemv_t rlvr_sgemv_ptr;
// rlvr_sbgemm_ptr is OpenBLAS's bf16 product, in builds with
// BUILD_BFLOAT16 only (Debian's 0.3.21 has none); NULL otherwise.
static rlvr_cblas_sbgemm_t rlvr_sbgemm_ptr;

// rlvr_open loads path and resolves cblas_sgemm; 0 on success.
static int rlvr_open(const char* path) {
	// Pin OpenBLAS to one thread before it starts its pool: rlvr splits
	// work across goroutines itself.
	setenv("OPENBLAS_NUM_THREADS", "1", 1);
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return 1;
	rlvr_cblas_sgemm_t f = (rlvr_cblas_sgemm_t)dlsym(h, "cblas_sgemm");
	rlvr_cblas_sgemv_t fv = (rlvr_cblas_sgemv_t)dlsym(h, "cblas_sgemv");
	if (!f || !fv) { dlclose(h); return 2; }
	rlvr_sgemv_ptr = fv;
	rlvr_set_threads_t st = (rlvr_set_threads_t)dlsym(h, "openblas_set_num_threads");
	if (st) st(1);
	rlvr_sgemm_ptr = f;
	rlvr_sbgemm_ptr = (rlvr_cblas_sbgemm_t)dlsym(h, "cblas_sbgemm");
	return 0;
}

static void rlvr_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
	// 101 = CblasRowMajor, 111 = CblasNoTrans, 112 = CblasTrans.
	rlvr_sgemm_ptr(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int rlvr_has_sbgemm(void) { return rlvr_sbgemm_ptr != 0; }

static void rlvr_sbgemm(int ta, int tb, int m, int n, int k, float alpha, const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta, float* c, int ldc) {
	rlvr_sbgemm_ptr(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// rlvr_sgemv computes y = alpha·op(A)·x + beta·y for a row-major A.
static void rlvr_sgemv(int ta, int m, int n, float alpha, const float* a, int lda, const float* x, int incx, float beta, float* y) {
	rlvr_sgemv_ptr(101, ta ? 112 : 111, m, n, alpha, a, lda, x, incx, beta, y, 1);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// libraryNames are tried in order when RLVR_BLAS does not name a library.
var libraryNames = []string{"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"}

func loadOpenBLAS(path string) (string, error) {
	names := libraryNames
	if path != "" {
		names = []string{path}
	}
	for _, name := range names {
		cs := C.CString(name)
		rc := C.rlvr_open(cs)
		C.free(unsafe.Pointer(cs))
		switch rc {
		case 0:
			return name, nil
		case 2:
			return "", fmt.Errorf("gemm: %s has no cblas_sgemm or cblas_sgemv", name)
		}
	}
	return "", fmt.Errorf("gemm: OpenBLAS not found (tried %v; on Debian: apt-get install libopenblas0)", names)
}

func openblasSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 1 && k > 0 {
		// One row: a matrix-vector product. sgemm would pack all of B
		// first, which costs more than the product.
		incx := 1
		if transA {
			incx = lda
		}
		rows, cols := k, n // B is k×n: y = Bᵀx
		if transB {
			rows, cols = n, k // B is n×k: y = Bx
		}
		C.rlvr_sgemv(cbool(!transB), C.int(rows), C.int(cols), C.float(alpha), (*C.float)(unsafe.Pointer(&b[0])), C.int(max(ldb, 1)),
			(*C.float)(unsafe.Pointer(&a[0])), C.int(incx), C.float(beta), (*C.float)(unsafe.Pointer(&c[0])))
		return
	}
	var ap, bp *float32
	if k > 0 {
		ap, bp = &a[0], &b[0]
	}
	C.rlvr_sgemm(cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(ap)), C.int(max(lda, 1)), (*C.float)(unsafe.Pointer(bp)), C.int(max(ldb, 1)),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

// sbgemmName describes OpenBLAS's cblas_sbgemm when the loaded library
// has it.
func sbgemmName() (string, error) {
	if !UsingBLAS() {
		return "", fmt.Errorf("gemm: no OpenBLAS for sbgemm (%v)", LoadError())
	}
	if C.rlvr_has_sbgemm() == 0 {
		return "", fmt.Errorf("gemm: %s has no cblas_sbgemm (OpenBLAS built without BUILD_BFLOAT16)", Backend())
	}
	return "OpenBLAS cblas_sbgemm (" + Backend() + ")", nil
}

// sbgemmSerial multiplies bf16 matrices with OpenBLAS's sbgemm on the
// calling goroutine.
func sbgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	C.rlvr_sbgemm(cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(a))), C.int(max(lda, 1)), (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(b))), C.int(max(ldb, 1)),
		C.float(beta), (*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.int(ldc))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
