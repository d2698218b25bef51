package gguf

import (
	"fmt"

	"rlvr/format/tokenizer"
)

// Vocab reads the tokenizer the file describes (tokenizer.ggml.* and
// tokenizer.chat_template), checking that the per-token arrays match the
// token list and the special ids lie inside it.
func (f *File) Vocab() (tokenizer.GGUFVocab, error) {
	v := tokenizer.GGUFVocab{
		Architecture: f.String("general.architecture"),
		Model:        f.String("tokenizer.ggml.model"),
		Pre:          f.String("tokenizer.ggml.pre"),
		ChatTemplate: f.String("tokenizer.chat_template"),
		BOS:          -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1,
	}
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("gguf: %s: %s: %s", f.Path, key, fmt.Sprintf(format, args...))
	}
	var ok bool
	if v.Tokens, ok = f.Metadata["tokenizer.ggml.tokens"].([]string); !ok || len(v.Tokens) == 0 {
		return v, bad("tokenizer.ggml.tokens", "missing or not an array of strings")
	}
	n := len(v.Tokens)
	if raw, present := f.Metadata["tokenizer.ggml.scores"]; present {
		if v.Scores, ok = raw.([]float32); !ok || len(v.Scores) != n {
			return v, bad("tokenizer.ggml.scores", "want %d float32 values", n)
		}
	}
	if raw, present := f.Metadata["tokenizer.ggml.token_type"]; present {
		if v.Types, ok = raw.([]int32); !ok || len(v.Types) != n {
			return v, bad("tokenizer.ggml.token_type", "want %d int32 values", n)
		}
	}
	if raw, present := f.Metadata["tokenizer.ggml.merges"]; present {
		if v.Merges, ok = raw.([]string); !ok {
			return v, bad("tokenizer.ggml.merges", "not an array of strings")
		}
	}
	for _, s := range []struct {
		key string
		dst *int
	}{{"bos", &v.BOS}, {"eos", &v.EOS}, {"unknown", &v.UNK}, {"padding", &v.PAD}, {"eot", &v.EOT}} {
		key := "tokenizer.ggml." + s.key + "_token_id"
		if _, present := f.Metadata[key]; !present {
			continue
		}
		id, ok := f.Uint(key)
		if !ok || id >= uint64(n) {
			return v, bad(key, "%v is not a token id below %d", f.Metadata[key], n)
		}
		*s.dst = int(id)
	}
	v.AddBOS, v.HasAddBOS = f.Bool("tokenizer.ggml.add_bos_token")
	v.AddEOS, v.HasAddEOS = f.Bool("tokenizer.ggml.add_eos_token")
	v.AddSpacePrefix, v.HasAddSpacePrefix = f.Bool("tokenizer.ggml.add_space_prefix")
	return v, nil
}
