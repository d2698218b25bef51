// Package hf loads and saves engine models as Hugging Face checkpoints: a
// directory with config.json and model.safetensors (or shards listed in
// model.safetensors.index.json), with the tensor names, shapes and header
// metadata transformers expects.
package hf

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rlvr/engine/model"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
)

// ModelConfig translates a config.json into the engine's configuration. It
// refuses what the engine cannot compute, naming the field.
func ModelConfig(c *hfconfig.Config) (model.Config, error) {
	if c.OProjBias() {
		return model.Config{}, fmt.Errorf("hf: attention_bias with an o_proj bias (%s) is not supported", c.Architecture)
	}
	m := model.Config{
		Vocab: c.VocabSize, Dim: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, Hidden: c.IntermediateSize,
		MaxSeq: c.MaxPositionEmbeddings, RopeTheta: c.RopeTheta, NormEps: float32(c.RMSNormEps),
		TiedEmbeddings: c.TieWordEmbeddings, AttentionBias: c.QKVBias(), QKNorm: c.QKNorm(),
	}
	if s := c.RopeScaling; s != nil {
		m.RopeScaling = model.RopeScaling{Type: s.Type, Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
			HighFreqFactor: s.HighFreqFactor, OriginalMaxSeq: s.OriginalMaxPositionEmbeddings}
		if s.Type == "dynamic" {
			// transformers rescales dynamic RoPE past max_position_embeddings,
			// the engine's limit on a sequence.
			m.RopeScaling.OriginalMaxSeq = c.MaxPositionEmbeddings
		}
	}
	if c.IsGemma3() {
		m.Gemma3, m.QueryPreAttnScalar = true, c.QueryPreAttnScalar
		m.SlidingWindow, m.LocalRopeTheta = c.SlidingWindow, c.RopeLocalBaseFreq
		m.LocalLayers = make([]bool, len(c.LayerTypes))
		for i, t := range c.LayerTypes {
			m.LocalLayers[i] = t == hfconfig.SlidingAttention
		}
	}
	return m, nil
}

// Config returns the config.json describing an engine configuration:
// Gemma 3 for Gemma3, Qwen3 when it has q/k norms, Qwen2 when it has q/k/v
// biases, Llama otherwise. A non-Gemma configuration with local layers or
// a query_pre_attn_scalar has no config.json: hfconfig refuses to write it.
func Config(m model.Config, bos, eos []int32) *hfconfig.Config {
	m = m.WithDefaults()
	arch := hfconfig.Llama
	switch {
	case m.Gemma3:
		arch = hfconfig.Gemma3
	case m.QKNorm:
		arch = hfconfig.Qwen3
	case m.AttentionBias:
		arch = hfconfig.Qwen2
	}
	c := &hfconfig.Config{
		Architecture: arch, HiddenSize: m.Dim, IntermediateSize: m.Hidden, NumHiddenLayers: m.Layers,
		NumAttentionHeads: m.Heads, NumKeyValueHeads: m.KVHeads, HeadDim: m.HeadDim, VocabSize: m.Vocab,
		MaxPositionEmbeddings: m.MaxSeq, RMSNormEps: float64(m.NormEps), RopeTheta: m.RopeTheta,
		TieWordEmbeddings: m.TiedEmbeddings, AttentionBias: m.AttentionBias && arch != hfconfig.Qwen2,
		BOSTokenIDs: bos, EOSTokenIDs: eos, TorchDType: "float32",
	}
	if s := m.RopeScaling; s.Type != "" {
		c.RopeScaling = &hfconfig.RopeScaling{Type: s.Type, Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
			HighFreqFactor: s.HighFreqFactor}
		if s.Type == "llama3" {
			c.RopeScaling.OriginalMaxPositionEmbeddings = s.OriginalMaxSeq
		}
	}
	if m.Gemma3 || len(m.LocalLayers) > 0 {
		c.SlidingWindow, c.RopeLocalBaseFreq = m.SlidingWindow, m.LocalRopeTheta
		c.LayerTypes = make([]string, m.Layers)
		for l := range c.LayerTypes {
			c.LayerTypes[l] = hfconfig.FullAttention
			if m.Local(l) {
				c.LayerTypes[l] = hfconfig.SlidingAttention
			}
		}
	}
	if m.Gemma3 || m.QueryPreAttnScalar != 0 {
		c.QueryPreAttnScalar = m.QueryPreAttnScalar
		if c.QueryPreAttnScalar == 0 {
			c.QueryPreAttnScalar = float64(m.HeadDim)
		}
	}
	return c
}

// Load reads a checkpoint directory into a new model. Before allocating
// anything it checks config.json against the weight files' headers (see
// [Check]), so a config.json that claims more than the files hold is an
// error naming it, never a huge allocation. Every tensor the architecture
// needs must be present with its exact shape, and every tensor the files
// hold must be one the model reads (see [Unread]); errors name the tensor
// and the file. An lm_head.weight beside tied embeddings must hold the
// embeddings' bytes: transformers ties the two and reads only the
// embeddings.
func Load(dir string) (*model.Model, *hfconfig.Config, error) {
	configPath := filepath.Join(dir, "config.json")
	hc, err := hfconfig.Load(configPath)
	if err != nil {
		return nil, nil, err
	}
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	mc, err := Check(hc, configPath, f.Tensors(), dir)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.NewEmpty(mc)
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %s: %w", dir, err)
	}
	// Each tensor is read straight into the model's slab (Check has
	// checked the shapes and dtypes), so loading holds no second copy.
	for _, t := range m.Tensors {
		if err := f.Float32Into(m.Params[t.Offset:t.Offset+t.Len()], t.Name); err != nil {
			return nil, nil, fmt.Errorf("hf: %s: %w", dir, err)
		}
	}
	if _, ok := f.Tensor(headName); ok && mc.TiedEmbeddings {
		same, err := f.SameData(headName, embedName)
		if err != nil {
			return nil, nil, fmt.Errorf("hf: %s: %w", dir, err)
		}
		if !same {
			return nil, nil, fmt.Errorf("hf: %s: tensor %q differs from %q, but %s ties them (tie_word_embeddings true), so it would not be read; "+
				"set tie_word_embeddings to false to use it", dir, headName, embedName, configPath)
		}
	}
	return m, hc, nil
}

// The tensors that tied embeddings share.
const (
	embedName = "model.embed_tokens.weight"
	headName  = "lm_head.weight"
)

// unreadSuffixes end the names of tensors a checkpoint may hold that no
// model reads, each with why leaving it unread loses nothing.
var unreadSuffixes = []struct{ suffix, why string }{
	{".rotary_emb.inv_freq", "rotary frequencies older transformers saved as buffers; they follow from rope_theta and rope_scaling, and transformers ignores them too"},
}

// Unread returns, sorted, the names among those a checkpoint holds that a
// model of configuration mc does not read, apart from those of
// unreadSuffixes. An lm_head.weight beside tied embeddings is among them:
// it is unread unless it equals the embeddings, which the caller checks.
func Unread(mc model.Config, names []string) ([]string, error) {
	want, err := model.Layout(mc)
	if err != nil {
		return nil, err
	}
	return unread(want, names), nil
}

// unread is Unread over the tensors of a model's layout.
func unread(want []model.Tensor, names []string) []string {
	read := make(map[string]bool, len(want))
	for _, t := range want {
		read[t.Name] = true
	}
	var out []string
	for _, name := range names {
		if read[name] || slices.ContainsFunc(unreadSuffixes, func(u struct{ suffix, why string }) bool { return strings.HasSuffix(name, u.suffix) }) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// minFloatBytes is the size of the smallest element Fill converts (BF16,
// F16).
const minFloatBytes = 2

// Check checks a parsed config.json against the tensors listed in a
// checkpoint's safetensors headers, before any weight is allocated or
// read, and returns the engine configuration. The config's parameter count
// must fit in the bytes the weight files hold; then every tensor the
// config implies must be listed with its exact shape and a dtype Fill
// converts, and every tensor listed must be one the model reads (see
// [Unread]; an lm_head.weight beside tied embeddings must have the
// embeddings' dtype and shape, and Load compares their bytes). configPath names the config in errors and weights the weight
// files (a directory or file).
func Check(hc *hfconfig.Config, configPath string, tensors []safetensors.TensorInfo, weights string) (model.Config, error) {
	mc, err := ModelConfig(hc)
	if err != nil {
		return model.Config{}, err
	}
	want, err := model.Layout(mc)
	if err != nil {
		return model.Config{}, fmt.Errorf("hf: %s: %w", configPath, err)
	}
	var params, bytes int64
	for _, t := range want {
		params += int64(t.Len())
	}
	have := make(map[string]safetensors.TensorInfo, len(tensors))
	for _, t := range tensors {
		have[t.Name] = t
		bytes += t.Offsets[1] - t.Offsets[0]
	}
	if params > bytes/minFloatBytes {
		return model.Config{}, fmt.Errorf("hf: %s: vocab_size %d, hidden_size %d, intermediate_size %d and num_hidden_layers %d imply %d parameters, "+
			"at least %d bytes, but the weights in %s hold %d bytes",
			configPath, hc.VocabSize, hc.HiddenSize, hc.IntermediateSize, hc.NumHiddenLayers, params, params*minFloatBytes, weights, bytes)
	}
	var errs []string
	for _, t := range want {
		got, ok := have[t.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("tensor %q (%s) is missing", t.Name, shapeFields(t.Name, hc)))
		case !slices.Equal(got.Shape, t.Shape):
			errs = append(errs, fmt.Sprintf("tensor %q has shape %v, the config implies %v (%s)", t.Name, got.Shape, t.Shape, shapeFields(t.Name, hc)))
		case got.DType.Size() < minFloatBytes || !convertible(got.DType):
			errs = append(errs, fmt.Sprintf("tensor %q has dtype %s, not a floating-point type", t.Name, got.DType))
		}
	}
	names := make([]string, 0, len(tensors))
	for _, t := range tensors {
		names = append(names, t.Name)
	}
	for _, name := range unread(want, names) {
		if name == headName && mc.TiedEmbeddings {
			// Load checks it holds the embeddings.
			if got, emb := have[headName], have[embedName]; got.DType != emb.DType || !slices.Equal(got.Shape, emb.Shape) {
				errs = append(errs, fmt.Sprintf("tensor %q (%s %v) is not the embeddings (%s %v) that tie_word_embeddings true puts in its place",
					headName, got.DType, got.Shape, emb.DType, emb.Shape))
			}
			continue
		}
		errs = append(errs, fmt.Sprintf("tensor %q is not part of the model the config describes (%s)", name, shapeFields(name, hc)))
	}
	if len(errs) > 0 {
		const shown = 4
		more := ""
		if len(errs) > shown {
			more = fmt.Sprintf("; and %d more", len(errs)-shown)
			errs = errs[:shown]
		}
		return model.Config{}, fmt.Errorf("hf: %s does not match %s: %s%s", weights, configPath, strings.Join(errs, "; "), more)
	}
	return mc, nil
}

// convertible reports whether Fill can read a dtype as float32.
func convertible(d safetensors.DType) bool {
	switch d {
	case safetensors.F32, safetensors.BF16, safetensors.F16, safetensors.F64:
		return true
	}
	return false
}

// shapeFields names the config.json fields a tensor's shape follows from.
func shapeFields(name string, hc *hfconfig.Config) string {
	layer := ""
	if strings.HasPrefix(name, "model.layers.") {
		layer = fmt.Sprintf("; num_hidden_layers %d", hc.NumHiddenLayers)
	}
	dims := ""
	switch {
	case strings.HasSuffix(name, "embed_tokens.weight"), name == "lm_head.weight":
		dims = fmt.Sprintf("vocab_size %d × hidden_size %d", hc.VocabSize, hc.HiddenSize)
	case strings.HasSuffix(name, "q_proj.weight"), strings.HasSuffix(name, "o_proj.weight"):
		dims = fmt.Sprintf("num_attention_heads %d × head_dim %d, hidden_size %d", hc.NumAttentionHeads, hc.HeadDim, hc.HiddenSize)
	case strings.HasSuffix(name, "k_proj.weight"), strings.HasSuffix(name, "v_proj.weight"):
		dims = fmt.Sprintf("num_key_value_heads %d × head_dim %d, hidden_size %d", hc.NumKeyValueHeads, hc.HeadDim, hc.HiddenSize)
	case strings.HasSuffix(name, "q_proj.bias"):
		dims = fmt.Sprintf("num_attention_heads %d × head_dim %d", hc.NumAttentionHeads, hc.HeadDim)
	case strings.HasSuffix(name, "k_proj.bias"), strings.HasSuffix(name, "v_proj.bias"):
		dims = fmt.Sprintf("num_key_value_heads %d × head_dim %d", hc.NumKeyValueHeads, hc.HeadDim)
	case strings.HasSuffix(name, "q_norm.weight"), strings.HasSuffix(name, "k_norm.weight"):
		dims = fmt.Sprintf("head_dim %d", hc.HeadDim)
	case strings.Contains(name, ".mlp."):
		dims = fmt.Sprintf("intermediate_size %d, hidden_size %d", hc.IntermediateSize, hc.HiddenSize)
	default:
		dims = fmt.Sprintf("hidden_size %d", hc.HiddenSize)
	}
	return dims + layer
}

// Fill copies every tensor of m from get (a safetensors file's Float32, or
// any source of Hugging Face-named tensors), checking shapes. source names
// the checkpoint in errors.
func Fill(m *model.Model, get func(name string) ([]float32, []int, error), source string) error {
	for _, t := range m.Tensors {
		data, shape, err := get(t.Name)
		if err != nil {
			return fmt.Errorf("hf: %s: tensor %q: %w", source, t.Name, err)
		}
		if !slices.Equal(shape, t.Shape) {
			return fmt.Errorf("hf: %s: tensor %q has shape %v, the config implies %v", source, t.Name, shape, t.Shape)
		}
		copy(m.Params[t.Offset:t.Offset+t.Len()], data)
	}
	return nil
}

// Save writes m to dir as config.json and model.safetensors (dtype F32 or
// BF16), creating dir. cfg supplies the token ids and architecture; nil
// derives them from the model. Files are written atomically. A frozen
// model (model.Model.Freeze) has released its matrices: saving it is an
// error wrapping model.ErrFrozen.
func Save(dir string, m *model.Model, cfg *hfconfig.Config, dtype safetensors.DType) error {
	if m.Frozen() {
		return fmt.Errorf("hf: saving to %s: %w", dir, model.ErrFrozen)
	}
	if cfg == nil {
		cfg = Config(m.Config, nil, nil)
	}
	c := *cfg
	c.TorchDType = map[safetensors.DType]string{safetensors.F32: "float32", safetensors.BF16: "bfloat16"}[dtype]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	ts := make([]safetensors.Tensor, len(m.Tensors))
	for i, t := range m.Tensors {
		ts[i] = safetensors.Tensor{Name: t.Name, Shape: t.Shape, Data: m.Params[t.Offset : t.Offset+t.Len()]}
	}
	if err := safetensors.Write(filepath.Join(dir, safetensors.SingleFileName), ts, map[string]string{"format": "pt"}, dtype); err != nil {
		return err
	}
	return hfconfig.Write(filepath.Join(dir, "config.json"), &c)
}
