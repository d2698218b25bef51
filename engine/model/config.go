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
	if len(errs) > 0 {
		return fmt.Errorf("model config: %s", strings.Join(errs, "; "))
	}
	return nil
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
