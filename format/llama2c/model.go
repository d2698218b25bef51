package llama2c

import (
	"fmt"

	"rlvr/engine/model"
	"rlvr/format/hf"
)

// ModelConfig is the engine configuration of a llama2.c checkpoint: RoPE
// θ 10000 and RMSNorm ε 1e-5 as run.c hard-codes them, the context of
// seq_len tokens, tied output embedding when the classifier is shared.
func (c Config) ModelConfig() model.Config {
	return model.Config{Vocab: c.Vocab, Dim: c.Dim, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads,
		Hidden: c.Hidden, MaxSeq: c.SeqLen, RopeTheta: RopeTheta, NormEps: RMSNormEps, TiedEmbeddings: c.SharedClassifier}
}

// Model builds an engine model from the checkpoint's converted tensors
// (rotate-half RoPE layout, Hugging Face names).
func (ck *Checkpoint) Model() (*model.Model, error) {
	m, err := model.NewEmpty(ck.Config.ModelConfig())
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	get := func(name string) ([]float32, []int, error) {
		t, ok := ck.Tensors[name]
		if !ok {
			return nil, nil, fmt.Errorf("missing")
		}
		return t.Data, t.Shape, nil
	}
	if err := hf.Fill(m, get, "llama2.c checkpoint"); err != nil {
		return nil, err
	}
	return m, nil
}

// LoadModel reads a llama2.c checkpoint file into an engine model.
func LoadModel(path string) (*model.Model, error) {
	ck, err := ReadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return ck.Model()
}
