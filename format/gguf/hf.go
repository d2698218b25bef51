package gguf

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// HF is a GGUF model seen as a Hugging Face checkpoint: its config.json and
// its tensors under Hugging Face names and shapes, with llama.cpp's
// conversions undone.
type HF struct {
	// Config is config.json: LlamaConfig fields for the llama
	// architecture, Gemma3TextConfig fields for gemma3.
	Config  []byte
	Tensors []HFTensor

	file   *File
	byName map[string]int
}

// HFTensor is one tensor under its Hugging Face name.
type HFTensor struct {
	Name   string
	Shape  []int
	Source string // the GGUF tensor it is read from
	// Heads is non-zero for a Llama q_proj or k_proj: llama.cpp's converter
	// permuted its rows for interleaved rotary pairs over this many heads,
	// and reading it undoes that.
	Heads int
	// MinusOne marks a Gemma RMSNorm weight, stored by llama.cpp as 1 + w.
	MinusOne bool
}

// archNames maps llama.cpp's per-layer tensor names to Hugging Face's, for
// each architecture rlvr reads.
var archNames = map[string]map[string]string{
	"llama": {
		"attn_norm":   "input_layernorm",
		"ffn_norm":    "post_attention_layernorm",
		"attn_q":      "self_attn.q_proj",
		"attn_k":      "self_attn.k_proj",
		"attn_v":      "self_attn.v_proj",
		"attn_output": "self_attn.o_proj",
		"ffn_gate":    "mlp.gate_proj",
		"ffn_up":      "mlp.up_proj",
		"ffn_down":    "mlp.down_proj",
	},
	"gemma3": {
		"attn_norm":           "input_layernorm",
		"post_attention_norm": "post_attention_layernorm",
		"ffn_norm":            "pre_feedforward_layernorm",
		"post_ffw_norm":       "post_feedforward_layernorm",
		"attn_q":              "self_attn.q_proj",
		"attn_k":              "self_attn.k_proj",
		"attn_v":              "self_attn.v_proj",
		"attn_output":         "self_attn.o_proj",
		"attn_q_norm":         "self_attn.q_norm",
		"attn_k_norm":         "self_attn.k_norm",
		"ffn_gate":            "mlp.gate_proj",
		"ffn_up":              "mlp.up_proj",
		"ffn_down":            "mlp.down_proj",
	},
}

// unreadTensors are the GGUF tensors no Hugging Face tensor is read from,
// each with the check that leaving it unread loses nothing.
var unreadTensors = map[string]func(f *File, t TensorInfo) error{
	// llama.cpp stores Llama 3's rotary frequency factors, which it
	// computes from config.json's rope_scaling, as a tensor and leaves
	// the scaling out of the metadata; config.json built from the
	// metadata then has plain RoPE, which the tensor agrees with only
	// when every factor is 1.
	"rope_freqs.weight": (*File).checkUnitRopeFreqs,
}

// checkUnitRopeFreqs refuses rotary frequency factors other than 1: they
// scale the rotation of some frequencies, and the model built from
// config.json would rotate them unscaled.
func (f *File) checkUnitRopeFreqs(t TensorInfo) error {
	if t.Elements() > 1<<16 {
		return fmt.Errorf("gguf: %s: tensor %q has %d values; rotary frequency factors are one per pair of a head's dimensions", f.Path, t.Name, t.Elements())
	}
	factors := make([]float32, t.Elements())
	if err := f.Dequantize(t.Name, factors); err != nil {
		return err
	}
	for i, v := range factors {
		if v != 1 {
			return fmt.Errorf("gguf: %s: tensor %q scales rotary frequency %d by %v (Llama 3's rope_scaling), which the config read from the metadata does not; "+
				"load the model from its Hugging Face directory instead", f.Path, t.Name, i, v)
		}
	}
	return nil
}

// HF maps the file to a Hugging Face checkpoint. Only the llama and gemma3
// architectures are mapped; others are refused naming
// general.architecture. Every tensor must be accounted for: a tensor with
// no Hugging Face name, a layer beyond <arch>.block_count, or a layer
// tensor missing below it is an error naming the tensor, and the only
// tensors left unread are those of unreadTensors.
func (f *File) HF() (*HF, error) {
	arch := f.String("general.architecture")
	names, ok := archNames[arch]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: general.architecture %q is not supported (supported: llama, gemma3)", f.Path, arch)
	}
	cfg, heads, kvHeads, err := f.hfConfig(arch)
	if err != nil {
		return nil, err
	}
	blocks, _ := f.Uint(arch + ".block_count") // checked by hfConfig
	// The weights seen of each layer: a map, not a slice, since a file may
	// claim more layers than it holds tensors for.
	layers := map[int]map[string]bool{}
	h := &HF{file: f, byName: map[string]int{}}
	for _, t := range f.Tensors {
		ht := HFTensor{Source: t.Name, Shape: t.Shape()}
		switch {
		case t.Name == "token_embd.weight":
			ht.Name = "model.embed_tokens.weight"
		case t.Name == "output_norm.weight":
			ht.Name = "model.norm.weight"
		case t.Name == "output.weight":
			ht.Name = "lm_head.weight"
		case unreadTensors[t.Name] != nil:
			if err := unreadTensors[t.Name](f, t); err != nil {
				return nil, err
			}
			continue
		case strings.HasPrefix(t.Name, "blk."):
			rest := strings.TrimPrefix(t.Name, "blk.")
			layer, part, ok := strings.Cut(rest, ".")
			base, suffix, ok2 := strings.Cut(part, ".")
			hf, known := names[base]
			n, err := strconv.Atoi(layer)
			if err != nil || n < 0 || strconv.Itoa(n) != layer || !ok || !ok2 || !known || suffix != "weight" && suffix != "bias" {
				return nil, fmt.Errorf("gguf: %s: tensor %q has no Hugging Face name for the %s architecture", f.Path, t.Name, arch)
			}
			if uint64(n) >= blocks {
				return nil, fmt.Errorf("gguf: %s: tensor %q is of layer %d, beyond %s.block_count %d", f.Path, t.Name, n, arch, blocks)
			}
			if layers[n] == nil {
				layers[n] = map[string]bool{}
			}
			layers[n][part] = true
			ht.Name = "model.layers." + layer + "." + hf + "." + suffix
			if arch == "llama" && (base == "attn_q" || base == "attn_k") {
				ht.Heads = heads
				if base == "attn_k" {
					ht.Heads = kvHeads
				}
			}
		default:
			return nil, fmt.Errorf("gguf: %s: tensor %q has no Hugging Face name", f.Path, t.Name)
		}
		if arch == "gemma3" && strings.HasSuffix(t.Name, "norm.weight") {
			ht.MinusOne = true
		}
		if ht.Heads > 0 && (len(ht.Shape) == 0 || ht.Shape[0]%(2*ht.Heads) != 0) {
			return nil, fmt.Errorf("gguf: %s: tensor %q: %d rows do not split into %d heads of rotary pairs", f.Path, t.Name, ht.Shape[0], ht.Heads)
		}
		h.byName[ht.Name] = len(h.Tensors)
		h.Tensors = append(h.Tensors, ht)
	}
	if _, ok := f.Tensor("output_norm.weight"); !ok {
		return nil, fmt.Errorf("gguf: %s: tensor \"output_norm.weight\" is missing", f.Path)
	}
	bases := slices.Sorted(maps.Keys(names))
	for n := range int(blocks) {
		for _, base := range bases {
			if !layers[n][base+".weight"] {
				return nil, fmt.Errorf("gguf: %s: tensor \"blk.%d.%s.weight\" is missing (%s.block_count %d)", f.Path, n, base, arch, blocks)
			}
		}
	}
	h.Config = cfg
	return h, nil
}

// Get reads a tensor by its Hugging Face name as float32 with its shape:
// the signature hf.Fill takes.
func (h *HF) Get(name string) ([]float32, []int, error) {
	i, ok := h.byName[name]
	if !ok {
		return nil, nil, fmt.Errorf("gguf: %s: no tensor maps to %q", h.file.Path, name)
	}
	t := h.Tensors[i]
	src, _ := h.file.Tensor(t.Source)
	out := make([]float32, src.Elements())
	if err := h.file.Dequantize(t.Source, out); err != nil {
		return nil, nil, err
	}
	if t.Heads > 0 {
		out = unpermuteRows(out, t.Heads, t.Shape[0], src.Elements()/t.Shape[0])
	}
	if t.MinusOne {
		for i := range out {
			out[i]--
		}
	}
	return out, t.Shape, nil
}

// unpermuteRows undoes llama.cpp's Q/K permutation: within each head of
// width hd, Hugging Face row s·hd/2 + j (the two halves rotate_half pairs)
// was stored as row 2j + s (interleaved pairs).
func unpermuteRows(w []float32, heads, rows, cols int) []float32 {
	hd := rows / heads
	out := make([]float32, len(w))
	for h := range heads {
		for s := range 2 {
			for j := range hd / 2 {
				dst := (h*hd + s*hd/2 + j) * cols
				src := (h*hd + 2*j + s) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}

// hfConfig builds config.json from the architecture's metadata, the way
// transformers' GGUF loader does, and returns the head counts.
func (f *File) hfConfig(arch string) ([]byte, int, int, error) {
	var errs []string
	need := func(key string) int {
		v, ok := f.Uint(arch + "." + key)
		if !ok || v == 0 || v > 1<<24 {
			errs = append(errs, fmt.Sprintf("%s.%s is missing or out of range (%v)", arch, key, f.Metadata[arch+"."+key]))
		}
		return int(v)
	}
	dim := need("embedding_length")
	layers := need("block_count")
	hidden := need("feed_forward_length")
	heads := need("attention.head_count")
	ctx := need("context_length")
	kv := heads
	if _, ok := f.Metadata[arch+".attention.head_count_kv"]; ok {
		kv = need("attention.head_count_kv")
	}
	headDim := 0
	if heads > 0 {
		headDim = dim / heads
	}
	if _, ok := f.Metadata[arch+".attention.key_length"]; ok {
		headDim = need("attention.key_length")
	}
	eps, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon")
	if !ok || !(eps > 0 && eps < 1) {
		errs = append(errs, fmt.Sprintf("%s.attention.layer_norm_rms_epsilon is missing or out of range", arch))
	}
	theta, ok := f.Float(arch + ".rope.freq_base")
	if !ok {
		theta = 10000
	}
	if !(theta > 0) || math.IsInf(theta, 0) {
		errs = append(errs, fmt.Sprintf("%s.rope.freq_base = %v", arch, theta))
	}
	tokens, _ := f.Metadata["tokenizer.ggml.tokens"].([]string)
	vocab := len(tokens)
	if emb, ok := f.Tensor("token_embd.weight"); ok && len(emb.Dims) == 2 {
		vocab = emb.Dims[1]
	} else {
		errs = append(errs, "tensor token_embd.weight is missing or not a matrix")
	}
	if len(errs) > 0 {
		return nil, 0, 0, fmt.Errorf("gguf: %s: %s", f.Path, strings.Join(errs, "; "))
	}
	_, untied := f.Tensor("output.weight")
	// float32 metadata printed as its shortest float32 decimal (1e-06, not
	// 9.99999997e-07).
	eps32 := json.Number(strconv.FormatFloat(float64(float32(eps)), 'g', -1, 32))
	c := map[string]any{
		"vocab_size":              vocab,
		"hidden_size":             dim,
		"intermediate_size":       hidden,
		"num_hidden_layers":       layers,
		"num_attention_heads":     heads,
		"num_key_value_heads":     kv,
		"head_dim":                headDim,
		"max_position_embeddings": ctx,
		"rms_norm_eps":            eps32,
		"tie_word_embeddings":     !untied,
		"torch_dtype":             "float32",
	}
	for key, field := range map[string]string{"bos": "bos_token_id", "eos": "eos_token_id", "padding": "pad_token_id"} {
		if id, ok := f.Uint("tokenizer.ggml." + key + "_token_id"); ok {
			c[field] = id
		}
	}
	switch arch {
	case "llama":
		c["model_type"] = "llama"
		c["architectures"] = []string{"LlamaForCausalLM"}
		c["hidden_act"] = "silu"
		c["rope_theta"] = theta
		if scaling, err := f.ropeScaling(arch); err != nil {
			return nil, 0, 0, err
		} else if scaling != nil {
			c["rope_scaling"] = scaling
		}
	case "gemma3":
		window := 0
		if v, ok := f.Uint(arch + ".attention.sliding_window"); ok {
			window = int(v)
		}
		// Gemma 3 puts a global layer after every five local ones; the
		// GGUF records the window but not the pattern, and transformers
		// takes this default too.
		const pattern = 6
		types := make([]string, layers)
		for i := range types {
			types[i] = "sliding_attention"
			if (i+1)%pattern == 0 {
				types[i] = "full_attention"
			}
		}
		c["model_type"] = "gemma3_text"
		c["architectures"] = []string{"Gemma3ForCausalLM"}
		c["hidden_activation"] = "gelu_pytorch_tanh"
		c["query_pre_attn_scalar"] = headDim
		c["sliding_window"] = window
		c["layer_types"] = types
		c["rope_theta"] = theta
		c["rope_local_base_freq"] = 10000.0
		c["final_logit_softcapping"] = nil
		c["attn_logit_softcapping"] = nil
		c["rope_scaling"] = nil
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("gguf: %s: %w", f.Path, err)
	}
	return append(data, '\n'), heads, kv, nil
}

// ropeScaling reads <arch>.rope.scaling.* as config.json's rope_scaling:
// nil when absent or "none".
func (f *File) ropeScaling(arch string) (map[string]any, error) {
	kind := f.String(arch + ".rope.scaling.type")
	if kind == "" || kind == "none" {
		return nil, nil
	}
	factor, ok := f.Float(arch + ".rope.scaling.factor")
	if !ok || !(factor > 0) {
		return nil, fmt.Errorf("gguf: %s: %s.rope.scaling.factor is missing or not positive", f.Path, arch)
	}
	switch kind {
	case "linear":
		return map[string]any{"rope_type": "linear", "factor": factor}, nil
	case "yarn":
		orig, _ := f.Uint(arch + ".rope.scaling.original_context_length")
		return map[string]any{"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": orig}, nil
	}
	return nil, fmt.Errorf("gguf: %s: %s.rope.scaling.type %q is not supported (linear, yarn)", f.Path, arch, kind)
}

// Close closes the file the tensors are read from.
func (h *HF) Close() error { return h.file.Close() }
