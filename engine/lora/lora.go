// Package lora trains low-rank adapters (LoRA, Hu et al. 2021) over a
// model's matrices, as Tinker's training clients do: each adapted matrix is
// W = W0 + s·B·A, with W0 frozen, A (r × in) and B (out × r) trained, and
// s = alpha/r.
//
// The adapters ride on the engine's full training pass instead of adding
// products to it. The engine computes G = ∂L/∂W of every matrix as it does
// for full training; the adapters' gradients follow from it by the chain
// rule, ∂L/∂B = s·G·Aᵀ and ∂L/∂A = s·Bᵀ·G; and after every optimizer step
// the merged W is written back into the model. Forward passes, sampling and
// saved checkpoints then see an ordinary model. The price is the frozen
// matrices' gradients, which full training computes too, and a copy of W0.
//
// On a model whose output head is tied to its embedding, the unembedding
// adapter sits on the one shared matrix, so it changes the embedding too.
package lora

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/engine/optim"
)

// Config says which matrices get adapters, of which rank, and how they
// start.
type Config struct {
	Rank int
	// Alpha scales the adapters' product by Alpha/Rank; 0 means 32, as
	// Tinker's service and SkyRL tx use.
	Alpha float32
	// Attention, MLP and Unembed choose the matrices: q, k, v and o
	// projections; gate, up and down projections; the output head.
	Attention, MLP, Unembed bool
	// Seed draws A's initial values; B starts at zero, so the adapted
	// model starts as the base model.
	Seed uint64
}

// DefaultAlpha is Config.Alpha's default.
const DefaultAlpha = 32

// Target is one adapted matrix.
type Target struct {
	Name       string // the model's tensor name
	Rows, Cols int    // out × in
	Unembed    bool   // the output head (lm_head, or the embedding tied to it)
	offset     int    // the matrix's first element in the model's slab
	a, b       int    // A's and B's first elements in Params
	base       int    // W0's first element in base
}

// Adapters are the adapters of one model: their parameters and gradients
// as flat slabs (A then B of each target, in the model's tensor order),
// which an optimizer steps like a model's.
type Adapters struct {
	Config  Config
	Scale   float32 // Alpha/Rank
	Targets []Target
	Params  []float32
	Grads   []float32
	base    []float32 // W0 of every target
}

// New makes adapters for m's matrices that cfg chooses, over m's current
// weights as W0.
func New(m *model.Model, cfg Config) (*Adapters, error) {
	if cfg.Rank <= 0 {
		return nil, fmt.Errorf("lora: rank %d: want at least 1", cfg.Rank)
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = DefaultAlpha
	}
	if !(cfg.Alpha > 0) || math.IsInf(float64(cfg.Alpha), 0) {
		return nil, fmt.Errorf("lora: alpha %v: want a positive number", cfg.Alpha)
	}
	a := &Adapters{Config: cfg, Scale: cfg.Alpha / float32(cfg.Rank)}
	nParams, nBase := 0, 0
	for _, t := range m.Tensors {
		if len(t.Shape) != 2 || !cfg.adapts(t.Name, m.Config.TiedEmbeddings) {
			continue
		}
		rows, cols := t.Shape[0], t.Shape[1]
		if cfg.Rank > min(rows, cols) {
			return nil, fmt.Errorf("lora: rank %d exceeds %s's %d × %d", cfg.Rank, t.Name, rows, cols)
		}
		tg := Target{Name: t.Name, Rows: rows, Cols: cols, Unembed: t.Name == "lm_head.weight" || t.Name == "model.embed_tokens.weight", offset: t.Offset, a: nParams, base: nBase}
		nParams += cfg.Rank * cols
		tg.b = nParams
		nParams += rows * cfg.Rank
		nBase += rows * cols
		a.Targets = append(a.Targets, tg)
	}
	if len(a.Targets) == 0 {
		return nil, fmt.Errorf("lora: no matrix chosen (attention %v, MLP %v, unembedding %v)", cfg.Attention, cfg.MLP, cfg.Unembed)
	}
	a.Params = make([]float32, nParams)
	a.Grads = make([]float32, nParams)
	a.base = make([]float32, nBase)
	// A as PEFT starts it (Kaiming-uniform with a = √5: U(±1/√in)), B zero.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x10ba))
	for _, t := range a.Targets {
		bound := 1 / math.Sqrt(float64(t.Cols))
		for i := range cfg.Rank * t.Cols {
			a.Params[t.a+i] = float32((2*rng.Float64() - 1) * bound)
		}
		copy(a.base[t.base:t.base+t.Rows*t.Cols], m.Params[t.offset:t.offset+t.Rows*t.Cols])
	}
	return a, nil
}

// adapts reports whether cfg adapts the matrix named name.
func (cfg Config) adapts(name string, tied bool) bool {
	switch {
	case strings.Contains(name, ".self_attn.") && strings.HasSuffix(name, "_proj.weight"):
		return cfg.Attention
	case strings.Contains(name, ".mlp.") && strings.HasSuffix(name, "_proj.weight"):
		return cfg.MLP
	case name == "lm_head.weight", tied && name == "model.embed_tokens.weight":
		return cfg.Unembed
	}
	return false
}

// NumParams is the number of trained parameters.
func (a *Adapters) NumParams() int { return len(a.Params) }

// Segments are the adapters' tensors for optim.NewAdamW, with weight decay
// on each.
func (a *Adapters) Segments() []optim.Segment {
	segs := make([]optim.Segment, 0, 2*len(a.Targets))
	for _, t := range a.Targets {
		segs = append(segs,
			optim.Segment{Name: t.Name + ".lora_A", Offset: t.a, Len: a.Config.Rank * t.Cols, Decay: true},
			optim.Segment{Name: t.Name + ".lora_B", Offset: t.b, Len: t.Rows * a.Config.Rank, Decay: true})
	}
	return segs
}

// A and B are target t's adapter matrices, views into Params.
func (a *Adapters) A(t Target) []float32 { return a.Params[t.a : t.a+a.Config.Rank*t.Cols] }
func (a *Adapters) B(t Target) []float32 { return a.Params[t.b : t.b+t.Rows*a.Config.Rank] }

// Project sets Grads from the model's full gradient slab: for each target,
// ∂L/∂A = s·Bᵀ·G and ∂L/∂B = s·G·Aᵀ, where G is the target's ∂L/∂W.
func (a *Adapters) Project(grads []float32) {
	r := a.Config.Rank
	for _, t := range a.Targets {
		g := grads[t.offset : t.offset+t.Rows*t.Cols]
		// dA (r × in) = s · Bᵀ (r × out) · G (out × in)
		gemm.Sgemm(true, false, r, t.Cols, t.Rows, a.Scale, a.B(t), r, g, t.Cols, 0, a.Grads[t.a:t.a+r*t.Cols], t.Cols)
		// dB (out × r) = s · G (out × in) · Aᵀ (in × r)
		gemm.Sgemm(false, true, t.Rows, r, t.Cols, a.Scale, g, t.Cols, a.A(t), t.Cols, 0, a.Grads[t.b:t.b+t.Rows*r], r)
	}
}

// Merge writes W = W0 + s·B·A of every target into the model's parameter
// slab params.
func (a *Adapters) Merge(params []float32) {
	r := a.Config.Rank
	for _, t := range a.Targets {
		w := params[t.offset : t.offset+t.Rows*t.Cols]
		copy(w, a.base[t.base:t.base+t.Rows*t.Cols])
		gemm.Sgemm(false, false, t.Rows, t.Cols, r, a.Scale, a.B(t), r, a.A(t), t.Cols, 1, w, t.Cols)
	}
}
