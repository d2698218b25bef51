package gemm

import (
	"fmt"
	"math"
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
	data   []float32 // (ceil(N/PanelWidth), K, PanelWidth)
	data16 []uint16  // the same layout in bf16 bits
	data8  []int8    // the same layout in int8
	scale  []float32 // int8: each feature's scale, ceil(N/PanelWidth)·PanelWidth of them
}

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
	p.reshape(n, k, PanelsF32, len(w))
	packPanels(p.data, w, n, k, func(_ int, v float32) float32 { return v })
}

// PackBF16 copies w (n × k) into the panels rounded to bf16, reusing their
// storage when the shape is unchanged.
func (p *Panels) PackBF16(w []float32, n, k int) {
	p.reshape(n, k, PanelsBF16, len(w))
	packPanels(p.data16, w, n, k, func(_ int, v float32) uint16 { return Float32ToBF16(v) })
}

// PackInt8 copies w (n × k) into the panels quantized to int8, each
// feature (row of w) by its own scale max|w|/127, rounded to nearest;
// it reuses their storage when the shape is unchanged. A feature of
// zeros has scale 0 (its products are 0); one holding a NaN or an
// infinity gives NaN products.
func (p *Panels) PackInt8(w []float32, n, k int) {
	p.reshape(n, k, PanelsInt8, len(w))
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

// reshape sizes the panels for an n × k matrix of len elements of kind,
// keeping the storage of the same shape and kind.
func (p *Panels) reshape(n, k int, kind PanelKind, len int) {
	if n <= 0 || k <= 0 || len < n*k {
		panic(fmt.Sprintf("gemm: packing a %d×%d matrix from %d elements", n, k, len))
	}
	padded := (n + PanelWidth - 1) / PanelWidth * PanelWidth
	size := padded * k
	if p.N == n && p.K == k && p.Kind == kind {
		return
	}
	p.N, p.K, p.Kind, p.data, p.data16, p.data8, p.scale = n, k, kind, nil, nil, nil, nil
	switch kind {
	case PanelsBF16:
		p.data16 = make([]uint16, size)
	case PanelsInt8:
		p.data8, p.scale = make([]int8, size), make([]float32, padded)
	default:
		p.data = make([]float32, size)
	}
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
