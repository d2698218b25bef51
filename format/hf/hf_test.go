package hf

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

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
		if hc2.Architecture != hc.Architecture || !m2.Config.Equal(m.Config) {
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
		l1, _ := m.ForwardBackward(b, tg, model.Loss{Logp: model.NLL{}}, nil, nil)
		l2, _ := m2.ForwardBackward(b, tg, model.Loss{Logp: model.NLL{}}, nil, nil)
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

// saveTiny saves a small random model with hf.Save and returns its
// directory.
func saveTiny(t testing.TB, cfg model.Config, dtype safetensors.DType) string {
	t.Helper()
	m, err := model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := Save(dir, m, nil, dtype); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editConfig rewrites fields of dir's config.json.
func editConfig(t *testing.T, dir string, fields map[string]any) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		c[k] = v
	}
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConfigClaimingMoreThanTheWeights edits the config.json of a saved
// model to claim other sizes: each is an error naming config.json and the
// field, found before the model is allocated.
func TestConfigClaimingMoreThanTheWeights(t *testing.T) {
	cfg := model.Config{Vocab: 64, Dim: 16, Layers: 2, Heads: 2, KVHeads: 1, Hidden: 32, MaxSeq: 32}
	for _, tc := range []struct {
		name   string
		dtype  safetensors.DType
		fields map[string]any
		want   []string
	}{
		{"huge vocab and width", safetensors.BF16, map[string]any{"hidden_size": 4096, "vocab_size": 1 << 20, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128},
			[]string{"vocab_size 1048576", "hidden_size 4096", "but the weights in"}},
		{"more layers", safetensors.F32, map[string]any{"num_hidden_layers": 3},
			[]string{`tensor "model.layers.2.input_layernorm.weight"`, "is missing", "num_hidden_layers 3"}},
		{"wider mlp", safetensors.F32, map[string]any{"intermediate_size": 40},
			[]string{`tensor "model.layers.0.mlp.gate_proj.weight" has shape [32 16], the config implies [40 16]`, "intermediate_size 40"}},
		{"kv heads", safetensors.F32, map[string]any{"num_key_value_heads": 2},
			[]string{`"model.layers.0.self_attn.k_proj.weight" has shape [8 16], the config implies [16 16]`, "num_key_value_heads 2"}},
		{"vocab beyond the limit", safetensors.F32, map[string]any{"vocab_size": 1 << 30}, []string{"vocab_size: 1073741824 exceeds the limit"}},
		{"layers beyond the limit", safetensors.F32, map[string]any{"num_hidden_layers": 1 << 40}, []string{"num_hidden_layers: 1099511627776 exceeds the limit"}},
		{"context beyond the limit", safetensors.F32, map[string]any{"max_position_embeddings": 1 << 40}, []string{"max_position_embeddings: 1099511627776 exceeds the limit"}},
		{"rotary tables", safetensors.F32, map[string]any{"max_position_embeddings": 1 << 22, "head_dim": 1024}, []string{"max_position_embeddings: 4194304 positions of head_dim 1024"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := saveTiny(t, cfg, tc.dtype)
			editConfig(t, dir, tc.fields)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, _, err := func() (m *model.Model, hc *hfconfig.Config, err error) {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic: %v", r)
					}
				}()
				return Load(dir)
			}()
			runtime.ReadMemStats(&after)
			if err == nil || m != nil {
				t.Fatal("no error")
			}
			for _, w := range append(tc.want, filepath.Join(dir, "config.json")) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
				t.Errorf("Load allocated %d bytes before failing", n)
			}
		})
	}
	// The unedited model loads.
	if _, _, err := Load(saveTiny(t, cfg, safetensors.BF16)); err != nil {
		t.Fatal(err)
	}
}

// TestCheckRefusesIntegerTensors checks that a tensor of the right shape
// but a dtype Fill cannot convert is an error from Check, not from Fill.
func TestCheckRefusesIntegerTensors(t *testing.T) {
	cfg := model.Config{Vocab: 8, Dim: 4, Layers: 1, Heads: 2, Hidden: 8, MaxSeq: 8}
	ts, err := model.Layout(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var infos []safetensors.TensorInfo
	var off int64
	for _, tt := range ts {
		dtype := safetensors.F32
		if tt.Name == "model.norm.weight" {
			dtype = "I32"
		}
		infos = append(infos, safetensors.TensorInfo{Name: tt.Name, DType: dtype, Shape: tt.Shape, Offsets: [2]int64{off, off + 4*int64(tt.Len())}})
		off += 4 * int64(tt.Len())
	}
	_, err = Check(Config(cfg, nil, nil), "config.json", infos, "model.safetensors")
	if err == nil || !strings.Contains(err.Error(), `tensor "model.norm.weight" has dtype I32`) {
		t.Fatalf("error %v", err)
	}
}

// FuzzCheck checks config.json against a safetensors file: Check never
// panics, and what it accepts loads: the model allocates no more than the
// file's size in parameters, and every tensor fills.
func FuzzCheck(f *testing.F) {
	for _, cfg := range []model.Config{
		{Vocab: 9, Dim: 8, Layers: 1, Heads: 2, Hidden: 12, MaxSeq: 8},
		{Vocab: 9, Dim: 8, Layers: 2, Heads: 2, KVHeads: 1, Hidden: 12, MaxSeq: 8, AttentionBias: true, TiedEmbeddings: true},
		{Vocab: 9, Dim: 8, Layers: 1, Heads: 2, HeadDim: 6, Hidden: 12, MaxSeq: 8, QKNorm: true},
		{Vocab: 9, Dim: 8, Layers: 2, Heads: 2, KVHeads: 1, Hidden: 12, MaxSeq: 8, TiedEmbeddings: true,
			Gemma3: true, SlidingWindow: 3, LocalLayers: []bool{true, false}, QueryPreAttnScalar: 4},
		{Vocab: 9, Dim: 8, Layers: 1, Heads: 2, Hidden: 12, MaxSeq: 8,
			RopeScaling: model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxSeq: 4}},
	} {
		dir := saveTiny(f, cfg, safetensors.BF16)
		config, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		weights, err := os.ReadFile(filepath.Join(dir, safetensors.SingleFileName))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(config, weights)
		f.Add(bytes.Replace(config, []byte(`"vocab_size": 9`), []byte(`"vocab_size": 1048576`), 1), weights)
		f.Add(bytes.Replace(config, []byte(`"num_hidden_layers": `), []byte(`"num_hidden_layers": 1`), 1), weights)
	}
	f.Fuzz(func(t *testing.T, config, weights []byte) {
		hc, err := hfconfig.Parse("config.json", config)
		if err != nil {
			return
		}
		sf, err := safetensors.NewFile(bytes.NewReader(weights), int64(len(weights)), "model.safetensors")
		if err != nil {
			return
		}
		mc, err := Check(hc, "config.json", sf.Tensors(), "model.safetensors")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "hf: ") || !strings.Contains(err.Error(), "config.json") {
				t.Fatalf("error %q does not name config.json", err)
			}
			return
		}
		if mc.MaxSeq*max(mc.HeadDim, mc.Dim/mc.Heads) > 1<<16 {
			return // valid, but building its rotary tables takes seconds
		}
		m, err := model.NewEmpty(mc)
		if err != nil {
			t.Fatalf("Check accepted a config NewEmpty refuses: %v", err)
		}
		if 2*m.NumParams() > len(weights) {
			t.Fatalf("%d parameters from a %d-byte file", m.NumParams(), len(weights))
		}
		if err := Fill(m, sf.Float32, "model.safetensors"); err != nil {
			t.Fatalf("Check accepted what Fill refuses: %v", err)
		}
		var names []string
		for _, ti := range sf.Tensors() {
			names = append(names, ti.Name)
		}
		unread, err := Unread(mc, names)
		if err != nil {
			t.Fatal(err)
		}
		if len(unread) > 0 && !(mc.TiedEmbeddings && slices.Equal(unread, []string{headName})) {
			t.Fatalf("Check accepted tensors the model does not read: %v", unread)
		}
	})
}

// TestGemma3AndScaledRoPERoundTrip saves a random Gemma 3 model (local and
// global layers, scaled global RoPE) and a Llama with each RoPE scaling,
// and checks the directory loads back as the same configuration with the
// same weights, under Gemma 3's tensor names.
func TestGemma3AndScaledRoPERoundTrip(t *testing.T) {
	gemma := model.Config{Vocab: 40, Dim: 16, Layers: 3, Heads: 2, KVHeads: 1, HeadDim: 8, Hidden: 24, MaxSeq: 64,
		RopeTheta: 1e6, NormEps: 1e-6, TiedEmbeddings: true, Gemma3: true, QueryPreAttnScalar: 8, SlidingWindow: 4,
		LocalLayers: []bool{true, false, true}, LocalRopeTheta: 10000,
		RopeScaling: model.RopeScaling{Type: "linear", Factor: 8}}
	llama := model.Config{Vocab: 40, Dim: 16, Layers: 1, Heads: 2, KVHeads: 2, Hidden: 24, MaxSeq: 64, RopeTheta: 500000, NormEps: 1e-5}
	cfgs := map[string]model.Config{"gemma3": gemma}
	for _, s := range []model.RopeScaling{
		{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxSeq: 32},
		{Type: "linear", Factor: 2},
		{Type: "dynamic", Factor: 2, OriginalMaxSeq: 64},
	} {
		c := llama
		c.RopeScaling = s
		cfgs["llama/"+s.Type] = c
	}
	for name, cfg := range cfgs {
		t.Run(name, func(t *testing.T) {
			m, err := model.New(cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := Save(dir, m, nil, safetensors.F32); err != nil {
				t.Fatal(err)
			}
			m2, hc, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !m2.Config.Equal(m.Config) {
				t.Fatalf("config %+v, saved %+v", m2.Config, m.Config)
			}
			if cfg.Gemma3 != (hc.Architecture == hfconfig.Gemma3) {
				t.Errorf("architecture %s", hc.Architecture)
			}
			for i := range m.Params {
				if m.Params[i] != m2.Params[i] {
					t.Fatalf("parameter %d differs", i)
				}
			}
			if cfg.Gemma3 {
				for _, name := range []string{"model.layers.2.pre_feedforward_layernorm.weight", "model.layers.2.post_feedforward_layernorm.weight",
					"model.layers.0.post_attention_layernorm.weight", "model.layers.1.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight"} {
					if _, _, ok := m2.Tensor(name); !ok {
						t.Errorf("no tensor %s", name)
					}
				}
			}
		})
	}
}
