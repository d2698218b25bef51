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
	return model.Config{
		Vocab: c.VocabSize, Dim: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, Hidden: c.IntermediateSize,
		MaxSeq: c.MaxPositionEmbeddings, RopeTheta: c.RopeTheta, NormEps: float32(c.RMSNormEps),
		TiedEmbeddings: c.TieWordEmbeddings, AttentionBias: c.QKVBias(), QKNorm: c.QKNorm(),
	}, nil
}

// Config returns the config.json describing an engine configuration: Qwen3
// when it has q/k norms, Qwen2 when it has q/k/v biases, Llama otherwise.
func Config(m model.Config, bos, eos []int) *hfconfig.Config {
	m = m.WithDefaults()
	arch := hfconfig.Llama
	switch {
	case m.QKNorm:
		arch = hfconfig.Qwen3
	case m.AttentionBias:
		arch = hfconfig.Qwen2
	}
	return &hfconfig.Config{
		Architecture: arch, HiddenSize: m.Dim, IntermediateSize: m.Hidden, NumHiddenLayers: m.Layers,
		NumAttentionHeads: m.Heads, NumKeyValueHeads: m.KVHeads, HeadDim: m.HeadDim, VocabSize: m.Vocab,
		MaxPositionEmbeddings: m.MaxSeq, RMSNormEps: float64(m.NormEps), RopeTheta: m.RopeTheta,
		TieWordEmbeddings: m.TiedEmbeddings, AttentionBias: m.AttentionBias && arch != hfconfig.Qwen2,
		BOSTokenIDs: bos, EOSTokenIDs: eos, TorchDType: "float32",
	}
}

// Load reads a checkpoint directory into a new model. Every tensor the
// architecture needs must be present with its exact shape; errors name the
// tensor and the file. An lm_head.weight beside tied embeddings is ignored,
// as transformers does.
func Load(dir string) (*model.Model, *hfconfig.Config, error) {
	hc, err := hfconfig.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, nil, err
	}
	mc, err := ModelConfig(hc)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.NewEmpty(mc)
	if err != nil {
		return nil, nil, fmt.Errorf("hf: %s: %w", dir, err)
	}
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if err := Fill(m, f.Float32, dir); err != nil {
		return nil, nil, err
	}
	return m, hc, nil
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
// derives them from the model. Files are written atomically.
func Save(dir string, m *model.Model, cfg *hfconfig.Config, dtype safetensors.DType) error {
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
