package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"rlvr/engine/gradcheck"
)

// Tensor is a named view into the parameter slab.
type Tensor struct {
	Name   string // Hugging Face name, e.g. "model.layers.0.mlp.up_proj.weight"
	Shape  []int
	Offset int  // index of the first element in the slab
	Decay  bool // whether AdamW applies weight decay (not to norms and biases)
}

// Len is the number of elements.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// layer holds one decoder block's views into a slab (parameters or
// gradients). q, k and v are adjacent in the slab, so qkv is one matrix of
// (H+2KV)·hd rows and one GEMM projects all three; gate and up likewise.
type layer struct {
	attnNorm     []float32 // (D)
	qkv          []float32 // ((H+2KV)·hd, D): q_proj, k_proj, v_proj
	qkvBias      []float32 // ((H+2KV)·hd) or nil
	qNorm        []float32 // (hd) or nil
	kNorm        []float32 // (hd) or nil
	o            []float32 // (D, H·hd)
	postAttnNorm []float32 // (D) Gemma 3's norm of the attention output, or nil
	mlpNorm      []float32 // (D) the MLP's input norm
	gateUp       []float32 // (2F, D): gate_proj, up_proj
	down         []float32 // (D, F)
	postMLPNorm  []float32 // (D) Gemma 3's norm of the MLP output, or nil
}

// weights is the whole model's views into one slab.
type weights struct {
	embed  []float32 // (V, D)
	layers []layer
	norm   []float32 // (D)
	head   []float32 // (V, D); the embedding when tied
}

// layout lists the tensors in slab order and returns the slab's length.
func layout(c Config) ([]Tensor, int) {
	var ts []Tensor
	off := 0
	add := func(name string, decay bool, shape ...int) {
		t := Tensor{Name: name, Shape: shape, Offset: off, Decay: decay}
		ts = append(ts, t)
		off += t.Len()
	}
	D, H, KV, hd, F := c.Dim, c.Heads, c.KVHeads, c.HeadDim, c.Hidden
	add("model.embed_tokens.weight", true, c.Vocab, D)
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", false, D)
		add(p+"self_attn.q_proj.weight", true, H*hd, D)
		add(p+"self_attn.k_proj.weight", true, KV*hd, D)
		add(p+"self_attn.v_proj.weight", true, KV*hd, D)
		if c.AttentionBias {
			add(p+"self_attn.q_proj.bias", false, H*hd)
			add(p+"self_attn.k_proj.bias", false, KV*hd)
			add(p+"self_attn.v_proj.bias", false, KV*hd)
		}
		if c.QKNorm {
			add(p+"self_attn.q_norm.weight", false, hd)
			add(p+"self_attn.k_norm.weight", false, hd)
		}
		add(p+"self_attn.o_proj.weight", true, D, H*hd)
		// Llama's post_attention_layernorm is the MLP's input norm;
		// Gemma's normalizes the attention output, and
		// pre_feedforward_layernorm is the MLP's input norm.
		add(p+"post_attention_layernorm.weight", false, D)
		if c.Gemma3 {
			add(p+"pre_feedforward_layernorm.weight", false, D)
		}
		add(p+"mlp.gate_proj.weight", true, F, D)
		add(p+"mlp.up_proj.weight", true, F, D)
		add(p+"mlp.down_proj.weight", true, D, F)
		if c.Gemma3 {
			add(p+"post_feedforward_layernorm.weight", false, D)
		}
	}
	add("model.norm.weight", false, D)
	if !c.TiedEmbeddings {
		add("lm_head.weight", true, c.Vocab, D)
	}
	return ts, off
}

// views cuts a slab laid out by layout into named views.
func views(c Config, ts []Tensor, slab []float32) weights {
	index := make(map[string]Tensor, len(ts))
	for _, t := range ts {
		index[t.Name] = t
	}
	byName := func(name string) []float32 {
		t, ok := index[name]
		if !ok {
			return nil
		}
		return slab[t.Offset : t.Offset+t.Len()]
	}
	// span returns the slab from the first named tensor through the last,
	// which layout placed adjacent.
	span := func(first, last string) []float32 {
		a, b := index[first], index[last]
		return slab[a.Offset : b.Offset+b.Len()]
	}
	w := weights{embed: byName("model.embed_tokens.weight"), norm: byName("model.norm.weight")}
	w.head = byName("lm_head.weight")
	if c.TiedEmbeddings {
		w.head = w.embed
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		ly := layer{
			attnNorm: byName(p + "input_layernorm.weight"),
			qkv:      span(p+"self_attn.q_proj.weight", p+"self_attn.v_proj.weight"),
			qNorm:    byName(p + "self_attn.q_norm.weight"),
			kNorm:    byName(p + "self_attn.k_norm.weight"),
			o:        byName(p + "self_attn.o_proj.weight"),
			mlpNorm:  byName(p + "post_attention_layernorm.weight"),
			gateUp:   span(p+"mlp.gate_proj.weight", p+"mlp.up_proj.weight"),
			down:     byName(p + "mlp.down_proj.weight"),
		}
		if c.Gemma3 {
			ly.postAttnNorm, ly.mlpNorm = ly.mlpNorm, byName(p+"pre_feedforward_layernorm.weight")
			ly.postMLPNorm = byName(p + "post_feedforward_layernorm.weight")
		}
		if c.AttentionBias {
			ly.qkvBias = span(p+"self_attn.q_proj.bias", p+"self_attn.v_proj.bias")
		}
		w.layers = append(w.layers, ly)
	}
	return w
}

// initParams fills the slab as Llama-style models are initialized:
// N(0, 0.02) matrices, residual output projections scaled down by
// 1/√(2·layers) (GPT-2), norms at a scale of 1 (weights 1, or 0 in
// Gemma's 1 + w), biases at 0.
func initParams(c Config, ts []Tensor, slab []float32, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x726c7672))
	resid := 0.02 / math.Sqrt(2*float64(c.Layers))
	for _, t := range ts {
		v := slab[t.Offset : t.Offset+t.Len()]
		switch {
		case len(t.Shape) == 1 && !isBias(t.Name):
			for i := range v {
				v[i] = 1 - c.normOffset()
			}
		case isBias(t.Name):
			clear(v)
		default:
			std := 0.02
			if hasSuffix(t.Name, "o_proj.weight") || hasSuffix(t.Name, "down_proj.weight") {
				std = resid
			}
			for i := range v {
				v[i] = float32(r.NormFloat64() * std)
			}
		}
	}
}

func isBias(name string) bool { return hasSuffix(name, ".bias") }

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

// CheckGradients compares grads, the gradient of loss at m's parameters,
// with central finite differences of loss at the coordinates of every
// tensor that o picks (gradcheck.Check), and returns the errors of the
// tensors out of tolerance, joined. loss must run the model on m.Params.
func (m *Model) CheckGradients(grads []float32, loss func() float64, o gradcheck.Options) error {
	var errs []error
	for _, ts := range m.Tensors {
		x := m.Params[ts.Offset : ts.Offset+ts.Len()]
		if _, err := gradcheck.Check(ts.Name, x, grads[ts.Offset:ts.Offset+ts.Len()], loss, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
