package gemm

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"rlvr/engine/parallel"
)

// useBF16 forces the bf16 kernel named by an RLVR_BF16_KERNEL value for
// the rest of the test.
func useBF16(t *testing.T, name string) bf16Choice {
	t.Helper()
	old := bf16State()
	c := chooseBF16(name)
	if name == bitsForTest {
		c = bf16Choice{backend: bf16Sbgemm, name: "three loops over bf16 bits", bits: naiveBits}
	}
	bf16Chosen.set(c)
	t.Cleanup(func() { bf16Chosen.set(*old) })
	return c
}

func TestParsePrecision(t *testing.T) {
	for in, want := range map[string]Precision{"fp32": FP32, "float32": FP32, "": FP32, "BF16": BF16, "bfloat16": BF16, " bf16 ": BF16} {
		got, err := ParsePrecision(in)
		if err != nil || got != want {
			t.Errorf("ParsePrecision(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParsePrecision("fp16"); err == nil || !strings.Contains(err.Error(), `"fp16"`) {
		t.Errorf("ParsePrecision(fp16): error %v should name the value", err)
	}
}

func TestFloat32ToBF16RoundsToNearestEven(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{1 + 1.0/256, 0x3f80},             // half an ulp above 1: tie, to the even 1
		{1 + 3.0/256, 0x3f82},             // tie between 0x3f81 and 0x3f82: to the even
		{1 + 1.0/256 + 1.0/65536, 0x3f81}, // just above the tie: up
		{-2.5, 0xc020},
		{math.MaxFloat32, 0x7f80}, // beyond bf16's largest finite value: +Inf
		{float32(math.Inf(-1)), 0xff80},
	}
	for _, c := range cases {
		if got := Float32ToBF16(c.in); got != c.want {
			t.Errorf("Float32ToBF16(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	nan := Float32ToBF16(math.Float32frombits(0x7f800001)) // a NaN whose payload is only in the low bits
	if v := BF16ToFloat32(nan); !math.IsNaN(float64(v)) {
		t.Errorf("a NaN became %v (%#04x)", v, nan)
	}
}

// TestRoundingKernelIsFloat32ToBF16: the vector rounding of rows (bits and
// float32 values, every length around the vector width, strided rows) is
// Float32ToBF16 to the bit, on ties, NaNs with low payloads, infinities,
// subnormals and values that round up into the infinities.
func TestRoundingKernelIsFloat32ToBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []uint32{0, 0x80000000, 0x3f808000, 0x3f818000, 0x3f808001, 0x7f7fffff, 0xff7fffff, 0x7f800000,
		0xff800000, 0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff, 0x00000001, 0x807fffff, 0x007f8000, 0x7f7f8000}
	for n := 0; n <= 41; n++ {
		src := make([]float32, n*3)
		for i := range src {
			if i%4 == 0 {
				src[i] = math.Float32frombits(special[r.IntN(len(special))])
			} else {
				src[i] = math.Float32frombits(r.Uint32())
			}
		}
		for _, ld := range []int{n, n + 3} {
			rows := len(src) / max(ld, 1)
			if ld == 0 {
				rows = 0
			}
			bits, vals := make([]uint16, rows*n), make([]float32, rows*n)
			convertRowRange(bits, src, n, ld, 0, rows)
			convertRowRange(vals, src, n, ld, 0, rows)
			for i := 0; i < rows; i++ {
				for j := 0; j < n; j++ {
					in := src[i*ld+j]
					if want := Float32ToBF16(in); bits[i*n+j] != want {
						t.Fatalf("n=%d ld=%d: %#08x rounds to %#04x, want %#04x", n, ld, math.Float32bits(in), bits[i*n+j], want)
					}
					if got, want := math.Float32bits(vals[i*n+j]), math.Float32bits(RoundBF16(in)); got != want {
						t.Fatalf("n=%d ld=%d: %#08x rounds to the value %#08x, want %#08x", n, ld, math.Float32bits(in), got, want)
					}
				}
			}
		}
	}
}

// TestTransposedRoundingIsFloat32ToBF16: rounding into the transpose (the
// copy a transposed A is multiplied from) puts Float32ToBF16 of src[i][j]
// at dst[j][i], for blocks of eight and the rows and columns left over, on
// column ranges that start inside a matrix.
func TestTransposedRoundingIsFloat32ToBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][2]int{{1, 1}, {8, 8}, {16, 24}, {9, 17}, {7, 40}, {33, 5}, {64, 3}} {
		rows, cols := sh[0], sh[1]
		ld := cols + 2
		src := make([]float32, rows*ld)
		for i := range src {
			src[i] = math.Float32frombits(r.Uint32())
		}
		for _, span := range [][2]int{{0, cols}, {cols / 3, cols}} {
			dst := make([]uint16, cols*rows)
			convertColRange(dst, src, rows, ld, span[0], span[1])
			for j := span[0]; j < span[1]; j++ {
				for i := 0; i < rows; i++ {
					if got, want := dst[j*rows+i], Float32ToBF16(src[i*ld+j]); got != want {
						t.Fatalf("%d×%d, columns %v: element (%d, %d) rounds to %#04x, want %#04x", rows, cols, span, i, j, got, want)
					}
				}
			}
		}
	}
}

// roundedCopy is src (rows × cols, row stride ld) with every element
// rounded to bf16, in place of the original layout.
func roundedCopy(src []float32) []float32 {
	out := make([]float32, len(src))
	for i, v := range src {
		out[i] = RoundBF16(v)
	}
	return out
}

// naiveBits is the three-loop product of bf16 bits: a stand-in for
// oneDNN and sbgemm, so that the path that converts operands to bits,
// reads weights' bits at an offset and splits the product across threads
// is tested on machines without a bf16 library.
func naiveBits(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	ar, ac, br, bc := opShapes(transA, transB, m, n, k)
	wide := func(h []uint16, rows, cols, ld int) []float32 {
		w := make([]float32, max(rows*ld, 1))
		for r := range rows {
			for j := range cols {
				w[r*ld+j] = BF16ToFloat32(h[r*ld+j])
			}
		}
		return w
	}
	Naive(transA, transB, m, n, k, alpha, wide(a, ar, ac, lda), lda, wide(b, br, bc, ldb), ldb, beta, c, ldc)
}

// bitsForTest is the name bf16Kernels gives the naiveBits stand-in.
const bitsForTest = "bits (test)"

// bf16Kernels are the RLVR_BF16_KERNEL values that give a kernel here,
// and the bits stand-in.
func bf16Kernels(t *testing.T) []string {
	names := []string{"emulate", "go", bitsForTest}
	for _, n := range []string{"onednn", "sbgemm"} {
		if c := chooseBF16(n); c.backend != bf16None {
			names = append(names, n)
		} else {
			t.Logf("%s: %s", n, c.why)
		}
	}
	return names
}

// TestBgemmAgainstReference checks every bf16 kernel this machine has
// against the reference: inputs rounded to bf16, then the three-loop
// product in float32, on awkward shapes (one row, odd k, k = 0),
// transposes, padded leading dimensions, alpha and beta.
func TestBgemmAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	shapes := []shape{{1, 1, 1}, {1, 37, 9}, {3, 5, 7}, {17, 33, 9}, {64, 64, 63}, {130, 70, 101}, {5, 4, 0}, {300, 2, 513}}
	defer parallel.SetThreads(parallel.SetThreads(2))
	for _, name := range bf16Kernels(t) {
		t.Logf("%s: %s", name, useBF16(t, name).name)
		forEachCase(r, shapes, func(g gemmCase) {
			for _, ab := range [][2]float32{{1, 0}, {1, 1}, {0.75, 0.5}} {
				c, want := slices.Clone(g.c), slices.Clone(g.c)
				Naive(g.ta, g.tb, g.m, g.n, g.k, ab[0], roundedCopy(g.a), g.lda, roundedCopy(g.b), g.ldb, ab[1], want, g.ldc)
				a0 := slices.Clone(g.a)
				Bgemm(g.ta, g.tb, g.m, g.n, g.k, ab[0], g.a, g.lda, g.b, g.ldb, ab[1], c, g.ldc)
				if !slices.Equal(g.a, a0) {
					t.Fatalf("%s modified A", name)
				}
				if worst, tol := maxDiff(c, want), 1e-5*float64(g.k+1); worst > tol {
					t.Errorf("%s %v ta=%v tb=%v alpha,beta=%v: max |diff| %.3g > %.3g", name, g.shape, g.ta, g.tb, ab, worst, tol)
				}
			}
		})
	}
}

// TestEmulatedIsSgemmOfRoundedInputs: the emulated kernel is the float32
// GEMM of the rounded inputs, so its numbers are the hardware kernel's up
// to the order of the float32 sums. With OpenBLAS it is bit for bit; gonum's
// assembly sums a row's unaligned head apart, so its order, and the last
// bit, depend on where the scratch lies in memory.
func TestEmulatedIsSgemmOfRoundedInputs(t *testing.T) {
	useBF16(t, "emulate")
	defer parallel.SetThreads(parallel.SetThreads(2))
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range []shape{{1, 300, 77}, {257, 129, 65}, {64, 700, 33}} {
		for _, tb := range []bool{false, true} {
			ldb := s.n
			if tb {
				ldb = s.k
			}
			a, b := randSlice(r, s.m*s.k), randSlice(r, s.k*s.n)
			got, want := make([]float32, s.m*s.n), make([]float32, s.m*s.n)
			Bgemm(false, tb, s.m, s.n, s.k, 1, a, s.k, b, ldb, 0, got, s.n)
			Sgemm(false, tb, s.m, s.n, s.k, 1, roundedCopy(a), s.k, roundedCopy(b), ldb, 0, want, s.n)
			tol := 0.0
			if !UsingBLAS() {
				tol = 1e-6 * float64(s.k)
			}
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > tol || tol == 0 && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v tb=%v: element %d is %v, Sgemm of the rounded inputs gives %v", s, tb, i, got[i], want[i])
				}
			}
		}
	}
}

// TestBF16DiffersFromFP32 guards against a bf16 path that silently runs in
// float32: on random inputs the rounding must show.
func TestBF16DiffersFromFP32(t *testing.T) {
	useBF16(t, "emulate")
	r := rand.New(rand.NewPCG(15, 16))
	m, n, k := 8, 8, 64
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	c16, c32 := make([]float32, m*n), make([]float32, m*n)
	BF16.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c16, n)
	FP32.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c32, n)
	var worst float64
	for i := range c16 {
		worst = math.Max(worst, math.Abs(float64(c16[i]-c32[i])))
	}
	// bf16 keeps 8 significant bits: each input is off by up to 2^-9
	// relatively, so a sum of 64 products of size ~0.3 moves by ~1e-2.
	if worst < 1e-4 || worst > 0.2 {
		t.Fatalf("bf16 and fp32 products differ by %.3g; want a bf16-sized gap in (1e-4, 0.2)", worst)
	}
}

// TestOneDNNPlumbing runs the oneDNN path in float32, which oneDNN has on
// every x86 CPU, so that its strides, transposes, alpha and beta are
// checked on machines where its bf16 matmul is missing.
func TestOneDNNPlumbing(t *testing.T) {
	if err := openOneDNN(); err != nil {
		t.Skipf("no oneDNN here: %v", err)
	}
	t.Log(dnnlDesc)
	r := rand.New(rand.NewPCG(17, 18))
	forEachCase(r, []shape{{1, 1, 1}, {1, 37, 9}, {17, 33, 9}, {130, 70, 101}}, func(g gemmCase) {
		want := slices.Clone(g.c)
		Naive(g.ta, g.tb, g.m, g.n, g.k, 0.75, g.a, g.lda, g.b, g.ldb, 0.5, want, g.ldc)
		if err := onednnF32(g.ta, g.tb, g.m, g.n, g.k, 0.75, g.a, g.lda, g.b, g.ldb, 0.5, g.c, g.ldc); err != nil {
			t.Fatal(err)
		}
		if worst, tol := maxDiff(g.c, want), 1e-5*float64(g.k+1); worst > tol {
			t.Fatalf("%v ta=%v tb=%v: max |diff| %.3g > %.3g", g.shape, g.ta, g.tb, worst, tol)
		}
	})
}

func TestFallbackNoticeOnce(t *testing.T) {
	c := useBF16(t, "none")
	var lines []string
	oldNotice := Notice
	Notice = func(s string) { lines = append(lines, s) }
	noticeOnce = sync.Once{}
	t.Cleanup(func() { Notice, noticeOnce = oldNotice, sync.Once{} })
	if p := BF16.Effective(); p != FP32 {
		t.Fatalf("BF16 without a kernel runs in %v, want fp32", p)
	}
	BF16.Effective()
	a := []float32{1.001}
	out := []float32{0}
	Bgemm(false, false, 1, 1, 1, 1, a, 1, a, 1, 0, out, 1)
	if out[0] != a[0]*a[0] {
		t.Errorf("the fallback product is %v, want the float32 %v", out[0], a[0]*a[0])
	}
	if len(lines) != 1 || strings.Contains(lines[0], "\n") || !strings.Contains(lines[0], c.why) || !strings.Contains(lines[0], "fp32") {
		t.Fatalf("notices %q: want one line naming the reason %q and the fp32 fallback", lines, c.why)
	}
	if FP32.Effective() != FP32 || len(lines) != 1 {
		t.Fatal("fp32 must not notice anything")
	}
	if k := KernelFor(BF16); !strings.Contains(k, "fp32") {
		t.Errorf("KernelFor(BF16) = %q, want it to name the fp32 fallback", k)
	}
}

func TestAutoNeedsBF16Instructions(t *testing.T) {
	c := chooseBF16("auto")
	if !DetectCPU().BF16() && c.backend != bf16None {
		t.Fatalf("auto chose %q on %v", c.name, DetectCPU())
	}
	if c.backend == bf16None && !strings.Contains(c.why, DetectCPU().Name) {
		t.Fatalf("auto's reason %q does not name the processor", c.why)
	}
	if bad := chooseBF16("fast"); bad.backend != bf16None || !strings.Contains(bad.why, `"fast"`) {
		t.Fatalf("an unknown RLVR_BF16_KERNEL gives %+v", bad)
	}
	t.Logf("%v; auto: %s", DetectCPU(), c.name+c.why)
}

// TestBgemmSteadyStateAllocs: after the first product, the rounded inputs'
// scratch is reused, so Bgemm allocates no more than Sgemm does.
func TestBgemmSteadyStateAllocs(t *testing.T) {
	useBF16(t, "emulate")
	defer parallel.SetThreads(parallel.SetThreads(1))
	m, n, k := 16, 32, 24
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	s := testing.AllocsPerRun(20, func() { Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n) })
	bf := testing.AllocsPerRun(20, func() { Bgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n) })
	if bf > s {
		t.Fatalf("Bgemm allocates %v times a call, Sgemm %v", bf, s)
	}
}

// BenchmarkBgemm measures the bf16 product with the kernel
// RLVR_BF16_KERNEL selects (auto: oneDNN or sbgemm where the CPU has
// bf16 instructions) on the training-step shapes BenchmarkSgemm uses, so
// `go test -bench 'Sgemm|Bgemm' ./engine/gemm` compares the two.
func BenchmarkBgemm(b *testing.B) {
	if !BF16KernelOK() {
		b.Skip(BF16Kernel())
	}
	b.Log(DetectCPU(), "; ", BF16Kernel())
	shapes := []struct {
		name    string
		m, n, k int
		ta, tb  bool
	}{
		{"1024", 1024, 1024, 1024, false, false},
		{"2048", 2048, 2048, 2048, false, false},
		{"xWt_1024x768x256", 1024, 768, 256, false, true},
		{"dyW_1024x256x688", 1024, 256, 688, false, false},
		{"dyTx_688x256x1024", 688, 256, 1024, true, false},
	}
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) { benchGemm(b, Bgemm, s.m, s.n, s.k, s.ta, s.tb) })
	}
}

// TestBF16WeightsReadTheCopy: a product whose B is a view of the slab
// reads its rounded copy at the view's offset and gives Bgemm's result;
// one whose B lies outside the slab rounds it then; after the slab
// changes, Set again is what the products see; a nil *BF16Weights is Sgemm.
func TestBF16WeightsReadTheCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	m, n, k := 7, 9, 11
	for _, name := range []string{"emulate", bitsForTest} {
		useBF16(t, name)
		slab := randSlice(r, 5+n*k+3)
		w := slab[5 : 5+n*k]
		x := randSlice(r, m*k)
		var bw BF16Weights
		bw.Set(slab)
		for _, tb := range []bool{false, true} {
			ldb := n
			if tb {
				ldb = k
			}
			got, want := make([]float32, m*n), make([]float32, m*n)
			bw.Gemm(false, tb, m, n, k, 1, x, k, w, ldb, 0, got, n)
			Bgemm(false, tb, m, n, k, 1, x, k, w, ldb, 0, want, n)
			if !slices.Equal(got, want) {
				t.Fatalf("%s tb=%v: the copy's product %v, Bgemm %v", name, tb, got[:3], want[:3])
			}
			outside := slices.Clone(w)
			bw.Gemm(false, tb, m, n, k, 1, x, k, outside, ldb, 0, got, n)
			if !slices.Equal(got, want) {
				t.Fatalf("%s tb=%v: B outside the slab gives %v, want %v", name, tb, got[:3], want[:3])
			}
		}
		for i := range slab {
			slab[i] *= 2
		}
		stale, fresh, want := make([]float32, m*n), make([]float32, m*n), make([]float32, m*n)
		bw.Gemm(false, true, m, n, k, 1, x, k, w, k, 0, stale, n)
		bw.Set(slab)
		bw.Gemm(false, true, m, n, k, 1, x, k, w, k, 0, fresh, n)
		Bgemm(false, true, m, n, k, 1, x, k, w, k, 0, want, n)
		if !slices.Equal(fresh, want) || slices.Equal(stale, want) {
			t.Fatalf("%s: after Set the copy must follow the slab, and only then", name)
		}
	}
	var none *BF16Weights
	a, b := randSlice(r, 6), randSlice(r, 6)
	got, want := make([]float32, 4), make([]float32, 4)
	none.Gemm(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, got, 2)
	Sgemm(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, want, 2)
	if !slices.Equal(got, want) {
		t.Fatalf("nil BF16Weights: %v, Sgemm %v", got, want)
	}
}
