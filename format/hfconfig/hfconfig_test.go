package hfconfig_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rlvr/format/hfconfig"
	"rlvr/internal/shareddata"
)

// qwen2Config is shaped like Qwen2.5-0.5B-Instruct's config.json.
const qwen2Config = `{
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}`

// qwen3Config is shaped like Qwen3-0.6B's config.json: head_dim times the
// number of heads is not hidden_size.
const qwen3Config = `{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": [151645, 151643],
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}`

// gemma3Config is shaped like Gemma 3 270M's config.json, as transformers
// 4.55 wrote it.
const gemma3Config = `{
  "_sliding_window_pattern": 6,
  "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": null,
  "bos_token_id": 2,
  "eos_token_id": 1,
  "final_logit_softcapping": null,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 640,
  "initializer_range": 0.02,
  "intermediate_size": 2048,
  "layer_types": [
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "full_attention"
  ],
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 18,
  "num_key_value_heads": 1,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000.0,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "sliding_window": 512,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.55.0.dev0",
  "use_bidirectional_attention": false,
  "use_cache": true,
  "vocab_size": 262144
}`

// gemma3Want is what gemma3Config parses to.
func gemma3Want() *hfconfig.Config {
	types := make([]string, 18)
	for i := range types {
		types[i] = hfconfig.SlidingAttention
		if i%6 == 5 {
			types[i] = hfconfig.FullAttention
		}
	}
	return &hfconfig.Config{
		Architecture: hfconfig.Gemma3, ModelType: "gemma3_text",
		HiddenSize: 640, IntermediateSize: 2048, NumHiddenLayers: 18, NumAttentionHeads: 4, NumKeyValueHeads: 1,
		HeadDim: 256, VocabSize: 262144, MaxPositionEmbeddings: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, BOSTokenIDs: []int32{2}, EOSTokenIDs: []int32{1}, TorchDType: "bfloat16",
		LayerTypes: types, SlidingWindow: 512, RopeLocalBaseFreq: 10000, QueryPreAttnScalar: 256,
	}
}

// TestGemma3 reads Gemma 3 270M's config.json in transformers 4's form,
// in the form transformers 5's Gemma3TextConfig.to_dict writes
// (rope_parameters per layer type, no rope_theta), and with layer_types
// left to sliding_window_pattern; all three are the same model, and it
// writes back unchanged.
func TestGemma3(t *testing.T) {
	c, err := hfconfig.Parse("gemma3/config.json", []byte(gemma3Config))
	if err != nil {
		t.Fatal(err)
	}
	if want := gemma3Want(); !reflect.DeepEqual(c, want) {
		t.Errorf("Parse() = %+v\nwant %+v", c, want)
	}
	if !c.IsGemma3() || !c.QKNorm() || c.QKVBias() || c.OProjBias() {
		t.Errorf("IsGemma3 %v QKNorm %v QKVBias %v OProjBias %v", c.IsGemma3(), c.QKNorm(), c.QKVBias(), c.OProjBias())
	}
	out := roundTrip(t, c)
	for _, key := range []string{`"rope_local_base_freq": 10000.0`, `"query_pre_attn_scalar": 256,`, `"hidden_activation": "gelu_pytorch_tanh"`, `"final_logit_softcapping": null`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("written config.json lacks %s:\n%s", key, out)
		}
	}
	v5 := strings.Replace(gemma3Config, `"rope_local_base_freq": 10000.0,
  "rope_scaling": null,
  "rope_theta": 1000000.0,`, `"rope_parameters": {
    "full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}
  },`, 1)
	if v5 == gemma3Config {
		t.Fatal("the transformers 5 form was not made")
	}
	c5, err := hfconfig.Parse("gemma3-v5/config.json", []byte(v5))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c5, c) {
		t.Errorf("transformers 5's form: %+v\nwant %+v", c5, c)
	}
	i, j := strings.Index(gemma3Config, `"layer_types"`), strings.Index(gemma3Config, `"max_position_embeddings"`)
	noTypes := gemma3Config[:i] + gemma3Config[j:]
	c6, err := hfconfig.Parse("gemma3-pattern/config.json", []byte(noTypes))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c6, c) {
		t.Errorf("layer_types from the default pattern: %+v\nwant %+v", c6.LayerTypes, c.LayerTypes)
	}
}

// TestGemma3Defaults checks transformers' Gemma3TextConfig defaults for
// absent fields, sliding_window_pattern, and the RoPE forms' precedence:
// rope_scaling adds to the full-attention dict, a base in a dict wins over
// rope_theta.
func TestGemma3Defaults(t *testing.T) {
	c, err := hfconfig.Parse("min.json", []byte(`{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32, "sliding_window_pattern": 2,
		"rope_theta": 5.0, "rope_parameters": {"full_attention": {"rope_theta": 7.0}},
		"rope_scaling": {"rope_type": "linear", "factor": 8.0}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &hfconfig.Config{
		Architecture: hfconfig.Gemma3, ModelType: "gemma3_text",
		HiddenSize: 64, IntermediateSize: 128, NumHiddenLayers: 4, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		HeadDim: 256, VocabSize: 32, MaxPositionEmbeddings: 131072, RMSNormEps: 1e-6, RopeTheta: 7,
		RopeScaling:       &hfconfig.RopeScaling{Type: "linear", Factor: 8},
		TieWordEmbeddings: true, BOSTokenIDs: []int32{2}, EOSTokenIDs: []int32{1},
		LayerTypes:    []string{hfconfig.SlidingAttention, hfconfig.FullAttention, hfconfig.SlidingAttention, hfconfig.FullAttention},
		SlidingWindow: 4096, RopeLocalBaseFreq: 10000, QueryPreAttnScalar: 256,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse() = %+v\nwant %+v", c, want)
	}
	roundTrip(t, c)
}

// TestRopeScaling reads each supported RoPE scaling in both forms,
// rope_scaling and transformers 5's rope_parameters, and writes it back.
func TestRopeScaling(t *testing.T) {
	const base = `"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 32, "max_position_embeddings": 4096`
	for _, tc := range []struct {
		name, json string
		theta      float64
		want       *hfconfig.RopeScaling
	}{
		{"llama3", `"rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}`,
			500000, &hfconfig.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}},
		{"llama3 in rope_parameters", `"rope_parameters": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_theta": 500000.0, "rope_type": "llama3"}`,
			500000, &hfconfig.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}},
		{"llama3 original length defaults", `"rope_scaling": {"factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "rope_type": "llama3"}`,
			10000, &hfconfig.RopeScaling{Type: "llama3", Factor: 2, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 4096}},
		{"linear legacy type", `"rope_scaling": {"type": "linear", "factor": 2.0}`, 10000, &hfconfig.RopeScaling{Type: "linear", Factor: 2}},
		{"dynamic", `"rope_parameters": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0}`, 10000, &hfconfig.RopeScaling{Type: "dynamic", Factor: 4}},
		{"default", `"rope_parameters": {"rope_type": "default", "rope_theta": 3.0}`, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := hfconfig.Parse("config.json", []byte("{"+base+", "+tc.json+"}"))
			if err != nil {
				t.Fatal(err)
			}
			if c.RopeTheta != tc.theta || !reflect.DeepEqual(c.RopeScaling, tc.want) {
				t.Errorf("rope_theta %v, scaling %+v; want %v, %+v", c.RopeTheta, c.RopeScaling, tc.theta, tc.want)
			}
			roundTrip(t, c)
		})
	}
}

func TestFixture(t *testing.T) {
	path := shareddata.Path(t, "verl-arith-llama/config.json")
	c, err := hfconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &hfconfig.Config{
		Architecture: hfconfig.Llama, ModelType: "llama",
		HiddenSize: 128, IntermediateSize: 344, NumHiddenLayers: 4,
		NumAttentionHeads: 4, NumKeyValueHeads: 4, HeadDim: 32, VocabSize: 16,
		MaxPositionEmbeddings: 2048, RMSNormEps: 1e-6, RopeTheta: 10000,
		EOSTokenIDs: []int32{1}, TorchDType: "bfloat16",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load() = %+v\nwant %+v", c, want)
	}
	if c.QKVBias() || c.OProjBias() || c.QKNorm() {
		t.Errorf("Llama without attention_bias: QKVBias %v OProjBias %v QKNorm %v", c.QKVBias(), c.OProjBias(), c.QKNorm())
	}
	roundTrip(t, c)
}

// roundTrip writes c and checks that it loads back unchanged.
func roundTrip(t *testing.T, c *hfconfig.Config) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := hfconfig.Write(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := hfconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := *c
	if want.TorchDType == "" {
		want.TorchDType = "float32"
	}
	if !reflect.DeepEqual(got, &want) {
		t.Errorf("after Write and Load: %+v\nwant %+v", got, &want)
	}
	data, _ := os.ReadFile(path)
	return data
}

func TestQwen2(t *testing.T) {
	c, err := hfconfig.Parse("qwen2/config.json", []byte(qwen2Config))
	if err != nil {
		t.Fatal(err)
	}
	want := &hfconfig.Config{
		Architecture: hfconfig.Qwen2, ModelType: "qwen2",
		HiddenSize: 896, IntermediateSize: 4864, NumHiddenLayers: 24,
		NumAttentionHeads: 14, NumKeyValueHeads: 2, HeadDim: 64, VocabSize: 151936,
		MaxPositionEmbeddings: 32768, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, BOSTokenIDs: []int32{151643}, EOSTokenIDs: []int32{151645},
		TorchDType: "bfloat16",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse() = %+v\nwant %+v", c, want)
	}
	if !c.QKVBias() || c.OProjBias() || c.QKNorm() {
		t.Errorf("Qwen2: QKVBias %v OProjBias %v QKNorm %v, want true false false", c.QKVBias(), c.OProjBias(), c.QKNorm())
	}
	data := roundTrip(t, c)
	for _, want := range []string{
		`"architectures": [` + "\n" + `    "Qwen2ForCausalLM"` + "\n  ],",
		`"model_type": "qwen2",`,
		`"rms_norm_eps": 1e-06,`,
		`"rope_theta": 1000000.0,`,
		`"torch_dtype": "bfloat16",`,
		`"use_sliding_window": false,`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("written config lacks %q:\n%s", want, data)
		}
	}
}

func TestQwen3(t *testing.T) {
	c, err := hfconfig.Parse("qwen3/config.json", []byte(qwen3Config))
	if err != nil {
		t.Fatal(err)
	}
	want := &hfconfig.Config{
		Architecture: hfconfig.Qwen3, ModelType: "qwen3",
		HiddenSize: 1024, IntermediateSize: 3072, NumHiddenLayers: 28,
		NumAttentionHeads: 16, NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 151936,
		MaxPositionEmbeddings: 40960, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, BOSTokenIDs: []int32{151643}, EOSTokenIDs: []int32{151645, 151643},
		TorchDType: "bfloat16",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse() = %+v\nwant %+v", c, want)
	}
	if c.QKVBias() || c.OProjBias() || !c.QKNorm() {
		t.Errorf("Qwen3: QKVBias %v OProjBias %v QKNorm %v, want false false true", c.QKVBias(), c.OProjBias(), c.QKNorm())
	}
	roundTrip(t, c)

	// Newer transformers write dtype and rope_parameters; head_dim
	// defaults to 128 for Qwen3.
	newer := strings.NewReplacer(
		`"torch_dtype"`, `"dtype"`,
		`"rope_theta": 1000000,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0},`,
		`"head_dim": 128,`, ``,
	).Replace(qwen3Config)
	c, err = hfconfig.Parse("newer.json", []byte(newer))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 5e6 || c.HeadDim != 128 || c.TorchDType != "bfloat16" {
		t.Errorf("newer format: rope_theta %v head_dim %d dtype %q", c.RopeTheta, c.HeadDim, c.TorchDType)
	}
}

func TestDefaults(t *testing.T) {
	c, err := hfconfig.Parse("min.json", []byte(`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 32, "attention_bias": true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &hfconfig.Config{
		Architecture: hfconfig.Llama, ModelType: "llama",
		HiddenSize: 64, IntermediateSize: 128, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 4, HeadDim: 16, VocabSize: 32,
		MaxPositionEmbeddings: 2048, RMSNormEps: 1e-6, RopeTheta: 10000,
		AttentionBias: true, BOSTokenIDs: []int32{1}, EOSTokenIDs: []int32{2},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse() = %+v\nwant %+v", c, want)
	}
	if !c.QKVBias() || !c.OProjBias() {
		t.Error("Llama with attention_bias: want q/k/v and o biases")
	}
	roundTrip(t, c)
}

func TestMalformed(t *testing.T) {
	const base = `"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 32`
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"invalid JSON", `{"hidden_size": 64,`, []string{"invalid JSON"}},
		{"not an object", `[1]`, []string{"invalid JSON"}},
		{"wrong type", `{` + base + `, "num_attention_heads": "4"}`, []string{"num_attention_heads", "cannot use JSON string"}},
		{"fractional size", `{` + base + `, "num_attention_heads": 4.5}`, []string{"num_attention_heads"}},
		{"missing size", `{"architectures": ["LlamaForCausalLM"], "num_attention_heads": 4}`, []string{"hidden_size: missing"}},
		{"zero size", `{` + base + `, "num_attention_heads": 0}`, []string{"num_attention_heads: must be positive"}},
		{"negative size", `{` + base + `, "num_attention_heads": 4, "num_hidden_layers": -1}`, []string{"num_hidden_layers: must be positive"}},
		{"heads do not divide hidden", `{` + base + `, "num_attention_heads": 3}`, []string{"num_attention_heads: 3 does not divide hidden_size 64"}},
		{"heads do not divide hidden with head_dim", `{` + base + `, "num_attention_heads": 3, "head_dim": 16}`, []string{"num_attention_heads: 3 does not divide hidden_size 64"}},
		{"kv heads", `{` + base + `, "num_attention_heads": 4, "num_key_value_heads": 3}`, []string{"num_key_value_heads: 3 does not divide num_attention_heads 4"}},
		{"odd head_dim", `{` + base + `, "num_attention_heads": 4, "head_dim": 15}`, []string{"head_dim: RoPE needs an even head size"}},
		{"unknown architecture", `{"architectures": ["MistralForCausalLM"]}`, []string{"architectures: unsupported architecture \"MistralForCausalLM\""}},
		{"two architectures", `{"architectures": ["LlamaForCausalLM", "Qwen2ForCausalLM"]}`, []string{"architectures: want one"}},
		{"unknown model_type", `{"model_type": "gpt2"}`, []string{"model_type: unsupported model type \"gpt2\""}},
		{"model_type mismatch", `{` + base + `, "num_attention_heads": 4, "model_type": "qwen2"}`, []string{"model_type: \"qwen2\" does not match architecture LlamaForCausalLM"}},
		{"no architecture", `{"hidden_size": 64}`, []string{"neither architectures nor model_type"}},
		{"rope_scaling llama3 incomplete", `{` + base + `, "num_attention_heads": 4, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}`, []string{"rope_scaling: llama3 RoPE needs low_freq_factor"}},
		{"rope_scaling without factor", `{` + base + `, "num_attention_heads": 4, "rope_scaling": {"type": "linear"}}`, []string{"rope_scaling: linear RoPE needs factor"}},
		{"rope_scaling yarn", `{` + base + `, "num_attention_heads": 4, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}`, []string{"rope_scaling: RoPE type \"yarn\" is not supported (default, linear, dynamic, llama3)"}},
		{"rope_scaling bands", `{` + base + `, "num_attention_heads": 4, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4, "high_freq_factor": 1}}`, []string{"rope_scaling: high_freq_factor 1 must exceed low_freq_factor 4"}},
		{"rope_scaling zero factor", `{` + base + `, "num_attention_heads": 4, "rope_scaling": {"rope_type": "dynamic", "factor": 0}}`, []string{"rope_scaling: factor must be positive"}},
		{"rope_parameters", `{` + base + `, "num_attention_heads": 4, "rope_parameters": {"rope_type": "yarn"}}`, []string{"rope_parameters: RoPE type \"yarn\" is not supported"}},
		{"partial rotary", `{` + base + `, "num_attention_heads": 4, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}`, []string{"rope_parameters: partial_rotary_factor 0.5 is not supported"}},
		{"multimodal gemma3", `{"model_type": "gemma3", "text_config": {}}`, []string{"model_type: the multimodal Gemma 3", "text_config (model_type gemma3_text, Gemma3ForCausalLM)"}},
		{"multimodal gemma3 architecture", `{"architectures": ["Gemma3ForConditionalGeneration"]}`, []string{"architectures: the multimodal Gemma 3"}},
		{"gemma softcapping", strings.Replace(gemma3Config, `"final_logit_softcapping": null`, `"final_logit_softcapping": 30.0`, 1), []string{"final_logit_softcapping: logit soft-capping (30.0) is not supported"}},
		{"gemma attention softcapping", strings.Replace(gemma3Config, `"attn_logit_softcapping": null`, `"attn_logit_softcapping": 50`, 1), []string{"attn_logit_softcapping: logit soft-capping"}},
		{"gemma bidirectional", strings.Replace(gemma3Config, `"use_bidirectional_attention": false`, `"use_bidirectional_attention": true`, 1), []string{"use_bidirectional_attention: bidirectional attention is not supported"}},
		{"gemma activation", strings.Replace(gemma3Config, `"gelu_pytorch_tanh"`, `"gelu"`, 1), []string{"hidden_activation: \"gelu\" is not supported (only gelu_pytorch_tanh)"}},
		{"gemma layer type", strings.Replace(gemma3Config, `"full_attention"`, `"chunked_attention"`, 1), []string{"layer_types: layer 5 is \"chunked_attention\""}},
		{"gemma layer count", strings.Replace(gemma3Config, `"num_hidden_layers": 18`, `"num_hidden_layers": 17`, 1), []string{"layer_types: 18 entries for num_hidden_layers 17"}},
		{"gemma null window", strings.Replace(gemma3Config, `"sliding_window": 512`, `"sliding_window": null`, 1), []string{"sliding_window: must be positive with sliding_attention layers, got 0"}},
		{"gemma window type", strings.Replace(gemma3Config, `"sliding_window": 512`, `"sliding_window": "512"`, 1), []string{"sliding_window: want a number of positions"}},
		{"gemma local scaling", strings.Replace(gemma3Config, `"rope_scaling": null,`, `"rope_parameters": {"sliding_attention": {"rope_type": "linear", "factor": 2.0}},`, 1), []string{"rope_parameters.sliding_attention: RoPE type \"linear\" on sliding-window layers is not supported"}},
		{"gemma flat rope_parameters", strings.Replace(gemma3Config, `"rope_scaling": null,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 10.0},`, 1), []string{"rope_parameters: want a dict per layer type (full_attention, sliding_attention), got key"}},
		{"gemma pattern", `{"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 32, "sliding_window_pattern": 0}`, []string{"sliding_window_pattern: must be positive"}},
		{"hidden_act", `{` + base + `, "num_attention_heads": 4, "hidden_act": "gelu"}`, []string{"hidden_act: \"gelu\" is not supported"}},
		{"mlp_bias", `{` + base + `, "num_attention_heads": 4, "mlp_bias": true}`, []string{"mlp_bias: MLP biases are not supported"}},
		{"sliding window", strings.Replace(qwen2Config, `"use_sliding_window": false`, `"use_sliding_window": true`, 1), []string{"use_sliding_window: sliding-window attention is not supported"}},
		{"layer_types", `{` + base + `, "num_attention_heads": 4, "layer_types": ["full_attention", "sliding_attention"]}`, []string{"layer_types: layer 1 is \"sliding_attention\""}},
		{"eos string", `{` + base + `, "num_attention_heads": 4, "eos_token_id": "</s>"}`, []string{"eos_token_id: want a token id"}},
		{"eos negative", `{` + base + `, "num_attention_heads": 4, "eos_token_id": [2, -1]}`, []string{"eos_token_id: want a token id"}},
		{"eos outside the vocabulary", `{` + base + `, "num_attention_heads": 4, "eos_token_id": [2, 32]}`, []string{"eos_token_id: token id 32 is outside the vocabulary of vocab_size 32"}},
		{"bos outside the vocabulary", `{` + base + `, "num_attention_heads": 4, "bos_token_id": 40000}`, []string{"bos_token_id: token id 40000 is outside the vocabulary of vocab_size 32"}},
		{"bos fraction", `{` + base + `, "num_attention_heads": 4, "bos_token_id": 1.5}`, []string{"bos_token_id: want a token id"}},
		{"rms_norm_eps", `{` + base + `, "num_attention_heads": 4, "rms_norm_eps": 0}`, []string{"rms_norm_eps: must be in (0, 1)"}},
		{"rope_theta", `{` + base + `, "num_attention_heads": 4, "rope_theta": -1}`, []string{"rope_theta: must be positive"}},
		{"torch_dtype", `{` + base + `, "num_attention_heads": 4, "torch_dtype": "int8"}`, []string{"torch_dtype: unsupported dtype \"int8\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := hfconfig.Parse("bad/config.json", []byte(tc.json))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			for _, want := range append([]string{"hfconfig: bad/config.json: "}, tc.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
	if _, err := hfconfig.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load(missing) error = %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	c, err := hfconfig.Parse("qwen3.json", []byte(qwen3Config))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")

	bad := *c
	bad.NumKeyValueHeads = 5
	if err := hfconfig.Write(path, &bad); err == nil || !strings.Contains(err.Error(), "hfconfig: "+path+": num_key_value_heads") {
		t.Errorf("Write(bad kv heads) error = %v", err)
	}
	if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "hfconfig: num_key_value_heads: ") {
		t.Errorf("Validate() error = %v", err)
	}
	bad = *c
	bad.BOSTokenIDs = []int32{1, 2}
	if err := hfconfig.Write(path, &bad); err == nil || !strings.Contains(err.Error(), "bos_token_id") {
		t.Errorf("Write(two BOS ids) error = %v", err)
	}
	bad = *c
	bad.SlidingWindow = 8
	if err := hfconfig.Write(path, &bad); err == nil || !strings.Contains(err.Error(), "sliding_window: is a Gemma 3 field") {
		t.Errorf("Write(Qwen3 with a sliding window) error = %v", err)
	}
	bad = *c
	bad.RopeScaling = &hfconfig.RopeScaling{Type: "yarn", Factor: 2}
	if err := hfconfig.Write(path, &bad); err == nil || !strings.Contains(err.Error(), `rope_scaling: RoPE type "yarn" is not supported`) {
		t.Errorf("Write(yarn) error = %v", err)
	}
	g := gemma3Want()
	g.LayerTypes = g.LayerTypes[1:]
	if err := hfconfig.Write(path, g); err == nil || !strings.Contains(err.Error(), "layer_types: 17 entries for num_hidden_layers 18") {
		t.Errorf("Write(Gemma 3 short of a layer type) error = %v", err)
	}
	bad = *c
	bad.Architecture = "GPT2LMHeadModel"
	if _, err := hfconfig.Marshal(&bad); err == nil || !strings.Contains(err.Error(), "architectures") {
		t.Errorf("Marshal(unknown architecture) error = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left %v", entries)
	}
	if err := hfconfig.Write(filepath.Join(dir, "missing", "config.json"), c); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(qwen2Config))
	f.Add([]byte(qwen3Config))
	f.Add([]byte(`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 32}`))
	f.Add([]byte(`{"model_type": "qwen3", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 2, "rope_parameters": {"rope_theta": 3}, "eos_token_id": []}`))
	f.Add([]byte(`{"architectures": ["LlamaForCausalLM"], "rope_scaling": {"type": "linear"}}`))
	f.Add([]byte(`{"eos_token_id": [1, 2.5]}`))
	f.Add([]byte(gemma3Config))
	f.Add([]byte(`{"model_type": "gemma3_text", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 3, "num_attention_heads": 2, "vocab_size": 2, "sliding_window_pattern": 2, "rope_parameters": {"full_attention": {"rope_type": "llama3", "factor": 2, "low_freq_factor": 1, "high_freq_factor": 2}}}`))
	f.Add([]byte(`{"model_type": "llama", "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 2, "rope_scaling": {"type": "dynamic", "factor": 2}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := hfconfig.Parse("fuzz.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "hfconfig: fuzz.json: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		out, err := hfconfig.Marshal(c)
		if len(c.BOSTokenIDs) > 1 {
			return
		}
		if err != nil {
			t.Fatalf("Marshal of a parsed config: %v", err)
		}
		back, err := hfconfig.Parse("out.json", out)
		if err != nil {
			t.Fatalf("Parse of a marshaled config: %v\n%s", err, out)
		}
		if c.TorchDType == "" {
			c.TorchDType = "float32"
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %+v\nwant %+v", back, c)
		}
	})
}

// TestLimits checks that sizes beyond the limits are refused, naming the
// field, and that the limits themselves are accepted.
func TestLimits(t *testing.T) {
	base := `"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 32, "max_position_embeddings": 64`
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"vocab", `"vocab_size": 4194305`, "vocab_size: 4194305 exceeds the limit of 4194304"},
		{"hidden", `"hidden_size": 131072`, "hidden_size: 131072 exceeds the limit"},
		{"intermediate", `"intermediate_size": 1000000000`, "intermediate_size: 1000000000 exceeds the limit"},
		{"layers", `"num_hidden_layers": 100000`, "num_hidden_layers: 100000 exceeds the limit"},
		{"heads", `"num_attention_heads": 2048, "head_dim": 16`, "num_attention_heads: 2048 exceeds the limit"},
		{"kv heads", `"num_key_value_heads": 1048576`, "num_key_value_heads: 1048576 exceeds the limit"},
		{"head dim", `"head_dim": 4096`, "head_dim: 4096 exceeds the limit"},
		{"positions", `"max_position_embeddings": 9223372036854775807`, "max_position_embeddings: 9223372036854775807 exceeds the limit"},
		{"rotary tables", `"max_position_embeddings": 4194304, "head_dim": 2048`, "max_position_embeddings: 4194304 positions of head_dim 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hfconfig.Parse("config.json", []byte("{"+base+", "+tc.extra+"}"))
			if err == nil || !strings.Contains(err.Error(), "config.json: "+tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	atLimit := `{"model_type": "llama", "hidden_size": 65536, "intermediate_size": 262144, "num_hidden_layers": 1024, "num_attention_heads": 1024, "vocab_size": 4194304, "max_position_embeddings": 2048}`
	if _, err := hfconfig.Parse("config.json", []byte(atLimit)); err != nil {
		t.Errorf("sizes at the limits: %v", err)
	}
}

// TestTransformersToDict parses the configs transformers 5 builds from the
// real models' GGUF files and writes with to_dict (format/gguf's
// testdata, from python/gguf_config_ref.py): Gemma 3's in the
// rope_parameters form, with architectures null.
func TestTransformersToDict(t *testing.T) {
	c, err := hfconfig.Load(filepath.Join("..", "gguf", "testdata", "gemma3.config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := gemma3Want()
	want.RMSNormEps, want.TorchDType = float64(float32(1e-6)), ""
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load() = %+v\nwant %+v", c, want)
	}
	if _, err := hfconfig.Load(filepath.Join("..", "gguf", "testdata", "smollm2.config.json")); err != nil {
		t.Error(err)
	}
}
