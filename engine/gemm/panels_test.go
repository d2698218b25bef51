package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rlvr/engine/parallel"
)

// TestPanelsAgainstNaive checks MulPanels, both kernels, against the naive
// product for row counts around the tile and block sizes, widths that
// leave a partial last panel, and both store and accumulate.
func TestPanelsAgainstNaive(t *testing.T) {
	for _, kernel := range panelKernels(t) {
		t.Run(kernel, func(t *testing.T) {
			usePanels(t, kernel)
			panelsAgainstNaive(t, kernelPairs(kernel))
		})
	}
}

// kernelPairs is the layout each RLVR_PANELS kernel packs bf16 panels in.
func kernelPairs(name string) pairsKernel {
	for _, t := range pairTiles {
		if t.env == name {
			return t.choice.pairs
		}
	}
	return pairsNone
}

// panelKernels are the bf16 panels' kernels that run here: fma, and amx
// and avx512bf16 where the CPU has their tiles (said in the log where it
// has not).
func panelKernels(t testing.TB) []string {
	kernels := []string{"fma"}
	for _, tiles := range pairTiles {
		if err := tiles.usable(); err != nil {
			t.Logf("%s tiles not tested: %v", tiles.env, err)
			continue
		}
		kernels = append(kernels, tiles.env)
	}
	return kernels
}

// usePanels chooses the bf16 panels' kernel for the rest of the test.
func usePanels(t *testing.T, name string) {
	t.Helper()
	if err := SetPanelsKernel(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { SetPanelsKernel("") })
}

func panelsAgainstNaive(t *testing.T, pairs pairsKernel) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, m := range []int{1, 2, 5, 6, 7, 13, 16, 17, 33, 96, 97, 200, 401} {
		for _, nk := range [][2]int{{16, 1}, {37, 7}, {50, 64}, {128, 33}, {70, 96}} {
			n, k := nk[0], nk[1]
			ldx, ldo := k+3, n+5
			x, w := randSlice(r, m*ldx), randSlice(r, n*k)
			for _, kind := range []PanelKind{PanelsF32, PanelsBF16, PanelsInt8} {
				// In bf16 the reference is the product of the rounded inputs,
				// which the portable kernel is given as MulPanels rounds them;
				// in int8, of x and the weights as the panels hold them.
				p, rx, rw := packed(kind, w, n, k), x, w
				want := pairsNone
				if kind == PanelsBF16 {
					want = pairs
				}
				if p.pairs != want {
					t.Fatalf("%s panels packed in pairs for kernel %d, want %d", kind, p.pairs, want)
				}
				switch kind {
				case PanelsBF16:
					rx, rw = roundedCopy(x), roundedCopy(w)
				case PanelsInt8:
					rw = dequantized(p)
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
						"MulPanels": func(out []float32) { MulPanels(out, ldo, x, ldx, m, p, acc) },
					}
					if p.pairs == pairsNone { // the portable kernel reads the FMA tiles' layout
						kernels["Go"] = func(out []float32) { panelsGo(out, ldo, rx, ldx, m, p, 0, (n+15)/16, acc) }
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
									t.Fatalf("%s %s m %d n %d k %d accumulate %v: out[%d][%d] = %v, want %v", name, kind, m, n, k, acc, i, j, g, w)
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
// bf16 and int8, storing and accumulating, for row counts around both tile
// heights and a partial last panel.
func TestPanelsAVX512IsAVX2(t *testing.T) {
	if !panelsAccelerated || !panels512 {
		t.Skip("no AVX-512 panel kernel on this machine")
	}
	defer func() { panels512 = true }()
	usePanels(t, "fma")
	r := rand.New(rand.NewPCG(7, 7))
	for _, m := range []int{1, 5, 6, 11, 12, 13, 25, 97, 130} {
		n, k := 53, 70
		x, w := randSlice(r, m*k), randSlice(r, n*k)
		for _, kind := range []PanelKind{PanelsF32, PanelsBF16, PanelsInt8} {
			p := packed(kind, w, n, k)
			for _, acc := range []bool{false, true} {
				base := randSlice(r, m*n)
				got, want := append([]float32(nil), base...), append([]float32(nil), base...)
				panels512 = false
				MulPanels(want, n, x, k, m, p, acc)
				panels512 = true
				MulPanels(got, n, x, k, m, p, acc)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("m %d %s accumulate %v: element %d is %v with AVX-512, %v with AVX2", m, kind, acc, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// packed is w (n × k) packed as kind.
func packed(kind PanelKind, w []float32, n, k int) *Panels {
	p := new(Panels)
	switch kind {
	case PanelsBF16:
		p.PackBF16(w, n, k)
	case PanelsInt8:
		p.PackInt8(w, n, k)
	default:
		p.Pack(w, n, k)
	}
	return p
}

// dequantized is the n × k matrix int8 panels hold: each weight times
// its feature's scale.
func dequantized(p *Panels) []float32 {
	w := make([]float32, p.N*p.K)
	for f := range p.N {
		q, j := f/PanelWidth, f%PanelWidth
		for i := range p.K {
			w[f*p.K+i] = float32(p.data8[(q*p.K+i)*PanelWidth+j]) * p.scale[f]
		}
	}
	return w
}

// TestPackInt8 checks the quantization against its definition: each
// feature's scale is its largest magnitude over 127, each weight within
// half a step of its int8 value, a feature's largest weight ±127, a
// feature of zeros all 0, and a NaN or an infinity in a feature makes its
// products NaN and leaves the others alone.
func TestPackInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	n, k := 37, 50
	w := randSlice(r, n*k)
	clear(w[3*k : 4*k])
	w[5*k+7] = float32(math.NaN())
	w[6*k+1] = float32(math.Inf(-1))
	var p Panels
	p.PackInt8(w, n, k)
	deq := dequantized(&p)
	for f := range n {
		if f == 5 || f == 6 {
			continue
		}
		var big float32
		for _, v := range w[f*k : (f+1)*k] {
			big = max(big, float32(math.Abs(float64(v))))
		}
		if s := p.scale[f]; s != big/127 {
			t.Fatalf("feature %d: scale %v, want %v", f, s, big/127)
		}
		extreme := false
		for i, v := range w[f*k : (f+1)*k] {
			q := p.data8[(f/PanelWidth*k+i)*PanelWidth+f%PanelWidth]
			extreme = extreme || q == 127 || q == -127
			if d := math.Abs(float64(deq[f*k+i] - v)); d > float64(p.scale[f])/2*(1+1e-6) {
				t.Fatalf("feature %d weight %d: %v holds as %d × %v, %v off", f, i, v, q, p.scale[f], d)
			}
		}
		if f != 3 && !extreme {
			t.Errorf("feature %d: no weight at ±127", f)
		}
	}
	x := randSlice(r, k)
	out := make([]float32, n)
	MulPanels(out, n, x, k, 1, &p, false)
	for f, v := range out {
		switch nan := math.IsNaN(float64(v)); {
		case f == 5 || f == 6:
			if !nan {
				t.Errorf("feature %d (a NaN or an infinity among its weights): product %v, want NaN", f, v)
			}
		case nan:
			t.Errorf("feature %d: product NaN", f)
		case f == 3 && v != 0:
			t.Errorf("feature of zeros: product %v", v)
		}
	}
}

// TestPanelsBatchInvariant checks a row's result is bitwise the same alone
// (the quad tiles) as at any position of batches of every size (the full
// tiles), for 1 or 2 threads, in every kind of panel.
func TestPanelsBatchInvariant(t *testing.T) {
	for _, kernel := range panelKernels(t) {
		t.Run(kernel, func(t *testing.T) {
			usePanels(t, kernel)
			panelsBatchInvariant(t)
		})
	}
}

func panelsBatchInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	n, k := 200, 96
	w, x := randSlice(r, n*k), randSlice(r, 300*k)
	defer parallel.SetThreads(parallel.Threads())
	for _, kind := range []PanelKind{PanelsF32, PanelsBF16, PanelsInt8} {
		p := packed(kind, w, n, k)
		for _, threads := range []int{1, 2} {
			parallel.SetThreads(threads)
			for _, m := range []int{2, 3, 8, 9, 16, 17, 64, 65, 300} {
				out := make([]float32, m*n)
				MulPanels(out, n, x, k, m, p, false)
				row := min(7, m-1)
				alone := make([]float32, n)
				MulPanels(alone, n, x[row*k:], k, 1, p, false)
				for j, v := range out[row*n : (row+1)*n] {
					if math.Float32bits(v) != math.Float32bits(alone[j]) {
						t.Fatalf("%s, %d threads, %d rows: row %d column %d is %v batched, %v alone", kind, threads, m, row, j, v, alone[j])
					}
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
			reportGFLOPs(b, flops)
		})
		b.Run(fmt.Sprintf("sgemm/%dx%dx%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				Sgemm(false, true, m, n, k, 1, x, k, w, k, 0, out, n)
			}
			reportGFLOPs(b, flops)
		})
	}
}

// BenchmarkPanelsBF16 multiplies one row (a one-stream decoding step) and
// 8 rows by weights packed in float32, bf16 and int8, on matrices of a
// real model's shape (Qwen2.5-0.5B's MLP, 17 MB in float32: beyond the L2
// cache, so the step streams the weights from L3 or memory): bf16 reads
// half the bytes and int8 a quarter, which is what a memory-bound step
// pays for.
func BenchmarkPanelsBF16(b *testing.B) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, s := range [][3]int{{1, 4864, 896}, {8, 4864, 896}, {1, 896, 4864}} {
		m, n, k := s[0], s[1], s[2]
		x, w, out := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
		for _, kind := range []PanelKind{PanelsF32, PanelsBF16, PanelsInt8} {
			p := packed(kind, w, n, k)
			b.Run(fmt.Sprintf("%s/%dx%dx%d", kind, m, n, k), func(b *testing.B) {
				for b.Loop() {
					MulPanels(out, n, x, k, m, p, false)
				}
				b.ReportMetric(float64(p.Bytes())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// TestPanelsDotIsOddFirst: the AVX512-BF16 tiles give, bit for bit, the
// sum VDPBF16PS's specification writes: over the pairs of k in order, the
// odd product added first, then the even, each add rounded to float32
// (the products of bf16 inputs are exact in float32). The FMA tiles add
// the even product first, which is why the two kernels differ in the last
// bits. For rows around the tile heights, odd k (a padded last pair), a
// partial last panel, storing and adding.
func TestPanelsDotIsOddFirst(t *testing.T) {
	if err := dotUsable(); err != nil {
		t.Skipf("no AVX512-BF16 tiles here: %v", err)
	}
	usePanels(t, "avx512bf16")
	r := rand.New(rand.NewPCG(11, 11))
	for _, m := range []int{1, 3, 5, 12, 13, 40} {
		for _, nk := range [][2]int{{16, 2}, {37, 7}, {70, 96}, {130, 33}} {
			n, k := nk[0], nk[1]
			x, w := randSlice(r, m*k), randSlice(r, n*k)
			rx, rw := roundedCopy(x), roundedCopy(w)
			p := packed(PanelsBF16, w, n, k)
			for _, acc := range []bool{false, true} {
				base := randSlice(r, m*n)
				got := append([]float32(nil), base...)
				MulPanels(got, n, x, k, m, p, acc)
				for i := range m {
					for f := range n {
						var c float32
						for j := 0; j < k; j += 2 {
							if j+1 < k {
								c += rx[i*k+j+1] * rw[f*k+j+1]
							}
							c += rx[i*k+j] * rw[f*k+j]
						}
						if acc {
							c += base[i*n+f]
						}
						if math.Float32bits(got[i*n+f]) != math.Float32bits(c) {
							t.Fatalf("m %d n %d k %d accumulate %v: out[%d][%d] = %v, want %v", m, n, k, acc, i, f, got[i*n+f], c)
						}
					}
				}
			}
		}
	}
}

// TestPanelsPairsLayout: bf16 panels packed for the AMX or AVX512-BF16
// tiles hold each feature's weights in pairs of k, k padded with zeros to
// a multiple of 32 and the last panel's missing features zero, and no
// more than that.
func TestPanelsPairsLayout(t *testing.T) {
	kernels := panelKernels(t)[1:]
	if len(kernels) == 0 {
		t.Skip("no AMX or AVX512-BF16 tiles here")
	}
	for _, kernel := range kernels {
		t.Run(kernel, func(t *testing.T) {
			usePanels(t, kernel)
			panelsPairsLayout(t, kernelPairs(kernel))
		})
	}
}

func panelsPairsLayout(t *testing.T, pairs pairsKernel) {
	r := rand.New(rand.NewPCG(8, 8))
	n, k := 37, 70
	w := randSlice(r, n*k)
	p := packed(PanelsBF16, w, n, k)
	const kp, panels = 96, 3
	if p.pairs != pairs || p.kp != kp || p.Bytes() != panels*PanelWidth*kp*2 {
		t.Fatalf("pairs %d, kp %d, %d bytes: want %d, %d, %d", p.pairs, p.kp, p.Bytes(), pairs, kp, panels*PanelWidth*kp*2)
	}
	for q := range panels {
		for i := range kp {
			for j := range PanelWidth {
				got := p.data16[q*kp*PanelWidth+(i/2)*2*PanelWidth+2*j+i%2]
				var want uint16
				if f := q*PanelWidth + j; f < n && i < k {
					want = Float32ToBF16(w[f*k+i])
				}
				if got != want {
					t.Fatalf("panel %d k %d feature %d: %#x, want %#x", q, i, j, got, want)
				}
			}
		}
	}
}

// BenchmarkPanelsKernels times the bf16 panels' kernels on SmolLM2-135M's
// decoding products (q/k/v, gate and up, down, the tied head) at 1, 8, 32
// and 64 rows, the streams of a decoding step: the FMA tiles, and the AMX
// and AVX512-BF16 tiles where the CPU has them.
func BenchmarkPanelsKernels(b *testing.B) {
	kernels := panelKernels(b)
	b.Log(DetectCPU())
	defer SetPanelsKernel("")
	r := rand.New(rand.NewPCG(7, 7))
	for _, m := range []int{1, 8, 32, 64} {
		for _, nk := range [][2]int{{960, 576}, {3072, 576}, {576, 1536}, {49152, 576}} {
			n, k := nk[0], nk[1]
			x, w, out := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
			for _, kernel := range kernels {
				if err := SetPanelsKernel(kernel); err != nil {
					b.Fatal(err)
				}
				var p Panels
				p.PackBF16(w, n, k)
				b.Run(fmt.Sprintf("%s/%dx%dx%d", kernel, m, n, k), func(b *testing.B) {
					for b.Loop() {
						MulPanels(out, n, x, k, m, &p, false)
					}
					reportGFLOPs(b, 2*float64(m*n*k))
				})
			}
		}
	}
}

// TestChoosePanels: RLVR_PANELS's values choose the kernel they name; a
// value that is none of them, or amx where the tiles cannot run, falls
// back to the FMA tiles with a notice naming the variable, the value and
// the kernel that runs instead.
func TestChoosePanels(t *testing.T) {
	amxErr, dotErr := amxUsable(), dotUsable()
	auto := pairsNone
	switch {
	case amxErr == nil:
		auto = pairsAMX
	case dotErr == nil:
		auto = pairsDot
	}
	for _, tc := range []struct {
		env    string
		pairs  pairsKernel
		notice []string
	}{
		{"", auto, nil},
		{"auto", auto, nil},
		{"FMA", pairsNone, nil},
		{"fastest", pairsNone, []string{`RLVR_PANELS="fastest"`, "auto", "amx", "avx512bf16", "fma", "runs on the"}},
	} {
		c, notice := choosePanels(tc.env)
		if c.pairs != tc.pairs {
			t.Errorf("RLVR_PANELS=%q: kernel %d, want %d", tc.env, c.pairs, tc.pairs)
		}
		if (notice == "") != (tc.notice == nil) {
			t.Errorf("RLVR_PANELS=%q: notice %q", tc.env, notice)
		}
		for _, want := range tc.notice {
			if !strings.Contains(notice, want) {
				t.Errorf("RLVR_PANELS=%q: notice %q does not say %q", tc.env, notice, want)
			}
		}
	}
	// A kernel asked for by name runs where its tiles do, and elsewhere
	// falls back to the FMA tiles with a notice naming both.
	for _, tc := range []struct {
		env   string
		pairs pairsKernel
		err   error
	}{{"amx", pairsAMX, amxErr}, {"avx512bf16", pairsDot, dotErr}} {
		c, notice := choosePanels(tc.env)
		switch {
		case tc.err == nil && (c.pairs != tc.pairs || notice != ""):
			t.Errorf("RLVR_PANELS=%s on a CPU with the tiles: kernel %d, notice %q", tc.env, c.pairs, notice)
		case tc.err != nil && (c.pairs != pairsNone || !strings.Contains(notice, "RLVR_PANELS="+tc.env) || !strings.Contains(notice, c.name)):
			t.Errorf("RLVR_PANELS=%s without the tiles: kernel %d, notice %q", tc.env, c.pairs, notice)
		}
	}
}

// TestPanelsBF16NaN: in bf16, on every kernel here, a NaN or an infinity
// among a feature's weights makes that feature's products NaN or infinite
// (so the decoder's NaN checks see it) and leaves the other features alone.
func TestPanelsBF16NaN(t *testing.T) {
	for _, kernel := range panelKernels(t) {
		usePanels(t, kernel)
		r := rand.New(rand.NewPCG(10, 10))
		n, k, m := 40, 70, 3
		w, x := randSlice(r, n*k), randSlice(r, m*k)
		w[5*k+7] = float32(math.NaN())
		w[33*k+69] = float32(math.Inf(1))
		p := packed(PanelsBF16, w, n, k)
		out := make([]float32, m*n)
		MulPanels(out, n, x, k, m, p, false)
		for i := range m {
			for f := range n {
				v := float64(out[i*n+f])
				bad := math.IsNaN(v) || math.IsInf(v, 0)
				if bad != (f == 5 || f == 33) {
					t.Errorf("%s: row %d feature %d: %v", kernel, i, f, v)
				}
			}
		}
	}
}

// BenchmarkPanelsAtLearnerRows runs the decoder's AMX tiles at a training
// step's row counts beside the bf16 library product (Bgemm) on the same
// SmolLM2 shapes: whether a kernel of rlvr's own would feed the learner's
// products faster than oneDNN does (docs/precision.md, the learner goal).
func BenchmarkPanelsAtLearnerRows(b *testing.B) {
	if err := amxUsable(); err != nil {
		b.Skip(err)
	}
	if !BF16KernelOK() {
		b.Skip(BF16Kernel())
	}
	b.Log(DetectCPU(), "; ", BF16Kernel())
	defer SetPanelsKernel("")
	if err := SetPanelsKernel("amx"); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, m := range []int{256, 2048} {
		for _, nk := range [][2]int{{960, 576}, {3072, 576}, {576, 1536}, {49152, 576}} {
			n, k := nk[0], nk[1]
			x, w, out := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
			var p Panels
			p.PackBF16(w, n, k)
			b.Run(fmt.Sprintf("amx/%dx%dx%d", m, n, k), func(b *testing.B) {
				for b.Loop() {
					MulPanels(out, n, x, k, m, &p, false)
				}
				reportGFLOPs(b, 2*float64(m*n*k))
			})
			b.Run(fmt.Sprintf("library/%dx%dx%d", m, n, k), func(b *testing.B) { benchGemm(b, Bgemm, m, n, k, false, true) })
		}
	}
}
