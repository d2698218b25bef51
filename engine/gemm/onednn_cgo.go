//go:build cgo

package gemm

/*
#cgo LDFLAGS: -ldl
#cgo noescape rlvr_dnnl_gemm
#cgo nocallback rlvr_dnnl_gemm
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

// The few declarations of oneDNN's C API (v3, dnnl.h) that a matrix product
// needs, so that building rlvr needs no oneDNN headers: the library is
// loaded at run time, where it exists.
typedef void* dnnl_handle;
typedef int64_t dnnl_dims_t[12];
typedef struct { int arg; dnnl_handle memory; } dnnl_exec_arg_t;
typedef struct { int major, minor, patch; const char* hash; unsigned cpu_runtime, gpu_runtime; } dnnl_version_t;
enum { DNNL_BF16 = 2, DNNL_F32 = 3, DNNL_CPU = 1, ARG_SRC = 1, ARG_DST = 17, ARG_WEIGHTS = 33, ARG_ATTR_SCALES = 4096 };

static struct {
	int (*engine_create)(dnnl_handle*, int, size_t);
	int (*stream_create)(dnnl_handle*, dnnl_handle, unsigned);
	int (*stream_destroy)(dnnl_handle);
	int (*md_create)(dnnl_handle*, int, const dnnl_dims_t, int, const dnnl_dims_t);
	int (*md_destroy)(dnnl_handle);
	int (*attr_create)(dnnl_handle*);
	int (*attr_destroy)(dnnl_handle);
	int (*attr_set_scales_mask)(dnnl_handle, int, int);
	int (*attr_set_post_ops)(dnnl_handle, dnnl_handle);
	int (*post_ops_create)(dnnl_handle*);
	int (*post_ops_destroy)(dnnl_handle);
	int (*post_ops_append_sum)(dnnl_handle, float, int32_t, int);
	int (*matmul_pd_create)(dnnl_handle*, dnnl_handle, dnnl_handle, dnnl_handle, dnnl_handle, dnnl_handle, dnnl_handle);
	int (*pd_destroy)(dnnl_handle);
	int (*primitive_create)(dnnl_handle*, dnnl_handle);
	int (*primitive_destroy)(dnnl_handle);
	int (*memory_create)(dnnl_handle*, dnnl_handle, dnnl_handle, void*);
	int (*memory_destroy)(dnnl_handle);
	int (*execute)(dnnl_handle, dnnl_handle, int, const dnnl_exec_arg_t*);
	int (*stream_wait)(dnnl_handle);
	const dnnl_version_t* (*version)(void);
	int (*effective_isa)(void);
	dnnl_handle engine;
} dn;

// rlvr_dnnl_open loads path and resolves the API; 0 on success, 1 when the
// library is missing, 2 when a symbol is (an older oneDNN, v2 or before),
// 3 when no CPU engine can be made.
static int rlvr_dnnl_open(const char* path) {
	// One thread per call: rlvr splits products across goroutines itself.
	// (libgomp reads this when the library's load brings it in.)
	setenv("OMP_NUM_THREADS", "1", 1);
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return 1;
#define SYM(field, name) if (!(*(void**)&dn.field = dlsym(h, name))) { dlclose(h); return 2; }
	SYM(engine_create, "dnnl_engine_create")
	SYM(stream_create, "dnnl_stream_create")
	SYM(stream_destroy, "dnnl_stream_destroy")
	SYM(md_create, "dnnl_memory_desc_create_with_strides")
	SYM(md_destroy, "dnnl_memory_desc_destroy")
	SYM(attr_create, "dnnl_primitive_attr_create")
	SYM(attr_destroy, "dnnl_primitive_attr_destroy")
	SYM(attr_set_scales_mask, "dnnl_primitive_attr_set_scales_mask")
	SYM(attr_set_post_ops, "dnnl_primitive_attr_set_post_ops")
	SYM(post_ops_create, "dnnl_post_ops_create")
	SYM(post_ops_destroy, "dnnl_post_ops_destroy")
	SYM(post_ops_append_sum, "dnnl_post_ops_append_sum")
	SYM(matmul_pd_create, "dnnl_matmul_primitive_desc_create")
	SYM(pd_destroy, "dnnl_primitive_desc_destroy")
	SYM(primitive_create, "dnnl_primitive_create")
	SYM(primitive_destroy, "dnnl_primitive_destroy")
	SYM(memory_create, "dnnl_memory_create")
	SYM(memory_destroy, "dnnl_memory_destroy")
	SYM(execute, "dnnl_primitive_execute")
	SYM(stream_wait, "dnnl_stream_wait")
	SYM(version, "dnnl_version")
	SYM(effective_isa, "dnnl_get_effective_cpu_isa")
#undef SYM
	if (dn.engine_create(&dn.engine, DNNL_CPU, 0) != 0) return 3;
	return 0;
}

static void rlvr_dnnl_version(int* v) {
	const dnnl_version_t* ver = dn.version();
	v[0] = ver->major; v[1] = ver->minor; v[2] = ver->patch; v[3] = dn.effective_isa();
}

// rlvr_dnnl_gemm computes C = alpha·op(A)·op(B) + beta·C with A and B of
// data type dt (bf16 or f32) and C f32, all row-major. A transposed
// operand is the same memory read with swapped strides. Returns oneDNN's
// status: 0 on success, 3 when it has no implementation (bf16 on a CPU
// without AVX-512), non-zero on any failure. Everything made here is
// destroyed here; oneDNN's primitive cache keeps repeated shapes cheap.
static int rlvr_dnnl_gemm(int dt, int ta, int tb, long m, long n, long k, float alpha, const void* a, long lda,
		const void* b, long ldb, float beta, float* c, long ldc, int dry) {
	dnnl_dims_t ad = {m, k}, as = {ta ? 1 : lda, ta ? lda : 1};
	dnnl_dims_t bd = {k, n}, bs = {tb ? 1 : ldb, tb ? ldb : 1};
	dnnl_dims_t cd = {m, n}, cs = {ldc, 1};
	dnnl_dims_t sd = {1}, ss = {1};
	dnnl_handle amd = 0, bmd = 0, cmd = 0, smd = 0, attr = 0, po = 0, pd = 0, prim = 0, stream = 0;
	dnnl_handle am = 0, bm = 0, cm = 0, sm = 0;
	int st;
#define TRY(x) if ((st = (x)) != 0) goto done;
	TRY(dn.md_create(&amd, 2, ad, dt, as))
	TRY(dn.md_create(&bmd, 2, bd, dt, bs))
	TRY(dn.md_create(&cmd, 2, cd, DNNL_F32, cs))
	TRY(dn.attr_create(&attr))
	if (alpha != 1) TRY(dn.attr_set_scales_mask(attr, ARG_SRC, 0))
	if (beta != 0) {
		TRY(dn.post_ops_create(&po))
		TRY(dn.post_ops_append_sum(po, beta, 0, 0))
		TRY(dn.attr_set_post_ops(attr, po))
	}
	TRY(dn.matmul_pd_create(&pd, dn.engine, amd, bmd, 0, cmd, attr))
	if (dry) goto done;
	TRY(dn.primitive_create(&prim, pd))
	TRY(dn.stream_create(&stream, dn.engine, 1))
	TRY(dn.memory_create(&am, amd, dn.engine, (void*)a))
	TRY(dn.memory_create(&bm, bmd, dn.engine, (void*)b))
	TRY(dn.memory_create(&cm, cmd, dn.engine, c))
	dnnl_exec_arg_t args[4] = {{ARG_SRC, am}, {ARG_WEIGHTS, bm}, {ARG_DST, cm}, {0, 0}};
	int nargs = 3;
	if (alpha != 1) {
		TRY(dn.md_create(&smd, 1, sd, DNNL_F32, ss))
		TRY(dn.memory_create(&sm, smd, dn.engine, &alpha))
		args[3].arg = ARG_ATTR_SCALES | ARG_SRC;
		args[3].memory = sm;
		nargs = 4;
	}
	TRY(dn.execute(prim, stream, nargs, args))
	TRY(dn.stream_wait(stream))
#undef TRY
done:
	if (sm) dn.memory_destroy(sm);
	if (cm) dn.memory_destroy(cm);
	if (bm) dn.memory_destroy(bm);
	if (am) dn.memory_destroy(am);
	if (stream) dn.stream_destroy(stream);
	if (prim) dn.primitive_destroy(prim);
	if (pd) dn.pd_destroy(pd);
	if (po) dn.post_ops_destroy(po);
	if (attr) dn.attr_destroy(attr);
	if (smd) dn.md_destroy(smd);
	if (cmd) dn.md_destroy(cmd);
	if (bmd) dn.md_destroy(bmd);
	if (amd) dn.md_destroy(amd);
	return st;
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"
)

// oneDNN's data types for its matmul.
const (
	dnnlBF16 = 2
	dnnlF32  = 3
)

// oneDNN's names for the instruction set it dispatches to
// (dnnl_get_effective_cpu_isa).
var dnnlISAs = map[int]string{0x3: "avx", 0x7: "avx2", 0xf: "avx2_vnni", 0x1f: "avx2_vnni_2", 0x27: "avx512_core",
	0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16", 0x1ef: "avx512_core_fp16", 0xfef: "avx512_core_amx", 0x1fef: "avx512_core_amx_fp16"}

var (
	dnnlOnce sync.Once
	dnnlDesc string // "oneDNN 3.2.0 (path, isa)"
	dnnlErr  error
)

// oneDNNPaths are tried in order when RLVR_DNNL does not name the library:
// the system's, then where scripts/setup.sh installs it.
func oneDNNPaths() []string {
	if p := os.Getenv("RLVR_DNNL"); p != "" {
		return []string{p}
	}
	paths := []string{"libdnnl.so.3"}
	cache := os.Getenv("RLVR_CACHE")
	if cache == "" {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			cache = filepath.Join(x, "rlvr")
		} else if h, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(h, ".cache", "rlvr")
		}
	}
	if cache != "" {
		paths = append(paths, filepath.Join(cache, "onednn", "libdnnl.so.3"))
	}
	return paths
}

// loadOneDNN loads oneDNN (v3 or later) once and checks that it has a
// bf16 matmul on this CPU, returning its description.
func loadOneDNN() (string, error) {
	if err := openOneDNN(); err != nil {
		return "", err
	}
	if st := C.rlvr_dnnl_gemm(dnnlBF16, 0, 0, 16, 16, 16, 1, nil, 16, nil, 16, 0, nil, 16, 1); st != 0 {
		return "", fmt.Errorf("gemm: %s has no bf16 matmul on this CPU (status %d)", dnnlDesc, st)
	}
	return dnnlDesc, nil
}

// openOneDNN loads the library, whatever data types it supports here.
func openOneDNN() error {
	dnnlOnce.Do(func() {
		paths := oneDNNPaths()
		for _, p := range paths {
			cs := C.CString(p)
			rc := C.rlvr_dnnl_open(cs)
			C.free(unsafe.Pointer(cs))
			switch rc {
			case 0:
				var v [4]C.int
				C.rlvr_dnnl_version(&v[0])
				isa := dnnlISAs[int(v[3])]
				if isa == "" {
					isa = fmt.Sprintf("isa %#x", int(v[3]))
				}
				dnnlDesc = fmt.Sprintf("oneDNN %d.%d.%d (%s, %s)", v[0], v[1], v[2], p, isa)
				return
			case 2:
				dnnlErr = fmt.Errorf("gemm: %s is older than oneDNN 3.0 (no dnnl_matmul_primitive_desc_create)", p)
				return
			case 3:
				dnnlErr = fmt.Errorf("gemm: %s could not create a CPU engine", p)
				return
			}
		}
		dnnlErr = fmt.Errorf("gemm: oneDNN not found (tried %v; scripts/setup.sh installs it)", paths)
	})
	return dnnlErr
}

// onednnSerial multiplies bf16 matrices with oneDNN on the calling thread.
func onednnSerial(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	st := C.rlvr_dnnl_gemm(dnnlBF16, cbool(transA), cbool(transB), C.long(m), C.long(n), C.long(k), C.float(alpha),
		unsafe.Pointer(unsafe.SliceData(a)), C.long(lda), unsafe.Pointer(unsafe.SliceData(b)), C.long(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.long(ldc), 0)
	if st != 0 {
		panic(fmt.Sprintf("gemm: oneDNN bf16 matmul %d×%d×%d failed with status %d", m, n, k, st))
	}
}

// onednnF32 is the same product in float32 through oneDNN, which runs on
// any x86 CPU: it checks the strides, transposes, alpha and beta of the
// bf16 path on machines whose oneDNN has no bf16 matmul.
func onednnF32(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if st := C.rlvr_dnnl_gemm(dnnlF32, cbool(transA), cbool(transB), C.long(m), C.long(n), C.long(k), C.float(alpha),
		unsafe.Pointer(unsafe.SliceData(a)), C.long(lda), unsafe.Pointer(unsafe.SliceData(b)), C.long(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(unsafe.SliceData(c))), C.long(ldc), 0); st != 0 {
		return fmt.Errorf("gemm: oneDNN f32 matmul %d×%d×%d failed with status %d", m, n, k, st)
	}
	return nil
}
