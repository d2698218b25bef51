package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"rlvr/engine/parallel"
)

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.Float32()*2 - 1
	}
	return s
}

type gemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// kernels lists every implementation this machine can run.
func kernels() map[string]gemmFunc {
	ks := map[string]gemmFunc{"Sgemm": Sgemm, "SgemmSerial": SgemmSerial, "gonum": gonumSerial}
	if UsingBLAS() {
		ks["openblas"] = openblasSerial
	}
	return ks
}

// shape is a product's m, n and k.
type shape struct{ m, n, k int }

// gemmCase is one product of a sweep: random operands in padded leading
// dimensions (so that ld is honoured) and a random C.
type gemmCase struct {
	shape
	ta, tb        bool
	lda, ldb, ldc int
	a, b, c       []float32
}

// forEachCase calls f with random operands for every shape and both
// transposes of A and B.
func forEachCase(r *rand.Rand, shapes []shape, f func(gemmCase)) {
	for _, s := range shapes {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				c := gemmCase{shape: s, ta: ta, tb: tb, lda: s.k + 3, ldb: s.n + 2, ldc: s.n + 1}
				if ta {
					c.lda = s.m + 3
				}
				if tb {
					c.ldb = s.k + 2
				}
				c.a = randSlice(r, max(s.m, s.k)*c.lda+1)
				c.b = randSlice(r, max(s.n, s.k)*c.ldb+1)
				c.c = randSlice(r, s.m*c.ldc)
				f(c)
			}
		}
	}
}

// maxDiff is the largest |got − want|.
func maxDiff(got, want []float32) float64 {
	var worst float64
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	return worst
}

func TestAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := []shape{{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 64, 64}, {130, 70, 100}, {40, 300, 50}, {5, 4, 0}}
	defer parallel.SetThreads(parallel.SetThreads(2))
	for name, f := range kernels() {
		forEachCase(r, shapes, func(g gemmCase) {
			for _, beta := range []float32{0, 1, 0.5} {
				c := slices.Clone(g.c)
				want := slices.Clone(g.c)
				Naive(g.ta, g.tb, g.m, g.n, g.k, 0.75, g.a, g.lda, g.b, g.ldb, beta, want, g.ldc)
				f(g.ta, g.tb, g.m, g.n, g.k, 0.75, g.a, g.lda, g.b, g.ldb, beta, c, g.ldc)
				if worst, tol := maxDiff(c, want), 1e-5*float64(g.k+1); worst > tol {
					t.Errorf("%s %v ta=%v tb=%v beta=%v: max |diff| %.3g > %.3g", name, g.shape, g.ta, g.tb, beta, worst, tol)
				}
			}
		})
	}
}

func TestDeterministicForThreadCount(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, n, k := 300, 200, 500
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	defer parallel.SetThreads(parallel.SetThreads(2))
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c1, n)
	Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c2, n)
	for i := range c1 {
		if math.Float32bits(c1[i]) != math.Float32bits(c2[i]) {
			t.Fatalf("element %d differs between identical calls: %v vs %v", i, c1[i], c2[i])
		}
	}
}

func TestShapePanicsNameTheMatrix(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || fmt.Sprint(r) != "gemm: b is 4×4 with ld 4 but has 10 elements" {
			t.Fatalf("recovered %v", r)
		}
	}()
	Sgemm(false, false, 4, 4, 4, 1, make([]float32, 16), 4, make([]float32, 10), 4, 0, make([]float32, 16), 4)
}

func TestBackendNamed(t *testing.T) {
	if Backend() == "" {
		t.Fatal("no backend name")
	}
	if !UsingBLAS() && LoadError() == nil {
		t.Fatal("no BLAS but no load error either")
	}
	t.Logf("backend: %s (load error: %v)", Backend(), LoadError())
}

func benchGemm(b *testing.B, f gemmFunc, m, n, k int, ta, tb bool) {
	r := rand.New(rand.NewPCG(5, 6))
	a, bb, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
	lda, ldb := k, n
	if ta {
		lda = m
	}
	if tb {
		ldb = k
	}
	b.ResetTimer()
	for b.Loop() {
		f(ta, tb, m, n, k, 1, a, lda, bb, ldb, 0, c, n)
	}
	reportGFLOPs(b, 2*float64(m)*float64(n)*float64(k))
}

// reportGFLOPs reports the rate of b's loop, each iteration flops of work.
func reportGFLOPs(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkSgemm measures the parallel driver with the loaded backend on
// square sizes and on the engine's training-step shapes (tokens 1024, d 256,
// SwiGLU 688, vocab 512).
func BenchmarkSgemm(b *testing.B) {
	shapes := []struct {
		name    string
		m, n, k int
		ta, tb  bool
	}{
		{"512", 512, 512, 512, false, false},
		{"1024", 1024, 1024, 1024, false, false},
		{"2048", 2048, 2048, 2048, false, false},
		{"xWt_1024x768x256", 1024, 768, 256, false, true},
		{"xWt_1024x1376x256", 1024, 1376, 256, false, true},
		{"dyW_1024x256x688", 1024, 256, 688, false, false},
		{"dyTx_688x256x1024", 688, 256, 1024, true, false},
	}
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) { benchGemm(b, Sgemm, s.m, s.n, s.k, s.ta, s.tb) })
	}
}

// BenchmarkFallback measures the pure-Go kernel whatever the machine has.
func BenchmarkFallback(b *testing.B) {
	for _, n := range []int{512, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchGemm(b, gonumSerial, n, n, n, false, false) })
	}
}

// TestTightSlices gives every kernel slices exactly as long as the shapes
// need, so no kernel may read past them.
func TestTightSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	m, n, k := 5, 7, 3
	for name, f := range kernels() {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				ar, ac, br, bc := m, k, k, n
				if ta {
					ar, ac = k, m
				}
				if tb {
					br, bc = n, k
				}
				a, b := randSlice(r, ar*ac), randSlice(r, br*bc)
				c, want := make([]float32, m*n), make([]float32, m*n)
				Naive(ta, tb, m, n, k, 1, a, ac, b, bc, 0, want, n)
				f(ta, tb, m, n, k, 1, a, ac, b, bc, 0, c, n)
				for i := range c {
					if math.Abs(float64(c[i]-want[i])) > 1e-5 {
						t.Fatalf("%s ta=%v tb=%v: element %d %v, want %v", name, ta, tb, i, c[i], want[i])
					}
				}
			}
		}
	}
}
