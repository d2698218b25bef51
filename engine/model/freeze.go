package model

import (
	"errors"
	"fmt"
)

// ErrFrozen is what using a frozen model for anything that needs the
// float32 matrices it released returns (wrapped): a forward and backward,
// logprobs from the training forward, packing the weights again, saving.
var ErrFrozen = errors.New("model: frozen for sampling: its float32 projection and output-head matrices were released once packed for decoding, " +
	"so it cannot be trained, scored by the training forward, saved or packed again")

// Freeze readies m for a process that only samples from it, with weights
// that never change (a served or evaluated checkpoint): it packs every
// block's projections and the output head for decoding, in the model's
// precision (EffectivePrecision), as Cache.Pack does, keeps that packed
// copy for every cache NewCache makes, and releases the float32 matrices
// it replaces. Prefill and decoding (Extend) then run from the packed copy
// alone, with the same numbers as a cache packed from the float32 weights.
//
// What stays float32 is what Extend reads outside the products, moved to
// a slab of its own: the embedding (its rows are looked up; with tied
// embeddings it is also what the output head was packed from), the norms'
// weights, and q/k/v biases. Params, Grads, the bf16 copy of the weights
// and the training activations are dropped. In FP32 the packed copy is the
// float32 weights in another layout, so a frozen model holds about one
// copy of them instead of two; in BF16 it holds their bf16 panels and the
// float32 embedding.
//
// On Linux the pages of each matrix are given back to the system
// (madvise) as soon as it is packed, and those of each weight that stays
// as soon as it is moved, so freezing holds little more than the larger
// of the model before it and the model after it; elsewhere the old slab
// goes, whole, once the model is packed. A model sharing m's weights
// (WithPrecision, made before) reads those pages as zeros afterwards:
// freeze only a model that nothing else reads. Params is nil after.
//
// A frozen model samples only: ForwardBackward, Logprobs and Cache.Pack
// return an error wrapping ErrFrozen, Gradients panics with it, Tensor
// finds nothing, and NewCache refuses a precision other than the one the
// model was frozen in. Freezing a frozen model does nothing.
func (m *Model) Freeze() {
	if m.frozen != nil {
		return
	}
	cf := m.Config
	p := &packedWeights{layers: make([]packedLayer, cf.Layers), prec: m.EffectivePrecision(), frozen: true}
	pack := packer(p.prec)
	for l := range m.w.layers {
		w := &m.w.layers[l]
		cf.packLayer(&p.layers[l], *w, pack)
		for _, v := range []*[]float32{&w.qkv, &w.o, &w.gateUp, &w.down} {
			discard(*v)
			*v = nil
		}
	}
	// The weights that stay float32 move to a slab of their own, each
	// one's old pages given back once copied.
	kept := m.w.retained()
	n := 0
	for _, v := range kept {
		n += len(*v)
	}
	slab := make([]float32, n)
	n = 0
	for _, v := range kept {
		if *v == nil {
			continue
		}
		old := *v
		*v = slab[n : n+len(old) : n+len(old)]
		copy(*v, old)
		discard(old)
		n += len(old)
	}
	// The head last: tied, it is packed from the embedding just moved.
	if cf.TiedEmbeddings {
		pack(&p.head, m.w.embed, cf.Vocab, cf.Dim)
	} else {
		pack(&p.head, m.w.head, cf.Vocab, cf.Dim)
		discard(m.w.head)
	}
	m.w.head = nil
	m.Params, m.Grads, m.g = nil, nil, weights{}
	m.bw, m.bf, m.act = nil, nil, activations{}
	m.kept, m.frozen = slab, p
}

// Frozen reports whether m was frozen for sampling (Freeze).
func (m *Model) Frozen() bool { return m.frozen != nil }

// learnable returns an error wrapping ErrFrozen, naming what, when m is
// frozen.
func (m *Model) learnable(what string) error {
	if m.frozen != nil {
		return fmt.Errorf("%s: %w", what, ErrFrozen)
	}
	return nil
}

// WeightBytes is the memory the model's float32 weights hold: the
// parameter slab, or in a frozen model the tensors it kept (its packed
// copy is its caches' PackedBytes).
func (m *Model) WeightBytes() int64 {
	if m.frozen != nil {
		return int64(len(m.kept)) * 4
	}
	return int64(len(m.Params)) * 4
}

// retained lists the views a frozen model keeps in float32: all but the
// packed matrices (nil where the architecture has none).
func (w *weights) retained() []*[]float32 {
	r := []*[]float32{&w.embed, &w.norm}
	for l := range w.layers {
		ly := &w.layers[l]
		r = append(r, &ly.attnNorm, &ly.qkvBias, &ly.qNorm, &ly.kNorm, &ly.postAttnNorm, &ly.mlpNorm, &ly.postMLPNorm)
	}
	return r
}
