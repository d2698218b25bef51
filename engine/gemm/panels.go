package gemm

import (
	"fmt"

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
type Panels struct {
	N, K int
	data []float32 // (ceil(N/PanelWidth), K, PanelWidth)
}

// Pack copies w (n × k) into the panels, reusing their storage when the
// shape is unchanged.
func (p *Panels) Pack(w []float32, n, k int) {
	if n <= 0 || k <= 0 || len(w) < n*k {
		panic(fmt.Sprintf("gemm: packing a %d×%d matrix from %d elements", n, k, len(w)))
	}
	panels := (n + PanelWidth - 1) / PanelWidth
	if p.N != n || p.K != k {
		p.N, p.K, p.data = n, k, make([]float32, panels*k*PanelWidth)
	}
	parallel.For(panels, 1, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			dst := p.data[q*k*PanelWidth : (q+1)*k*PanelWidth]
			for j := range PanelWidth {
				f := q*PanelWidth + j
				if f >= n {
					for i := range k {
						dst[i*PanelWidth+j] = 0
					}
					continue
				}
				for i, v := range w[f*k : (f+1)*k] {
					dst[i*PanelWidth+j] = v
				}
			}
		}
	})
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

// panelsGo is the portable kernel: rows in blocks of panelRows, each
// element accumulated over k in order from zero, then stored or added.
func panelsGo(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	K := p.K
	var acc [4 * PanelWidth]float32
	for r0 := 0; r0 < m; r0 += panelRows {
		r1 := min(r0+panelRows, m)
		for q := p0; q < p1; q++ {
			b := p.data[q*K*PanelWidth : (q+1)*K*PanelWidth]
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
