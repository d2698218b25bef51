// Package hfconfig reads and writes the config.json of Hugging Face
// decoder-only checkpoints of the Llama family (LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM) and of Gemma 3's text model
// (Gemma3ForCausalLM, model_type gemma3_text).
//
// Parse fills in the defaults transformers uses for missing fields and
// rejects configurations the engine cannot run exactly, such as YaRN RoPE
// scaling, Qwen2's sliding window or Gemma's logit soft-capping, rather
// than silently computing something else. It reads RoPE settings in both
// of transformers' forms: rope_theta and rope_scaling (with Gemma 3's
// rope_local_base_freq), and rope_parameters, which transformers 5 writes
// (keyed by layer type for Gemma 3). Write produces a config.json that
// transformers loads as the same model, in the first form, which both
// transformers 4 and 5 read.
package hfconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"rlvr/internal/atomicfile"
)

// The supported architectures, as named in config.json's "architectures".
const (
	Llama  = "LlamaForCausalLM"
	Qwen2  = "Qwen2ForCausalLM"
	Qwen3  = "Qwen3ForCausalLM"
	Gemma3 = "Gemma3ForCausalLM"
)

// supported names the architectures in errors.
const supported = Llama + ", " + Qwen2 + ", " + Qwen3 + ", " + Gemma3

// arch holds what differs between the architectures: the model_type and
// transformers' defaults.
type arch struct {
	modelType   string
	maxPos      int
	headDim     int     // 0: hidden_size / num_attention_heads
	bos, eos    []int32 // token ids when the keys are absent
	alwaysQKV   bool    // q/k/v projections always have biases
	qkNorm      bool    // per-head RMSNorm of queries and keys
	slidingKeys bool    // use_sliding_window is a config field
	tied        bool    // tie_word_embeddings when absent
	theta       float64
	gemma       bool // Gemma 3's fields and block
}

var archs = map[string]arch{
	Llama: {modelType: "llama", maxPos: 2048, bos: []int32{1}, eos: []int32{2}, theta: 10000},
	Qwen2: {modelType: "qwen2", maxPos: 32768, alwaysQKV: true, slidingKeys: true, theta: 10000},
	Qwen3: {modelType: "qwen3", maxPos: 32768, headDim: 128, qkNorm: true, slidingKeys: true, theta: 10000},
	Gemma3: {modelType: "gemma3_text", maxPos: 131072, headDim: 256, bos: []int32{2}, eos: []int32{1}, qkNorm: true,
		tied: true, theta: 1e6, gemma: true},
}

// Gemma 3's defaults in transformers' Gemma3TextConfig.
const (
	gemmaQueryPreAttnScalar = 256
	gemmaSlidingWindow      = 4096
	gemmaWindowPattern      = 6 // sliding_window_pattern: every sixth layer is global
	gemmaLocalBase          = 10000.0
	gemmaActivation         = "gelu_pytorch_tanh"
)

// Layer types of layer_types.
const (
	FullAttention    = "full_attention"
	SlidingAttention = "sliding_attention"
)

// Limits on the sizes a config.json may claim, well above those of any
// published model of these families (the largest have a vocabulary of
// 262,144, hidden_size 16,384, intermediate_size 53,248, 126 layers, 128
// heads of 256 and a context of about a million positions). A config.json
// is untrusted input: it decides how much memory a model takes before its
// weights are read, so Parse refuses sizes beyond these.
const (
	MaxVocabSize          = 1 << 22 // vocab_size
	MaxHiddenSize         = 1 << 16 // hidden_size
	MaxIntermediateSize   = 1 << 18 // intermediate_size
	MaxHiddenLayers       = 1 << 10 // num_hidden_layers
	MaxAttentionHeads     = 1 << 10 // num_attention_heads, num_key_value_heads
	MaxHeadDim            = 1 << 11 // head_dim
	MaxPositionEmbeddings = 1 << 22 // max_position_embeddings
	// MaxRotaryEntries bounds max_position_embeddings × head_dim, the size
	// of each rotary table (1 GiB of float32 for the pair).
	MaxRotaryEntries = 1 << 27
)

// Config is the part of a config.json that defines the model.
type Config struct {
	// Architecture is Llama, Qwen2 or Qwen3.
	Architecture string
	// ModelType is config.json's model_type: "llama", "qwen2" or "qwen3".
	// Write fills it in from Architecture when empty.
	ModelType string

	HiddenSize        int
	IntermediateSize  int
	NumHiddenLayers   int
	NumAttentionHeads int
	// NumKeyValueHeads defaults to NumAttentionHeads.
	NumKeyValueHeads int
	// HeadDim is the size of one attention head: head_dim if given,
	// otherwise 128 for Qwen3 and HiddenSize/NumAttentionHeads for the
	// others, as in transformers.
	HeadDim   int
	VocabSize int
	// MaxPositionEmbeddings defaults to 2048 for Llama and 32768 for Qwen.
	MaxPositionEmbeddings int

	// RMSNormEps defaults to 1e-6.
	RMSNormEps float64
	// RopeTheta is the RoPE base frequency (of the full-attention layers
	// in Gemma 3); it defaults to 10000, or 1e6 for Gemma 3.
	RopeTheta float64
	// RopeScaling is rope_scaling (in rope_parameters, the rope_type and
	// its fields); nil means plain RoPE. In Gemma 3 it applies to the
	// full-attention layers.
	RopeScaling *RopeScaling

	// TieWordEmbeddings reports whether the output projection reuses the
	// token embeddings (there is then no lm_head.weight).
	TieWordEmbeddings bool
	// AttentionBias is config.json's attention_bias, which gives the q, k,
	// v and o projections biases in Llama and Qwen3. Qwen2 ignores it; see
	// QKVBias and OProjBias.
	AttentionBias bool

	// BOSTokenIDs and EOSTokenIDs hold bos_token_id and eos_token_id, which
	// config.json gives as null, a number or a list. Llama defaults to
	// BOS 1 and EOS 2 when the keys are absent.
	BOSTokenIDs []int32
	EOSTokenIDs []int32

	// TorchDType is the dtype of the stored weights, e.g. "bfloat16"
	// (config.json's torch_dtype, or dtype in newer transformers). Empty
	// means float32.
	TorchDType string

	// Gemma 3 only (the zero values elsewhere):

	// LayerTypes is layer_types, one of FullAttention or SlidingAttention
	// per layer. When absent it follows sliding_window_pattern (default 6):
	// every pattern-th layer is full, the others sliding, as transformers
	// derives it.
	LayerTypes []string
	// SlidingWindow is sliding_window: a query of a sliding layer sees the
	// keys less than this many positions behind it (itself included).
	// Default 4096.
	SlidingWindow int
	// RopeLocalBaseFreq is rope_local_base_freq, the RoPE base of the
	// sliding layers, which take no scaling. Default 10000.
	RopeLocalBaseFreq float64
	// QueryPreAttnScalar is query_pre_attn_scalar: attention scores are
	// scaled by its inverse square root. Default 256.
	QueryPreAttnScalar float64
}

// RopeScaling is rope_scaling: a RoPE type other than "default" and its
// parameters.
type RopeScaling struct {
	// Type is rope_type (or the older type): "linear", "dynamic" or
	// "llama3".
	Type   string
	Factor float64 // factor
	// LowFreqFactor, HighFreqFactor and OriginalMaxPositionEmbeddings are
	// llama3's bands (low_freq_factor, high_freq_factor,
	// original_max_position_embeddings). dynamic rescales from
	// max_position_embeddings, as transformers does, and ignores them.
	LowFreqFactor                 float64
	HighFreqFactor                float64
	OriginalMaxPositionEmbeddings int
}

// IsGemma3 reports whether c is Gemma 3's text model.
func (c *Config) IsGemma3() bool { return archs[c.Architecture].gemma }

// QKVBias reports whether the q, k and v projections have biases.
func (c *Config) QKVBias() bool { return archs[c.Architecture].alwaysQKV || c.AttentionBias }

// OProjBias reports whether the attention output projection has a bias.
func (c *Config) OProjBias() bool { return !archs[c.Architecture].alwaysQKV && c.AttentionBias }

// QKNorm reports whether queries and keys go through a per-head RMSNorm
// (q_norm, k_norm) before RoPE, as in Qwen3.
func (c *Config) QKNorm() bool { return archs[c.Architecture].qkNorm }

// rawConfig is config.json as decoded; pointers tell absent fields apart.
type rawConfig struct {
	Architectures         []string        `json:"architectures"`
	ModelType             string          `json:"model_type"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	VocabSize             *int            `json:"vocab_size"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	RopeParameters        json.RawMessage `json:"rope_parameters"`
	OriginalMaxPos        *int            `json:"original_max_position_embeddings"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	HiddenAct             *string         `json:"hidden_act"`
	UseSlidingWindow      bool            `json:"use_sliding_window"`
	LayerTypes            []string        `json:"layer_types"`
	BOSTokenID            json.RawMessage `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	TorchDType            *string         `json:"torch_dtype"`
	DType                 *string         `json:"dtype"`

	// Gemma 3
	HiddenActivation          *string         `json:"hidden_activation"`
	QueryPreAttnScalar        *float64        `json:"query_pre_attn_scalar"`
	SlidingWindow             json.RawMessage `json:"sliding_window"`
	SlidingWindowPattern      *int            `json:"sliding_window_pattern"`
	RopeLocalBaseFreq         *float64        `json:"rope_local_base_freq"`
	FinalLogitSoftcapping     json.RawMessage `json:"final_logit_softcapping"`
	AttnLogitSoftcapping      json.RawMessage `json:"attn_logit_softcapping"`
	UseBidirectionalAttention *bool           `json:"use_bidirectional_attention"`
}

// fieldError is an error about one field of a config file; file may be
// empty.
func fieldError(file, field, format string, args ...any) error {
	if file == "" {
		return fmt.Errorf("hfconfig: %s: %s", field, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("hfconfig: %s: %s: %s", file, field, fmt.Sprintf(format, args...))
}

// Load reads and parses the config.json at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hfconfig: %w", err)
	}
	return Parse(path, data)
}

// Parse parses the contents of a config.json, filling in defaults, and
// validates the result. filename is used in error messages.
func Parse(filename string, data []byte) (*Config, error) {
	var raw rawConfig
	if err := json.Unmarshal(data, &raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, fieldError(filename, typeErr.Field, "cannot use JSON %s as %s", typeErr.Value, typeErr.Type)
		}
		return nil, fmt.Errorf("hfconfig: %s: invalid JSON: %w", filename, err)
	}
	if raw.Architectures == nil && raw.ModelType == "" {
		return nil, fmt.Errorf("hfconfig: %s: neither architectures nor model_type is set", filename)
	}
	if raw.ModelType == "gemma3" || slices.Contains(raw.Architectures, "Gemma3ForConditionalGeneration") {
		field := "model_type"
		if raw.ModelType != "gemma3" {
			field = "architectures"
		}
		return nil, fieldError(filename, field, "the multimodal Gemma 3 (model_type gemma3, Gemma3ForConditionalGeneration) is not supported: "+
			"use its text model's config, text_config (model_type gemma3_text, %s)", Gemma3)
	}
	c := &Config{ModelType: raw.ModelType, AttentionBias: raw.AttentionBias}
	switch len(raw.Architectures) {
	case 0:
		for name, a := range archs {
			if a.modelType == raw.ModelType {
				c.Architecture = name
			}
		}
		if c.Architecture == "" {
			return nil, fieldError(filename, "model_type", "unsupported model type %q (supported: llama, qwen2, qwen3, gemma3_text)", raw.ModelType)
		}
	case 1:
		c.Architecture = raw.Architectures[0]
	default:
		return nil, fieldError(filename, "architectures", "want one architecture, got %q", raw.Architectures)
	}
	a, ok := archs[c.Architecture]
	if !ok {
		return nil, fieldError(filename, "architectures", "unsupported architecture %q (supported: %s)", c.Architecture, supported)
	}
	if c.ModelType == "" {
		c.ModelType = a.modelType
	}
	c.TieWordEmbeddings = valueOr(raw.TieWordEmbeddings, a.tied)

	for _, f := range []struct {
		name string
		src  *int
		dst  *int
	}{
		{"hidden_size", raw.HiddenSize, &c.HiddenSize},
		{"intermediate_size", raw.IntermediateSize, &c.IntermediateSize},
		{"num_hidden_layers", raw.NumHiddenLayers, &c.NumHiddenLayers},
		{"num_attention_heads", raw.NumAttentionHeads, &c.NumAttentionHeads},
		{"vocab_size", raw.VocabSize, &c.VocabSize},
	} {
		if f.src == nil {
			return nil, fieldError(filename, f.name, "missing")
		}
		*f.dst = *f.src
	}
	c.NumKeyValueHeads = valueOr(raw.NumKeyValueHeads, c.NumAttentionHeads)
	c.MaxPositionEmbeddings = valueOr(raw.MaxPositionEmbeddings, a.maxPos)
	c.RMSNormEps = valueOr(raw.RMSNormEps, 1e-6)
	c.RopeTheta = valueOr(raw.RopeTheta, a.theta)
	switch {
	case raw.HeadDim != nil:
		c.HeadDim = *raw.HeadDim
	case a.headDim != 0:
		c.HeadDim = a.headDim
	case c.NumAttentionHeads > 0:
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			return nil, fieldError(filename, "num_attention_heads", "%d does not divide hidden_size %d", c.NumAttentionHeads, c.HiddenSize)
		}
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if a.gemma {
		if err := parseGemma(filename, &raw, c); err != nil {
			return nil, err
		}
	}
	if err := parseRoPE(filename, &raw, c); err != nil {
		return nil, err
	}

	if raw.HiddenAct != nil && *raw.HiddenAct != "silu" && !a.gemma {
		return nil, fieldError(filename, "hidden_act", "%q is not supported (only silu)", *raw.HiddenAct)
	}
	if raw.MLPBias {
		return nil, fieldError(filename, "mlp_bias", "MLP biases are not supported")
	}
	if raw.UseSlidingWindow && a.slidingKeys {
		return nil, fieldError(filename, "use_sliding_window", "sliding-window attention is not supported")
	}
	for i, lt := range raw.LayerTypes {
		if lt != FullAttention && !a.gemma {
			return nil, fieldError(filename, "layer_types", "layer %d is %q; only full_attention is supported", i, lt)
		}
	}

	var err error
	if c.BOSTokenIDs, err = parseTokenIDs(raw.BOSTokenID, a.bos); err != nil {
		return nil, fieldError(filename, "bos_token_id", "%v", err)
	}
	if c.EOSTokenIDs, err = parseTokenIDs(raw.EOSTokenID, a.eos); err != nil {
		return nil, fieldError(filename, "eos_token_id", "%v", err)
	}
	switch {
	case raw.TorchDType != nil:
		c.TorchDType = *raw.TorchDType
	case raw.DType != nil:
		c.TorchDType = *raw.DType
	}
	if err := c.validate(filename); err != nil {
		return nil, err
	}
	return c, nil
}

func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// isSet reports whether a raw JSON field is present and not null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// ropeDict is one RoPE parameter dict: rope_scaling, rope_parameters, or
// one of Gemma 3's rope_parameters per layer type.
type ropeDict struct {
	RopeType            string   `json:"rope_type"`
	Type                string   `json:"type"`
	RopeTheta           *float64 `json:"rope_theta"`
	Factor              *float64 `json:"factor"`
	LowFreqFactor       *float64 `json:"low_freq_factor"`
	HighFreqFactor      *float64 `json:"high_freq_factor"`
	OriginalMaxPos      *int     `json:"original_max_position_embeddings"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// decodeRope decodes a RoPE dict named field; null gives nil.
func decodeRope(filename, field string, data json.RawMessage) (*ropeDict, error) {
	if !isSet(data) {
		return nil, nil
	}
	var r ropeDict
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fieldError(filename, field, "%v", err)
	}
	return &r, nil
}

// scaling returns the RoPE scaling r describes (nil for the default
// type), naming field in errors. Like transformers, llama3's original
// length defaults to original_max_position_embeddings beside the dict,
// then to max_position_embeddings.
func (r *ropeDict) scaling(filename, field string, raw *rawConfig, c *Config) (*RopeScaling, error) {
	if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != 1 {
		return nil, fieldError(filename, field, "partial_rotary_factor %v is not supported (only 1)", *r.PartialRotaryFactor)
	}
	kind := cmpOr(r.RopeType, r.Type, "default")
	need := func(name string, v *float64) (float64, error) {
		if v == nil {
			return 0, fieldError(filename, field, "%s RoPE needs %s", kind, name)
		}
		return *v, nil
	}
	s := &RopeScaling{Type: kind}
	var err error
	switch kind {
	case "default":
		return nil, nil
	case "linear", "dynamic":
		s.Factor, err = need("factor", r.Factor)
	case "llama3":
		if s.Factor, err = need("factor", r.Factor); err != nil {
			return nil, err
		}
		if s.LowFreqFactor, err = need("low_freq_factor", r.LowFreqFactor); err != nil {
			return nil, err
		}
		if s.HighFreqFactor, err = need("high_freq_factor", r.HighFreqFactor); err != nil {
			return nil, err
		}
		s.OriginalMaxPositionEmbeddings = valueOr(r.OriginalMaxPos, valueOr(raw.OriginalMaxPos, c.MaxPositionEmbeddings))
	default:
		return nil, fieldError(filename, field, "RoPE type %q is not supported (default, linear, dynamic, llama3)", kind)
	}
	return s, err
}

// parseRoPE reads the RoPE base and scaling from either form: rope_theta
// and rope_scaling (with rope_local_base_freq in Gemma 3), or
// rope_parameters, where transformers 5 puts them (keyed by layer type in
// Gemma 3). As in transformers, rope_scaling takes precedence over
// rope_parameters for a single dict, and a base in the dict over
// rope_theta.
func parseRoPE(filename string, raw *rawConfig, c *Config) error {
	scaling, err := decodeRope(filename, "rope_scaling", raw.RopeScaling)
	if err != nil {
		return err
	}
	if !archs[c.Architecture].gemma {
		field, r := "rope_scaling", scaling
		if r == nil {
			field = "rope_parameters"
			if r, err = decodeRope(filename, field, raw.RopeParameters); err != nil {
				return err
			}
		}
		if r == nil {
			return nil
		}
		if r.RopeTheta != nil {
			c.RopeTheta = *r.RopeTheta
		}
		c.RopeScaling, err = r.scaling(filename, field, raw, c)
		return err
	}
	// Gemma 3: one dict per layer type; rope_scaling adds to the
	// full-attention one.
	full, local := &ropeDict{}, &ropeDict{}
	if isSet(raw.RopeParameters) {
		var byType map[string]json.RawMessage
		if err := json.Unmarshal(raw.RopeParameters, &byType); err != nil {
			return fieldError(filename, "rope_parameters", "%v", err)
		}
		for key := range byType {
			if key != FullAttention && key != SlidingAttention {
				return fieldError(filename, "rope_parameters", "want a dict per layer type (full_attention, sliding_attention), got key %q", key)
			}
		}
		for _, t := range []struct {
			key string
			dst **ropeDict
		}{{FullAttention, &full}, {SlidingAttention, &local}} {
			r, err := decodeRope(filename, "rope_parameters."+t.key, byType[t.key])
			if err != nil {
				return err
			}
			if r != nil {
				*t.dst = r
			}
		}
	}
	if scaling != nil {
		// rope_scaling's keys replace the full-attention dict's.
		theta := full.RopeTheta
		full = scaling
		if full.RopeTheta == nil {
			full.RopeTheta = theta
		}
	}
	if full.RopeTheta != nil {
		c.RopeTheta = *full.RopeTheta
	}
	if local.RopeTheta != nil {
		c.RopeLocalBaseFreq = *local.RopeTheta
	}
	fullField := "rope_parameters.full_attention"
	if scaling != nil {
		fullField = "rope_scaling"
	}
	if c.RopeScaling, err = full.scaling(filename, fullField, raw, c); err != nil {
		return err
	}
	if s, err := local.scaling(filename, "rope_parameters.sliding_attention", raw, c); err != nil {
		return err
	} else if s != nil {
		return fieldError(filename, "rope_parameters.sliding_attention", "RoPE type %q on sliding-window layers is not supported (only default)", s.Type)
	}
	return nil
}

// parseGemma reads Gemma 3's own fields, with transformers' defaults, and
// refuses what the engine does not compute: logit soft-capping,
// bidirectional attention and other activations.
func parseGemma(filename string, raw *rawConfig, c *Config) error {
	if raw.HiddenActivation != nil && *raw.HiddenActivation != gemmaActivation {
		return fieldError(filename, "hidden_activation", "%q is not supported (only %s)", *raw.HiddenActivation, gemmaActivation)
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"final_logit_softcapping", raw.FinalLogitSoftcapping}, {"attn_logit_softcapping", raw.AttnLogitSoftcapping}} {
		if isSet(f.v) {
			return fieldError(filename, f.name, "logit soft-capping (%s) is not supported; Gemma 3 sets it to null", f.v)
		}
	}
	if raw.UseBidirectionalAttention != nil && *raw.UseBidirectionalAttention {
		return fieldError(filename, "use_bidirectional_attention", "bidirectional attention is not supported (only causal)")
	}
	c.QueryPreAttnScalar = valueOr(raw.QueryPreAttnScalar, gemmaQueryPreAttnScalar)
	c.RopeLocalBaseFreq = valueOr(raw.RopeLocalBaseFreq, gemmaLocalBase)
	c.SlidingWindow = gemmaSlidingWindow
	if len(raw.SlidingWindow) > 0 {
		// null leaves sliding layers without a window, which transformers
		// refuses when it builds their mask; so does validate.
		c.SlidingWindow = 0
		if isSet(raw.SlidingWindow) {
			if err := json.Unmarshal(raw.SlidingWindow, &c.SlidingWindow); err != nil {
				return fieldError(filename, "sliding_window", "want a number of positions, got %s", raw.SlidingWindow)
			}
		}
	}
	c.LayerTypes = slices.Clone(raw.LayerTypes)
	if raw.LayerTypes == nil && c.NumHiddenLayers > 0 && c.NumHiddenLayers <= MaxHiddenLayers {
		pattern := valueOr(raw.SlidingWindowPattern, gemmaWindowPattern)
		if pattern <= 0 {
			return fieldError(filename, "sliding_window_pattern", "must be positive, got %d", pattern)
		}
		c.LayerTypes = make([]string, c.NumHiddenLayers)
		for i := range c.LayerTypes {
			c.LayerTypes[i] = SlidingAttention
			if (i+1)%pattern == 0 {
				c.LayerTypes[i] = FullAttention
			}
		}
	}
	return nil
}

// cmpOr returns the first non-empty string.
func cmpOr(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// parseTokenIDs parses a token id field: absent (def), null, a number or a
// list of numbers.
func parseTokenIDs(raw json.RawMessage, def []int32) ([]int32, error) {
	if len(raw) == 0 {
		return slices.Clone(def), nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var list []any
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		list = v
	default:
		list = []any{v}
	}
	if len(list) == 0 {
		return nil, nil
	}
	ids := make([]int32, len(list))
	for i, x := range list {
		f, ok := x.(float64)
		if !ok || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return nil, fmt.Errorf("want a token id or a list of them, got %s", raw)
		}
		ids[i] = int32(f)
	}
	return ids, nil
}

// Validate checks that the configuration is consistent and supported.
func (c *Config) Validate() error {
	return c.validate("")
}

// validate checks the configuration, naming file and the faulty field in
// errors.
func (c *Config) validate(file string) error {
	a, ok := archs[c.Architecture]
	if !ok {
		return fieldError(file, "architectures", "unsupported architecture %q (supported: %s)", c.Architecture, supported)
	}
	if c.ModelType != "" && c.ModelType != a.modelType {
		return fieldError(file, "model_type", "%q does not match architecture %s (want %q)", c.ModelType, c.Architecture, a.modelType)
	}
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{
		{"hidden_size", c.HiddenSize, MaxHiddenSize},
		{"intermediate_size", c.IntermediateSize, MaxIntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers, MaxHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads, MaxAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads, MaxAttentionHeads},
		{"head_dim", c.HeadDim, MaxHeadDim},
		{"vocab_size", c.VocabSize, MaxVocabSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositionEmbeddings},
	} {
		if f.v <= 0 {
			return fieldError(file, f.name, "must be positive, got %d", f.v)
		}
		if f.v > f.max {
			return fieldError(file, f.name, "%d exceeds the limit of %d", f.v, f.max)
		}
	}
	if r := c.MaxPositionEmbeddings * c.HeadDim; r > MaxRotaryEntries {
		return fieldError(file, "max_position_embeddings", "%d positions of head_dim %d need rotary tables of %d entries, more than the limit of %d",
			c.MaxPositionEmbeddings, c.HeadDim, r, MaxRotaryEntries)
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 && c.Architecture != Qwen3 {
		// Qwen3 sets head_dim independently of hidden_size.
		return fieldError(file, "num_attention_heads", "%d does not divide hidden_size %d", c.NumAttentionHeads, c.HiddenSize)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fieldError(file, "num_key_value_heads", "%d does not divide num_attention_heads %d", c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	if c.HeadDim%2 != 0 {
		return fieldError(file, "head_dim", "RoPE needs an even head size, got %d", c.HeadDim)
	}
	if !(c.RMSNormEps > 0 && c.RMSNormEps < 1) {
		return fieldError(file, "rms_norm_eps", "must be in (0, 1), got %v", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0 && !math.IsInf(c.RopeTheta, 1)) {
		return fieldError(file, "rope_theta", "must be positive and finite, got %v", c.RopeTheta)
	}
	if err := c.RopeScaling.validate(file); err != nil {
		return err
	}
	if err := c.validateGemma(file, a.gemma); err != nil {
		return err
	}
	for _, ids := range []struct {
		name string
		ids  []int32
	}{{"bos_token_id", c.BOSTokenIDs}, {"eos_token_id", c.EOSTokenIDs}} {
		for _, id := range ids.ids {
			if id < 0 {
				return fieldError(file, ids.name, "invalid token id %d", id)
			}
			if int(id) >= c.VocabSize {
				return fieldError(file, ids.name, "token id %d is outside the vocabulary of vocab_size %d", id, c.VocabSize)
			}
		}
	}
	switch c.TorchDType {
	case "", "float32", "bfloat16", "float16", "float64":
	default:
		return fieldError(file, "torch_dtype", "unsupported dtype %q", c.TorchDType)
	}
	return nil
}

// validate checks s, which may be nil.
func (s *RopeScaling) validate(file string) error {
	if s == nil {
		return nil
	}
	positive := func(v float64) bool { return v > 0 && !math.IsInf(v, 1) }
	switch s.Type {
	case "linear", "dynamic", "llama3":
	default:
		return fieldError(file, "rope_scaling", "RoPE type %q is not supported (linear, dynamic, llama3)", s.Type)
	}
	if !positive(s.Factor) {
		return fieldError(file, "rope_scaling", "factor must be positive and finite, got %v", s.Factor)
	}
	if s.Type != "llama3" {
		return nil
	}
	switch {
	case !positive(s.LowFreqFactor) || !positive(s.HighFreqFactor):
		return fieldError(file, "rope_scaling", "low_freq_factor %v and high_freq_factor %v must be positive and finite", s.LowFreqFactor, s.HighFreqFactor)
	case s.HighFreqFactor <= s.LowFreqFactor:
		return fieldError(file, "rope_scaling", "high_freq_factor %v must exceed low_freq_factor %v", s.HighFreqFactor, s.LowFreqFactor)
	case s.OriginalMaxPositionEmbeddings <= 0:
		return fieldError(file, "rope_scaling", "original_max_position_embeddings must be positive, got %d", s.OriginalMaxPositionEmbeddings)
	}
	return nil
}

// validateGemma checks Gemma 3's fields, or that a config of another
// architecture (gemma false) sets none of them.
func (c *Config) validateGemma(file string, gemma bool) error {
	if !gemma {
		for _, f := range []struct {
			name string
			set  bool
		}{{"layer_types", c.LayerTypes != nil}, {"sliding_window", c.SlidingWindow != 0},
			{"rope_local_base_freq", c.RopeLocalBaseFreq != 0}, {"query_pre_attn_scalar", c.QueryPreAttnScalar != 0}} {
			if f.set {
				return fieldError(file, f.name, "is a Gemma 3 field; %s has none", c.Architecture)
			}
		}
		return nil
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return fieldError(file, "layer_types", "%d entries for num_hidden_layers %d", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		if t != FullAttention && t != SlidingAttention {
			return fieldError(file, "layer_types", "layer %d is %q (want %s or %s)", i, t, FullAttention, SlidingAttention)
		}
	}
	if slices.Contains(c.LayerTypes, SlidingAttention) && c.SlidingWindow <= 0 {
		return fieldError(file, "sliding_window", "must be positive with sliding_attention layers, got %d", c.SlidingWindow)
	}
	if c.SlidingWindow < 0 {
		return fieldError(file, "sliding_window", "must not be negative, got %d", c.SlidingWindow)
	}
	if !(c.RopeLocalBaseFreq > 0 && !math.IsInf(c.RopeLocalBaseFreq, 1)) {
		return fieldError(file, "rope_local_base_freq", "must be positive and finite, got %v", c.RopeLocalBaseFreq)
	}
	if !(c.QueryPreAttnScalar > 0 && !math.IsInf(c.QueryPreAttnScalar, 1)) {
		return fieldError(file, "query_pre_attn_scalar", "must be positive and finite, got %v", c.QueryPreAttnScalar)
	}
	return nil
}

// Marshal returns c as config.json contents for transformers: indented
// JSON with sorted keys, as transformers writes it. It fails if c is not
// valid or has more than one BOS token id, which transformers rejects.
func Marshal(c *Config) ([]byte, error) {
	return marshal("", c)
}

// marshal implements Marshal, naming file in errors.
func marshal(file string, c *Config) ([]byte, error) {
	if err := c.validate(file); err != nil {
		return nil, err
	}
	if len(c.BOSTokenIDs) > 1 {
		return nil, fieldError(file, "bos_token_id", "transformers takes one BOS token id, got %v", c.BOSTokenIDs)
	}
	a := archs[c.Architecture]
	m := map[string]any{
		"architectures":           []string{c.Architecture},
		"model_type":              a.modelType,
		"hidden_size":             c.HiddenSize,
		"intermediate_size":       c.IntermediateSize,
		"num_hidden_layers":       c.NumHiddenLayers,
		"num_attention_heads":     c.NumAttentionHeads,
		"num_key_value_heads":     c.NumKeyValueHeads,
		"head_dim":                c.HeadDim,
		"vocab_size":              c.VocabSize,
		"max_position_embeddings": c.MaxPositionEmbeddings,
		"rms_norm_eps":            pyFloat(c.RMSNormEps),
		"rope_theta":              pyFloat(c.RopeTheta),
		"rope_scaling":            c.RopeScaling.json(),
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"attention_dropout":       pyFloat(0),
		"bos_token_id":            tokenIDsJSON(c.BOSTokenIDs),
		"eos_token_id":            tokenIDsJSON(c.EOSTokenIDs),
		"torch_dtype":             cmpOr(c.TorchDType, "float32"),
		"use_cache":               true,
		"attention_bias":          c.AttentionBias, // Qwen2 ignores it
	}
	if c.Architecture == Llama {
		m["mlp_bias"] = false
	}
	if a.gemma {
		m["hidden_activation"] = gemmaActivation
		m["query_pre_attn_scalar"] = pyNumber(c.QueryPreAttnScalar)
		m["sliding_window"] = c.SlidingWindow
		m["layer_types"] = c.LayerTypes
		m["rope_local_base_freq"] = pyFloat(c.RopeLocalBaseFreq)
		m["final_logit_softcapping"] = nil
		m["attn_logit_softcapping"] = nil
		m["use_bidirectional_attention"] = false
	} else {
		m["hidden_act"] = "silu"
	}
	if a.slidingKeys {
		m["use_sliding_window"] = false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("hfconfig: %w", err)
	}
	return buf.Bytes(), nil
}

// json returns rope_scaling as transformers 4 writes it (and 5 reads):
// nil for none.
func (s *RopeScaling) json() any {
	if s == nil {
		return nil
	}
	m := map[string]any{"rope_type": s.Type, "factor": pyFloat(s.Factor)}
	if s.Type == "llama3" {
		m["low_freq_factor"] = pyFloat(s.LowFreqFactor)
		m["high_freq_factor"] = pyFloat(s.HighFreqFactor)
		m["original_max_position_embeddings"] = s.OriginalMaxPositionEmbeddings
	}
	return m
}

// pyNumber is an integer when v is one, else a float: transformers
// declares query_pre_attn_scalar an int and checks the type.
func pyNumber(v float64) any {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return int64(v)
	}
	return pyFloat(v)
}

// tokenIDsJSON returns token ids as transformers stores them: null, a
// number, or a list.
func tokenIDsJSON(ids []int32) any {
	switch len(ids) {
	case 0:
		return nil
	case 1:
		return ids[0]
	}
	return ids
}

// pyFloat is a float64 that marshals as Python's json module writes floats
// (10000.0, 1e-06), so that it reads back as a float in Python.
type pyFloat float64

// MarshalJSON implements json.Marshaler.
func (f pyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("hfconfig: cannot write %v as JSON", v)
	}
	if abs := math.Abs(v); abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		return []byte(strconv.FormatFloat(v, 'e', -1, 64)), nil
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return []byte(s), nil
}

// Write writes c to path as a config.json (see Marshal). It replaces path
// atomically: it writes a temporary file in the same directory, syncs it
// and renames it to path.
func Write(path string, c *Config) error {
	data, err := marshal(path, c)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, data); err != nil {
		return fmt.Errorf("hfconfig: %w", err)
	}
	return nil
}
