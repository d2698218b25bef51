package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"rlvr/engine/parallel"
)

// TestPanelsAgainstNaive checks MulPanels, both kernels, against the naive
// product for row counts around the tile and block sizes, widths that
// leave a partial last panel, and both store and accumulate.
func TestPanelsAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, m := range []int{1, 2, 5, 6, 7, 13, 96, 97, 200, 401} {
		for _, nk := range [][2]int{{16, 1}, {37, 7}, {50, 64}, {128, 33}} {
			n, k := nk[0], nk[1]
			ldx, ldo := k+3, n+5
			x, w := randSlice(r, m*ldx), randSlice(r, n*k)
			for _, bf16 := range []bool{false, true} {
				var p Panels
				// In bf16 the reference is the product of the rounded inputs,
				// which the portable kernel is given as MulPanels rounds them.
				rx, rw := x, w
				if bf16 {
					p.PackBF16(w, n, k)
					rx, rw = roundedCopy(x), roundedCopy(w)
				} else {
					p.Pack(w, n, k)
				}
				for _, acc := range []bool{false, true} {
					base := randSlice(r, m*ldo)
					want := append([]float32(nil), base...)
					beta := float32(0)
					if acc {
						beta = 1
					}
					Naive(false, true, m, n, k, 1, rx, ldx, rw, k, beta, want, ldo)
					kernels := map[string]func(out []float32){
						"MulPanels": func(out []float32) { MulPanels(out, ldo, x, ldx, m, &p, acc) },
						"Go":        func(out []float32) { panelsGo(out, ldo, rx, ldx, m, &p, 0, (n+15)/16, acc) },
					}
					for name, f := range kernels {
						got := append([]float32(nil), base...)
						f(got)
						for i := 0; i < m; i++ {
							for j := 0; j < ldo; j++ {
								g, w := got[i*ldo+j], want[i*ldo+j]
								if j >= n {
									w = base[i*ldo+j] // past the matrix: untouched
								}
								if math.Abs(float64(g-w)) > 1e-4*(1+math.Abs(float64(w))) {
									t.Fatalf("%s bf16 %v m %d n %d k %d accumulate %v: out[%d][%d] = %v, want %v", name, bf16, m, n, k, acc, i, j, g, w)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestPanelsAVX512IsAVX2: where the CPU has AVX-512, its tiles give the
// AVX2 tiles' bits (each element the same chain of FMAs over k), in float32
// and bf16, storing and accumulating, for row counts around both tile
// heights and a partial last panel.
func TestPanelsAVX512IsAVX2(t *testing.T) {
	if !panelsAccelerated || !panels512 {
		t.Skip("no AVX-512 panel kernel on this machine")
	}
	defer func() { panels512 = true }()
	r := rand.New(rand.NewPCG(7, 7))
	for _, m := range []int{1, 5, 6, 11, 12, 13, 25, 97, 130} {
		n, k := 53, 70
		x, w := randSlice(r, m*k), randSlice(r, n*k)
		for _, bf16 := range []bool{false, true} {
			var p Panels
			if bf16 {
				p.PackBF16(w, n, k)
			} else {
				p.Pack(w, n, k)
			}
			for _, acc := range []bool{false, true} {
				base := randSlice(r, m*n)
				got, want := append([]float32(nil), base...), append([]float32(nil), base...)
				panels512 = false
				MulPanels(want, n, x, k, m, &p, acc)
				panels512 = true
				MulPanels(got, n, x, k, m, &p, acc)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("m %d bf16 %v accumulate %v: element %d is %v with AVX-512, %v with AVX2", m, bf16, acc, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestPanelsBatchInvariant checks a row's result is bitwise the same alone,
// at any position of batches of every size, and for 1 or 2 threads.
func TestPanelsBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	n, k := 200, 96
	var p Panels
	p.Pack(randSlice(r, n*k), n, k)
	x := randSlice(r, 300*k)
	alone := make([]float32, n)
	MulPanels(alone, n, x[7*k:], k, 1, &p, false)
	defer parallel.SetThreads(parallel.Threads())
	for _, threads := range []int{1, 2} {
		parallel.SetThreads(threads)
		for _, m := range []int{8, 9, 64, 65, 300} {
			out := make([]float32, m*n)
			MulPanels(out, n, x, k, m, &p, false)
			for j, v := range out[7*n : 8*n] {
				if math.Float32bits(v) != math.Float32bits(alone[j]) {
					t.Fatalf("%d threads, %d rows: row 7 column %d is %v batched, %v alone", threads, m, j, v, alone[j])
				}
			}
		}
	}
}

// BenchmarkPanels compares MulPanels with Sgemm on decoding's products: 64
// rows times the projections of the d256 benchmark model and of a
// Qwen2.5-0.5B layer.
func BenchmarkPanels(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, s := range [][3]int{{64, 768, 256}, {64, 256, 256}, {64, 1376, 256}, {64, 256, 688}, {64, 1152, 896}, {64, 9728, 896}, {64, 896, 4864}} {
		m, n, k := s[0], s[1], s[2]
		x, w, out := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
		var p Panels
		p.Pack(w, n, k)
		flops := 2 * float64(m*n*k)
		b.Run(fmt.Sprintf("panels/%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				MulPanels(out, n, x, k, m, &p, false)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("sgemm/%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				Sgemm(false, true, m, n, k, 1, x, k, w, k, 0, out, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkPanelsBF16 multiplies one row (a one-stream decoding step) and
// 8 rows by weights packed in float32 and in bf16, on matrices of a real
// model's shape (Qwen2.5-0.5B's MLP, 17 MB in float32: beyond the L2
// cache, so the step streams the weights from L3 or memory): bf16 reads
// half the bytes, which is what a memory-bound step pays for.
func BenchmarkPanelsBF16(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, s := range [][3]int{{1, 4864, 896}, {8, 4864, 896}, {1, 896, 4864}} {
		m, n, k := s[0], s[1], s[2]
		x, w, out := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
		var p32, p16 Panels
		p32.Pack(w, n, k)
		p16.PackBF16(w, n, k)
		for _, p := range []*Panels{&p32, &p16} {
			name := "fp32"
			if p.BF16 {
				name = "bf16"
			}
			b.Run(fmt.Sprintf("%s/%dx%dx%d", name, m, n, k), func(b *testing.B) {
				for b.Loop() {
					MulPanels(out, n, x, k, m, p, false)
				}
				b.ReportMetric(float64(p.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
