// Package model is the Llama/Qwen2/Qwen3-family decoder the engine trains:
// token embedding, RMSNorm, rotary embeddings, grouped-query causal
// attention (optional q/k/v biases and per-head q/k norms), a SwiGLU MLP and
// an optionally tied output head, with every forward and backward written
// out in package nn.
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
	// rotary embedding (Qwen3).
	QKNorm bool
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
	if c.RopeTheta < 0 || c.NormEps < 0 {
		bad("rope_theta = %v and norm_eps = %v must not be negative", c.RopeTheta, c.NormEps)
	}
	if d.Vocab > 0 && d.Dim > 0 && d.Layers > 0 && d.Heads > 0 && d.KVHeads > 0 && d.HeadDim > 0 && d.Hidden > 0 && d.MaxSeq > 0 {
		if n := d.paramCount(); n > MaxParams {
			bad("%.4g parameters (vocab %d, dim %d, layers %d, hidden %d) exceed the engine's limit of %d", n, d.Vocab, d.Dim, d.Layers, d.Hidden, int64(MaxParams))
		}
		if r := float64(d.MaxSeq) * float64(d.HeadDim); r > MaxRotary {
			bad("max_seq = %d × head_dim = %d rotary table entries exceed the engine's limit of %d", d.MaxSeq, d.HeadDim, int64(MaxRotary))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("model config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Limits on what a configuration may ask the engine to allocate. A model
// holds its parameters and their gradients (8 bytes per parameter) and two
// rotary tables of MaxSeq·HeadDim/2 entries each; configurations beyond
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
