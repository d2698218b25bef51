package hf

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
	"rlvr/internal/shareddata"
)

// TestLoadFixtureAndRoundTrip loads a bf16 Llama written by another
// framework, checks it computes, and that F32 and BF16 saves load back bit
// for bit.
func TestLoadFixtureAndRoundTrip(t *testing.T) {
	dir := shareddata.Path(t, "verl-arith-llama")
	m, hc, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.Dim != 128 || m.Config.Layers != 4 || m.Config.Vocab != 16 || hc.Architecture != hfconfig.Llama {
		t.Fatalf("config %+v", m.Config)
	}
	b := model.Pack([][]int32{{1, 5, 7, 3, 9}, {2, 4}})
	lp := make([]float32, len(b.Tokens))
	if err := m.Logprobs(b, []int32{5, 7, 3, 9, 2, 4, 6}, lp, nil); err != nil {
		t.Fatal(err)
	}
	for i, v := range lp {
		if !(v < 0) || math.IsInf(float64(v), 0) {
			t.Fatalf("logprob %d = %v", i, v)
		}
	}
	for _, dtype := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		out := filepath.Join(t.TempDir(), "ckpt")
		if err := Save(out, m, hc, dtype); err != nil {
			t.Fatal(err)
		}
		m2, hc2, err := Load(out)
		if err != nil {
			t.Fatal(err)
		}
		if hc2.Architecture != hc.Architecture || m2.Config != m.Config {
			t.Fatalf("%s: config changed: %+v vs %+v", dtype, m2.Config, m.Config)
		}
		for i := range m.Params {
			if math.Float32bits(m.Params[i]) != math.Float32bits(m2.Params[i]) {
				t.Fatalf("%s: parameter %d: %v vs %v", dtype, i, m.Params[i], m2.Params[i])
			}
		}
	}
	// The bf16 save reproduces the original tensor bytes exactly.
	out := filepath.Join(t.TempDir(), "bf16")
	if err := Save(out, m, hc, safetensors.BF16); err != nil {
		t.Fatal(err)
	}
	orig, _ := safetensors.OpenDir(dir)
	defer orig.Close()
	saved, _ := safetensors.OpenDir(out)
	defer saved.Close()
	if got := saved.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format %q, transformers expects \"pt\"", got)
	}
	for _, ti := range orig.Tensors() {
		a, _ := orig.Bytes(ti.Name)
		b, err := saved.Bytes(ti.Name)
		if err != nil || string(a) != string(b) {
			t.Fatalf("tensor %s differs after a bf16 round trip (%v)", ti.Name, err)
		}
	}
}

// TestRoundTripEveryArchitecture saves and reloads Llama, Qwen2 (biases,
// tied) and Qwen3 (q/k norms) models and checks they compute the same.
func TestRoundTripEveryArchitecture(t *testing.T) {
	for name, cfg := range map[string]model.Config{
		"llama": {Vocab: 9, Dim: 8, Layers: 1, Heads: 2, Hidden: 12, MaxSeq: 8},
		"qwen2": {Vocab: 9, Dim: 8, Layers: 2, Heads: 2, KVHeads: 1, Hidden: 12, MaxSeq: 8, AttentionBias: true, TiedEmbeddings: true, RopeTheta: 1e6, NormEps: 1e-6},
		"qwen3": {Vocab: 9, Dim: 8, Layers: 1, Heads: 2, HeadDim: 6, Hidden: 12, MaxSeq: 8, QKNorm: true, NormEps: 1e-6},
	} {
		m, err := model.New(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), name)
		if err := Save(dir, m, nil, safetensors.F32); err != nil {
			t.Fatal(err)
		}
		m2, _, err := Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := model.Pack([][]int32{{1, 2, 3, 4}})
		tg := model.Targets{Targets: []int32{2, 3, 4, 5}, Weights: []float32{1, 1, 1, 1}}
		l1, _ := m.ForwardBackward(b, tg, backend.Loss{NLL: 1}, nil, nil)
		l2, _ := m2.ForwardBackward(b, tg, backend.Loss{NLL: 1}, nil, nil)
		if l1.Loss != l2.Loss {
			t.Errorf("%s: loss %v after reload, %v before", name, l2.Loss, l1.Loss)
		}
	}
}

func TestLoadErrorsNameTensorAndFile(t *testing.T) {
	cfg := model.Config{Vocab: 9, Dim: 8, Layers: 1, Heads: 2, Hidden: 12, MaxSeq: 8}
	m, _ := model.New(cfg, 1)
	write := func(drop, reshape string) string {
		dir := t.TempDir()
		var ts []safetensors.Tensor
		for _, tt := range m.Tensors {
			if tt.Name == drop {
				continue
			}
			shape := tt.Shape
			if tt.Name == reshape {
				shape = []int{tt.Len()}
			}
			ts = append(ts, safetensors.Tensor{Name: tt.Name, Shape: shape, Data: m.Params[tt.Offset : tt.Offset+tt.Len()]})
		}
		if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil, safetensors.F32); err != nil {
			t.Fatal(err)
		}
		if err := hfconfig.Write(filepath.Join(dir, "config.json"), Config(cfg, nil, nil)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct{ drop, reshape, want string }{
		{"model.layers.0.mlp.up_proj.weight", "", `tensor "model.layers.0.mlp.up_proj.weight"`},
		{"", "model.layers.0.self_attn.k_proj.weight", `"model.layers.0.self_attn.k_proj.weight" has shape [64], the config implies [8 8]`},
	} {
		dir := write(tc.drop, tc.reshape)
		_, _, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("error %v, want it to name %s and the directory", err, tc.want)
		}
	}
	// A truncated weights file names the file.
	dir := write("", "")
	p := filepath.Join(dir, "model.safetensors")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)/2], 0o644)
	if _, _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("truncated file: error %v", err)
	}
}
