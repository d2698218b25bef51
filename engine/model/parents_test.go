package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// sharedBatch is two prompts, each packed once as the parent of its
// answers, and the same data unshared, every answer packed after its own
// copy of its prompt: the prompts' positions weigh 0, as in a policy
// gradient. The second family's answers have zero advantages (an inert
// group) and come first in the packing, so the live family moves ahead.
func sharedBatch(r *rand.Rand, vocab int) (shared Batch, st Targets, unshared Batch, ut Targets, copies [][2]int) {
	prompts := randomSeqs(r, vocab, 4, 3)
	answers := [][][]int32{randomSeqs(r, vocab, 2, 3), randomSeqs(r, vocab, 3, 1, 2)}
	order := []int{1, 0}
	shared.Offsets, unshared.Offsets = []int{0}, []int{0}
	st = Targets{Advantages: []float32{}, SamplerLogprobs: []float32{}}
	ut = Targets{Advantages: []float32{}, SamplerLogprobs: []float32{}}
	add := func(b *Batch, t *Targets, toks []int32, w, adv float32) {
		b.Tokens = append(b.Tokens, toks...)
		b.Offsets = append(b.Offsets, len(b.Tokens))
		for range toks {
			t.Targets = append(t.Targets, int32(r.IntN(vocab)))
			t.Weights = append(t.Weights, w)
			t.Advantages = append(t.Advantages, adv)
			t.SamplerLogprobs = append(t.SamplerLogprobs, -2.4+float32(r.NormFloat64())*0.05)
		}
	}
	for _, f := range order {
		root := len(shared.Offsets) - 1
		shared.Parents = append(shared.Parents, -1)
		add(&shared, &st, prompts[f], 0, 0)
		for _, a := range answers[f] {
			adv := float32(r.NormFloat64())
			if f == 1 {
				adv = 0
			}
			shared.Parents = append(shared.Parents, root)
			add(&shared, &st, a, 1, adv)
		}
	}
	// The unshared copy repeats each prompt's rows (and its random
	// targets) before each of its answers.
	for f, s := 0, 0; s < len(shared.Parents); s++ {
		if shared.Parents[s] < 0 {
			f = s
			continue
		}
		for _, seq := range []int{f, s} {
			lo, hi := shared.Offsets[seq], shared.Offsets[seq+1]
			copies = append(copies, [2]int{lo, hi})
			unshared.Tokens = append(unshared.Tokens, shared.Tokens[lo:hi]...)
			ut.Targets = append(ut.Targets, st.Targets[lo:hi]...)
			ut.Weights = append(ut.Weights, st.Weights[lo:hi]...)
			ut.Advantages = append(ut.Advantages, st.Advantages[lo:hi]...)
			ut.SamplerLogprobs = append(ut.SamplerLogprobs, st.SamplerLogprobs[lo:hi]...)
		}
		unshared.Offsets = append(unshared.Offsets, len(unshared.Tokens))
	}
	return shared, st, unshared, ut, copies
}

// TestParentsAreTheirCopies checks that a batch whose answers continue a
// prompt packed once gives the gradients, logprobs and loss of the same
// answers each packed after a copy of its prompt.
func TestParentsAreTheirCopies(t *testing.T) {
	loss := Loss{Logp: testLoss{PG: 1}}
	for name, cfg := range variants {
		for _, recompute := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recompute=%v", name, recompute), func(t *testing.T) {
				r := rand.New(rand.NewPCG(8, 8))
				sb, st, ub, ut, copies := sharedBatch(r, cfg.Vocab)
				run := func(b Batch, tg Targets) ([]float32, []float32, Metrics) {
					return trainOnce(t, cfg, recompute, b, tg, loss)
				}
				sg, slp, smet := run(sb, st)
				ug, ulp, umet := run(ub, ut)
				near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5+1e-4*math.Abs(b) }
				nonzero := 0
				for i := range sg {
					if !near(float64(sg[i]), float64(ug[i])) {
						t.Fatalf("gradient %d: %v shared, %v unshared", i, sg[i], ug[i])
					}
					if sg[i] != 0 {
						nonzero++
					}
				}
				if nonzero < len(sg)/2 {
					t.Fatalf("%d of %d gradients are non-zero", nonzero, len(sg))
				}
				n := 0
				for _, c := range copies {
					for i := c[0]; i < c[1]; i++ {
						if !near(float64(slp[i]), float64(ulp[n])) {
							t.Fatalf("logprob at shared position %d: %v, %v unshared", i, slp[i], ulp[n])
						}
						n++
					}
				}
				if !near(smet.Loss, umet.Loss) || smet.Tokens != umet.Tokens {
					t.Fatalf("metrics %+v shared, %+v unshared", smet, umet)
				}
			})
		}
	}
}

func TestBadParentsAreAnError(t *testing.T) {
	m, _ := New(variants["llama"], 1)
	for _, c := range []struct {
		parents []int
		want    string
	}{
		{[]int{-1, 0}, "2 parents for 3 sequences"},
		{[]int{-1, 2, -1}, "sequence 1 has parent 2"},   // after it
		{[]int{-1, 0, 1}, "sequence 2 has parent 1"},    // a continuation's continuation
		{[]int{0, -1, -1}, "sequence 0 has parent 0"},   // itself
		{[]int{-1, -1, 0}, "sequence 2 has parent 0"},   // another family between
		{[]int{-1, -2, -1}, "sequence 1 has parent -2"}, // not an index
	} {
		b := Batch{Tokens: []int32{1, 2, 3, 4, 5, 6}, Offsets: []int{0, 2, 4, 6}, Parents: c.parents}
		err := m.Validate(b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parents %v: error %v, want %q", c.parents, err, c.want)
		}
	}
	// A continuation counts its parent's tokens against max_seq.
	cfg := variants["llama"]
	long := Batch{Tokens: make([]int32, cfg.MaxSeq+1), Offsets: []int{0, cfg.MaxSeq - 1, cfg.MaxSeq + 1}, Parents: []int{-1, 0}}
	if err := m.Validate(long); err == nil || !strings.Contains(err.Error(), "with its parent's") {
		t.Errorf("a continuation past max_seq: error %v", err)
	}
	if _, err := m.NewCache(1, 8); err == nil {
		c, _ := m.NewCache(2, 8)
		err := m.Extend(c, []int{0, 1}, Batch{Tokens: []int32{1, 2}, Offsets: []int{0, 1, 2}, Parents: []int{-1, 0}}, make([]float32, 2*cfg.Vocab))
		if err == nil || !strings.Contains(err.Error(), "parents") {
			t.Errorf("extend with parents: error %v", err)
		}
	}
}
