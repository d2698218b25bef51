package gemm

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"rlvr/engine/parallel"
)

// Precision is the number format a matrix product's inputs are rounded to.
// Accumulation and output are float32 in each: BF16 is PyTorch's autocast
// product (bf16 inputs, float32 accumulation), FP32 the plain float32 one.
// INT8 is for sampling only: the weights a decoding cache multiplies by
// are int8 with a float32 scale per output feature (Panels.PackInt8),
// the inputs stay float32, and every other product is FP32's.
// The zero value is FP32.
type Precision uint8

const (
	FP32 Precision = iota
	BF16
	INT8
)

func (p Precision) String() string {
	switch p {
	case BF16:
		return "bf16"
	case INT8:
		return "int8"
	}
	return "fp32"
}

// ParsePrecision reads "fp32" or "float32", "bf16" or "bfloat16", "int8"
// (any case). The empty string is FP32.
func ParsePrecision(s string) (Precision, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "fp32", "float32":
		return FP32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "int8":
		return INT8, nil
	}
	return FP32, fmt.Errorf("precision %q: want fp32 (float32), bf16 (bfloat16) or int8 (sampling only)", s)
}

// Gemm is Sgemm in precision p: with BF16 (and a bf16 kernel, see
// Effective) the inputs are rounded to bf16 first, as Bgemm does. INT8
// has no general product of its own: it is Sgemm.
func (p Precision) Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if p == BF16 {
		Bgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Effective is the precision products asked for in p actually run in: BF16
// only when a bf16 kernel is available (BF16KernelOK), FP32 otherwise. The
// first time BF16 falls back, Notice gets one line saying why and which
// precision runs instead.
func (p Precision) Effective() Precision {
	if p != BF16 {
		return p
	}
	if bf16State().backend == bf16None {
		fallbackNotice()
		return FP32
	}
	return BF16
}

// Notice receives the one-line notice of a bf16 fallback. It writes to
// standard error; tests and commands may replace it before the first bf16
// product.
var Notice = func(line string) { fmt.Fprintln(os.Stderr, line) }

var noticeOnce sync.Once

func fallbackNotice() {
	noticeOnce.Do(func() {
		Notice("rlvr: precision bf16 falls back to fp32: " + bf16State().why + " (RLVR_BF16_KERNEL=emulate computes bf16 products in float32 anywhere)")
	})
}

// BF16ToFloat32 widens bfloat16 bits to the float32 of the same value.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 converts f to bfloat16 bits, rounding to nearest with ties
// to even, as PyTorch's .to(torch.bfloat16) and the hardware's conversion
// instructions do. Values beyond the bfloat16 range become infinities, and
// NaNs stay NaNs (quiet, keeping the sign and the high payload bits).
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: rounding could carry it into an infinity
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// RoundBF16 is f rounded to the nearest bfloat16 value, kept as a float32.
func RoundBF16(f float32) float32 { return BF16ToFloat32(Float32ToBF16(f)) }

// bf16Backend is the kernel behind Bgemm.
type bf16Backend uint8

const (
	bf16None    bf16Backend = iota // no kernel: products run in float32
	bf16OneDNN                     // oneDNN's matmul, bf16 inputs, f32 output
	bf16Sbgemm                     // OpenBLAS's cblas_sbgemm
	bf16Emulate                    // inputs rounded to bf16 values in float32, then Sgemm
	bf16Go                         // the same through gonum's pure-Go sgemm: the reference
)

// bf16Choice is the kernel chosen for bf16 products and why.
type bf16Choice struct {
	backend bf16Backend
	name    string     // what runs, for logs and benchmark tables
	why     string     // why there is no kernel (backend bf16None)
	bits    bitsKernel // the product of bf16 bits, for oneDNN and sbgemm
}

// bitsKernel multiplies bf16 matrices (bits) into a float32 C on the
// calling goroutine.
type bitsKernel func(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int)

// bf16Chosen is the kernel choice.
var bf16Chosen lazyChoice[bf16Choice]

// bf16State is the kernel choice, made on first use from RLVR_BF16_KERNEL,
// so a process that never multiplies in bf16 loads no bf16 library.
func bf16State() *bf16Choice {
	return bf16Chosen.get(func() bf16Choice { return chooseBF16(os.Getenv("RLVR_BF16_KERNEL")) })
}

// lazyChoice is a setting chosen once, on first use (from the
// environment), which a test or a command may set again.
type lazyChoice[T any] struct {
	mu     sync.Mutex // serializes the choice
	chosen atomic.Pointer[T]
}

// get is the choice, made by choose if it is not yet.
func (c *lazyChoice[T]) get(choose func() T) *T {
	if v := c.chosen.Load(); v != nil {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.chosen.Load(); v != nil {
		return v
	}
	v := choose()
	c.chosen.Store(&v)
	return &v
}

// set replaces the choice.
func (c *lazyChoice[T]) set(v T) {
	c.mu.Lock()
	c.chosen.Store(&v)
	c.mu.Unlock()
}

// BF16Kernels are the values RLVR_BF16_KERNEL takes:
//
//	auto     oneDNN, else OpenBLAS's sbgemm, where the CPU has AVX512-BF16 or
//	         AMX-BF16; none elsewhere (the default)
//	onednn   oneDNN's matmul, whatever the CPU (it fails where oneDNN has
//	         no bf16 implementation)
//	sbgemm   OpenBLAS's cblas_sbgemm, where the loaded library has it
//	emulate  inputs rounded to bf16, kept as float32, then the float32 GEMM:
//	         the hardware kernel's numbers up to summation order, on any CPU
//	go       the same through the pure-Go GEMM: the reference
//	none     no bf16 kernel: bf16 products run in float32
var BF16Kernels = []string{"auto", "onednn", "sbgemm", "emulate", "go", "none"}

func chooseBF16(env string) bf16Choice {
	cpu := DetectCPU()
	switch strings.ToLower(env) {
	case "", "auto":
		if !cpu.BF16() {
			return bf16Choice{why: cpu.Name + " has no AVX512-BF16 or AMX-BF16 instructions"}
		}
		name, errD := loadOneDNN()
		if errD == nil {
			return bf16Choice{backend: bf16OneDNN, name: name, bits: onednnSerial}
		}
		name, errS := sbgemmName()
		if errS == nil {
			return bf16Choice{backend: bf16Sbgemm, name: name, bits: sbgemmSerial}
		}
		return bf16Choice{why: fmt.Sprintf("%s has %s but no bf16 library loaded (%v; %v; scripts/setup.sh installs oneDNN)", cpu.Name, cpu.Features(), errD, errS)}
	case "onednn":
		name, err := loadOneDNN()
		if err != nil {
			return bf16Choice{why: "RLVR_BF16_KERNEL=onednn: " + err.Error()}
		}
		return bf16Choice{backend: bf16OneDNN, name: name, bits: onednnSerial}
	case "sbgemm":
		name, err := sbgemmName()
		if err != nil {
			return bf16Choice{why: "RLVR_BF16_KERNEL=sbgemm: " + err.Error()}
		}
		return bf16Choice{backend: bf16Sbgemm, name: name, bits: sbgemmSerial}
	case "emulate":
		return bf16Choice{backend: bf16Emulate, name: "emulated: bf16-rounded inputs through " + Backend()}
	case "go":
		return bf16Choice{backend: bf16Go, name: "emulated: bf16-rounded inputs through gonum (pure Go)"}
	case "none":
		return bf16Choice{why: "RLVR_BF16_KERNEL=none"}
	}
	return bf16Choice{why: fmt.Sprintf("RLVR_BF16_KERNEL=%q is none of %v", env, BF16Kernels)}
}

// BF16Kernel names the kernel bf16 products run on, e.g. "oneDNN 3.2.0
// (libdnnl.so.3, avx512_core_amx)" or "emulated: bf16-rounded inputs
// through OpenBLAS (…)", or says "none (…)" with the reason when there is
// none and bf16 falls back to float32.
func BF16Kernel() string {
	s := bf16State()
	if s.backend == bf16None {
		return "none (" + s.why + ")"
	}
	return s.name
}

// BF16KernelOK reports whether bf16 products have a kernel (hardware or
// forced emulation); without one, BF16 runs in float32.
func BF16KernelOK() bool { return bf16State().backend != bf16None }

// KernelFor names the kernels products in precision p run on: in bf16,
// the general products' and the decoder's (bf16 panels).
func KernelFor(p Precision) string {
	if p == INT8 {
		return "int8 decoding weights (a scale per feature), fp32 elsewhere: " + Backend()
	}
	if p.Effective() == BF16 {
		return "bf16: " + BF16Kernel() + "; decoding on the " + PanelsKernel()
	}
	if p == BF16 {
		return "fp32 (bf16 unavailable: " + bf16State().why + "): " + Backend()
	}
	return "fp32: " + Backend()
}

// bf16Scratch holds one product's rounded inputs: float32 values for the
// emulated kernels, bf16 bits for the hardware ones.
type bf16Scratch struct {
	vals []float32
	bits []uint16
}

// scratchPool recycles bf16Scratch, so a steady loop of products allocates
// nothing; products on several goroutines each get their own.
var scratchPool = sync.Pool{New: func() any { return new(bf16Scratch) }}

// Bgemm computes C = alpha·op(A)·op(B) + beta·C as Sgemm does, with the
// elements of A and B rounded to bfloat16 (to nearest, ties to even) before
// the product and the sum accumulated in float32: PyTorch's autocast matrix
// product on the CPU. A and B are not modified. Every product of two bf16
// values is exact in float32, so the kernels differ only in the order of
// the sums. Without a bf16 kernel (BF16KernelOK false) it is Sgemm, after
// the one-line fallback notice.
func Bgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkShapes(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	bgemm(transA, transB, m, n, k, alpha, a, lda, b, nil, 0, ldb, beta, c, ldc)
}

// bf16Matrix is a float32 matrix (or a slab of them) rounded to bf16 once,
// in the form the running bf16 kernel reads: bits for oneDNN and sbgemm,
// float32 values for the emulations.
type bf16Matrix struct {
	bits []uint16
	vals []float32
}

// Set rounds src into x, reusing x's storage when it is large enough.
func (x *bf16Matrix) Set(src []float32) {
	switch bf16State().backend {
	case bf16None:
	case bf16Emulate, bf16Go:
		x.vals = grow(x.vals, len(src))
		convertRows(x.vals, src, 1, len(src), len(src))
	default:
		x.bits = grow(x.bits, len(src))
		convertRows(x.bits, src, 1, len(src), len(src))
	}
}

// Bytes is the memory x holds.
func (x *bf16Matrix) Bytes() int64 { return int64(cap(x.bits))*2 + int64(cap(x.vals))*4 }

// BF16Weights is a slab of float32 weights with its bf16 copy, so that a
// model's products read their weights rounded once per refresh (Set)
// instead of at every product. A nil *BF16Weights stands for float32
// products: its Gemm is Sgemm.
type BF16Weights struct {
	slab []float32
	copy bf16Matrix
}

// Set makes w the rounded copy of slab (the weights as they are now): to
// be called again whenever they change.
func (w *BF16Weights) Set(slab []float32) {
	w.slab = slab
	w.copy.Set(slab)
}

// Bytes is the memory the copy holds.
func (w *BF16Weights) Bytes() int64 {
	if w == nil {
		return 0
	}
	return w.copy.Bytes()
}

// Gemm computes C = alpha·op(A)·op(B) + beta·C: Sgemm when w is nil,
// else Bgemm, reading B from the rounded copy when B is a view of the
// slab w was set from (a weight matrix).
func (w *BF16Weights) Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkShapes(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if w == nil {
		Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if off, ok := w.offset(b); ok && k > 0 {
		bgemm(transA, transB, m, n, k, alpha, a, lda, b, &w.copy, off, ldb, beta, c, ldc)
		return
	}
	bgemm(transA, transB, m, n, k, alpha, a, lda, b, nil, 0, ldb, beta, c, ldc)
}

// offset is where b starts in the slab, if it is a view of it.
func (w *BF16Weights) offset(b []float32) (int, bool) {
	if len(b) == 0 || len(w.slab) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(w.slab)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p >= base+uintptr(len(w.slab))*4 {
		return 0, false
	}
	return int((p - base) / 4), true
}

// bgemm is Bgemm, or with bm not nil Bgemm with B read from bm at off.
func bgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, bm *bf16Matrix, off, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	st := bf16State()
	if st.backend == bf16None {
		fallbackNotice()
		Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	ar, ac, br, bc := opShapes(transA, transB, m, n, k)
	s := scratchPool.Get().(*bf16Scratch)
	defer scratchPool.Put(s)
	switch st.backend {
	case bf16Emulate, bf16Go:
		var pre []float32
		if bm != nil {
			pre = bm.vals[off:]
		}
		ra, rb, ldb := roundOperands(&s.vals, pre, a, ar, ac, lda, false, b, br, bc, ldb)
		if st.backend == bf16Go {
			gonumSerial(transA, transB, m, n, k, alpha, ra, ac, rb[:(br-1)*ldb+bc], ldb, beta, c, ldc)
			return
		}
		Sgemm(transA, transB, m, n, k, alpha, ra, ac, rb, ldb, beta, c, ldc)
	default:
		var pre []uint16
		if bm != nil {
			pre = bm.bits[off:]
		}
		// The libraries' bf16 kernels are fastest on a plain source: on
		// AMX, oneDNN's matmul reads a transposed A at a third to a half
		// of its plain speed on a weight gradient's shapes. So the copy
		// that rounds a transposed A also transposes it.
		ha, hb, ldb := roundOperands(&s.bits, pre, a, ar, ac, lda, transA, b, br, bc, ldb)
		splitProduct(st.bits, true, false, transB, m, n, k, alpha, ha, k, hb, ldb, beta, c, ldc)
	}
}

// roundOperands rounds A (ar × ac, leading dimension lda) into the
// scratch *buf, transposed (ac × ar) with transposeA, and B (br × bc, ldb)
// too unless pre holds it rounded already. It returns the rounded
// operands, each tight, and B's leading dimension.
func roundOperands[T float32 | uint16](buf *[]T, pre []T, a []float32, ar, ac, lda int, transposeA bool, b []float32, br, bc, ldb int) (ra, rb []T, ldbOut int) {
	n := ar * ac
	if pre == nil {
		n += br * bc
	}
	*buf = grow(*buf, n)
	ra = (*buf)[:ar*ac]
	if transposeA {
		convertTransposed(ra, a, ar, ac, lda)
	} else {
		convertRows(ra, a, ar, ac, lda)
	}
	if pre != nil {
		return ra, pre, ldb
	}
	rb = (*buf)[ar*ac : n]
	convertRows(rb, b, br, bc, ldb)
	return ra, rb, bc
}

// grow returns s with length n, reallocating only when its capacity is
// short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// minSplitRound is the matrix size below which rounding runs on the
// calling goroutine: splitting it would cost more than it saves.
const minSplitRound = 1 << 16

// convertRows copies the rows × cols matrix src (row stride ld) into dst
// (row stride cols) with every element rounded to bf16: bf16 values in
// float32, or bf16 bits.
func convertRows[T float32 | uint16](dst []T, src []float32, rows, cols, ld int) {
	if rows*cols < minSplitRound {
		convertRowRange(dst, src, cols, ld, 0, rows)
		return
	}
	parallel.For(rows, max(1, 4096/cols), func(lo, hi int) { convertRowRange(dst, src, cols, ld, lo, hi) })
}

// convertTransposed is convertRows into the transpose: dst (cols × rows,
// tight) holds src's columns as rows.
func convertTransposed[T float32 | uint16](dst []T, src []float32, rows, cols, ld int) {
	if rows*cols < minSplitRound {
		convertColRange(dst, src, rows, ld, 0, cols)
		return
	}
	parallel.For(cols, max(1, 4096/rows), func(lo, hi int) { convertColRange(dst, src, rows, ld, lo, hi) })
}

func convertColRange[T float32 | uint16](dst []T, src []float32, rows, ld, lo, hi int) {
	if d, ok := any(dst).([]uint16); ok && roundAccelerated {
		roundTransposedC(d, src, rows, ld, lo, hi)
		return
	}
	for j := lo; j < hi; j++ {
		switch d := any(dst[j*rows : (j+1)*rows]).(type) {
		case []float32:
			for i := range d {
				d[i] = RoundBF16(src[i*ld+j])
			}
		case []uint16:
			for i := range d {
				d[i] = Float32ToBF16(src[i*ld+j])
			}
		}
	}
}

func convertRowRange[T float32 | uint16](dst []T, src []float32, cols, ld, lo, hi int) {
	if roundAccelerated {
		if ld == cols {
			roundC(dst[lo*cols:hi*cols], src[lo*ld:hi*ld])
			return
		}
		for r := lo; r < hi; r++ {
			roundC(dst[r*cols:(r+1)*cols], src[r*ld:r*ld+cols])
		}
		return
	}
	for r := lo; r < hi; r++ {
		s := src[r*ld : r*ld+cols]
		switch d := any(dst[r*cols : (r+1)*cols]).(type) {
		case []float32:
			for i, v := range s {
				d[i] = RoundBF16(v)
			}
		case []uint16:
			for i, v := range s {
				d[i] = Float32ToBF16(v)
			}
		}
	}
}

// SetBF16Kernel chooses the bf16 kernel by an RLVR_BF16_KERNEL value
// (BF16Kernels), replacing the environment's choice: for benchmarks and
// tests that measure one kernel, and for parity runs that force the
// emulation. Products already under way finish on the old kernel; a
// BF16Weights set before must be set again. The error says why the choice
// gives no kernel (bf16 then falls back to float32).
func SetBF16Kernel(name string) error {
	c := chooseBF16(name)
	bf16Chosen.set(c)
	if c.backend == bf16None {
		return fmt.Errorf("gemm: no bf16 kernel: %s", c.why)
	}
	return nil
}
