// Package nn holds the transformer's kernels as forward/backward pairs.
//
// Conventions, as in llm.c: outputs come first; a backward takes the
// gradient of its forward's output (dout) and ADDS into the gradients of the
// forward's inputs and weights (dinp, dweight), so residual branches and
// tied weights need no special case and one zero-grad clears everything. A
// forward saves exactly what its backward needs, and says so.
//
// Tensors are flat row-major float32 slices of packed tokens: the sequences
// of a batch are concatenated with no padding, and offsets (S+1 entries,
// offsets[s] .. offsets[s+1] is sequence s) say where each one lies. Shapes
// are written beside each argument with this legend:
//
//	N   tokens in the packed batch (the sum of the sequence lengths)
//	S   sequences
//	T   one sequence's length
//	D   model width
//	H   query heads; KV key/value heads; hd head width
//	F   SwiGLU/GeGLU hidden width
//	V   vocabulary size
//
// A wrong shape is a programmer error inside the engine and panics (through
// the slice bounds); errors caused by data are checked by callers.
package nn

import (
	"math"

	"rlvr/engine/gemm"
	"rlvr/engine/parallel"
	"rlvr/engine/vec"
)

// rowGrain is how many rows of an elementwise kernel one goroutine takes at
// least, so tiny batches are not split.
const rowGrain = 16

// EmbeddingForward gathers rows of the table: out[n] = wte[tokens[n]].
func EmbeddingForward(out []float32, tokens []int32, wte []float32, D int) {
	// out (N, D), tokens (N), wte (V, D)
	parallel.For(len(tokens), rowGrain, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			t := int(tokens[n])
			copy(out[n*D:(n+1)*D], wte[t*D:(t+1)*D])
		}
	})
}

// EmbeddingBackward adds dout's rows into the rows of dwte they came from.
// Columns are split across goroutines, so repeated tokens never race and
// the sum runs in token order whatever the thread count.
func EmbeddingBackward(dwte []float32, dout []float32, tokens []int32, D int) {
	// dwte (V, D), dout (N, D), tokens (N)
	parallel.For(D, 16, func(lo, hi int) {
		for n, t := range tokens {
			dst := dwte[int(t)*D+lo : int(t)*D+hi]
			src := dout[n*D+lo : n*D+hi]
			for i := range dst {
				dst[i] += src[i]
			}
		}
	})
}

// RMSNormForward normalizes rows of C values: out = inp / rms(inp) ·
// (offset + weight), where offset is 0 for Llama's norms and 1 for Gemma's,
// which store w for a scale of 1 + w. The input holds N rows of G
// consecutive groups of C values each, rows stride apart; each group is
// normalized on its own (G = 1 for the model's norms, G = heads for the
// per-head q/k norms). out may be inp. It saves rstd (N·G), the reciprocal
// RMS, for the backward.
func RMSNormForward(out, rstd, inp, weight []float32, N, G, C, stride int, eps, offset float32) {
	// out, inp (N, stride) with G·C ≤ stride; rstd (N, G); weight (C)
	parallel.For(N, rowGrain, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for g := 0; g < G; g++ {
				x := inp[n*stride+g*C : n*stride+(g+1)*C]
				y := out[n*stride+g*C : n*stride+(g+1)*C]
				var ss float32
				for _, v := range x {
					ss += v * v
				}
				r := float32(1 / math.Sqrt(float64(ss/float32(C)+eps)))
				rstd[n*G+g] = r
				for i, v := range x {
					y[i] = v * r * (offset + weight[i])
				}
			}
		}
	})
}

// RMSNormBackward adds the gradients of RMSNormForward into dinp and
// dweight, with s = offset + w the scale:
//
//	dinp += r·(s⊙dout) − r³/C · x · Σ(s⊙dout⊙x)
//	dweight += Σ_rows dout⊙x·r
//
// dinp may alias nothing else; dweight is summed in row order by columns,
// so it is the same whatever the thread count.
func RMSNormBackward(dinp, dweight, dout, inp, weight, rstd []float32, N, G, C, stride int, offset float32) {
	parallel.For(N, rowGrain, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for g := 0; g < G; g++ {
				off := n*stride + g*C
				x, dy, dx := inp[off:off+C], dout[off:off+C], dinp[off:off+C]
				r := rstd[n*G+g]
				var dot float32
				for i := range x {
					dot += (offset + weight[i]) * dy[i] * x[i]
				}
				k := r * r * r * dot / float32(C)
				for i := range x {
					dx[i] += r*(offset+weight[i])*dy[i] - k*x[i]
				}
			}
		}
	})
	parallel.For(C, 8, func(lo, hi int) {
		dw := dweight[lo:hi]
		for n := 0; n < N; n++ {
			for g := 0; g < G; g++ {
				off := n*stride + g*C
				x, dy := inp[off+lo:off+hi], dout[off+lo:off+hi]
				r := rstd[n*G+g]
				for i := range dw {
					dw[i] += dy[i] * x[i] * r
				}
			}
		}
	})
}

// RoPETables returns cos and sin, each (maxPos, hd/2), for rotary
// embeddings with the given base theta, computed as Hugging Face Llama does
// (inverse frequencies and angles in float32).
func RoPETables(maxPos, hd int, theta float64) (cos, sin []float32) {
	inv := make([]float32, hd/2)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(hd)))
	}
	return RoPETablesFrom(maxPos, inv)
}

// RoPETablesFrom returns cos and sin, each (maxPos, len(inv)), for the
// inverse frequencies inv: the angle of position p and pair i is p·inv[i]
// in float32, as transformers computes it.
func RoPETablesFrom(maxPos int, inv []float32) (cos, sin []float32) {
	half := len(inv)
	cos, sin = make([]float32, maxPos*half), make([]float32, maxPos*half)
	for i, f := range inv {
		for p := 0; p < maxPos; p++ {
			a := float64(float32(p) * f)
			cos[p*half+i], sin[p*half+i] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}

// RoPE rotates heads in place with the "rotate half" convention of Hugging
// Face Llama/Qwen2: the pair (x[i], x[i+hd/2]) turns by angle pos·θ_i.
// x holds N rows, stride apart, each starting with `heads` heads of hd
// values. pos gives each row's position in its sequence. inverse rotates
// the other way: it is the backward, since a rotation's transpose is its
// inverse, applied to the gradient in place.
func RoPE(x []float32, N, heads, hd, stride int, pos []int32, cos, sin []float32, inverse bool) {
	half := hd / 2
	parallel.For(N, rowGrain, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			c := cos[int(pos[n])*half : int(pos[n]+1)*half]
			s := sin[int(pos[n])*half : int(pos[n]+1)*half]
			for h := 0; h < heads; h++ {
				v := x[n*stride+h*hd : n*stride+(h+1)*hd]
				for i := 0; i < half; i++ {
					x1, x2, si := v[i], v[i+half], s[i]
					if inverse {
						si = -si
					}
					v[i] = x1*c[i] - x2*si
					v[i+half] = x2*c[i] + x1*si
				}
			}
		}
	})
}

// Sequences of a packed batch may continue another: parents, when not
// nil, holds one entry per sequence, −1 for a sequence of its own and p for
// one that continues sequence p (a shared prompt, packed once before the
// answers that follow it). A continuation's tokens come after all of its
// parent's: its queries see the parent's keys, then its own causally. A
// parent continues nothing, and every sequence between a parent and its
// continuation continues the same parent (model.Batch checks both), so a
// parent and its continuations form one contiguous family.

// ParentLen is the length of sequence s's parent, 0 when it has none.
func ParentLen(offsets, parents []int, s int) int {
	if parents == nil || parents[s] < 0 {
		return 0
	}
	p := parents[s]
	return offsets[p+1] - offsets[p]
}

// FamilyEnd is the end of the family that starts at sequence s: s and the
// continuations that follow it.
func FamilyEnd(parents []int, s int) int {
	e := s + 1
	for e < len(parents) && parents[e] >= 0 {
		e++
	}
	return e
}

// AttentionScratch returns the size of the per-thread scratch the attention
// backward needs: the largest of its sequences' T × (parent's T + T).
func AttentionScratch(offsets, parents []int) int {
	n := 0
	for s := 0; s+1 < len(offsets); s++ {
		t := offsets[s+1] - offsets[s]
		n = max(n, t*(ParentLen(offsets, parents, s)+t))
	}
	return n
}

// AttentionProbsSize returns how many floats AttentionForward saves for the
// backward: one T × (parent's T + T) matrix per sequence and head.
func AttentionProbsSize(offsets, parents []int, H int) int {
	return attOffset(offsets, parents, len(offsets)-1, H)
}

// attOffset is where sequence s's probabilities start in att.
func attOffset(offsets, parents []int, s, H int) int {
	n := 0
	for i := 0; i < s; i++ {
		t := offsets[i+1] - offsets[i]
		n += H * t * (ParentLen(offsets, parents, i) + t)
	}
	return n
}

// AttentionForward is causal grouped-query attention over packed sequences:
// softmax(scale·q·kᵀ)·v. qkv holds each token's H query heads, then KV key
// heads, then KV value heads (post-RoPE); query head h reads key/value head
// h/(H/KV). A sequence that continues a parent (see parents above) sees the
// parent's keys before its own. window, when positive, is a sliding
// window: the query at position i (counted from the parent's start) sees
// only the keys j with i − j < window. It writes out and saves the softmax
// probabilities att (AttentionProbsSize floats; entries above the diagonal
// and outside the window are zero) for the backward.
func AttentionForward(out, att, qkv []float32, offsets, parents []int, H, KV, hd int, scale float32, window int) {
	// out (N, H·hd), qkv (N, (H+2KV)·hd), att (Σ_s H·T_s·(P_s+T_s))
	ld, rep := (H+2*KV)*hd, H/KV
	S := len(offsets) - 1
	parallel.Each(S*KV, func(task int) {
		s, g := task/KV, task%KV
		o, T := offsets[s], offsets[s+1]-offsets[s]
		P := ParentLen(offsets, parents, s)
		L := P + T
		k := qkv[o*ld+(H+g)*hd:]
		v := qkv[o*ld+(H+KV+g)*hd:]
		var pk, pv []float32
		if P > 0 {
			po := offsets[parents[s]]
			pk, pv = qkv[po*ld+(H+g)*hd:], qkv[po*ld+(H+KV+g)*hd:]
		}
		base := attOffset(offsets, parents, s, H)
		for h := g * rep; h < (g+1)*rep; h++ {
			p := att[base+h*T*L:][:T*L]
			q, dst := qkv[o*ld+h*hd:], out[o*H*hd+h*hd:]
			var beta float32 // 1 once the parent's values are in dst
			if P > 0 {
				gemm.SgemmSerial(false, true, T, P, hd, scale, q, ld, pk, ld, 0, p, L)
			}
			gemm.SgemmSerial(false, true, T, T, hd, scale, q, ld, k, ld, 0, p[P:], L)
			vec.SoftmaxWindow(p, T, L, P, window)
			if P > 0 {
				gemm.SgemmSerial(false, false, T, hd, P, 1, p, L, pv, ld, 0, dst, H*hd)
				beta = 1
			}
			gemm.SgemmSerial(false, false, T, hd, T, 1, p[P:], L, v, ld, beta, dst, H*hd)
		}
	})
}

// AttentionBackward adds the gradients of AttentionForward, which ran with
// this scale, into dqkv (same layout as qkv). The window needs no
// argument: att is zero outside it, and so is its gradient. scratch holds
// parallel.Threads() blocks of AttentionScratch floats. Work is split by
// (family, key/value head): the heads sharing a key/value head, and a
// parent's continuations, accumulate into its gradient in order on one
// goroutine.
func AttentionBackward(dqkv, dout, qkv, att, scratch []float32, offsets, parents []int, H, KV, hd int, scale float32) {
	ld := (H + 2*KV) * hd
	size := AttentionScratch(offsets, parents)
	S := len(offsets) - 1
	families := S
	if parents != nil {
		families = 0
		for _, p := range parents {
			if p < 0 {
				families++
			}
		}
	}
	parallel.Worker(families*KV, func(w, lo, hi int) {
		dp := scratch[w*size:][:size]
		for task := lo; task < hi; task++ {
			f, g := task/KV, task%KV
			first := f
			if parents != nil {
				first = nthRoot(parents, f)
			}
			for s := first; s < FamilyEnd(parents, first); s++ {
				attentionBackwardSeq(dqkv, dout, qkv, att, dp, offsets, parents, s, g, H, KV, hd, ld, scale)
			}
		}
	})
}

// nthRoot is the index of the f-th sequence that continues no other.
func nthRoot(parents []int, f int) int {
	for s, p := range parents {
		if p < 0 {
			if f == 0 {
				return s
			}
			f--
		}
	}
	return -1
}

// attentionBackwardSeq adds sequence s's part of the attention gradient for
// key/value head g, its parent's keys and values included.
func attentionBackwardSeq(dqkv, dout, qkv, att, dp []float32, offsets, parents []int, s, g, H, KV, hd, ld int, scale float32) {
	rep := H / KV
	o, T := offsets[s], offsets[s+1]-offsets[s]
	P := ParentLen(offsets, parents, s)
	L := P + T
	k, v := qkv[o*ld+(H+g)*hd:], qkv[o*ld+(H+KV+g)*hd:]
	dk, dv := dqkv[o*ld+(H+g)*hd:], dqkv[o*ld+(H+KV+g)*hd:]
	var pk, pv, pdk, pdv []float32
	if P > 0 {
		po := offsets[parents[s]]
		pk, pv = qkv[po*ld+(H+g)*hd:], qkv[po*ld+(H+KV+g)*hd:]
		pdk, pdv = dqkv[po*ld+(H+g)*hd:], dqkv[po*ld+(H+KV+g)*hd:]
	}
	base := attOffset(offsets, parents, s, H)
	for h := g * rep; h < (g+1)*rep; h++ {
		p := att[base+h*T*L:][:T*L]
		q, dq := qkv[o*ld+h*hd:], dqkv[o*ld+h*hd:]
		do := dout[o*H*hd+h*hd:]
		d := dp[:T*L]
		// dP = dout·vᵀ ; dv += Pᵀ·dout, over the parent's columns and then
		// the sequence's own
		if P > 0 {
			gemm.SgemmSerial(false, true, T, P, hd, 1, do, H*hd, pv, ld, 0, d, L)
			gemm.SgemmSerial(true, false, P, hd, T, 1, p, L, do, H*hd, 1, pdv, ld)
		}
		gemm.SgemmSerial(false, true, T, T, hd, 1, do, H*hd, v, ld, 0, d[P:], L)
		gemm.SgemmSerial(true, false, T, hd, T, 1, p[P:], L, do, H*hd, 1, dv, ld)
		// dS = P ⊙ (dP − Σ_j dP⊙P), the softmax backward; masked
		// entries (above the diagonal, outside the window) have P = 0 and
		// stay 0.
		for i := 0; i < T; i++ {
			n := P + i + 1
			pr, dr := p[i*L:i*L+n], d[i*L:i*L+n]
			var dot float32
			for j := range pr {
				dot += pr[j] * dr[j]
			}
			for j := range pr {
				dr[j] = pr[j] * (dr[j] - dot)
			}
			clear(d[i*L+n : (i+1)*L])
		}
		// dq += scale·dS·k ; dk += scale·dSᵀ·q
		if P > 0 {
			gemm.SgemmSerial(false, false, T, hd, P, scale, d, L, pk, ld, 1, dq, ld)
			gemm.SgemmSerial(true, false, P, hd, T, scale, d, L, q, ld, 1, pdk, ld)
		}
		gemm.SgemmSerial(false, false, T, hd, T, scale, d[P:], L, k, ld, 1, dq, ld)
		gemm.SgemmSerial(true, false, T, hd, T, scale, d[P:], L, q, ld, 1, dk, ld)
	}
}

// SwiGLUForward computes out = silu(gate) ⊙ up, where each row of gu holds
// the F gate values then the F up values (one fused projection). It saves
// sig = σ(gate) (N, F) for the backward, which would otherwise recompute
// every exponential.
func SwiGLUForward(out, sig, gu []float32, N, F int) {
	// out, sig (N, F), gu (N, 2F)
	parallel.For(N, rowGrain, func(lo, hi int) {
		vec.SwiGLU(out[lo*F:hi*F], sig[lo*F:hi*F], gu[lo*2*F:hi*2*F], hi-lo, F)
	})
}

// SwiGLUBackward adds the gradients of SwiGLUForward into dgu:
// silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
func SwiGLUBackward(dgu, dout, gu, sig []float32, N, F int) {
	parallel.For(N, rowGrain, func(lo, hi int) {
		vec.SwiGLUBackward(dgu[lo*2*F:hi*2*F], dout[lo*F:hi*F], gu[lo*2*F:hi*2*F], sig[lo*F:hi*F], hi-lo, F)
	})
}

// GeGLUForward computes out = gelu_tanh(gate) ⊙ up, GELU's tanh
// approximation 0.5·g·(1 + tanh(β·(g + κ·g³))) as PyTorch's
// gelu(approximate="tanh") defines it, where each row of gu holds the F
// gate values then the F up values (one fused projection). It saves sig
// = σ(2β·(g + κ·g³)) = 0.5·(1 + tanh(…)) (N, F) for the backward.
func GeGLUForward(out, sig, gu []float32, N, F int) {
	// out, sig (N, F), gu (N, 2F)
	parallel.For(N, rowGrain, func(lo, hi int) {
		vec.GeGLU(out[lo*F:hi*F], sig[lo*F:hi*F], gu[lo*2*F:hi*2*F], hi-lo, F)
	})
}

// GeGLUBackward adds the gradients of GeGLUForward into dgu.
func GeGLUBackward(dgu, dout, gu, sig []float32, N, F int) {
	parallel.For(N, rowGrain, func(lo, hi int) {
		vec.GeGLUBackward(dgu[lo*2*F:hi*2*F], dout[lo*F:hi*F], gu[lo*2*F:hi*2*F], sig[lo*F:hi*F], hi-lo, F)
	})
}

// Scale multiplies x by s in place: Gemma's embedding scale, forward and
// backward.
func Scale(x []float32, s float32) {
	parallel.For(len(x), 4096, func(lo, hi int) {
		for i := range x[lo:hi] {
			x[lo+i] *= s
		}
	})
}

// Add sets dst += src elementwise: a residual connection.
func Add(dst, src []float32) {
	parallel.For(len(dst), 4096, func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		for i := range d {
			d[i] += s[i]
		}
	})
}

// MatmulForward is a linear layer in PyTorch's layout: out = inp·wᵀ + bias,
// with w stored (out features, in features) as Hugging Face checkpoints do.
// bias may be nil. With bw not nil (w a view of its slab) the product takes
// bf16 inputs, autocast's product; the sum, the bias and out are float32.
func MatmulForward(bw *gemm.BF16Weights, out, inp, w, bias []float32, N, in, outF int) {
	// out (N, outF), inp (N, in), w (outF, in), bias (outF)
	bw.Gemm(false, true, N, outF, in, 1, inp, in, w, in, 0, out, outF)
	if bias != nil {
		AddBias(out, bias, N, outF)
	}
}

// AddBias adds bias (outF) to each of the N rows of out (N, outF).
func AddBias(out, bias []float32, N, outF int) {
	parallel.For(N, rowGrain, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			y := out[n*outF : (n+1)*outF]
			for i := range y {
				y[i] += bias[i]
			}
		}
	})
}

// MatmulBackward adds the gradients of MatmulForward:
//
//	dinp += dout·w    dw += doutᵀ·inp    dbias += Σ_n dout
//
// dinp may be nil when the input needs no gradient; dbias may be nil. With
// bw not nil both products take bf16-rounded inputs (dout, w; dout, inp),
// as autocast's backward does, and add float32 sums into float32
// gradients.
func MatmulBackward(bw *gemm.BF16Weights, dinp, dw, dbias, dout, inp, w []float32, N, in, outF int) {
	if dinp != nil {
		bw.Gemm(false, false, N, in, outF, 1, dout, outF, w, in, 1, dinp, in)
	}
	bw.Gemm(true, false, outF, in, N, 1, dout, outF, inp, in, 1, dw, in)
	if dbias != nil {
		parallel.For(outF, 16, func(lo, hi int) {
			db := dbias[lo:hi]
			for n := 0; n < N; n++ {
				dy := dout[n*outF+lo : n*outF+hi]
				for i := range db {
					db[i] += dy[i]
				}
			}
		})
	}
}

// MatmulAccumulate adds a linear layer's output into out: out += inp·wᵀ.
// The residual connections use it, so the sum is formed in place.
func MatmulAccumulate(bw *gemm.BF16Weights, out, inp, w []float32, N, in, outF int) {
	bw.Gemm(false, true, N, outF, in, 1, inp, in, w, in, 1, out, outF)
}
