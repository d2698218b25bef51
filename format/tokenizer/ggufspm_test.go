package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestDeriveMerges checks the merges derived from a vocabulary against
// those transformers 5.24's generate_merges gives for it, ranked by score
// and, as for Gemma, by position.
func TestDeriveMerges(t *testing.T) {
	toks := []string{"<unk>", "a", "b", "c", "ab", "bc", "abc", "▁", "▁a", "▁ab", "ca", "cab", "é", "éa", "aé"}
	scores := []float64{0, -1, -2, -3, -4, -4, -5, -6, -7, -8, -9, -3, -10, -4, -4}
	vocab := map[string]int{}
	for i, tok := range toks {
		vocab[tok] = i
	}
	str := func(ms *derivedMerges) string { return fmt.Sprint(ms.pairs()) }
	got := deriveMerges(toks, vocab, func(id int) float64 { return scores[id] })
	want := "[[ca b] [c ab] [a b] [b c] [é a] [a é] [ab c] [a bc] [▁ a] [▁a b] [▁ ab] [c a]]"
	if str(got) != want {
		t.Errorf("by score: %v\nwant %v", got, want)
	}
	got = deriveMerges(toks, vocab, func(id int) float64 { return -float64(id) })
	want = "[[a b] [b c] [ab c] [a bc] [▁ a] [▁a b] [▁ ab] [c a] [ca b] [c ab] [é a] [a é]]"
	if str(got) != want {
		t.Errorf("by position: %v\nwant %v", got, want)
	}
}

// tinySPMVocab is a "llama" vocabulary: <unk>, <s>, </s>, the 256 byte
// tokens, then pieces with falling scores, no merges.
func tinySPMVocab() GGUFVocab {
	v := GGUFVocab{Model: "llama", Architecture: "llama", BOS: 1, EOS: 2, UNK: 0, PAD: -1, EOT: -1}
	add := func(tok string, typ int32, score float32) {
		v.Tokens = append(v.Tokens, tok)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", GGUFTokenUnknown, 0)
	add("<s>", GGUFTokenControl, 0)
	add("</s>", GGUFTokenControl, 0)
	for b := 0; b < 256; b++ {
		add(byteTokenName(byte(b)), GGUFTokenByte, 0)
	}
	for i, tok := range []string{"▁", "a", "b", "h", "i", "▁a", "ab", "▁ab", "hi", "▁hi", "  ", "<tag>"} {
		typ := int32(GGUFTokenNormal)
		if tok == "  " || tok == "<tag>" {
			typ = GGUFTokenUserDefined
		}
		add(tok, typ, -float32(i))
	}
	return v
}

func TestFromGGUFSentencePiece(t *testing.T) {
	for _, arch := range []string{"llama", "gemma3", "phi3"} {
		v := tinySPMVocab()
		v.Architecture = arch
		tok, err := FromGGUF(v)
		if err != nil {
			t.Fatal(err)
		}
		id := func(s string) int32 {
			i, ok := tok.TokenID(s)
			if !ok {
				t.Fatalf("%s: no token %q", arch, s)
			}
			return i
		}
		var want []int32
		text := "ab hi  <tag>x"
		switch arch {
		case "llama": // "  " is a user-defined token, split off first; Metaspace prefixes the first piece only.
			want = []int32{id("▁ab"), id("▁hi"), id("  "), id("<tag>"), 3 + 'x'}
		case "gemma3": // "  " is renamed "▁▁", a plain token; no prefix.
			want = []int32{id("ab"), id("▁hi"), id("▁▁"), id("<tag>"), 3 + 'x'}
		case "phi3": // Prepend: every piece between added tokens gets "▁".
			want = []int32{id("▁ab"), id("▁hi"), id("  "), id("<tag>"), id("▁"), 3 + 'x'}
		}
		if got := tok.Encode(text); !slices.Equal(got, want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", arch, text, got, want)
		}
		if got := tok.Decode(tok.Encode(text)); got != text && !(arch == "phi3" && got == "ab hi  <tag> x") {
			t.Errorf("%s: Decode(Encode(%q)) = %q", arch, text, got)
		}
		if bos, ok := tok.BOS(); !ok || bos != 1 || !tok.AddBOS() || tok.AddEOS() {
			t.Errorf("%s: BOS %d %v, AddBOS %v, AddEOS %v", arch, bos, ok, tok.AddBOS(), tok.AddEOS())
		}
		// The files HFFilesFromGGUF writes make the same tokenizer.
		tj, cj, err := HFFilesFromGGUF(v)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := Parse(tj)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfig(cj)
		if err != nil {
			t.Fatal(err)
		}
		if parsed, err = parsed.WithConfig(cfg); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{text, "  hi ab <s>ha</s>", "é"} {
			if a, b := tok.Encode(s), parsed.Encode(s); !slices.Equal(a, b) {
				t.Errorf("%s: Encode(%q): FromGGUF %v, Parse(HFFilesFromGGUF) %v", arch, s, a, b)
			}
		}
		if !parsed.AddBOS() || cfg.BOSToken != "<s>" || cfg.UNKToken != "<unk>" {
			t.Errorf("%s: config %+v", arch, cfg)
		}
	}
}

func TestFromGGUFSentencePieceFlags(t *testing.T) {
	v := tinySPMVocab()
	v.AddBOS, v.HasAddBOS, v.AddEOS, v.HasAddEOS = false, true, true, true
	tok, err := FromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AddBOS() || !tok.AddEOS() {
		t.Errorf("AddBOS %v, AddEOS %v", tok.AddBOS(), tok.AddEOS())
	}
	// Without the architecture, tokens of spaces only mark Gemma's vocabulary.
	v = tinySPMVocab()
	v.Architecture = ""
	if spmFlavor(&v) != spmGemma {
		t.Error("a vocabulary with \"  \" is not taken for Gemma's")
	}
	v.Tokens[len(v.Tokens)-2] = "▁▁"
	if spmFlavor(&v) != spmLlama {
		t.Error("a vocabulary without tokens of spaces is taken for Gemma's")
	}
	for tok, want := range map[string]string{"  ": "▁▁", " \t": "▁▁", "\t\t": "\t\t", " a": " a", " ": "▁"} {
		if got := gemmaRespell(tok); got != want {
			t.Errorf("gemmaRespell(%q) = %q, want %q", tok, got, want)
		}
	}
}

func TestHFFilesFromGGUFSentencePieceRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*GGUFVocab)
		field string
	}{
		{"scores", func(v *GGUFVocab) { v.Scores = v.Scores[:3] }, "tokenizer.ggml.scores"},
		{"types", func(v *GGUFVocab) { v.Types = v.Types[:3] }, "tokenizer.ggml.token_type"},
		{"duplicate token", func(v *GGUFVocab) { v.Tokens[265] = "a" }, "tokenizer.ggml.tokens"},
		{"merge", func(v *GGUFVocab) { v.Merges = []string{"a b", "ab"} }, "tokenizer.ggml.merges[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tinySPMVocab()
			tc.edit(&v)
			_, _, err := HFFilesFromGGUF(v)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field != tc.field || !strings.Contains(err.Error(), "GGUF metadata") {
				t.Errorf("error %v, want a ParseError naming %s", err, tc.field)
			}
		})
	}
	// Merges given in the file are used as they are.
	v := tinySPMVocab()
	v.Merges = []string{"a b"}
	tok, err := FromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := tok.TokenID("ab")
	a, _ := tok.TokenID("▁")
	if got := tok.Encode("ab"); !slices.Equal(got, []int32{a, ab}) {
		t.Errorf("Encode(ab) with the merge a b only: %v", got)
	}
}
