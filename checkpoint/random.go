package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
)

// Shape is a model architecture without its vocabulary, which comes from
// the tokenizer a model is built around (see [InitRandom]).
type Shape struct {
	Name        string
	Description string
	// Architecture is hfconfig.Llama, hfconfig.Qwen2 (q/k/v biases) or
	// hfconfig.Qwen3 (per-head q/k norms).
	Architecture string
	Dim          int // hidden_size
	Layers       int // num_hidden_layers
	Heads        int // num_attention_heads
	KVHeads      int // num_key_value_heads
	// HeadDim is head_dim; 0 means Dim/Heads.
	HeadDim        int
	Hidden         int     // intermediate_size
	MaxSeq         int     // max_position_embeddings
	RopeTheta      float64 // rope_theta
	NormEps        float64 // rms_norm_eps
	TiedEmbeddings bool    // tie_word_embeddings
}

// shapes is the registry behind Shapes; the real models' values are those
// of their published config.json.
var shapes = []Shape{
	{Name: "qwen3-tiny", Description: "Qwen3 architecture, d_model 64, 2 layers, 4 heads (2 KV), SwiGLU 128: for tests",
		Architecture: hfconfig.Qwen3, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 128, MaxSeq: 2048,
		RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true},
	{Name: "qwen2-tiny", Description: "Qwen2 architecture (q/k/v biases), d_model 64, 2 layers, 4 heads (2 KV), SwiGLU 128: for tests",
		Architecture: hfconfig.Qwen2, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 128, MaxSeq: 2048,
		RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true},
	{Name: "llama-tiny", Description: "Llama architecture, d_model 64, 2 layers, 4 heads (2 KV), SwiGLU 128, untied head: for tests",
		Architecture: hfconfig.Llama, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 128, MaxSeq: 2048,
		RopeTheta: 10000, NormEps: 1e-5},
	{Name: "qwen3-0.6b", Description: "the shape of Qwen3-0.6B: d_model 1024, 28 layers, 16 heads (8 KV) of 128, SwiGLU 3072",
		Architecture: hfconfig.Qwen3, Dim: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Hidden: 3072, MaxSeq: 40960,
		RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true},
	{Name: "qwen2.5-0.5b", Description: "the shape of Qwen2.5-0.5B: d_model 896, 24 layers, 14 heads (2 KV) of 64, SwiGLU 4864",
		Architecture: hfconfig.Qwen2, Dim: 896, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64, Hidden: 4864, MaxSeq: 32768,
		RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true},
}

// Shapes returns the named shapes [LookupShape] knows, smallest first:
//
//   - qwen3-tiny, qwen2-tiny, llama-tiny: d_model 64, 2 layers, 4 heads
//     (2 KV heads), SwiGLU 128, for tests;
//   - qwen3-0.6b: Qwen3-0.6B (Qwen3ForCausalLM);
//   - qwen2.5-0.5b: Qwen2.5-0.5B (Qwen2ForCausalLM).
func Shapes() []Shape { return slices.Clone(shapes) }

// ShapeNames returns the names of [Shapes], in order.
func ShapeNames() []string {
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = s.Name
	}
	return names
}

// LookupShape returns the shape called name; the error for an unknown name
// lists the known ones.
func LookupShape(name string) (Shape, error) {
	for _, s := range shapes {
		if s.Name == name {
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("checkpoint: unknown shape %q (known: %s)", name, strings.Join(ShapeNames(), ", "))
}

// Validate reports what makes s unusable, naming the field.
func (s Shape) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	switch s.Architecture {
	case hfconfig.Llama, hfconfig.Qwen2, hfconfig.Qwen3:
	default:
		bad("architecture %q is not %s, %s or %s", s.Architecture, hfconfig.Llama, hfconfig.Qwen2, hfconfig.Qwen3)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", s.Dim}, {"layers", s.Layers}, {"heads", s.Heads}, {"kv heads", s.KVHeads}, {"hidden", s.Hidden}, {"max seq", s.MaxSeq}} {
		if f.v <= 0 {
			bad("%s %d must be positive", f.name, f.v)
		}
	}
	if s.HeadDim < 0 {
		bad("head dim %d must not be negative", s.HeadDim)
	}
	if s.Heads > 0 && s.HeadDim == 0 && s.Dim%s.Heads != 0 {
		bad("heads %d do not divide dim %d (give a head dim)", s.Heads, s.Dim)
	}
	if s.HeadDim > 0 && s.Architecture != hfconfig.Qwen3 && s.HeadDim*s.Heads != s.Dim {
		bad("head dim %d times heads %d is not dim %d (only Qwen3 sets the head size independently)", s.HeadDim, s.Heads, s.Dim)
	}
	if s.Heads > 0 && s.KVHeads > 0 && s.Heads%s.KVHeads != 0 {
		bad("kv heads %d do not divide heads %d", s.KVHeads, s.Heads)
	}
	if hd := s.headDim(); hd > 0 && hd%2 != 0 {
		bad("head dim %d must be even for rotary embeddings", hd)
	}
	if !(s.RopeTheta > 0) {
		bad("rope theta %v must be positive", s.RopeTheta)
	}
	if !(s.NormEps > 0 && s.NormEps < 1) {
		bad("norm eps %v must be in (0, 1)", s.NormEps)
	}
	if len(errs) > 0 {
		name := s.Name
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("checkpoint: shape %s: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

func (s Shape) headDim() int {
	if s.HeadDim == 0 && s.Heads > 0 {
		return s.Dim / s.Heads
	}
	return s.HeadDim
}

// Config returns the config.json of s with a vocabulary of vocab tokens and
// the given BOS and EOS ids (nil for none).
func (s Shape) Config(vocab int, bos, eos []int32) (*hfconfig.Config, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	c := &hfconfig.Config{
		Architecture: s.Architecture, HiddenSize: s.Dim, IntermediateSize: s.Hidden, NumHiddenLayers: s.Layers,
		NumAttentionHeads: s.Heads, NumKeyValueHeads: s.KVHeads, HeadDim: s.headDim(), VocabSize: vocab,
		MaxPositionEmbeddings: s.MaxSeq, RMSNormEps: s.NormEps, RopeTheta: s.RopeTheta,
		TieWordEmbeddings: s.TiedEmbeddings, BOSTokenIDs: bos, EOSTokenIDs: eos, TorchDType: "float32",
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint: shape %s: %w", s.Name, err)
	}
	return c, nil
}

// InitOptions say what [InitRandom] builds.
type InitOptions struct {
	// Tokenizer is a directory holding tokenizer.json and
	// tokenizer_config.json (and possibly the other [TokenizerFiles]).
	Tokenizer string
	Shape     Shape
	Seed      uint64 // initialization seed
	// Out is the directory to write. It must not exist or be empty,
	// unless Force is set.
	Out string
	// Force writes into a non-empty Out, replacing the files a model
	// directory holds and removing those that would contradict the new
	// model (weight shards and their index, optimizer state, tokenizer
	// files the new tokenizer does not have).
	Force bool
}

// InitResult describes the checkpoint [InitRandom] wrote.
type InitResult struct {
	Config *hfconfig.Config // the config.json written
	Params int              // number of parameters
	Copied []string         // the tokenizer files copied, of TokenizerFiles
}

// InitRandom writes a randomly initialised Hugging Face checkpoint of
// opts.Shape built around the tokenizer in opts.Tokenizer: config.json
// (vocabulary size the tokenizer's, added tokens included; bos_token_id
// and eos_token_id those of tokenizer_config.json's bos_token and
// eos_token), model.safetensors in float32 with the engine's
// initialisation (model.New) for opts.Seed, and a copy of the tokenizer's
// files.
func InitRandom(opts InitOptions) (*InitResult, error) {
	if opts.Out == "" {
		return nil, errors.New("checkpoint: no output directory")
	}
	if opts.Tokenizer == "" {
		return nil, errors.New("checkpoint: no tokenizer directory")
	}
	if st, err := os.Stat(opts.Tokenizer); err != nil {
		return nil, fmt.Errorf("checkpoint: tokenizer: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("checkpoint: tokenizer: %s is not a directory", opts.Tokenizer)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(opts.Tokenizer, name)); err != nil {
			return nil, fmt.Errorf("checkpoint: tokenizer: %w", err)
		}
	}
	tok, err := tokenizer.Load(opts.Tokenizer)
	if err != nil {
		return nil, err
	}
	var bos, eos []int32
	if id, ok := tok.BOS(); ok {
		bos = []int32{id}
	}
	if id, ok := tok.EOS(); ok {
		eos = []int32{id}
	}
	hc, err := opts.Shape.Config(tok.VocabSize(), bos, eos)
	if err != nil {
		return nil, err
	}
	mc, err := hf.ModelConfig(hc)
	if err != nil {
		return nil, err
	}
	if err := prepareOut(opts.Out, opts.Tokenizer, opts.Force); err != nil {
		return nil, err
	}
	m, err := model.New(mc, opts.Seed)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: shape %s: %w", opts.Shape.Name, err)
	}
	copied, err := CopyTokenizerFiles(opts.Tokenizer, opts.Out)
	if err != nil {
		return nil, err
	}
	if err := hf.Save(opts.Out, m, hc, safetensors.F32); err != nil {
		return nil, err
	}
	return &InitResult{Config: hc, Params: m.NumParams(), Copied: copied}, nil
}

// prepareOut makes out an empty directory, or, with force, an existing
// one cleared of the files that would contradict a new model built around
// the tokenizer in tokDir.
func prepareOut(out, tokDir string, force bool) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("checkpoint: %w", err)
	case len(entries) == 0:
		return nil
	case !force:
		return fmt.Errorf("checkpoint: %s exists and is not empty (force to write into it)", out)
	}
	for _, e := range entries {
		name := e.Name()
		stale := name == safetensors.IndexFileName || name == "optimizer.safetensors" ||
			(strings.HasPrefix(name, "model-") && strings.HasSuffix(name, ".safetensors"))
		if slices.Contains(TokenizerFiles, name) {
			_, err := os.Stat(filepath.Join(tokDir, name))
			stale = errors.Is(err, fs.ErrNotExist)
		}
		if stale {
			if err := os.Remove(filepath.Join(out, name)); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
		}
	}
	return nil
}
