// Package model is the decoder the engine trains, of the Llama/Qwen2/Qwen3
// family (token embedding, RMSNorm, rotary embeddings with optional
// linear, dynamic or Llama 3 scaling, grouped-query causal attention with
// optional q/k/v biases and per-head q/k norms, a SwiGLU MLP and an
// optionally tied output head) or Gemma 3 (1 + w norms around both
// sublayers, a GeGLU MLP, a scaled embedding, and sliding-window layers
// with their own rotary base), with every forward and backward written out
// in package nn.
//
// Parameters and gradients each live in one flat slab; Tensors names the
// views with Hugging Face tensor names and shapes, so checkpoint I/O, AdamW
// and zero-grad are single loops. Batches are packed: sequences of
// different lengths are concatenated without padding, so padding can never
// reach an output, a loss or a gradient.
//
// A Model is not safe for concurrent use.
package model

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// Config is a model's architecture, named after the Hugging Face
// config.json fields it corresponds to.
type Config struct {
	Vocab   int // vocab_size
	Dim     int // hidden_size
	Layers  int // num_hidden_layers
	Heads   int // num_attention_heads
	KVHeads int // num_key_value_heads; 0 means Heads
	HeadDim int // head_dim; 0 means Dim/Heads
	Hidden  int // intermediate_size, the SwiGLU width
	// MaxSeq bounds a sequence's length (max_position_embeddings); rotary
	// tables are built up to it.
	MaxSeq    int
	RopeTheta float64 // rope_theta; 0 means 10000
	NormEps   float32 // rms_norm_eps; 0 means 1e-6
	// TiedEmbeddings reuses the embedding matrix as the output head
	// (tie_word_embeddings).
	TiedEmbeddings bool
	// AttentionBias adds biases to the q, k and v projections (Qwen2).
	AttentionBias bool
	// QKNorm applies an RMSNorm to each query and key head before the
	// rotary embedding (Qwen3, Gemma 3).
	QKNorm bool
	// RopeScaling rescales the rotary frequencies of the global layers
	// (rope_scaling); the zero value is plain RoPE.
	//
	// This field and those below are left out of JSON when zero, so a
	// configuration that does not use them encodes (and hashes, as
	// train.ConfigHash does) as before they existed.
	RopeScaling RopeScaling `json:",omitzero"`

	// Gemma3 selects Gemma 3's block (model_type gemma3_text): every
	// RMSNorm scales by 1 + w; the token embedding is multiplied by
	// √hidden_size; post_attention_layernorm and post_feedforward_layernorm
	// normalize the attention and MLP outputs before their residual adds,
	// and pre_feedforward_layernorm is the MLP's input norm; the MLP is
	// GeGLU, down(gelu_tanh(gate(x)) ⊙ up(x)). It implies QKNorm.
	Gemma3 bool `json:",omitzero"`
	// QueryPreAttnScalar sets the attention scale to
	// QueryPreAttnScalar^-½ (query_pre_attn_scalar); 0 means HeadDim.
	QueryPreAttnScalar float64 `json:",omitzero"`
	// SlidingWindow is how many positions a query of a local layer sees,
	// itself included (sliding_window): a query at position i attends to
	// keys j ≤ i with i − j < SlidingWindow. Only local layers read it.
	SlidingWindow int `json:",omitzero"`
	// LocalLayers marks the layers with sliding-window attention
	// (layer_types' "sliding_attention"); nil means none. When not nil it
	// has one entry per layer.
	LocalLayers []bool `json:",omitzero"`
	// LocalRopeTheta is the RoPE base of the local layers
	// (rope_local_base_freq), which take no RopeScaling; 0 means 10000.
	LocalRopeTheta float64 `json:",omitzero"`
}

// RopeScaling is rope_scaling: how the rotary inverse frequencies
// θ^(−2i/hd) are rescaled for contexts longer than the model was trained
// on. Type is one of
//
//   - "" (or "default"): none;
//   - "linear": positions divided by Factor, i.e. every frequency;
//   - "dynamic": NTK-aware, the base rescaled when a sequence is longer than
//     OriginalMaxSeq. The engine refuses sequences longer than MaxSeq, and
//     requires MaxSeq ≤ OriginalMaxSeq, so its frequencies are always the
//     unscaled ones: transformers rescales from the longest position in a
//     batch, which would make a token's logits depend on the tokens after
//     it, and the training forward disagree with the decoder;
//   - "llama3": Llama 3.1's bands: wavelengths below
//     OriginalMaxSeq/HighFreqFactor keep their frequency, those above
//     OriginalMaxSeq/LowFreqFactor are divided by Factor, and those between
//     are interpolated.
type RopeScaling struct {
	Type           string  // rope_type
	Factor         float64 // factor
	LowFreqFactor  float64 // low_freq_factor (llama3)
	HighFreqFactor float64 // high_freq_factor (llama3)
	OriginalMaxSeq int     // original_max_position_embeddings (llama3, dynamic)
}

// Equal reports whether c and o describe the same model. Config holds a
// slice, so == does not compile; a nil LocalLayers equals an empty one.
func (c Config) Equal(o Config) bool {
	if !slices.Equal(c.LocalLayers, o.LocalLayers) {
		return false
	}
	c.LocalLayers, o.LocalLayers = nil, nil
	return reflect.DeepEqual(c, o)
}

// Local reports whether layer l uses sliding-window attention.
func (c Config) Local(l int) bool { return l < len(c.LocalLayers) && c.LocalLayers[l] }

// window is layer l's attention window: SlidingWindow for a local layer, 0
// (unbounded) for a global one.
func (c Config) window(l int) int {
	if c.Local(l) {
		return c.SlidingWindow
	}
	return 0
}

// attentionScale is the factor on q·k: QueryPreAttnScalar^-½, or hd^-½.
func (c Config) attentionScale() float32 {
	s := c.QueryPreAttnScalar
	if s == 0 {
		s = float64(c.HeadDim)
	}
	return float32(1 / math.Sqrt(s))
}

// normOffset is what an RMSNorm adds to its weights: 1 for Gemma's 1 + w.
func (c Config) normOffset() float32 {
	if c.Gemma3 {
		return 1
	}
	return 0
}

// WithDefaults fills the fields whose zero value means a default.
func (c Config) WithDefaults() Config {
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 && c.Heads > 0 {
		c.HeadDim = c.Dim / c.Heads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-6
	}
	if c.LocalRopeTheta == 0 {
		c.LocalRopeTheta = 10000
	}
	if c.Gemma3 {
		c.QKNorm = true
	}
	if c.RopeScaling.Type == "default" {
		c.RopeScaling = RopeScaling{}
	}
	return c
}

// Validate reports every problem with the configuration at once, naming the
// fields and values.
func (c Config) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab", c.Vocab}, {"dim", c.Dim}, {"layers", c.Layers}, {"heads", c.Heads}, {"hidden", c.Hidden}, {"max_seq", c.MaxSeq}} {
		if f.v <= 0 {
			bad("%s = %d must be positive", f.name, f.v)
		}
	}
	if c.KVHeads < 0 || c.HeadDim < 0 {
		bad("kv_heads = %d and head_dim = %d must not be negative", c.KVHeads, c.HeadDim)
	}
	if c.Heads > 0 && c.HeadDim == 0 && c.Dim%c.Heads != 0 {
		bad("heads = %d does not divide dim = %d (set head_dim to use another head width)", c.Heads, c.Dim)
	}
	d := c.WithDefaults()
	if d.Heads > 0 && d.KVHeads > 0 && d.Heads%d.KVHeads != 0 {
		bad("kv_heads = %d does not divide heads = %d", d.KVHeads, d.Heads)
	}
	if d.HeadDim%2 != 0 {
		bad("head_dim = %d must be even for rotary embeddings", d.HeadDim)
	}
	if c.RopeTheta < 0 || c.NormEps < 0 || c.LocalRopeTheta < 0 || math.IsNaN(c.RopeTheta+float64(c.NormEps)+c.LocalRopeTheta) {
		bad("rope_theta = %v, norm_eps = %v and local_rope_theta = %v must not be negative", c.RopeTheta, c.NormEps, c.LocalRopeTheta)
	}
	if !(c.QueryPreAttnScalar >= 0) || math.IsInf(c.QueryPreAttnScalar, 1) {
		bad("query_pre_attn_scalar = %v must be positive and finite (or 0 for head_dim)", c.QueryPreAttnScalar)
	}
	if c.SlidingWindow < 0 {
		bad("sliding_window = %d must not be negative", c.SlidingWindow)
	}
	if c.LocalLayers != nil && len(c.LocalLayers) != c.Layers {
		bad("local_layers has %d entries for %d layers", len(c.LocalLayers), c.Layers)
	}
	if slices.Contains(c.LocalLayers, true) && c.SlidingWindow == 0 {
		bad("local layers need a sliding_window")
	}
	if err := d.RopeScaling.validate(d.MaxSeq); err != "" {
		bad("%s", err)
	}
	if d.Vocab > 0 && d.Dim > 0 && d.Layers > 0 && d.Heads > 0 && d.KVHeads > 0 && d.HeadDim > 0 && d.Hidden > 0 && d.MaxSeq > 0 {
		if n := d.paramCount(); n > MaxParams {
			bad("%.4g parameters (vocab %d, dim %d, layers %d, hidden %d) exceed the engine's limit of %d", n, d.Vocab, d.Dim, d.Layers, d.Hidden, int64(MaxParams))
		}
		tables := 1.0
		if slices.Contains(d.LocalLayers, true) {
			tables = 2
		}
		if r := tables * float64(d.MaxSeq) * float64(d.HeadDim); r > MaxRotary {
			bad("max_seq = %d × head_dim = %d rotary table entries exceed the engine's limit of %d", d.MaxSeq, d.HeadDim, int64(MaxRotary))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("model config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// validate describes what is wrong with s for a model of maxSeq positions,
// or returns "".
func (s RopeScaling) validate(maxSeq int) string {
	positive := func(v float64) bool { return v > 0 && !math.IsInf(v, 1) }
	switch s.Type {
	case "", "default":
		return ""
	case "linear":
		if !positive(s.Factor) {
			return fmt.Sprintf("rope_scaling linear: factor = %v must be positive and finite", s.Factor)
		}
	case "dynamic":
		switch {
		case !positive(s.Factor):
			return fmt.Sprintf("rope_scaling dynamic: factor = %v must be positive and finite", s.Factor)
		case s.OriginalMaxSeq <= 0 || maxSeq > s.OriginalMaxSeq:
			return fmt.Sprintf("rope_scaling dynamic: max_seq = %d exceeds the original %d positions; the engine does not rescale for longer sequences", maxSeq, s.OriginalMaxSeq)
		}
	case "llama3":
		switch {
		case !positive(s.Factor) || !positive(s.LowFreqFactor) || !positive(s.HighFreqFactor):
			return fmt.Sprintf("rope_scaling llama3: factor = %v, low_freq_factor = %v and high_freq_factor = %v must be positive and finite", s.Factor, s.LowFreqFactor, s.HighFreqFactor)
		case s.HighFreqFactor <= s.LowFreqFactor:
			return fmt.Sprintf("rope_scaling llama3: high_freq_factor = %v must exceed low_freq_factor = %v", s.HighFreqFactor, s.LowFreqFactor)
		case s.OriginalMaxSeq <= 0:
			return fmt.Sprintf("rope_scaling llama3: original_max_position_embeddings = %d must be positive", s.OriginalMaxSeq)
		}
	default:
		return fmt.Sprintf("rope_scaling type %q is not supported (linear, dynamic, llama3)", s.Type)
	}
	return ""
}

// Limits on what a configuration may ask the engine to allocate. A model
// holds its parameters and their gradients (8 bytes per parameter) and two
// rotary tables of MaxSeq·HeadDim/2 entries each (twice that with local
// layers); configurations beyond
// these limits cannot be allocated on any machine the engine runs on, and
// Validate refuses them before anything is allocated.
const (
	MaxParams = 1 << 36 // parameters, 512 GiB with their gradients
	MaxRotary = 1 << 30 // MaxSeq × HeadDim, 4 GiB of rotary tables
)

// paramCount is the number of parameters of a defaulted configuration with
// positive sizes, in float64 so that no size can overflow it.
func (c Config) paramCount() float64 {
	V, D, L, F := float64(c.Vocab), float64(c.Dim), float64(c.Layers), float64(c.Hidden)
	hd, H := float64(c.HeadDim), float64(c.Heads)
	qkv := (H + 2*float64(c.KVHeads)) * hd
	layer := 2*D + qkv*D + H*hd*D + 3*F*D
	if c.Gemma3 {
		layer += 2 * D // the norms after attention and after the MLP
	}
	if c.AttentionBias {
		layer += qkv
	}
	if c.QKNorm {
		layer += 2 * hd
	}
	n := V*D + L*layer + D
	if !c.TiedEmbeddings {
		n += V * D
	}
	return n
}

// Layout returns the tensors a model of configuration c has, in the order
// of its parameter slab, without allocating them: what a checkpoint of it
// must hold. It validates c first.
func Layout(c Config) ([]Tensor, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ts, _ := layout(c.WithDefaults())
	return ts, nil
}

// Tiny is the default small model of the built-in world and the engine
// benchmark's shape family: a Llama-style decoder small enough to train in
// minutes on a CPU.
func Tiny(vocab int) Config {
	return Config{Vocab: vocab, Dim: 128, Layers: 4, Heads: 4, KVHeads: 4, Hidden: 344, MaxSeq: 512, RopeTheta: 10000, NormEps: 1e-5}
}

// BenchConfig is the engine benchmark's shape (4 layers, d_model 256, 4
// heads, SwiGLU 688, vocab 512), the one PyTorch is compared against.
func BenchConfig() Config {
	return Config{Vocab: 512, Dim: 256, Layers: 4, Heads: 4, KVHeads: 4, Hidden: 688, MaxSeq: 128, RopeTheta: 10000, NormEps: 1e-5}
}
