// Package hfconfig reads and writes the config.json of Hugging Face
// decoder-only checkpoints of the Llama family: LlamaForCausalLM,
// Qwen2ForCausalLM and Qwen3ForCausalLM.
//
// Parse fills in the defaults transformers uses for missing fields and
// rejects configurations the engine cannot run exactly, such as RoPE
// scaling or sliding-window attention, rather than silently computing
// something else. Write produces a config.json that transformers loads as
// the same model.
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
	Llama = "LlamaForCausalLM"
	Qwen2 = "Qwen2ForCausalLM"
	Qwen3 = "Qwen3ForCausalLM"
)

// arch holds what differs between the architectures: the model_type and
// transformers' defaults.
type arch struct {
	modelType   string
	maxPos      int
	headDim     int   // 0: hidden_size / num_attention_heads
	bos, eos    []int // token ids when the keys are absent
	alwaysQKV   bool  // q/k/v projections always have biases
	qkNorm      bool  // per-head RMSNorm of queries and keys
	slidingKeys bool  // use_sliding_window is a config field
}

var archs = map[string]arch{
	Llama: {modelType: "llama", maxPos: 2048, bos: []int{1}, eos: []int{2}},
	Qwen2: {modelType: "qwen2", maxPos: 32768, alwaysQKV: true, slidingKeys: true},
	Qwen3: {modelType: "qwen3", maxPos: 32768, headDim: 128, qkNorm: true, slidingKeys: true},
}

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
	// RopeTheta is the RoPE base frequency; it defaults to 10000.
	RopeTheta float64

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
	BOSTokenIDs []int
	EOSTokenIDs []int

	// TorchDType is the dtype of the stored weights, e.g. "bfloat16"
	// (config.json's torch_dtype, or dtype in newer transformers). Empty
	// means float32.
	TorchDType string
}

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
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	HiddenAct             *string         `json:"hidden_act"`
	UseSlidingWindow      bool            `json:"use_sliding_window"`
	LayerTypes            []string        `json:"layer_types"`
	BOSTokenID            json.RawMessage `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	TorchDType            *string         `json:"torch_dtype"`
	DType                 *string         `json:"dtype"`
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
	c := &Config{ModelType: raw.ModelType, TieWordEmbeddings: raw.TieWordEmbeddings, AttentionBias: raw.AttentionBias}
	switch len(raw.Architectures) {
	case 0:
		for name, a := range archs {
			if a.modelType == raw.ModelType {
				c.Architecture = name
			}
		}
		if c.Architecture == "" {
			return nil, fieldError(filename, "model_type", "unsupported model type %q (supported: llama, qwen2, qwen3)", raw.ModelType)
		}
	case 1:
		c.Architecture = raw.Architectures[0]
	default:
		return nil, fieldError(filename, "architectures", "want one architecture, got %q", raw.Architectures)
	}
	a, ok := archs[c.Architecture]
	if !ok {
		return nil, fieldError(filename, "architectures", "unsupported architecture %q (supported: %s, %s, %s)", c.Architecture, Llama, Qwen2, Qwen3)
	}
	if c.ModelType == "" {
		c.ModelType = a.modelType
	}

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
	c.RopeTheta = valueOr(raw.RopeTheta, 10000)
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
	if err := parseRoPE(filename, &raw, c); err != nil {
		return nil, err
	}

	if raw.HiddenAct != nil && *raw.HiddenAct != "silu" {
		return nil, fieldError(filename, "hidden_act", "%q is not supported (only silu)", *raw.HiddenAct)
	}
	if raw.MLPBias {
		return nil, fieldError(filename, "mlp_bias", "MLP biases are not supported")
	}
	if raw.UseSlidingWindow && a.slidingKeys {
		return nil, fieldError(filename, "use_sliding_window", "sliding-window attention is not supported")
	}
	for i, lt := range raw.LayerTypes {
		if lt != "full_attention" {
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

// parseRoPE rejects RoPE scaling and reads rope_parameters, the form newer
// transformers versions write.
func parseRoPE(filename string, raw *rawConfig, c *Config) error {
	type rope struct {
		RopeType  string   `json:"rope_type"`
		Type      string   `json:"type"`
		RopeTheta *float64 `json:"rope_theta"`
	}
	if isSet(raw.RopeScaling) {
		var r rope
		json.Unmarshal(raw.RopeScaling, &r) // only to name the kind in the error
		kind := cmpOr(r.RopeType, r.Type, "given")
		return fieldError(filename, "rope_scaling", "RoPE scaling (%s) is not supported yet; only plain RoPE (rope_scaling null)", kind)
	}
	if !isSet(raw.RopeParameters) {
		return nil
	}
	var r rope
	if err := json.Unmarshal(raw.RopeParameters, &r); err != nil {
		return fieldError(filename, "rope_parameters", "%v", err)
	}
	if kind := cmpOr(r.RopeType, r.Type, "default"); kind != "default" {
		return fieldError(filename, "rope_parameters", "RoPE type %q is not supported yet; only default", kind)
	}
	if r.RopeTheta != nil {
		c.RopeTheta = *r.RopeTheta
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
func parseTokenIDs(raw json.RawMessage, def []int) ([]int, error) {
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
	ids := make([]int, len(list))
	for i, x := range list {
		f, ok := x.(float64)
		if !ok || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return nil, fmt.Errorf("want a token id or a list of them, got %s", raw)
		}
		ids[i] = int(f)
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
		return fieldError(file, "architectures", "unsupported architecture %q (supported: %s, %s, %s)", c.Architecture, Llama, Qwen2, Qwen3)
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
	for _, ids := range []struct {
		name string
		ids  []int
	}{{"bos_token_id", c.BOSTokenIDs}, {"eos_token_id", c.EOSTokenIDs}} {
		for _, id := range ids.ids {
			if id < 0 || id > math.MaxInt32 {
				return fieldError(file, ids.name, "invalid token id %d", id)
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
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"hidden_act":              "silu",
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

// tokenIDsJSON returns token ids as transformers stores them: null, a
// number, or a list.
func tokenIDsJSON(ids []int) any {
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
