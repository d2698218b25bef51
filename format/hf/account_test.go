package hf

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/engine/model"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
)

// writeAccounted saves a random model of cfg as a checkpoint directory
// under the config.json of configured, its weights file holding the
// model's tensors and those extra returns besides.
func writeAccounted(t *testing.T, cfg, configured model.Config, extra func(m *model.Model) []safetensors.Tensor) string {
	t.Helper()
	m, err := model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, tt := range m.Tensors {
		ts = append(ts, safetensors.Tensor{Name: tt.Name, Shape: tt.Shape, Data: m.Params[tt.Offset : tt.Offset+tt.Len()]})
	}
	if extra != nil {
		ts = append(ts, extra(m)...)
	}
	dir := t.TempDir()
	if err := safetensors.Write(filepath.Join(dir, safetensors.SingleFileName), ts, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	if err := hfconfig.Write(filepath.Join(dir, "config.json"), Config(configured, nil, nil)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// embeddings is m's embedding tensor under another name, its values
// changed by add.
func embeddings(m *model.Model, name string, add float32) safetensors.Tensor {
	for _, tt := range m.Tensors {
		if tt.Name == embedName {
			data := slices.Clone(m.Params[tt.Offset : tt.Offset+tt.Len()])
			for i := range data {
				data[i] += add
			}
			return safetensors.Tensor{Name: name, Shape: tt.Shape, Data: data}
		}
	}
	panic("no embeddings")
}

// TestLoadAccountsForEveryTensor: a tensor the configured model does not
// read (a layer beyond num_hidden_layers, a bias Llama has no place for,
// an lm_head.weight other than the tied embeddings) is an error naming it
// and the directory; rotary buffers and an lm_head.weight equal to the
// tied embeddings load.
func TestLoadAccountsForEveryTensor(t *testing.T) {
	llama := model.Config{Vocab: 9, Dim: 8, Layers: 3, Heads: 2, KVHeads: 1, Hidden: 12, MaxSeq: 8}
	twoLayers := llama
	twoLayers.Layers = 2
	tied := llama
	tied.TiedEmbeddings = true
	one := func(ts ...safetensors.Tensor) func(*model.Model) []safetensors.Tensor {
		return func(*model.Model) []safetensors.Tensor { return ts }
	}
	for _, tc := range []struct {
		name            string
		cfg, configured model.Config
		extra           func(*model.Model) []safetensors.Tensor
		want            []string // in the error; none: it loads
	}{
		{"a layer beyond num_hidden_layers", llama, twoLayers, nil,
			[]string{`tensor "model.layers.2.input_layernorm.weight" is not part of the model`, "num_hidden_layers 2", "and 5 more"}},
		{"a bias Llama does not read", llama, llama,
			one(safetensors.Tensor{Name: "model.layers.0.self_attn.q_proj.bias", Shape: []int{8}, Data: make([]float32, 8)}),
			[]string{`tensor "model.layers.0.self_attn.q_proj.bias" is not part of the model`}},
		{"an unknown tensor", llama, llama,
			one(safetensors.Tensor{Name: "model.extra.weight", Shape: []int{2}, Data: make([]float32, 2)}),
			[]string{`tensor "model.extra.weight" is not part of the model`}},
		{"rotary buffers", llama, llama,
			one(safetensors.Tensor{Name: "model.layers.0.self_attn.rotary_emb.inv_freq", Shape: []int{2}, Data: []float32{1, 0.01}}), nil},
		{"a tied head equal to the embeddings", tied, tied,
			func(m *model.Model) []safetensors.Tensor { return []safetensors.Tensor{embeddings(m, headName, 0)} }, nil},
		{"a tied head other than the embeddings", tied, tied,
			func(m *model.Model) []safetensors.Tensor { return []safetensors.Tensor{embeddings(m, headName, 1)} },
			[]string{`tensor "lm_head.weight" differs from "model.embed_tokens.weight"`, "tie_word_embeddings"}},
		{"a tied head of another shape", tied, tied,
			one(safetensors.Tensor{Name: headName, Shape: []int{9, 4}, Data: make([]float32, 36)}),
			[]string{`tensor "lm_head.weight" (F32 [9 4]) is not the embeddings (F32 [9 8])`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeAccounted(t, tc.cfg, tc.configured, tc.extra)
			_, _, err := Load(dir)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append(tc.want, dir) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestUnread lists what a model does not read, sorted, without the
// rotary buffers.
func TestUnread(t *testing.T) {
	cfg := model.Config{Vocab: 9, Dim: 8, Layers: 1, Heads: 2, Hidden: 12, MaxSeq: 8, TiedEmbeddings: true}
	got, err := Unread(cfg, []string{"model.norm.weight", "z.weight", headName, "model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.1.mlp.up_proj.weight"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{headName, "model.layers.1.mlp.up_proj.weight", "z.weight"}; !slices.Equal(got, want) {
		t.Errorf("Unread = %v, want %v", got, want)
	}
}
