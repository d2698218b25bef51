package gemm

import (
	"fmt"
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
// Once packed, products only read the panels: several goroutines may
// multiply by the same Panels at once (decoding caches sharing one packed
// model), as long as none packs it meanwhile.
type Panels struct {
	N, K   int
	BF16   bool      // packed by PackBF16: data16 holds the weights
	data   []float32 // (ceil(N/PanelWidth), K, PanelWidth)
	data16 []uint16  // the same layout in bf16 bits
}

// Pack copies w (n × k) into the panels, reusing their storage when the
// shape is unchanged.
func (p *Panels) Pack(w []float32, n, k int) {
	p.reshape(n, k, false, len(w))
	packPanels(p.data, w, n, k, func(v float32) float32 { return v })
}

// PackBF16 copies w (n × k) into the panels rounded to bf16, reusing their
// storage when the shape is unchanged.
func (p *Panels) PackBF16(w []float32, n, k int) {
	p.reshape(n, k, true, len(w))
	packPanels(p.data16, w, n, k, Float32ToBF16)
}

// reshape sizes the panels for an n × k matrix of len elements, in bf16
// or float32, keeping the storage of the same shape and kind.
func (p *Panels) reshape(n, k int, bf16 bool, len int) {
	if n <= 0 || k <= 0 || len < n*k {
		panic(fmt.Sprintf("gemm: packing a %d×%d matrix from %d elements", n, k, len))
	}
	size := (n + PanelWidth - 1) / PanelWidth * k * PanelWidth
	if p.N == n && p.K == k && p.BF16 == bf16 {
		return
	}
	p.N, p.K, p.BF16, p.data, p.data16 = n, k, bf16, nil, nil
	if bf16 {
		p.data16 = make([]uint16, size)
	} else {
		p.data = make([]float32, size)
	}
}

// packPanels writes w (n × k) into dst in the panels' layout, each element
// converted by conv, the last panel's missing features zero.
func packPanels[T float32 | uint16](dst []T, w []float32, n, k int, conv func(float32) T) {
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
					dst[i*PanelWidth+j] = conv(v)
				}
			}
		}
	})
}

// Bytes is the memory the packed weights hold.
func (p *Panels) Bytes() int64 { return int64(len(p.data))*4 + int64(len(p.data16))*2 }

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
	if p.BF16 {
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
	if p.BF16 {
		wide = widePool.Get().(*[]float32)
		defer widePool.Put(wide)
		*wide = grow(*wide, K*PanelWidth)
	}
	for r0 := 0; r0 < m; r0 += panelRows {
		r1 := min(r0+panelRows, m)
		for q := p0; q < p1; q++ {
			var b []float32
			if p.BF16 {
				// One panel widened to float32, exactly.
				b = *wide
				for i, h := range p.data16[q*K*PanelWidth : (q+1)*K*PanelWidth] {
					b[i] = BF16ToFloat32(h)
				}
			} else {
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
