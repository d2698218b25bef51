package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"rlvr/engine/gemm"
)

// TestExtendMatchesForward feeds sequences into a KV cache in pieces of
// different sizes, for every architecture variant, and checks the
// next-token logprobs against the training forward over the whole
// sequence.
func TestExtendMatchesForward(t *testing.T) {
	for name, cfg := range variants {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(4, 4))
			m, _ := New(cfg, 9)
			perturb(m, 10)
			seqs := randomSeqs(r, cfg.Vocab, 9, 12)
			pieces := [][]int{{3, 1, 1, 4}, {5, 2, 1, 1, 3}} // per sequence, summing to its length
			c, err := m.NewCache(2, cfg.MaxSeq)
			if err != nil {
				t.Fatal(err)
			}
			// Reference: logits at every position from the training forward.
			V := cfg.Vocab
			full := Pack(seqs)
			m.forward(full)
			ref := make([]float32, len(full.Tokens)*V)
			for n := range full.Tokens {
				copy(ref[n*V:], m.logitsOf(n))
			}
			logits := make([]float32, 2*V)
			at := []int{0, 0}
			for step := 0; step < 5; step++ {
				var part [][]int32
				var slots []int
				for s := range seqs {
					if step < len(pieces[s]) {
						part = append(part, seqs[s][at[s]:at[s]+pieces[s][step]])
						slots = append(slots, s)
					}
				}
				if err := m.Extend(c, slots, Pack(part), logits); err != nil {
					t.Fatal(err)
				}
				for i, s := range slots {
					at[s] += len(part[i])
					n := full.Offsets[s] + at[s] - 1
					for v := 0; v < V; v++ {
						if d := math.Abs(float64(logits[i*V+v] - ref[n*V+v])); d > 1e-4 {
							t.Fatalf("sequence %d after %d tokens: logit %d differs by %.3g", s, at[s], v, d)
						}
					}
				}
			}
		})
	}
}

// logitsOf returns the output logits at packed position n of the last
// forward pass (V floats, freshly allocated).
func (m *Model) logitsOf(n int) []float32 {
	D, V := m.Config.Dim, m.Config.Vocab
	out := make([]float32, V)
	gemm.Sgemm(false, true, 1, V, D, 1, m.act.normed[n*D:], D, m.w.head, D, 0, out, V)
	return out
}

// TestDecodeMatchesForwardPastTheWindow decodes Gemma 3 models one token
// at a time far past their sliding window, through both decode-attention
// paths (two query heads per key/value head, and one), and checks every
// step's logits against the training forward over the whole sequence.
func TestDecodeMatchesForwardPastTheWindow(t *testing.T) {
	for _, kv := range []int{1, 2} {
		cfg := variants["gemma3"]
		cfg.KVHeads, cfg.HeadDim = kv, 16
		r := rand.New(rand.NewPCG(7, uint64(kv)))
		m, err := New(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		perturb(m, 4)
		seq := randomSeqs(r, cfg.Vocab, cfg.MaxSeq)[0]
		full := Pack([][]int32{seq})
		m.forward(full)
		V := cfg.Vocab
		c, err := m.NewCache(1, cfg.MaxSeq)
		if err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, V)
		if err := m.Extend(c, []int{0}, Pack([][]int32{seq[:2]}), logits); err != nil {
			t.Fatal(err)
		}
		for n := 2; n <= len(seq); n++ {
			if n > 2 {
				if err := m.Extend(c, []int{0}, Pack([][]int32{seq[n-1 : n]}), logits); err != nil {
					t.Fatal(err)
				}
			}
			ref := m.logitsOf(n - 1)
			for v := range ref {
				if d := math.Abs(float64(logits[v] - ref[v])); d > 1e-4 {
					t.Fatalf("kv heads %d, after %d tokens: logit %d differs by %.3g", kv, n, v, d)
				}
			}
		}
	}
}
