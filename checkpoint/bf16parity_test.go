package checkpoint_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/internal/gzjson"
	"rlvr/internal/realmodel"
)

// bf16Ref is python/ref_logits_bf16.py's record: for each run (fp32,
// autocast, bf16 weights), prompt and position of the float32 reference's
// sequences, [lse, the logits at the reference's top 8 and 8 probe ids].
type bf16Ref struct {
	Reference string                   `json:"reference"`
	Runs      map[string][][][]float64 `json:"runs"`
}

// gapStats accumulates |Δ| over positions.
type gapStats struct {
	sum, max float64
	n        int
}

func (g *gapStats) add(d float64) {
	d = math.Abs(d)
	g.sum += d
	g.max = max(g.max, d)
	g.n++
}

func (g gapStats) mean() float64 { return g.sum / float64(max(g.n, 1)) }

func (g gapStats) String() string { return fmt.Sprintf("mean %.3g, max %.3g", g.mean(), g.max) }

// TestRealModelParityBF16 runs the real models in bf16 (the hardware
// kernel where the CPU has one, else the emulation: the same numbers up to
// summation order) on the 20 parity prompts and compares them with
// transformers in bf16, autocast (float32 weights, bf16 products) and bf16
// weights (every activation bf16 too), all on the same GGUF weights.
//
// The measure is the logprob of the float32 reference's top token at
// every position of prompt + continuation, through the training forward
// and through the KV-cache decoder (which packs its weights in bf16). The
// yardstick is transformers' own departure from float32 in each mode
// (tf_M − tf_fp32): bf16 rounding moves logprobs by that much whoever
// computes them, so no implementation can be held closer to another's
// bf16 than that. The tolerances:
//
//   - rlvr's bf16 departs from float32 no more than transformers' autocast
//     does, on average over positions: rlvr rounds the products' inputs
//     only, autocast also their outputs and runs attention in bf16; and
//     by at least a tenth of it, or the products were not rounded;
//   - rlvr's bf16 lies within 1.5× transformers' own fp32–bf16 gap of
//     transformers' bf16, in mean and in max |Δ|: two independent bf16
//     computations of equal error differ by about √2 of it.
func TestRealModelParityBF16(t *testing.T) {
	for _, tc := range []struct{ name, model string }{{"smollm2", realmodel.SmolLM2}, {"gemma3", realmodel.Gemma3}} {
		t.Run(tc.name, func(t *testing.T) {
			path := realmodel.Path(t, tc.model)
			refFile := filepath.Join("testdata", "parity", tc.name+".bf16.json.gz")
			if _, err := os.Stat(refFile); err != nil {
				t.Fatalf("%v: python/ref_logits_bf16.py writes it", err)
			}
			ref := readParityRef(t, tc.name)
			var bref bf16Ref
			gzjson.Read(t, refFile, &bref)
			// The reference may hold the first prompts only (its script's
			// --prompts): transformers' bf16 is slow on CPUs without bf16.
			prompts := len(bref.Runs["fp32"])
			for _, run := range []string{"fp32", "autocast", "bf16"} {
				if n := len(bref.Runs[run]); n != prompts || n == 0 || n > len(ref.Prompts) {
					t.Fatalf("%s: %d prompts in run %s, %d in run fp32, %d in the float32 reference", refFile, n, run, prompts, len(ref.Prompts))
				}
			}
			kernel := os.Getenv("RLVR_BF16_KERNEL")
			if !gemm.BF16KernelOK() {
				kernel = "emulate"
			}
			if err := gemm.SetBF16Kernel(kernel); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gemm.SetBF16Kernel(os.Getenv("RLVR_BF16_KERNEL")) })
			l, err := checkpoint.Open(path, "")
			if err != nil {
				t.Fatal(err)
			}
			m32 := l.Model
			m16 := m32.WithPrecision(model.BF16)
			t.Logf("%s; rlvr: %s; transformers: %s", gemm.DetectCPU(), m16.Kernel(), bref.Reference)
			// lp is a run's logprob of the float32 top token at a position.
			lp := func(run string, p, pos int) float64 {
				r := bref.Runs[run][p][pos]
				return r[1] - r[0]
			}
			var tfGap, rlvrGap, dTrain, dDecode = map[string]*gapStats{}, &gapStats{}, map[string]*gapStats{}, map[string]*gapStats{}
			for _, run := range []string{"autocast", "bf16"} {
				tfGap[run], dTrain[run], dDecode[run] = &gapStats{}, &gapStats{}, &gapStats{}
			}
			for i, p := range ref.Prompts[:prompts] {
				seq := append(slices.Clone(p.Prompt), p.Continuation...)
				targets := make([]int32, len(seq))
				for j, pos := range p.Positions {
					targets[j] = int32(pos.Top[0][0])
				}
				lp32, lp16 := make([]float32, len(seq)), make([]float32, len(seq))
				if err := m32.Logprobs(model.Pack([][]int32{seq}), targets, lp32, nil); err != nil {
					t.Fatal(err)
				}
				if err := m16.Logprobs(model.Pack([][]int32{seq}), targets, lp16, nil); err != nil {
					t.Fatal(err)
				}
				dec := decodeLogprobs(t, m16, p.Prompt, p.Continuation, targets)
				for j := range seq {
					rlvrGap.add(float64(lp16[j] - lp32[j]))
					for _, run := range []string{"autocast", "bf16"} {
						tfGap[run].add(lp(run, i, j) - lp("fp32", i, j))
						dTrain[run].add(float64(lp16[j]) - lp(run, i, j))
						if j >= len(p.Prompt)-1 && j < len(seq)-1 {
							dDecode[run].add(dec[j-len(p.Prompt)+1] - lp(run, i, j))
						}
					}
				}
			}
			t.Logf("|Δ logprob| of the float32 top token, %d positions of %d prompts: rlvr bf16 − rlvr fp32: %v", rlvrGap.n, prompts, rlvrGap)
			for _, run := range []string{"autocast", "bf16"} {
				t.Logf("  transformers %-8s − transformers fp32: %v; rlvr bf16 − transformers %s: training forward %v, decoder %v",
					run, tfGap[run], run, dTrain[run], dDecode[run])
			}
			if rlvrGap.mean() > tfGap["autocast"].mean() {
				t.Errorf("rlvr's bf16 departs from its float32 by %v, more than transformers' autocast (%v)", rlvrGap, tfGap["autocast"])
			}
			if rlvrGap.mean() < 0.1*tfGap["autocast"].mean() {
				t.Errorf("rlvr's bf16 departs from its float32 by %v, under a tenth of transformers' autocast (%v): are its products rounded at all?", rlvrGap, tfGap["autocast"])
			}
			for _, run := range []string{"autocast", "bf16"} {
				for what, d := range map[string]*gapStats{"training forward": dTrain[run], "decoder": dDecode[run]} {
					if d.mean() > 1.5*tfGap[run].mean() || d.max > 1.5*tfGap[run].max {
						t.Errorf("%s: rlvr bf16 − transformers %s is %v: beyond 1.5× transformers' own fp32–%s gap (%v)", what, run, d, run, tfGap[run])
					}
				}
			}
		})
	}
}

// decodeLogprobs prefills prompt into a KV cache of m and decodes cont one
// token at a time, returning at each step the logprob of targets' token
// for that position (the position before the step's token).
func decodeLogprobs(t *testing.T, m *model.Model, prompt, cont, targets []int32) []float64 {
	t.Helper()
	V := m.Config.Vocab
	c, err := m.NewCache(1, len(prompt)+len(cont))
	if err != nil {
		t.Fatal(err)
	}
	logits, scratch := make([]float32, V), make([]float32, V)
	out := make([]float64, len(cont))
	next := prompt
	for step := range cont {
		if err := m.Extend(c, []int{0}, model.Pack([][]int32{next}), logits); err != nil {
			t.Fatal(err)
		}
		lse, _ := model.LogSumExp(logits, scratch)
		out[step] = float64(logits[targets[len(prompt)+step-1]]) - lse
		next = cont[step : step+1]
	}
	return out
}
