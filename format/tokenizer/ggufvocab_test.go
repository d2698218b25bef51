package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// tinyGGUFVocab is a gpt2-model vocabulary: the bytes of "ab1 ", one merge
// and two control tokens.
func tinyGGUFVocab() GGUFVocab {
	return GGUFVocab{
		Model: "gpt2", Pre: "smollm",
		Tokens: []string{"<|endoftext|>", "<|im_end|>", "a", "b", "1", "Ġ", "ab"},
		Types:  []int32{GGUFTokenControl, GGUFTokenControl, 1, 1, 1, 1, 1},
		Merges: []string{"a b"},
		BOS:    0, EOS: 1, UNK: -1, PAD: -1, EOT: -1,
		ChatTemplate: "{{ messages[0]['content'] }}",
	}
}

func TestFromGGUF(t *testing.T) {
	tok, err := FromGGUF(tinyGGUFVocab())
	if err != nil {
		t.Fatal(err)
	}
	// Digits splits "11" into two pieces before the byte-level split.
	if got := tok.EncodeWithSpecial("ab 11<|im_end|>", true); !slices.Equal(got, []int32{6, 5, 4, 4, 1}) {
		t.Errorf("ids %v", got)
	}
	if eos, ok := tok.EOS(); !ok || eos != 1 {
		t.Errorf("EOS %d %v", eos, ok)
	}
	if _, err := tok.ChatTemplate(); err != nil {
		t.Errorf("chat template: %v", err)
	}
}

func TestHFFilesFromGGUFRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*GGUFVocab)
		field string
	}{
		{"model", func(v *GGUFVocab) { v.Model = "rwkv" }, "tokenizer.ggml.model"},
		{"pre-tokenizer", func(v *GGUFVocab) { v.Pre = "no-such-pre" }, "tokenizer.ggml.pre"},
		{"types", func(v *GGUFVocab) { v.Types = v.Types[:2] }, "tokenizer.ggml.token_type"},
		{"duplicate token", func(v *GGUFVocab) { v.Tokens[3] = "a" }, "tokenizer.ggml.tokens"},
		{"merge", func(v *GGUFVocab) { v.Merges = []string{"ab"} }, "tokenizer.ggml.merges[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tinyGGUFVocab()
			tc.edit(&v)
			_, _, err := HFFilesFromGGUF(v)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field != tc.field || !strings.Contains(err.Error(), "GGUF metadata") {
				t.Errorf("error %v, want a ParseError naming %s", err, tc.field)
			}
		})
	}
}

func TestDigitsSplitters(t *testing.T) {
	pieces := func(s string, split splitter) []string {
		var out []string
		for i := 0; i < len(s); {
			j := split(s, i)
			out = append(out, s[i:j])
			i = j
		}
		return out
	}
	s := "x12 ²3٤a"
	if got, want := pieces(s, splitDigits), []string{"x", "1", "2", " ", "²", "3", "٤", "a"}; !slices.Equal(got, want) {
		t.Errorf("individual digits: %q, want %q", got, want)
	}
	if got, want := pieces(s, splitDigitRuns), []string{"x", "12", " ", "²3٤", "a"}; !slices.Equal(got, want) {
		t.Errorf("digit runs: %q, want %q", got, want)
	}
}
