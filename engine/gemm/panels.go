package gemm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"

	"rlvr/engine/parallel"
)

// PanelWidth is how many output features a panel holds: two 8-float
// vectors, the width of the micro-kernel's tile.
const PanelWidth = 16

// panelRows is the row block of MulPanels: the rows of x one pass over
// the panels reuses, sized so the block stays in the L2 cache.
const panelRows = 96

// Panels is a linear layer's weight matrix W (n × k, row-major, as Hugging
// Face stores it) repacked for products x·Wᵀ with few rows of x, the shape
// of decoding: panels of PanelWidth output features, each stored k-major
// (k rows of PanelWidth), the last panel padded with zeros. A product then
// streams each panel once per block of rows without packing anything per
// call, which is what a general GEMM spends most of its time on when x has
// only a few dozen rows.
//
// Packed in bf16 (PackBF16) the panels hold bfloat16 bits, half the bytes
// a one-stream decoding step streams, and a product rounds x to bf16 too:
// bf16 inputs, float32 accumulation, as Bgemm.
//
// Packed in int8 (PackInt8) they hold each feature's weights as int8 with
// one float32 scale per feature (symmetric, per output channel: the
// weight-only int8 of torchao's int8_weight_only), a quarter of float32's
// bytes. x stays float32; each feature's sum over k of x times its int8
// weights, made exactly as float32 FMAs, is multiplied by its scale once.
//
// Once packed, products only read the panels: several goroutines may
// multiply by the same Panels at once (decoding caches sharing one packed
// model), as long as none packs it meanwhile.
type Panels struct {
	N, K   int
	Kind   PanelKind
	data   []float32   // (ceil(N/PanelWidth), K, PanelWidth)
	data16 []uint16    // the same layout in bf16 bits; with pairs, (ceil(N/PanelWidth), kp/2, PanelWidth, 2)
	pairs  pairsKernel // bf16 packed for the AMX or AVX512-BF16 tiles: pairs of k per feature, k padded to kp
	kp     int         // with pairs, K rounded up to a multiple of amxK
	data8  []int8      // the same layout in int8
	scale  []float32   // int8: each feature's scale, ceil(N/PanelWidth)·PanelWidth of them
}

// pairsKernel is the kernel bf16 panels in pair layout are packed for;
// none for the k-major layout of the FMA tiles and the portable kernel.
type pairsKernel uint8

const (
	pairsNone pairsKernel = iota
	pairsAMX              // TDPBF16PS, 16 rows × 32 k a tile
	pairsDot              // VDPBF16PS, one pair of k per 32-bit lane
)

// PanelKind is how a Panels stores its weights.
type PanelKind uint8

// The kinds of panel, numbered as the C kernel numbers them.
const (
	PanelsF32 PanelKind = iota
	PanelsBF16
	PanelsInt8
)

func (k PanelKind) String() string {
	switch k {
	case PanelsBF16:
		return "bf16"
	case PanelsInt8:
		return "int8"
	}
	return "fp32"
}

// Pack copies w (n × k) into the panels, reusing their storage when the
// shape is unchanged.
func (p *Panels) Pack(w []float32, n, k int) {
	p.reshape(n, k, PanelsF32, len(w), pairsNone)
	packPanels(p.data, w, n, k, func(_ int, v float32) float32 { return v })
}

// PackBF16 copies w (n × k) into the panels rounded to bf16, reusing their
// storage when the shape is unchanged. Where the AMX or AVX512-BF16
// tiles run (PanelsKernel), the panels take their pair layout, and every
// product by them runs on those tiles.
func (p *Panels) PackBF16(w []float32, n, k int) {
	pairs := panelsState().pairs
	p.reshape(n, k, PanelsBF16, len(w), pairs)
	if pairs != pairsNone {
		packPairs(p.data16, w, n, k, p.kp)
		return
	}
	packPanels(p.data16, w, n, k, func(_ int, v float32) uint16 { return Float32ToBF16(v) })
}

// PackInt8 copies w (n × k) into the panels quantized to int8, each
// feature (row of w) by its own scale max|w|/127, rounded to nearest;
// it reuses their storage when the shape is unchanged. A feature of
// zeros has scale 0 (its products are 0); one holding a NaN or an
// infinity gives NaN products.
func (p *Panels) PackInt8(w []float32, n, k int) {
	p.reshape(n, k, PanelsInt8, len(w), pairsNone)
	parallel.For(n, 64, func(lo, hi int) {
		for f := lo; f < hi; f++ {
			var m float32
			for _, v := range w[f*k : (f+1)*k] {
				if a := float32(math.Abs(float64(v))); a > m || a != a {
					m = a
				}
			}
			p.scale[f] = m / 127
		}
	})
	packPanels(p.data8, w, n, k, func(f int, v float32) int8 {
		s := p.scale[f]
		if s == 0 || s != s || math.IsInf(float64(s), 0) {
			return 0
		}
		return int8(max(-127, min(127, math.Round(float64(v/s)))))
	})
}

// reshape sizes the panels for an n × k matrix of len elements of kind
// (bf16 in pair layout for the tiles pairs names), keeping the storage of
// the same shape, kind and layout.
func (p *Panels) reshape(n, k int, kind PanelKind, len int, pairs pairsKernel) {
	if n <= 0 || k <= 0 || len < n*k {
		panic(fmt.Sprintf("gemm: packing a %d×%d matrix from %d elements", n, k, len))
	}
	padded := (n + PanelWidth - 1) / PanelWidth * PanelWidth
	kp := k
	if pairs != pairsNone {
		kp = (k + amxK - 1) / amxK * amxK
	}
	size := padded * kp
	if p.N == n && p.K == k && p.Kind == kind && p.pairs == pairs {
		return
	}
	p.N, p.K, p.Kind, p.pairs, p.kp, p.data, p.data16, p.data8, p.scale = n, k, kind, pairs, kp, nil, nil, nil, nil
	switch kind {
	case PanelsBF16:
		p.data16 = make([]uint16, size)
	case PanelsInt8:
		p.data8, p.scale = make([]int8, size), make([]float32, padded)
	default:
		p.data = make([]float32, size)
	}
}

// amxK is the k an AMX tile product takes at once: 16 rows of pairs. The
// AVX512-BF16 tiles need only an even k, but share the layout (and its
// padding, which adds zeros).
const amxK = 32

// packPairs writes w (n × k) rounded to bf16 into dst in pair layout:
// each panel kp/2 rows of PanelWidth features × 2 consecutive k (the B
// operand of TDPBF16PS), the k past k and the features past n zero.
func packPairs(dst []uint16, w []float32, n, k, kp int) {
	panels := (n + PanelWidth - 1) / PanelWidth
	parallel.For(panels, 1, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			dst := dst[q*kp*PanelWidth : (q+1)*kp*PanelWidth]
			clear(dst)
			for j := range min(PanelWidth, n-q*PanelWidth) {
				f := q*PanelWidth + j
				for i, v := range w[f*k : (f+1)*k] {
					dst[(i/2)*2*PanelWidth+2*j+i%2] = Float32ToBF16(v)
				}
			}
		}
	})
}

// packPanels writes w (n × k) into dst in the panels' layout, each element
// of feature f converted by conv, the last panel's missing features zero.
func packPanels[T float32 | uint16 | int8](dst []T, w []float32, n, k int, conv func(f int, v float32) T) {
	panels := (n + PanelWidth - 1) / PanelWidth
	parallel.For(panels, 1, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			dst := dst[q*k*PanelWidth : (q+1)*k*PanelWidth]
			for j := range PanelWidth {
				f := q*PanelWidth + j
				if f >= n {
					for i := range k {
						dst[i*PanelWidth+j] = 0
					}
					continue
				}
				for i, v := range w[f*k : (f+1)*k] {
					dst[i*PanelWidth+j] = conv(f, v)
				}
			}
		}
	})
}

// Bytes is the memory the packed weights hold.
func (p *Panels) Bytes() int64 {
	return int64(len(p.data))*4 + int64(len(p.data16))*2 + int64(len(p.data8)) + int64(len(p.scale))*4
}

// MulPanels computes out = x·Wᵀ (or out += x·Wᵀ with accumulate) for m
// rows: x is (m × K) with row stride ldx, out (m × N) with row stride ldo.
// Every output element is the same sequence of float32 fused multiply-adds
// over k, whatever m, the element's row among them and the thread count,
// so a row's result does not depend on what it is batched with.
func MulPanels(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, accumulate bool) {
	if m <= 0 {
		return
	}
	if ldx < p.K || ldo < p.N || len(x) < (m-1)*ldx+p.K || len(out) < (m-1)*ldo+p.N {
		panic(fmt.Sprintf("gemm: %d rows of x (ld %d, %d elements) times a %d×%d panel matrix into out (ld %d, %d elements)", m, ldx, len(x), p.N, p.K, ldo, len(out)))
	}
	panels := (p.N + PanelWidth - 1) / PanelWidth
	if p.pairs != pairsNone {
		mulPairs(out, ldo, x, ldx, m, p, panels, accumulate)
		return
	}
	if p.Kind == PanelsBF16 {
		// The rows rounded once, before the threads split the panels,
		// into a buffer of the pool's: one buffer serves every matrix a
		// decoding step multiplies by, where one per matrix would hold a
		// prefill's rows for each of them.
		xr := roundedPool.Get().(*[]float32)
		defer roundedPool.Put(xr)
		*xr = grow(*xr, m*p.K)
		convertRows(*xr, x, m, p.K, ldx)
		x, ldx = *xr, p.K
	}
	if m >= 2*panelRows {
		// Many rows (a prompt's prefill): threads take blocks of rows.
		blocks := (m + panelRows - 1) / panelRows
		parallel.For(blocks, 1, func(lo, hi int) {
			r0, r1 := lo*panelRows, min(hi*panelRows, m)
			panelsKernel(out[r0*ldo:], ldo, x[r0*ldx:], ldx, r1-r0, p, 0, panels, accumulate)
		})
		return
	}
	if 2*m*p.N*p.K < minSplitFLOPs {
		panelsKernel(out, ldo, x, ldx, m, p, 0, panels, accumulate)
		return
	}
	parallel.For(panels, 1, func(lo, hi int) {
		panelsKernel(out, ldo, x, ldx, m, p, lo, hi, accumulate)
	})
}

// mulPairs is MulPanels on panels in pair layout: the rows rounded to
// bf16 once into the AMX A tiles' layout (which the AVX512-BF16 tiles read
// as words of pairs), then split as MulPanels splits them.
func mulPairs(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, panels int, accumulate bool) {
	kernel := panelsAMXC
	if p.pairs == pairsDot {
		kernel = panelsDotC
	}
	kp, rows := p.kp, (m+15)/16*16
	xb := pairsPool.Get().(*[]uint16)
	defer pairsPool.Put(xb)
	*xb = grow(*xb, rows*kp)
	a := *xb
	for r := range m {
		convertRows(a[r*kp:r*kp+p.K], x[r*ldx:], 1, p.K, ldx)
		clear(a[r*kp+p.K : (r+1)*kp])
	}
	clear(a[m*kp : rows*kp])
	switch {
	case m >= 2*panelRows: // a prefill: threads take blocks of rows
		blocks := (m + panelRows - 1) / panelRows
		parallel.For(blocks, 1, func(lo, hi int) {
			r0, r1 := lo*panelRows, min(hi*panelRows, m)
			kernel(out[r0*ldo:], ldo, a[r0*kp:], r1-r0, p, 0, panels, accumulate)
		})
	case 2*m*p.N*p.K < minSplitFLOPs:
		kernel(out, ldo, a, m, p, 0, panels, accumulate)
	default:
		parallel.For(panels, 4, func(lo, hi int) {
			kernel(out, ldo, a, m, p, lo, hi, accumulate)
		})
	}
}

// pairsPool holds the rows of x in the pair kernels' layout (bf16, rows of
// kp, a multiple of 16 rows), grown as needed.
var pairsPool = sync.Pool{New: func() any { return new([]uint16) }}

// PanelKernels are the values RLVR_PANELS takes, the kernel that products
// by bf16 panels (decoding in bf16) run on:
//
//	auto        the AMX tiles where the CPU has AMX-BF16 and the system
//	            grants them, else the AVX512-BF16 tiles where the CPU has
//	            them, else fma (the default)
//	amx         the AMX tiles, with a notice where they cannot run
//	avx512bf16  the AVX512-BF16 tiles (VDPBF16PS: Zen 4, Cooper Lake and
//	            later), with a notice where they cannot run
//	fma         the AVX-512 or AVX2 tiles: each element one chain of
//	            float32 FMAs over k, the same bits on every x86 CPU with AVX2
//
// All are batch-invariant: a row's result depends on its own row of x
// only. They differ from each other in the last bits (the AMX unit sums
// each 32 k its own way, VDPBF16PS each pair), so a run that must
// reproduce one made with another sets RLVR_PANELS.
var PanelKernels = []string{"auto", "amx", "avx512bf16", "fma"}

var (
	errNoAMX = errors.New("gemm: the CPU has no AMX-BF16")
	errNoDot = errors.New("gemm: the CPU has no AVX512-BF16")
)

// panelsChoice is the bf16 panels' kernel.
type panelsChoice struct {
	pairs pairsKernel // none: the FMA tiles or the portable kernel
	name  string
}

// pairTiles are the kernels of the pair layout, by RLVR_PANELS value, in
// the order auto prefers them.
var pairTiles = []struct {
	env    string
	choice panelsChoice
	usable func() error // nil when the tiles can run here
}{
	{"amx", panelsChoice{pairsAMX, "AMX tiles (AMX-BF16)"}, amxUsable},
	{"avx512bf16", panelsChoice{pairsDot, "AVX512-BF16 tiles (VDPBF16PS)"}, dotUsable},
}

// panelsChosen is the bf16 panels' kernel.
var panelsChosen lazyChoice[panelsChoice]

// panelsState is the bf16 panels' kernel, chosen on first use from
// RLVR_PANELS.
func panelsState() *panelsChoice {
	return panelsChosen.get(func() panelsChoice {
		c, notice := choosePanels(os.Getenv("RLVR_PANELS"))
		if notice != "" {
			Notice(notice)
		}
		return c
	})
}

// choosePanels chooses the bf16 panels' kernel for the value of
// RLVR_PANELS, with the one-line notice to give when it is not what was
// asked for.
func choosePanels(env string) (panelsChoice, string) {
	fma := panelsChoice{name: "FMA tiles (AVX2)"}
	switch {
	case panelsAccelerated && panels512:
		fma.name = "FMA tiles (AVX-512)"
	case !panelsAccelerated:
		fma.name = "portable Go"
	}
	switch name := strings.ToLower(env); name {
	case "", "auto":
		for _, t := range pairTiles {
			if t.usable() == nil {
				return t.choice, ""
			}
		}
		return fma, ""
	case "fma":
		return fma, ""
	default:
		for _, t := range pairTiles {
			if t.env != name {
				continue
			}
			if err := t.usable(); err != nil {
				return fma, fmt.Sprintf("rlvr: RLVR_PANELS=%s: %v; bf16 decoding runs on the %s", t.env, err, fma.name)
			}
			return t.choice, ""
		}
	}
	return fma, fmt.Sprintf("rlvr: RLVR_PANELS=%q is none of %v; bf16 decoding runs on the %s", env, PanelKernels, fma.name)
}

// PanelsKernel names the kernel products by bf16 panels run on, e.g.
// "AMX tiles (AMX-BF16)".
func PanelsKernel() string { return panelsState().name }

// SetPanelsKernel chooses the bf16 panels' kernel as RLVR_PANELS would,
// for tests and benchmarks that compare the kernels. Panels packed before
// keep the layout, and so the kernel, they were packed for. The error says
// why the choice was not possible (the FMA tiles then run).
func SetPanelsKernel(name string) error {
	c, notice := choosePanels(name)
	panelsChosen.set(c)
	if notice != "" {
		return errors.New(notice)
	}
	return nil
}

// panelsKernel multiplies m rows by panels [p0, p1), on the calling
// goroutine.
func panelsKernel(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	if panelsAccelerated {
		panelsC(out, ldo, x, ldx, m, p, p0, p1, accumulate)
		return
	}
	panelsGo(out, ldo, x, ldx, m, p, p0, p1, accumulate)
}

// roundedPool holds the rows of x rounded to bf16 for a product by bf16
// panels, (m, K), grown as needed.
var roundedPool = sync.Pool{New: func() any { return new([]float32) }}

// widePool holds the portable kernel's float32 copy of one bf16 panel.
var widePool = sync.Pool{New: func() any { return new([]float32) }}

// panelsGo is the portable kernel: rows in blocks of panelRows, each
// element accumulated over k in order from zero, then stored or added.
func panelsGo(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	K := p.K
	var acc [4 * PanelWidth]float32
	var wide *[]float32
	if p.Kind != PanelsF32 {
		wide = widePool.Get().(*[]float32)
		defer widePool.Put(wide)
		*wide = grow(*wide, K*PanelWidth)
	}
	for r0 := 0; r0 < m; r0 += panelRows {
		r1 := min(r0+panelRows, m)
		for q := p0; q < p1; q++ {
			var b []float32
			switch p.Kind {
			case PanelsBF16: // one panel widened to float32, exactly
				b = *wide
				for i, h := range p.data16[q*K*PanelWidth : (q+1)*K*PanelWidth] {
					b[i] = BF16ToFloat32(h)
				}
			case PanelsInt8: // converted exactly; scaled at the end
				b = *wide
				for i, v := range p.data8[q*K*PanelWidth : (q+1)*K*PanelWidth] {
					b[i] = float32(v)
				}
			default:
				b = p.data[q*K*PanelWidth : (q+1)*K*PanelWidth]
			}
			cols := min(PanelWidth, p.N-q*PanelWidth)
			for r := r0; r < r1; r += 4 {
				rows := min(4, r1-r)
				clear(acc[:])
				for i := range rows {
					xr := x[(r+i)*ldx : (r+i)*ldx+K]
					a := acc[i*PanelWidth : (i+1)*PanelWidth : (i+1)*PanelWidth]
					for k, xv := range xr {
						w := b[k*PanelWidth : (k+1)*PanelWidth : (k+1)*PanelWidth]
						for j := range a {
							a[j] += xv * w[j]
						}
					}
				}
				for i := range rows {
					o := out[(r+i)*ldo+q*PanelWidth:][:cols]
					a := acc[i*PanelWidth:][:cols]
					if p.Kind == PanelsInt8 {
						for j, s := range p.scale[q*PanelWidth:][:cols] {
							a[j] *= s
						}
					}
					if accumulate {
						for j := range o {
							o[j] += a[j]
						}
					} else {
						copy(o, a)
					}
				}
			}
		}
	}
}
