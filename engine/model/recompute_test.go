package model

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// recomputeStep is what one ForwardBackward gives.
type recomputeStep struct {
	grads, logprobs []float32
	loss            float64
}

// runRecompute runs one ForwardBackward of every loss term but the
// teacher's, with recomputation on or off.
func runRecompute(t *testing.T, m *Model, recompute bool, b Batch, tg Targets) recomputeStep {
	t.Helper()
	m.Recompute = recompute
	m.ZeroGrad()
	lp := make([]float32, len(b.Tokens))
	met, err := m.ForwardBackward(b, tg, everyTerm, nil, lp)
	if err != nil {
		t.Fatal(err)
	}
	return recomputeStep{append([]float32(nil), m.Grads...), lp, met.Loss}
}

func sameBits(t *testing.T, what string, a, b recomputeStep) {
	t.Helper()
	if math.Float64bits(a.loss) != math.Float64bits(b.loss) {
		t.Fatalf("%s: loss %v vs %v", what, a.loss, b.loss)
	}
	for i := range a.grads {
		if math.Float32bits(a.grads[i]) != math.Float32bits(b.grads[i]) {
			t.Fatalf("%s: gradient %d differs: %v vs %v", what, i, a.grads[i], b.grads[i])
		}
	}
	for i := range a.logprobs {
		if math.Float32bits(a.logprobs[i]) != math.Float32bits(b.logprobs[i]) {
			t.Fatalf("%s: logprob %d differs: %v vs %v", what, i, a.logprobs[i], b.logprobs[i])
		}
	}
}

// TestRecomputeIsBitIdentical checks that recomputing each block's
// activations in the backward gives the loss, logprobs and every gradient
// bit for bit, on every variant (GQA, q/k/v biases, tied head, q/k norms),
// on one model switched between the two modes and across a batch that
// grows the activations.
func TestRecomputeIsBitIdentical(t *testing.T) {
	for name, cfg := range variants {
		t.Run(name, func(t *testing.T) {
			cfg.Layers = 3 // blocks before the last are the recomputed ones
			r := rand.New(rand.NewPCG(13, 14))
			small := Pack(randomSeqs(r, cfg.Vocab, 5, 3, 7))
			large := Pack(randomSeqs(r, cfg.Vocab, 9, 16, 2, 11))
			tgSmall := fullTargets(r, cfg.Vocab, len(small.Tokens))
			tgLarge := fullTargets(r, cfg.Vocab, len(large.Tokens))
			plain, _ := New(cfg, 21)
			perturb(plain, 22)
			m, _ := New(cfg, 21)
			perturb(m, 22)
			want := runRecompute(t, plain, false, small, tgSmall)
			sameBits(t, "recompute", want, runRecompute(t, m, true, small, tgSmall))
			sameBits(t, "recompute, grown batch", runRecompute(t, plain, false, large, tgLarge), runRecompute(t, m, true, large, tgLarge))
			sameBits(t, "back to saving every block", want, runRecompute(t, m, false, small, tgSmall))
			sameBits(t, "recompute again", want, runRecompute(t, m, true, small, tgSmall))
		})
	}
}

// TestRecomputeKeepsOneBlock checks what recomputation saves: the forward
// sizes one block's activations, not one per layer, switching modes
// resizes them, and a batch seen before allocates none.
func TestRecomputeKeepsOneBlock(t *testing.T) {
	cfg := variants["qwen2-gqa"]
	cfg.Layers = 4
	r := rand.New(rand.NewPCG(15, 16))
	b := Pack(randomSeqs(r, cfg.Vocab, 12, 16))
	tg := fullTargets(r, cfg.Vocab, len(b.Tokens))
	m, _ := New(cfg, 23)
	step := func() {
		if _, err := m.ForwardBackward(b, tg, Loss{Logp: NLL{}}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if len(m.act.layers) != cfg.Layers {
		t.Fatalf("without recomputation the forward saved %d blocks, want %d", len(m.act.layers), cfg.Layers)
	}
	full := m.ActivationBytes()
	m.Recompute = true
	step()
	if len(m.act.layers) != 1 {
		t.Fatalf("with recomputation the forward saved %d blocks, want 1", len(m.act.layers))
	}
	one := m.ActivationBytes()
	block := sliceBytes(reflect.ValueOf(m.act.layers[0]))
	if want := full - int64(cfg.Layers-1)*block; one > want || block == 0 {
		t.Fatalf("activations hold %d bytes with recomputation, %d without and a block %d: want at most %d", one, full, block, want)
	}
	if allocs := testing.AllocsPerRun(5, func() { m.ensure(b) }); allocs != 0 {
		t.Fatalf("sizing the activations for a batch seen before allocates %v times", allocs)
	}
	m.Recompute = false
	step()
	if len(m.act.layers) != cfg.Layers || m.ActivationBytes() < full {
		t.Fatalf("back without recomputation: %d blocks, %d bytes; want %d, %d", len(m.act.layers), m.ActivationBytes(), cfg.Layers, full)
	}
}
