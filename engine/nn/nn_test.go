package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"rlvr/engine/gradcheck"
	"rlvr/engine/parallel"
)

func randn(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64()) * scale
	}
	return s
}

// check runs gradcheck on every (name, x, grad) triple and fails the test on
// the first error.
func check(t *testing.T, loss func() float64, pairs ...any) {
	t.Helper()
	for i := 0; i < len(pairs); i += 3 {
		name, x, g := pairs[i].(string), pairs[i+1].([]float32), pairs[i+2].([]float32)
		if _, err := gradcheck.Check(name, x, g, loss, gradcheck.Options{Coordinates: 60, Seed: uint64(i)}); err != nil {
			t.Error(err)
		}
	}
}

func TestEmbeddingGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	V, D := 7, 5
	tokens := []int32{3, 1, 3, 6, 0, 3}
	wte := randn(r, V*D, 1)
	out := make([]float32, len(tokens)*D)
	dout := randn(r, len(out), 1)
	loss := func() float64 { EmbeddingForward(out, tokens, wte, D); return gradcheck.Dot(dout, out) }
	dwte := make([]float32, V*D)
	EmbeddingBackward(dwte, dout, tokens, D)
	check(t, loss, "wte", wte, dwte)
}

func TestRMSNormGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		N, G, C, stride int
		offset          float32 // 1: Gemma's 1 + w
	}{{6, 1, 8, 8, 0}, {5, 3, 4, 14, 0}, {6, 1, 8, 8, 1}, {5, 3, 4, 14, 1}} {
		inp, w := randn(r, tc.N*tc.stride, 1), randn(r, tc.C, 1)
		out, rstd := make([]float32, len(inp)), make([]float32, tc.N*tc.G)
		dout := randn(r, len(inp), 1)
		// Only the normalized columns carry a loss; the rest of each row
		// belongs to someone else.
		for n := 0; n < tc.N; n++ {
			clear(dout[n*tc.stride+tc.G*tc.C : (n+1)*tc.stride])
		}
		loss := func() float64 {
			RMSNormForward(out, rstd, inp, w, tc.N, tc.G, tc.C, tc.stride, 1e-5, tc.offset)
			return gradcheck.Dot(dout, out)
		}
		loss()
		dinp, dw := make([]float32, len(inp)), make([]float32, tc.C)
		RMSNormBackward(dinp, dw, dout, inp, w, rstd, tc.N, tc.G, tc.C, tc.stride, tc.offset)
		check(t, loss, "inp", inp, dinp, "weight", w, dw)
	}
}

func TestRoPEIsARotationAndItsInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 3))
	N, heads, hd, stride := 5, 3, 8, 30
	cos, sin := RoPETables(16, hd, 10000)
	pos := []int32{0, 1, 2, 7, 15}
	x := randn(r, N*stride, 1)
	orig := append([]float32(nil), x...)
	RoPE(x, N, heads, hd, stride, pos, cos, sin, false)
	for n := 0; n < N; n++ {
		for h := 0; h < heads; h++ {
			var a, b float64
			for i := 0; i < hd; i++ {
				a += float64(x[n*stride+h*hd+i]) * float64(x[n*stride+h*hd+i])
				b += float64(orig[n*stride+h*hd+i]) * float64(orig[n*stride+h*hd+i])
			}
			if math.Abs(a-b) > 1e-4*b {
				t.Fatalf("row %d head %d: norm changed %v -> %v", n, h, b, a)
			}
		}
		// Columns past the heads are untouched.
		for i := heads * hd; i < stride; i++ {
			if x[n*stride+i] != orig[n*stride+i] {
				t.Fatalf("row %d column %d outside the heads changed", n, i)
			}
		}
	}
	if x[0] != orig[0] {
		t.Fatal("position 0 must not rotate")
	}
	// The backward (inverse) of a linear map y = Rx applied to dout = r gives
	// Rᵀr; check it against finite differences of Σ r·Rx.
	y := make([]float32, len(x))
	dout := randn(r, len(x), 1)
	loss := func() float64 {
		copy(y, orig)
		RoPE(y, N, heads, hd, stride, pos, cos, sin, false)
		return gradcheck.Dot(dout, y)
	}
	grad := append([]float32(nil), dout...)
	RoPE(grad, N, heads, hd, stride, pos, cos, sin, true)
	check(t, loss, "x", orig, grad)
}

func attentionCase(t *testing.T, offsets, parents []int, H, KV, hd int, scale float32, window int) {
	r := rand.New(rand.NewPCG(uint64(H), uint64(KV)))
	N := offsets[len(offsets)-1]
	qkv := randn(r, N*(H+2*KV)*hd, 1)
	out, att := make([]float32, N*H*hd), make([]float32, AttentionProbsSize(offsets, parents, H))
	dout := randn(r, len(out), 1)
	loss := func() float64 {
		AttentionForward(out, att, qkv, offsets, parents, H, KV, hd, scale, window)
		return gradcheck.Dot(dout, out)
	}
	loss()
	dqkv := make([]float32, len(qkv))
	AttentionBackward(dqkv, dout, qkv, att, make([]float32, parallel.Threads()*AttentionScratch(offsets, parents)), offsets, parents, H, KV, hd, scale)
	check(t, loss, "qkv", qkv, dqkv)
}

func TestAttentionGrad(t *testing.T) {
	attentionCase(t, []int{0, 5, 8, 9}, nil, 2, 2, 4, 0.5, 0)
	attentionCase(t, []int{0, 4, 10}, nil, 4, 2, 4, 0.5, 0) // grouped-query
	attentionCase(t, []int{0, 7}, nil, 3, 1, 2, 0.7, 0)     // multi-query
	attentionCase(t, []int{0, 7, 10}, nil, 4, 2, 4, 0.3, 3) // a sliding window of 3
	// A shared prefix (sequence 0) with three continuations, a sequence of
	// its own, and a second family: the parents' keys and values gather
	// gradient from every continuation.
	families := []int{0, 4, 7, 9, 12, 15, 18, 21}
	parents := []int{-1, 0, 0, 0, -1, -1, 5}
	attentionCase(t, families, parents, 4, 2, 4, 0.5, 0)
	attentionCase(t, families, parents, 2, 1, 4, 0.4, 3) // the window reaches into the parent
}

// TestAttentionContinuationIsTheWholeSequence checks a continuation's
// outputs and gradients against the same tokens packed as one sequence
// with its parent's copied in front.
func TestAttentionContinuationIsTheWholeSequence(t *testing.T) {
	for _, window := range []int{0, 3} {
		r := rand.New(rand.NewPCG(7, uint64(window)))
		H, KV, hd := 4, 2, 4
		ld := (H + 2*KV) * hd
		// Shared: a parent of 5 tokens and continuations of 3 and 4.
		offsets, parents := []int{0, 5, 8, 12}, []int{-1, 0, 0}
		qkv := randn(r, 12*ld, 1)
		dout := randn(r, 12*H*hd, 1)
		out := make([]float32, 12*H*hd)
		att := make([]float32, AttentionProbsSize(offsets, parents, H))
		AttentionForward(out, att, qkv, offsets, parents, H, KV, hd, 0.5, window)
		dqkv := make([]float32, len(qkv))
		AttentionBackward(dqkv, dout, qkv, att, make([]float32, parallel.Threads()*AttentionScratch(offsets, parents)), offsets, parents, H, KV, hd, 0.5)
		// Unshared: parent+first (8 tokens), parent+second (9 tokens); the
		// parent's output gradient is given to the first copy only.
		rows := func(v []float32, w, from, to int) []float32 { return v[from*w : to*w] }
		flat := append(append(append([]float32{}, rows(qkv, ld, 0, 5)...), rows(qkv, ld, 5, 8)...), rows(qkv, ld, 0, 5)...)
		flat = append(flat, rows(qkv, ld, 8, 12)...)
		fdout := append(append(append([]float32{}, rows(dout, H*hd, 0, 5)...), rows(dout, H*hd, 5, 8)...), make([]float32, 5*H*hd)...)
		fdout = append(fdout, rows(dout, H*hd, 8, 12)...)
		foffsets := []int{0, 8, 17}
		fout := make([]float32, 17*H*hd)
		fatt := make([]float32, AttentionProbsSize(foffsets, nil, H))
		AttentionForward(fout, fatt, flat, foffsets, nil, H, KV, hd, 0.5, window)
		fdqkv := make([]float32, len(flat))
		AttentionBackward(fdqkv, fdout, flat, fatt, make([]float32, parallel.Threads()*AttentionScratch(foffsets, nil)), foffsets, nil, H, KV, hd, 0.5)
		near := func(what string, i int, a, b float32) {
			if math.Abs(float64(a-b)) > 1e-5 {
				t.Fatalf("window %d: %s %d: %v shared, %v unshared", window, what, i, a, b)
			}
		}
		w := H * hd
		for i := range 8 * w {
			near("output", i, out[i], fout[i])
		}
		for i := range 4 * w {
			near("output", 8*w+i, out[8*w+i], fout[13*w+i])
		}
		// The parent's gradient is the sum of its two copies'.
		for i := range 5 * ld {
			near("parent gradient", i, dqkv[i], fdqkv[i]+fdqkv[8*ld+i])
		}
		for i := range 3 * ld {
			near("gradient", 5*ld+i, dqkv[5*ld+i], fdqkv[5*ld+i])
		}
		for i := range 4 * ld {
			near("gradient", 8*ld+i, dqkv[8*ld+i], fdqkv[13*ld+i])
		}
	}
}

// TestAttentionWindow checks that a query of a windowed attention depends
// on the keys and values in its window and on no others.
func TestAttentionWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	H, KV, hd, window := 2, 1, 4, 3
	offsets := []int{0, 8}
	N, ld := 8, (H+2*KV)*hd
	qkv := randn(r, N*ld, 1)
	att := make([]float32, AttentionProbsSize(offsets, nil, H))
	out1, out2 := make([]float32, N*H*hd), make([]float32, N*H*hd)
	AttentionForward(out1, att, qkv, offsets, nil, H, KV, hd, 0.5, window)
	for i := 2*ld + H*hd; i < 3*ld; i++ { // token 2's key and value
		qkv[i] += 1
	}
	AttentionForward(out2, att, qkv, offsets, nil, H, KV, hd, 0.5, window)
	for n := 0; n < N; n++ {
		same := true
		for i := n * H * hd; i < (n+1)*H*hd; i++ {
			same = same && out1[i] == out2[i]
		}
		if wantSame := n < 2 || n-2 >= window; same != wantSame {
			t.Errorf("token %d: output unchanged = %v, want %v", n, same, wantSame)
		}
	}
}

// TestAttentionIsCausalAndPerSequence checks that changing a later token, or
// another sequence, leaves earlier outputs untouched.
func TestAttentionIsCausalAndPerSequence(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	H, KV, hd := 2, 1, 4
	offsets := []int{0, 6, 10}
	N, ld := 10, (H+2*KV)*hd
	qkv := randn(r, N*ld, 1)
	out1, att := make([]float32, N*H*hd), make([]float32, AttentionProbsSize(offsets, nil, H))
	AttentionForward(out1, att, qkv, offsets, nil, H, KV, hd, 0.5, 0)
	for i := 4 * ld; i < 7*ld; i++ { // tokens 4, 5 of sequence 0 and token 0 of sequence 1
		qkv[i] += 1
	}
	out2 := make([]float32, len(out1))
	AttentionForward(out2, att, qkv, offsets, nil, H, KV, hd, 0.5, 0)
	for n := 0; n < N; n++ {
		same := true
		for i := n * H * hd; i < (n+1)*H*hd; i++ {
			same = same && out1[i] == out2[i]
		}
		if wantSame := n < 4; same != wantSame {
			t.Errorf("token %d: output unchanged = %v, want %v", n, same, wantSame)
		}
	}
}

func TestSwiGLUGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 5))
	N, F := 4, 6
	gu := randn(r, N*2*F, 2)
	out, sig, dout := make([]float32, N*F), make([]float32, N*F), randn(r, N*F, 1)
	loss := func() float64 { SwiGLUForward(out, sig, gu, N, F); return gradcheck.Dot(dout, out) }
	loss()
	dgu := make([]float32, len(gu))
	SwiGLUBackward(dgu, dout, gu, sig, N, F)
	check(t, loss, "gu", gu, dgu)
}

func TestGeGLUGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 8))
	N, F := 4, 6
	gu := randn(r, N*2*F, 2)
	out, th, dout := make([]float32, N*F), make([]float32, N*F), randn(r, N*F, 1)
	loss := func() float64 { GeGLUForward(out, th, gu, N, F); return gradcheck.Dot(dout, out) }
	loss()
	dgu := make([]float32, len(gu))
	GeGLUBackward(dgu, dout, gu, th, N, F)
	check(t, loss, "gu", gu, dgu)
}

// TestGeGLUValues checks the tanh-approximated GELU against its formula in
// float64 at a few points.
func TestGeGLUValues(t *testing.T) {
	g := []float32{-3, -0.5, 0, 0.1, 1, 2.5}
	gu := append(append([]float32{}, g...), 1, 1, 1, 1, 1, 2)
	out, th := make([]float32, 6), make([]float32, 6)
	GeGLUForward(out, th, gu, 1, 6)
	for i, x := range g {
		v := float64(x)
		want := 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) * float64(gu[6+i])
		if math.Abs(float64(out[i])-want) > 1e-6*(1+math.Abs(want)) {
			t.Errorf("gelu_tanh(%v)·%v = %v, want %v", x, gu[6+i], out[i], want)
		}
	}
}

func TestMatmulGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 6))
	N, in, outF := 40, 24, 36
	inp, w, b := randn(r, N*in, 1), randn(r, outF*in, 0.3), randn(r, outF, 1)
	out, dout := make([]float32, N*outF), randn(r, N*outF, 1)
	loss := func() float64 { MatmulForward(nil, out, inp, w, b, N, in, outF); return gradcheck.Dot(dout, out) }
	dinp, dw, db := make([]float32, len(inp)), make([]float32, len(w)), make([]float32, len(b))
	MatmulBackward(nil, dinp, dw, db, dout, inp, w, N, in, outF)
	check(t, loss, "inp", inp, dinp, "w", w, dw, "bias", b, db)
}

// TestBackwardAccumulates checks the contract that backwards add into
// gradients rather than overwrite them.
func TestBackwardAccumulates(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 7))
	N, F := 3, 4
	gu, dout := randn(r, N*2*F, 1), randn(r, N*F, 1)
	sig := make([]float32, N*F)
	SwiGLUForward(make([]float32, N*F), sig, gu, N, F)
	once := make([]float32, N*2*F)
	SwiGLUBackward(once, dout, gu, sig, N, F)
	twice := make([]float32, N*2*F)
	SwiGLUBackward(twice, dout, gu, sig, N, F)
	SwiGLUBackward(twice, dout, gu, sig, N, F)
	for i := range once {
		if math.Abs(float64(twice[i]-2*once[i])) > 1e-6 {
			t.Fatalf("element %d: twice %v, 2×once %v", i, twice[i], 2*once[i])
		}
	}
}
