package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"rlvr/engine/gemm"
)

// useBF16Kernel forces gemm's bf16 kernel for the rest of the test,
// restoring the emulation (what the model tests measure bf16 with)
// afterwards.
func useBF16Kernel(t *testing.T, name string) {
	t.Helper()
	if err := gemm.SetBF16Kernel(name); err != nil && name != "none" {
		t.Fatal(err)
	}
	t.Cleanup(func() { gemm.SetBF16Kernel("emulate") })
}

// bf16Case is a model of cfg (seed) and a random batch of sequences of
// the given lengths with targets on every position.
func bf16Case(cfg Config, seed uint64, lengths ...int) (*Model, Batch, Targets) {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := Pack(randomSeqs(r, cfg.Vocab, lengths...))
	tg := fullTargets(r, cfg.Vocab, len(b.Tokens))
	m, _ := New(cfg, seed+2)
	return m, b, tg
}

func TestParsePrecisionNamesTheValue(t *testing.T) {
	for _, s := range []string{"fp32", "float32", "bf16", "bfloat16", "int8", "INT8"} {
		if _, err := ParsePrecision(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParsePrecision("int4"); err == nil || !strings.Contains(err.Error(), "int4") {
		t.Fatalf("ParsePrecision(int4): %v", err)
	}
}

// TestBF16NearFP32 runs one ForwardBackward in each precision on every
// variant: bf16 must differ from float32 (the products really are
// rounded) by a bf16-sized amount, in the logprobs and in the gradients.
func TestBF16NearFP32(t *testing.T) {
	useBF16Kernel(t, "emulate")
	for name, cfg := range variants {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(31, 32))
			b := Pack(randomSeqs(r, cfg.Vocab, 9, 5, 13))
			tg := fullTargets(r, cfg.Vocab, len(b.Tokens))
			m, _ := New(cfg, 33)
			perturb(m, 34)
			want := runRecompute(t, m, false, b, tg)
			m.Precision = BF16
			got := runRecompute(t, m, false, b, tg)
			var dlp, dg, gn float64
			for i := range got.logprobs {
				dlp = math.Max(dlp, math.Abs(float64(got.logprobs[i]-want.logprobs[i])))
			}
			for i := range got.grads {
				d := float64(got.grads[i] - want.grads[i])
				dg += d * d
				gn += float64(want.grads[i]) * float64(want.grads[i])
			}
			rel := math.Sqrt(dg / gn)
			t.Logf("max |Δ logprob| %.3g, ‖Δ grad‖/‖grad‖ %.3g", dlp, rel)
			// bf16 keeps 8 significant bits (relative error ≤ 2^-9 per
			// input): a few products deep, logprobs move by ~1e-3 to 1e-2
			// and gradients by a few percent at most.
			if dlp == 0 || dlp > 0.05 {
				t.Errorf("max |Δ logprob| %.3g: want a bf16-sized gap in (0, 0.05]", dlp)
			}
			if rel == 0 || rel > 0.05 {
				t.Errorf("‖Δ grad‖/‖grad‖ %.3g: want a bf16-sized gap in (0, 0.05]", rel)
			}
		})
	}
}

// TestBF16KernelsAgree: every bf16 kernel that loads here (the pure-Go
// emulation, and oneDNN or OpenBLAS's sbgemm where the CPU and library
// have them) rounds the same inputs as the emulation through the float32
// backend, so they differ only in summation order: in the logprobs and in
// every gradient of a forward and backward (whose weight gradients
// multiply by a transposed A), by far less than bf16 differs from float32.
func TestBF16KernelsAgree(t *testing.T) {
	cfg := variants["qwen2-gqa"]
	m, b, tg := bf16Case(cfg, 35, 11, 7, 16, 13)
	want32 := runRecompute(t, m, false, b, tg)
	m.Precision = BF16
	useBF16Kernel(t, "emulate")
	want := runRecompute(t, m, false, b, tg)
	gap := func(x, y []float32) float64 {
		var d, n float64
		for i := range x {
			d += float64(x[i]-y[i]) * float64(x[i]-y[i])
			n += float64(y[i]) * float64(y[i])
		}
		return math.Sqrt(d / n)
	}
	precisionGap := gap(want.grads, want32.grads)
	for _, kernel := range []string{"go", "onednn", "sbgemm"} {
		if err := gemm.SetBF16Kernel(kernel); err != nil {
			t.Logf("%s: %v", kernel, err)
			continue
		}
		got := runRecompute(t, m, false, b, tg)
		for i := range got.logprobs {
			if d := math.Abs(float64(got.logprobs[i] - want.logprobs[i])); d > 1e-4 {
				t.Fatalf("%s: logprob %d is %v, emulated %v", kernel, i, got.logprobs[i], want.logprobs[i])
			}
		}
		g := gap(got.grads, want.grads)
		t.Logf("%s (%s): ‖Δ grad‖/‖grad‖ against the emulation %.3g; bf16 against fp32 %.3g", kernel, gemm.BF16Kernel(), g, precisionGap)
		if g > precisionGap/10 {
			t.Errorf("%s: the gradients differ from the emulation's by %.3g of their norm, more than a tenth of bf16's own gap from fp32 (%.3g)", kernel, g, precisionGap)
		}
	}
}

// TestBF16RecomputeIsBitIdentical: recomputation replays the same bf16
// products, so it stays bit for bit.
func TestBF16RecomputeIsBitIdentical(t *testing.T) {
	useBF16Kernel(t, "emulate")
	cfg := variants["qwen2-gqa"]
	cfg.Layers = 3
	m, b, tg := bf16Case(cfg, 38, 6, 9)
	m.Precision = BF16
	sameBits(t, "bf16 recompute", runRecompute(t, m, false, b, tg), runRecompute(t, m, true, b, tg))
}

// TestBF16SeesWeightUpdates: the bf16 copy of the weights is refreshed at
// each forward, so an update to Params (an optimizer step) is seen at
// once, and the result is that of a model loaded with the new weights.
func TestBF16SeesWeightUpdates(t *testing.T) {
	useBF16Kernel(t, "emulate")
	cfg := variants["qwen2-gqa"]
	m, b, tg := bf16Case(cfg, 41, 8)
	m.Precision = BF16
	before := runRecompute(t, m, false, b, tg)
	for i := range m.Params {
		m.Params[i] *= 1.5
	}
	after := runRecompute(t, m, false, b, tg)
	fresh, _ := New(cfg, 43)
	for i := range fresh.Params {
		fresh.Params[i] *= 1.5
	}
	fresh.Precision = BF16
	sameBits(t, "updated weights", runRecompute(t, fresh, false, b, tg), after)
	if before.logprobs[0] == after.logprobs[0] {
		t.Fatal("the forward did not see the updated weights")
	}
	if m.BF16WeightBytes() < int64(len(m.Params))*2 {
		t.Fatalf("the bf16 copy holds %d bytes for %d parameters", m.BF16WeightBytes(), len(m.Params))
	}
}

// TestBF16FallbackIsFP32: with no bf16 kernel, BF16 runs the float32
// products exactly.
func TestBF16FallbackIsFP32(t *testing.T) {
	useBF16Kernel(t, "none")
	cfg := variants["qwen2-gqa"]
	m, b, tg := bf16Case(cfg, 44, 7, 4)
	want := runRecompute(t, m, false, b, tg)
	m.Precision = BF16
	if m.EffectivePrecision() != FP32 || !strings.Contains(m.Kernel(), "fp32") {
		t.Fatalf("without a kernel: effective %v, kernel %q", m.EffectivePrecision(), m.Kernel())
	}
	sameBits(t, "fallback", want, runRecompute(t, m, false, b, tg))
}

// TestWithPrecisionSharesWeights: a bf16 view of a float32 model reads
// the same Params and leaves the original's results alone.
func TestWithPrecisionSharesWeights(t *testing.T) {
	useBF16Kernel(t, "emulate")
	cfg := variants["qwen2-gqa"]
	m, b, tg := bf16Case(cfg, 47, 6, 5)
	want := runRecompute(t, m, false, b, tg)
	v := m.WithPrecision(BF16)
	if &v.Params[0] != &m.Params[0] || v.Precision != BF16 || m.Precision != FP32 {
		t.Fatal("WithPrecision must share the weights and change only the copy's precision")
	}
	lp := make([]float32, len(b.Tokens))
	if err := v.Logprobs(b, tg.Targets, lp, nil); err != nil {
		t.Fatal(err)
	}
	if lp[0] == want.logprobs[0] {
		t.Error("the bf16 view computed float32 logprobs")
	}
	sameBits(t, "the float32 original after its bf16 view ran", want, runRecompute(t, m, false, b, tg))
}

// TestBF16ExtendMatchesForward: the KV-cache decoder in BF16 packs its
// weights in bf16 (half the bytes) and agrees with the bf16 training
// forward. The two sum in different orders; an activation that lands on a
// bf16 rounding boundary could round the other way in one of them and move
// a logit by a bf16 ulp's effect, which these small models never show:
// 1e-3 leaves room for it.
func TestBF16ExtendMatchesForward(t *testing.T) {
	useBF16Kernel(t, "emulate")
	kernels := []string{"fma"}
	for _, tiles := range []string{"amx", "avx512bf16"} {
		if err := gemm.SetPanelsKernel(tiles); err != nil {
			t.Logf("%s tiles not tested: %v", tiles, err)
			continue
		}
		kernels = append(kernels, tiles)
	}
	defer gemm.SetPanelsKernel("")
	for _, kernel := range kernels {
		t.Run(kernel, func(t *testing.T) {
			if err := gemm.SetPanelsKernel(kernel); err != nil {
				t.Fatal(err)
			}
			bf16ExtendMatchesForward(t, kernel != "fma")
		})
	}
}

// bf16ExtendMatchesForward checks one panels kernel; pairs: it packs in
// pair layout (the AMX and AVX512-BF16 tiles).
func bf16ExtendMatchesForward(t *testing.T, pairs bool) {
	for name, cfg := range variants {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(50, 51))
			m, _ := New(cfg, 52)
			perturb(m, 53)
			seq := randomSeqs(r, cfg.Vocab, 11)
			c32, _ := m.NewCache(1, cfg.MaxSeq)
			m.Precision = BF16
			c, err := m.NewCache(1, cfg.MaxSeq)
			if err != nil {
				t.Fatal(err)
			}
			// The pair layout pads each matrix's k to a multiple of 32,
			// which these small models' widths are not all.
			if b16, b32 := c.PackedBytes(), c32.PackedBytes(); !pairs && 2*b16 != b32 || pairs && (2*b16 < b32 || b16 > b32) {
				t.Fatalf("bf16 packing holds %d bytes, float32 %d: want half (pair layout: from half to float32's)", b16, b32)
			}
			full := Pack(seq)
			m.forward(full)
			D, V := cfg.Dim, cfg.Vocab
			ref := make([]float32, len(full.Tokens)*V)
			for n := range full.Tokens {
				m.bw.Gemm(false, true, 1, V, D, 1, m.act.normed[n*D:], D, m.w.head, D, 0, ref[n*V:], V)
			}
			logits := make([]float32, V)
			var worst float64
			for i, tok := range seq[0] {
				if err := m.Extend(c, []int{0}, Pack([][]int32{{tok}}), logits); err != nil {
					t.Fatal(err)
				}
				for v := range V {
					worst = math.Max(worst, math.Abs(float64(logits[v]-ref[i*V+v])))
				}
			}
			t.Logf("max |Δ logit| decoder vs training forward, both bf16: %.3g", worst)
			if worst > 1e-3 {
				t.Fatalf("max |Δ logit| %.3g > 1e-3", worst)
			}
		})
	}
}

// quantizeRows replaces each row of the n × k matrix w by its int8 value
// times its scale, as weight-only int8 defines them: the scale is the
// row's largest magnitude over 127, each weight rounded to the nearest
// multiple of it. (An implementation of its own, not gemm's.)
func quantizeRows(w []float32, n, k int) {
	for f := range n {
		row := w[f*k : (f+1)*k]
		var big float64
		for _, v := range row {
			big = math.Max(big, math.Abs(float64(v)))
		}
		s := float32(big) / 127
		for i, v := range row {
			row[i] = float32(math.Round(float64(v/s))) * s
		}
	}
}

// TestInt8DecodesTheDequantizedModel: a model decoding in INT8 gives the
// logits that float32 decoding gives with its projections and output head
// replaced by their int8 values times their scales (untied variants, where
// the embedding the head shares is not quantized with it), to float32
// summation error; its packed weights are about a quarter of float32's;
// and on every variant its logits differ from float32's by an int8-sized
// gap, not by nothing.
func TestInt8DecodesTheDequantizedModel(t *testing.T) {
	for name, cfg := range variants {
		t.Run(name, func(t *testing.T) {
			twin := func() *Model {
				m, _ := New(cfg, 81)
				perturb(m, 82)
				return m
			}
			want := decodeRun(t, twin())
			m := twin()
			m.Precision = INT8
			got := decodeRun(t, m)
			var gap float64
			for i := range got {
				gap = math.Max(gap, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("max |Δ logit| int8 against fp32: %.3g", gap)
			if gap == 0 || gap > 0.1 {
				t.Errorf("max |Δ logit| int8 against fp32 %.3g: want an int8-sized gap in (0, 0.1]", gap)
			}
			c32, _ := twin().NewCache(1, 4)
			c8, _ := m.NewCache(1, 4)
			if r := float64(c8.PackedBytes()) / float64(c32.PackedBytes()); r < 0.25 || r > 0.5 {
				t.Errorf("int8 packing holds %.2f of float32's bytes, want about a quarter", r)
			}
			if cfg.TiedEmbeddings {
				return
			}
			deq := twin()
			c := deq.Config
			D, F, Hd, Q := c.Dim, c.Hidden, c.Heads*c.HeadDim, c.qkvWidth()
			for _, w := range deq.w.layers {
				quantizeRows(w.qkv, Q, D)
				quantizeRows(w.o, D, Hd)
				quantizeRows(w.gateUp, 2*F, D)
				quantizeRows(w.down, D, F)
			}
			quantizeRows(deq.w.head, cfg.Vocab, D)
			ref := decodeRun(t, deq)
			for i := range got {
				if d := math.Abs(float64(got[i] - ref[i])); d > 1e-4*(1+math.Abs(float64(ref[i]))) {
					t.Fatalf("logit %d: %v in int8, %v from the dequantized weights in float32", i, got[i], ref[i])
				}
			}
		})
	}
}
