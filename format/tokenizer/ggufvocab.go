package tokenizer

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// GGUFVocab is the tokenizer a GGUF file describes in its tokenizer.ggml.*
// and tokenizer.chat_template metadata, as plain data: package gguf reads
// it from a file, and this package turns it into the Hugging Face
// tokenizer.json (and tokenizer_config.json) that the model was converted
// from, so that a GGUF model and its imported directory share one
// tokenizer implementation.
type GGUFVocab struct {
	// Model is tokenizer.ggml.model: "gpt2" (byte-level BPE with merges)
	// or "llama" (SentencePiece BPE with scores and byte fallback).
	Model string
	// Architecture is general.architecture ("llama", "gemma3", ...), which
	// shapes a "llama" vocabulary's tokenizer.json (see HFFilesFromGGUF);
	// "" when unknown.
	Architecture string
	// Pre is tokenizer.ggml.pre, llama.cpp's name for the pre-tokenizer
	// ("smollm", "llama-bpe", "qwen2", "default", ...); "" when absent.
	Pre    string
	Tokens []string  // tokenizer.ggml.tokens, by id
	Scores []float32 // tokenizer.ggml.scores, by id; nil when absent
	// Types is tokenizer.ggml.token_type, by id: 1 normal, 2 unknown,
	// 3 control, 4 user-defined, 5 unused, 6 byte; nil when absent.
	Types  []int32
	Merges []string // tokenizer.ggml.merges, "a b" by rank; nil when absent

	// Special token ids; -1 when absent.
	BOS, EOS, UNK, PAD, EOT int
	// AddBOS, AddEOS and AddSpacePrefix are tokenizer.ggml.add_bos_token,
	// add_eos_token and add_space_prefix; the Has fields say whether the
	// file set them.
	AddBOS, AddEOS, AddSpacePrefix          bool
	HasAddBOS, HasAddEOS, HasAddSpacePrefix bool

	// ChatTemplate is tokenizer.chat_template; "" when absent.
	ChatTemplate string
}

// GGUF token types (tokenizer.ggml.token_type).
const (
	GGUFTokenNormal      = 1
	GGUFTokenUnknown     = 2
	GGUFTokenControl     = 3
	GGUFTokenUserDefined = 4
	GGUFTokenUnused      = 5
	GGUFTokenByte        = 6
)

// HFFilesFromGGUF writes the Hugging Face tokenizer.json and
// tokenizer_config.json that describe v: the model's published tokenizer
// as far as the metadata records it. Control and user-defined tokens
// become added tokens.
//
// For the gpt2 model (byte-level BPE), the pre-tokenizer follows
// tokenizer.ggml.pre (llama.cpp's name for it). For the llama model
// (SentencePiece BPE with byte fallback), the file is the one transformers
// 5.x builds from the GGUF, shaped by the architecture (Gemma, Phi-3 or
// Llama-like), with merges derived from the vocabulary when the file has
// none; add_bos_token defaults to true, as in llama.cpp.
func HFFilesFromGGUF(v GGUFVocab) (tokenizerJSON, tokenizerConfigJSON []byte, err error) {
	var doc map[string]any
	doc, tokenizerConfigJSON, err = ggufDocument(v)
	if err != nil {
		return nil, nil, err
	}
	if tokenizerJSON, err = json.Marshal(doc); err != nil {
		return nil, nil, err
	}
	return tokenizerJSON, tokenizerConfigJSON, nil
}

// ggufDocument returns the tokenizer.json of v as a JSON value, with the
// vocabulary a map[string]int and the merges a [][2]string, and the
// tokenizer_config.json.
func ggufDocument(v GGUFVocab) (doc map[string]any, tokenizerConfigJSON []byte, err error) {
	fail := func(field, format string, args ...any) error {
		return &ParseError{File: "GGUF metadata", Field: field, Err: fmt.Errorf(format, args...)}
	}
	addBOS := v.AddBOS
	switch v.Model {
	case "gpt2":
		doc, err = gpt2Document(v, fail)
	case "llama":
		doc, addBOS, err = spmDocument(v, fail)
	default:
		return nil, nil, fail("tokenizer.ggml.model", "unsupported tokenizer model %q (supported: gpt2, llama)", v.Model)
	}
	if err != nil {
		return nil, nil, err
	}
	cfg := map[string]any{"add_bos_token": addBOS, "add_eos_token": v.AddEOS, "clean_up_tokenization_spaces": false,
		"model_max_length": 1 << 30}
	for _, s := range []struct {
		key string
		id  int
	}{{"bos_token", v.BOS}, {"eos_token", v.EOS}, {"pad_token", v.PAD}, {"unk_token", v.UNK}} {
		if s.id >= 0 && s.id < len(v.Tokens) {
			cfg[s.key] = v.Tokens[s.id]
		}
	}
	if v.ChatTemplate != "" {
		cfg["chat_template"] = v.ChatTemplate
	}
	if tokenizerConfigJSON, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		return nil, nil, err
	}
	return doc, tokenizerConfigJSON, nil
}

// gpt2Document returns the tokenizer.json of a "gpt2" vocabulary as a JSON
// value.
func gpt2Document(v GGUFVocab, fail func(field, format string, args ...any) error) (map[string]any, error) {
	pre, ok := ggufPreTokenizers[v.Pre]
	if !ok {
		return nil, fail("tokenizer.ggml.pre", "unsupported pre-tokenizer %q (supported: %s)", v.Pre, strings.Join(slices.Sorted(maps.Keys(ggufPreTokenizers)), ", "))
	}
	if len(v.Types) != 0 && len(v.Types) != len(v.Tokens) {
		return nil, fail("tokenizer.ggml.token_type", "%d types for %d tokens", len(v.Types), len(v.Tokens))
	}
	vocab := make(map[string]int, len(v.Tokens))
	var added []map[string]any
	for id, tok := range v.Tokens {
		if _, dup := vocab[tok]; dup {
			return nil, fail("tokenizer.ggml.tokens", "token %q appears twice (ids %d and %d)", tok, vocab[tok], id)
		}
		vocab[tok] = id
		if len(v.Types) > 0 && (v.Types[id] == GGUFTokenControl || v.Types[id] == GGUFTokenUserDefined) {
			added = append(added, map[string]any{"id": id, "content": tok, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": v.Types[id] == GGUFTokenControl})
		}
	}
	merges, err := splitGGUFMerges(v.Merges, fail)
	if err != nil {
		return nil, err
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   added,
		"normalizer":     nil,
		"pre_tokenizer":  pre(),
		"post_processor": nil,
		"decoder":        byteLevel,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}, nil
}

// ggufPreTokenizers maps llama.cpp's pre-tokenizer names to the
// tokenizer.json pre_tokenizer the models they name ship.
var ggufPreTokenizers = map[string]func() any{
	"":        gpt2PreTokenizer,
	"default": gpt2PreTokenizer,
	"gpt-2":   gpt2PreTokenizer,
	"smollm": func() any {
		return sequence(map[string]any{"type": "Digits", "individual_digits": true}, gpt2PreTokenizer())
	},
	"llama-bpe": func() any { return splitThenBytes(patternLlama3) },
	"qwen2":     func() any { return splitThenBytes(patternQwen2) },
}

func gpt2PreTokenizer() any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
}

func sequence(pre ...any) any { return map[string]any{"type": "Sequence", "pretokenizers": pre} }

func splitThenBytes(pattern string) any {
	return sequence(map[string]any{"type": "Split", "pattern": map[string]string{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false})
}

// FromGGUF builds the tokenizer v describes, with its tokenizer_config:
// the tokenizer [Parse] reads from HFFilesFromGGUF's files, built without
// writing and reading back the vocabulary and merges.
func FromGGUF(v GGUFVocab) (*Tokenizer, error) {
	doc, cj, err := ggufDocument(v)
	if err != nil {
		return nil, err
	}
	model := doc["model"].(map[string]any)
	vocab, merges := model["vocab"].(map[string]int), model["merges"]
	delete(model, "vocab")
	delete(model, "merges")
	tj, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var top tokenizerJSON
	if err := json.Unmarshal(tj, &top); err != nil {
		return nil, err
	}
	top.Model.vocab = vocab
	switch m := merges.(type) {
	case [][2]string:
		top.Model.merges = m
		if m == nil {
			top.Model.merges = [][2]string{}
		}
	case *derivedMerges:
		top.Model.mergeIDs = m.ids
	}
	c, err := parser{file: "tokenizer.json"}.parseTop(&top)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(cj)
	if err != nil {
		return nil, err
	}
	return newTokenizer(c).WithConfig(cfg)
}
