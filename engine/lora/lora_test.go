package lora

import (
	"math/rand/v2"
	"strings"
	"testing"

	"rlvr/engine/gradcheck"
	"rlvr/engine/model"
)

// tinyModel is a random model of each kind of layout the adapters meet:
// separate and tied output heads, grouped-query attention.
func tinyModel(t *testing.T, tied bool) *model.Model {
	t.Helper()
	cfg := model.Config{Vocab: 13, Dim: 16, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 24, MaxSeq: 16, NormEps: 1e-5, TiedEmbeddings: tied}
	m, err := model.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nllBatch is a batch of random sequences with every position trained on.
func nllBatch(vocab int) (model.Batch, model.Targets) {
	r := rand.New(rand.NewPCG(7, 8))
	var seqs [][]int32
	for _, n := range []int{6, 9} {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(r.IntN(vocab))
		}
		seqs = append(seqs, s)
	}
	b := model.Pack(seqs)
	tg := model.Targets{Targets: make([]int32, len(b.Tokens)), Weights: make([]float32, len(b.Tokens))}
	for i := range tg.Targets {
		tg.Targets[i] = int32(r.IntN(vocab))
		tg.Weights[i] = 1
	}
	return b, tg
}

// TestGradients checks the adapters' gradients, projected from the
// model's full gradient, against finite differences of the loss in A and
// B, with B away from zero so that both products are exercised.
func TestGradients(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m := tinyModel(t, tied)
		a, err := New(m, Config{Rank: 3, Alpha: 6, Attention: true, MLP: true, Unembed: true, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(2, 3))
		for i := range a.Params {
			a.Params[i] = float32(r.NormFloat64() * 0.2)
		}
		a.Merge(m.Params)
		b, tg := nllBatch(m.Config.Vocab)
		loss := func() float64 {
			a.Merge(m.Params)
			met, err := m.ForwardBackward(b, tg, model.Loss{Logp: model.NLL{}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			return met.Loss
		}
		m.ZeroGrad()
		loss()
		a.Project(m.Grads)
		grads := append([]float32(nil), a.Grads...)
		for _, s := range a.Segments() {
			x := a.Params[s.Offset : s.Offset+s.Len]
			g := grads[s.Offset : s.Offset+s.Len]
			if _, err := gradcheck.Check(s.Name, x, g, loss, gradcheck.Options{Coordinates: 4, Step: 5e-3, Atol: 3e-3, Rtol: 3e-2}); err != nil {
				t.Errorf("tied %v: %v", tied, err)
			}
		}
	}
}

// TestTargets checks which matrices each switch adapts, that the adapted
// model starts as the base model, and what is refused.
func TestTargets(t *testing.T) {
	m := tinyModel(t, true)
	before := append([]float32(nil), m.Params...)
	count := func(cfg Config) (attn, mlp, unembed int) {
		t.Helper()
		a, err := New(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range a.Targets {
			switch {
			case strings.Contains(tg.Name, "self_attn"):
				attn++
			case strings.Contains(tg.Name, "mlp"):
				mlp++
			default:
				unembed++
			}
		}
		a.Merge(m.Params)
		for i := range before {
			if m.Params[i] != before[i] {
				t.Fatalf("%+v: parameter %d changed from %v to %v at B = 0", cfg, i, before[i], m.Params[i])
			}
		}
		return
	}
	if a, mm, u := count(Config{Rank: 2, Attention: true, MLP: true, Unembed: true}); a != 8 || mm != 6 || u != 1 {
		t.Errorf("every matrix: %d attention, %d MLP, %d unembedding; want 8, 6, 1", a, mm, u)
	}
	if a, mm, u := count(Config{Rank: 2, MLP: true}); a != 0 || mm != 6 || u != 0 {
		t.Errorf("MLP only: %d, %d, %d", a, mm, u)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Rank: 0, MLP: true}, "rank 0"},
		{Config{Rank: 17, MLP: true}, "rank 17 exceeds"},
		{Config{Rank: 2}, "no matrix chosen"},
		{Config{Rank: 2, MLP: true, Alpha: -1}, "alpha -1"},
	} {
		if _, err := New(m, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
