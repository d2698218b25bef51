package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randn(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64()) * scale
	}
	return s
}

func close(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*(1+math.Abs(float64(want[i]))) || math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) {
			t.Fatalf("%s: element %d: %v, want %v", name, i, got[i], want[i])
		}
	}
}

// TestKernelsMatchReference checks each C kernel against its Go reference
// (skipped where the C kernels are not built or the CPU lacks AVX2).
func TestKernelsMatchReference(t *testing.T) {
	if !accelerated {
		t.Skip("no AVX2 C kernels on this build or CPU; the Go reference is what runs")
	}
	r := rand.New(rand.NewPCG(1, 1))
	// Softmax over causal rows with a past, without and with a window.
	T, L, past := 5, 13, 8
	for _, window := range []int{0, 3, 9, 20} {
		p := randn(r, T*L, 3)
		want := append([]float32(nil), p...)
		softmaxCausalGo(want, T, L, past, window)
		softmaxCausalC(p, T, L, past, window)
		close(t, "softmax", p, want, 1e-6)
	}
	// SwiGLU forward and backward.
	N, F := 3, 37
	gu := randn(r, N*2*F, 4)
	o1, s1, o2, s2 := make([]float32, N*F), make([]float32, N*F), make([]float32, N*F), make([]float32, N*F)
	swigluGo(o1, s1, gu, N, F)
	swigluC(o2, s2, gu, N, F)
	close(t, "swiglu", o2, o1, 1e-6)
	close(t, "sigmoid", s2, s1, 1e-6)
	dout := randn(r, N*F, 1)
	d1, d2 := randn(r, N*2*F, 1), make([]float32, N*2*F)
	copy(d2, d1)
	swigluBackwardGo(d1, dout, gu, s1, N, F)
	swigluBackwardC(d2, dout, gu, s1, N, F)
	close(t, "swiglu backward", d2, d1, 1e-6)
	// GeGLU forward and backward.
	gegluGo(o1, s1, gu, N, F)
	gegluC(o2, s2, gu, N, F)
	close(t, "geglu", o2, o1, 1e-6)
	close(t, "geglu sigmoid", s2, s1, 1e-6)
	copy(d2, d1)
	gegluBackwardGo(d1, dout, gu, s1, N, F)
	gegluBackwardC(d2, dout, gu, s1, N, F)
	close(t, "geglu backward", d2, d1, 1e-6)
	// exp with a shift and its sum.
	src := randn(r, 1000, 5)
	e1, e2 := make([]float32, 1000), make([]float32, 1000)
	sum1, sum2 := expShiftSumGo(e1, src, 2), expShiftSumC(e2, src, 2)
	close(t, "exp", e2, e1, 1e-6)
	if math.Abs(sum1-sum2) > 1e-6*sum1 {
		t.Fatalf("exp sum %v vs %v", sum2, sum1)
	}
	// Decode attention over a cache of 3 slots with GQA, for narrow heads,
	// the vectorized widths, an odd width, Gemma 3's 256 and 200 (blocks
	// of 64 and a rest); with the heads of a group one, two, three (as
	// SmolLM2's), four (as Gemma 3's), five and nine (more than a pass of
	// the AVX-512 kernel takes), through both kernels where the CPU has
	// AVX-512.
	kernels := []bool{false}
	if grouped512 {
		kernels = append(kernels, true)
	}
	defer func(was bool) { grouped512 = was }(grouped512)
	S, capacity := 3, 80
	slot := []int32{2, 0, 1}
	for _, heads := range [][2]int{{4, 2}, {2, 2}, {6, 2}, {4, 1}, {5, 1}, {9, 1}} {
		H, KV := heads[0], heads[1]
		for _, hd := range []int{8, 16, 24, 32, 48, 64, 6, 256, 200} {
			for _, lens := range [][]int32{{7, 1, 75}, {16, 17, 32}, {33, 48, 80}} { // 75: the 32-key blocks, an 8-key block and a tail
				for _, window := range []int{0, 5, 40} {
					k, v := randn(r, 3*capacity*KV*hd, 1), randn(r, 3*capacity*KV*hd, 1)
					q := randn(r, S*(H+2*KV)*hd, 1)
					want := make([]float32, S*H*hd)
					decodeAttentionGo(want, H*hd, q, (H+2*KV)*hd, k, v, capacity, slot, lens, H, KV, hd, 0.3, window, make([]float32, 4*capacity))
					for _, grouped512 = range kernels {
						got := make([]float32, S*H*hd)
						decodeAttentionC(got, H*hd, q, (H+2*KV)*hd, k, v, capacity, slot, lens, H, KV, hd, 0.3, window, make([]float32, 4*capacity))
						close(t, fmt.Sprintf("decode attention (H %d, KV %d, hd %d, lengths %v, window %d, AVX-512 %v)", H, KV, hd, lens, window, grouped512), got, want, 1e-5)
					}
				}
			}
		}
	}
}

// TestDecodeAttentionReference checks decode attention against a direct
// float64 computation of softmax(q·Kᵀ·scale)·V on a transposed key cache,
// over all 5 cached positions and over a window of the last 3.
func TestDecodeAttentionReference(t *testing.T) {
	for _, window := range []int{0, 3} {
		decodeAttentionReference(t, window)
	}
}

func decodeAttentionReference(t *testing.T, window int) {
	r := rand.New(rand.NewPCG(2, 2))
	H, KV, hd, capacity := 2, 1, 4, 8
	k, v := randn(r, 2*capacity*KV*hd, 1), randn(r, 2*capacity*KV*hd, 1)
	q := randn(r, H*hd, 1)
	out := make([]float32, H*hd)
	DecodeAttention(out, H*hd, q, H*hd, k, v, capacity, []int32{1}, []int32{5}, H, KV, hd, 0.5, window, make([]float32, 20))
	kt, vb := k[capacity*hd:], v[capacity*hd:] // slot 1
	first := 0
	if window > 0 {
		first = 5 - window
	}
	for h := 0; h < H; h++ {
		var w [5]float64
		var z float64
		for j := first; j < 5; j++ {
			var d float64
			for i := 0; i < hd; i++ {
				d += float64(q[h*hd+i]) * float64(kt[i*capacity+j])
			}
			w[j] = math.Exp(0.5 * d)
			z += w[j]
		}
		for i := 0; i < hd; i++ {
			var o float64
			for j := first; j < 5; j++ {
				o += w[j] / z * float64(vb[j*hd+i]) // KV = 1: slot 1's rows
			}
			if math.Abs(o-float64(out[h*hd+i])) > 1e-5 {
				t.Fatalf("head %d element %d: %v, want %v", h, i, out[h*hd+i], o)
			}
		}
	}
}

func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	N, F := 256, 688
	gu, out, sig := randn(r, N*2*F, 2), make([]float32, N*F), make([]float32, N*F)
	for b.Loop() {
		SwiGLU(out, sig, gu, N, F)
	}
	b.ReportMetric(float64(N*F*b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

func BenchmarkSoftmaxCausal(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	p := randn(r, 128*128, 2)
	for b.Loop() {
		SoftmaxCausal(p, 128, 128, 0)
	}
}

// BenchmarkDecodeAttention is one decoding step's attention for 64
// sequences with the heads of stories260K (8 query heads, 4 key/value
// heads of width 8; 128 cached tokens), SmolLM2-135M (9 and 3 of width 64)
// and Gemma 3 270M (4 and 1 of width 256), each of those 300 tokens long,
// through each kernel the CPU runs; and SmolLM2's over all 30 layers at
// 128 tokens, whose caches (380 MB) stream from memory, as a decoding
// step's do: there the step is bound by the bytes it reads.
func BenchmarkDecodeAttention(b *testing.B) {
	shapes := []struct {
		name                    string
		H, KV, hd, L, c, layers int
	}{{"stories260K", 8, 4, 8, 128, 257, 1}, {"SmolLM2", 9, 3, 64, 300, 457, 1}, {"Gemma3", 4, 1, 256, 300, 457, 1}, {"SmolLM2-30-layers", 9, 3, 64, 128, 257, 30}}
	kernels := []bool{false}
	if grouped512 {
		kernels = append(kernels, true)
	}
	defer func(was bool) { grouped512 = was }(grouped512)
	for _, sh := range shapes {
		for _, avx512 := range kernels {
			name := sh.name + "/avx2"
			if avx512 {
				name = sh.name + "/avx512"
			}
			b.Run(name, func(b *testing.B) {
				grouped512 = avx512
				r := rand.New(rand.NewPCG(1, 1))
				S, H, KV, hd, capacity := 64, sh.H, sh.KV, sh.hd, sh.c
				var k, v [][]float32
				for range sh.layers {
					k, v = append(k, randn(r, S*capacity*KV*hd, 1)), append(v, randn(r, S*capacity*KV*hd, 1))
				}
				q := randn(r, S*(H+2*KV)*hd, 1)
				out := make([]float32, S*H*hd)
				slot, n := make([]int32, S), make([]int32, S)
				for s := range slot {
					slot[s], n[s] = int32(s), int32(sh.L)
				}
				scratch := make([]float32, 4*capacity)
				for b.Loop() {
					for l := range sh.layers {
						DecodeAttention(out, H*hd, q, (H+2*KV)*hd, k[l], v[l], capacity, slot, n, H, KV, hd, 0.3, 0, scratch)
					}
				}
				b.ReportMetric(float64(4*S*H*sh.L*hd*sh.layers*b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestMax checks Max against the plain loop on every length up to a few
// blocks, with the largest value anywhere and a NaN anywhere.
func TestMax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for n := 1; n < 200; n++ {
		x := randn(r, n, 10)
		at := r.IntN(n)
		x[at] = 100
		if got := Max(x); got != 100 {
			t.Fatalf("n %d, largest at %d: Max %v", n, at, got)
		}
		x[r.IntN(n)] = float32(math.NaN())
		if got := Max(x); !math.IsNaN(float64(got)) {
			t.Fatalf("n %d with a NaN: Max %v, want NaN", n, got)
		}
	}
}

// TestSearchCumulative checks the blocked search against a plain scan of
// the partial sums, at both ends of every block and past the total.
func TestSearchCumulative(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	p := make([]float32, 300)
	for i := range p {
		if r.IntN(4) > 0 { // some zero mass too
			p[i] = r.Float32()
		}
	}
	p[len(p)-1] = 0
	naive := func(u float64) int {
		var c float64
		for i, v := range p {
			c += float64(v)
			if u < c {
				return i
			}
		}
		return -1
	}
	var total float64
	for i, v := range p {
		total += float64(v)
		for _, u := range []float64{total - float64(v)/2, total - 1e-9} {
			if v > 0 && u >= 0 {
				if got, want := SearchCumulative(p, u), naive(u); got != want || want != i {
					t.Fatalf("u %v: index %d, want %d (scan %d)", u, got, i, want)
				}
			}
		}
	}
	last := len(p) - 2
	for p[last] == 0 {
		last--
	}
	if got := SearchCumulative(p, total*1.01); got != last {
		t.Fatalf("u past the total: %d, want the last index with mass %d", got, last)
	}
}

// TestSoftmaxWindow checks which keys a windowed row attends to: row i of
// a block with past positions before it sees keys j with past+i − j <
// window, and its probabilities there sum to one.
func TestSoftmaxWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	T, L, past, window := 4, 9, 5, 3
	p := randn(r, T*L, 2)
	SoftmaxWindow(p, T, L, past, window)
	for i := 0; i < T; i++ {
		var sum float64
		for j := 0; j < L; j++ {
			q := past + i
			seen := j <= q && q-j < window
			if v := p[i*L+j]; (v != 0) != seen {
				t.Fatalf("row %d key %d: probability %v, seen %v", i, j, v, seen)
			}
			sum += float64(p[i*L+j])
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Fatalf("row %d sums to %v", i, sum)
		}
	}
}

// TestGeGLUReference checks the Go GeGLU against GELU's tanh approximation
// computed in float64, 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³)))·u, and
// its derivative in g against a central difference of that formula.
func TestGeGLUReference(t *testing.T) {
	g := []float32{-9, -3, -0.5, -1e-3, 0, 1e-4, 0.1, 1, 2.5, 7}
	F := len(g)
	gu := append(append([]float32{}, g...), make([]float32, F)...)
	for i := range g {
		gu[F+i] = 0.5 + float32(i)/4
	}
	out, sig := make([]float32, F), make([]float32, F)
	gegluGo(out, sig, gu, 1, F)
	gelu := func(v float64) float64 { return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) }
	dgu := make([]float32, 2*F)
	ones := make([]float32, F)
	for i := range ones {
		ones[i] = 1
	}
	gegluBackwardGo(dgu, ones, gu, sig, 1, F)
	for i, x := range g {
		v, u := float64(x), float64(gu[F+i])
		if want := gelu(v) * u; math.Abs(float64(out[i])-want) > 1e-6*(1e-3+math.Abs(want)) {
			t.Errorf("gelu_tanh(%v)·%v = %v, want %v", x, u, out[i], want)
		}
		const h = 1e-4
		if want := (gelu(v+h) - gelu(v-h)) / (2 * h) * u; math.Abs(float64(dgu[i])-want) > 1e-5*(1+math.Abs(want)) {
			t.Errorf("d/dg at %v: %v, want %v", x, dgu[i], want)
		}
		if want := gelu(v); math.Abs(float64(dgu[F+i])-want) > 1e-6*(1e-3+math.Abs(want)) {
			t.Errorf("d/du at %v: %v, want %v", x, dgu[F+i], want)
		}
	}
}
