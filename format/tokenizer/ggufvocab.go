package tokenizer

import "fmt"

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
// tokenizer_config.json that describe v, as transformers' GGUF converter
// and llama.cpp's tokenizer read it.
func HFFilesFromGGUF(v GGUFVocab) (tokenizerJSON, tokenizerConfigJSON []byte, err error) {
	return nil, nil, &ParseError{File: "GGUF metadata", Field: "tokenizer.ggml.model", Err: fmt.Errorf("unsupported tokenizer model %q", v.Model)}
}

// FromGGUF builds the tokenizer v describes, with its tokenizer_config.
func FromGGUF(v GGUFVocab) (*Tokenizer, error) {
	tj, cj, err := HFFilesFromGGUF(v)
	if err != nil {
		return nil, err
	}
	t, err := Parse(tj)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(cj)
	if err != nil {
		return nil, err
	}
	return t.WithConfig(cfg)
}
