package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// pg is a policy gradient alone: a position with a zero advantage is inert.
var pg = Loss{Logp: testLoss{PG: 1}}

// inertBatch is five sequences under a policy gradient where
// sequences 0, 2 and 4 have zero advantages everywhere (a GRPO group of
// equal rewards), so only 1 and 3 carry gradient.
func inertBatch(r *rand.Rand, vocab int) ([][]int32, Targets) {
	seqs := randomSeqs(r, vocab, 4, 6, 3, 7, 5)
	b := Pack(seqs)
	tg := fullTargets(r, vocab, len(b.Tokens))
	tg.RefLogprobs = nil
	for _, s := range []int{0, 2, 4} {
		for n := b.Offsets[s]; n < b.Offsets[s+1]; n++ {
			tg.Advantages[n] = 0
			tg.Weights[n] = 1
		}
	}
	return seqs, tg
}

// reorder packs the sequences in the given order with their targets.
func reorder(seqs [][]int32, tg Targets, order []int) (Batch, Targets) {
	return permute(Pack(seqs), tg, order)
}

func TestInertSequencesChangeNoResult(t *testing.T) {
	loss := pg
	for name, cfg := range variants {
		for _, recompute := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recompute=%v", name, recompute), func(t *testing.T) {
				r := rand.New(rand.NewPCG(4, 4))
				seqs, tg := inertBatch(r, cfg.Vocab)
				b := Pack(seqs)
				if order, live := liveFirst(b, tg, &loss); live != 2 || len(order) != 5 || order[0] != 1 || order[1] != 3 {
					t.Fatalf("live-first order %v with %d live, want [1 3 0 2 4] with 2", order, live)
				}
				run := func(b Batch, tg Targets) ([]float32, []float32, Metrics) {
					return trainOnce(t, cfg, recompute, b, tg, loss)
				}
				g, lp, met := run(b, tg)
				// The same data with the live sequences first, as a caller
				// could pack it: nothing is moved, the backward covers them.
				sb, stg := reorder(seqs, tg, []int{1, 3, 0, 2, 4})
				sg, slp, smet := run(sb, stg)
				// Only the live sequences: the gradient must be theirs alone.
				lb, ltg := reorder(seqs, tg, []int{1, 3})
				lg, _, _ := run(lb, ltg)
				near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5+1e-4*math.Abs(b) }
				for i := range g {
					if !near(float64(g[i]), float64(sg[i])) || !near(float64(g[i]), float64(lg[i])) {
						t.Fatalf("gradient %d: %v interleaved, %v live first, %v live only", i, g[i], sg[i], lg[i])
					}
				}
				nonzero := 0
				for _, v := range g {
					if v != 0 {
						nonzero++
					}
				}
				if nonzero < len(g)/2 {
					t.Fatalf("%d of %d gradients are non-zero", nonzero, len(g))
				}
				// Logprobs come back in the caller's order, and the metrics
				// cover the inert sequences too.
				off := sb.Offsets
				for i, s := range []int{1, 3, 0, 2, 4} {
					for j := range off[i+1] - off[i] {
						if !near(float64(lp[b.Offsets[s]+j]), float64(slp[off[i]+j])) {
							t.Fatalf("sequence %d position %d: logprob %v, %v with live first", s, j, lp[b.Offsets[s]+j], slp[off[i]+j])
						}
					}
				}
				if met.Tokens != smet.Tokens || met.ClipLow != smet.ClipLow || met.ClipHigh != smet.ClipHigh ||
					!near(met.Entropy, smet.Entropy) || !near(met.NLL, smet.NLL) || !near(met.Loss, smet.Loss) {
					t.Fatalf("metrics %+v, %+v with live first", met, smet)
				}
				want := 0
				for _, w := range tg.Weights {
					if w != 0 {
						want++
					}
				}
				if met.Tokens != want {
					t.Fatalf("metrics count %d tokens, want all %d weighted ones", met.Tokens, want)
				}
			})
		}
	}
}

func TestInertGradientsAgainstFiniteDifferences(t *testing.T) {
	cfg := variants["qwen2-gqa"]
	loss := pg
	r := rand.New(rand.NewPCG(6, 6))
	seqs, tg := inertBatch(r, cfg.Vocab)
	b := Pack(seqs)
	// Advantages of both signs on every live position.
	for _, s := range []int{1, 3} {
		for n := b.Offsets[s]; n < b.Offsets[s+1]; n++ {
			tg.Weights[n], tg.Advantages[n] = 1, []float32{0.7, -1.3}[n%2]
		}
	}
	m, _ := New(cfg, 7)
	perturb(m, 3)
	checkLossGradients(t, m, b, tg, loss)
}

func TestInertSequenceErrorNamesCallersSequence(t *testing.T) {
	cfg := variants["llama"]
	r := rand.New(rand.NewPCG(5, 5))
	seqs, tg := inertBatch(r, cfg.Vocab)
	// A token only sequence 2 (inert, run after the live ones) holds, at
	// its start: attention carries a NaN to earlier positions too.
	seqs[2][0] = int32(cfg.Vocab - 1)
	for s, q := range seqs {
		for i, v := range q {
			if v == int32(cfg.Vocab-1) && !(s == 2 && i == 0) {
				q[i] = 0
			}
		}
	}
	m, _ := New(cfg, 1)
	emb, _, _ := m.Tensor("model.embed_tokens.weight")
	emb[(cfg.Vocab-1)*cfg.Dim] = float32(math.NaN())
	_, err := m.ForwardBackward(Pack(seqs), tg, pg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "sequence 2 position 0") {
		t.Fatalf("error %v, want one naming sequence 2 position 0", err)
	}
}
