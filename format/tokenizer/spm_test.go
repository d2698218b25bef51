package tokenizer

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type spmCase struct {
	text    string
	ids     []int32
	decoded string
}

// The tokenizers in testdata/spm share a small SentencePiece-style
// vocabulary: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF> (ids
// 3..258), a few characters and merged pieces, the added tokens <tag>
// (raw) and [X] (normalized, lstrip, rstrip). They differ in their
// normalizer, pre-tokenizer and decoder, as Llama 2 (converted today and
// as published), Gemma and a splitting Metaspace do. The ids and decodings
// are those of the Hugging Face tokenizers library 0.23.3.
var spmCases = []struct {
	file  string
	cases []spmCase
}{
	{"llama", []spmCase{
		{"ab", []int32{271}, "ab"},
		{"hi ab", []int32{273, 271}, "hi ab"},
		{" hi  ab ", []int32{273, 259, 271, 259}, "hi  ab "},
		{"aaaaa", []int32{269, 275, 275}, "aaaaa"},
		{"héllo", []int32{259, 263, 265, 111, 111, 114}, "héllo"},
		{"xé中🙂z", []int32{259, 266, 265, 231, 187, 176, 243, 162, 156, 133, 125}, "xé中🙂z"},
		{"<s>hi</s>", []int32{1, 272, 2}, "<s>hi</s>"},
		{"hi<tag>ab", []int32{273, 277, 270}, "hi<tag>ab"},
		{"a [X]  b", []int32{269, 278, 261}, "a[X]b"},
		{"[X]a", []int32{278, 260}, "[X]a"},
		{"  ", []int32{274}, " "},
		{"", []int32{}, ""},
		{"\t\n", []int32{259, 12, 13}, "\t\n"},
		{"ab ", []int32{271, 197, 163}, "ab "},
		{"a<tag> b", []int32{269, 277, 259, 261}, "a<tag> b"},
	}},
	{"llama-legacy", []spmCase{
		{"ab", []int32{271}, "ab"},
		{"hi ab", []int32{273, 271}, "hi ab"},
		{" hi  ab ", []int32{259, 273, 259, 271, 259}, " hi  ab "},
		{"aaaaa", []int32{269, 275, 275}, "aaaaa"},
		{"héllo", []int32{259, 263, 265, 111, 111, 114}, "héllo"},
		{"xé中🙂z", []int32{259, 266, 265, 231, 187, 176, 243, 162, 156, 133, 125}, "xé中🙂z"},
		{"<s>hi</s>", []int32{1, 273, 2}, "<s> hi</s>"},
		{"hi<tag>ab", []int32{273, 277, 271}, "hi<tag> ab"},
		{"a [X]  b", []int32{269, 278, 274, 261}, "a [X]  b"},
		{"[X]a", []int32{278, 260}, "[X]a"},
		{"  ", []int32{274, 259}, "  "},
		{"", []int32{}, ""},
		{"\t\n", []int32{259, 12, 13}, "\t\n"},
		{"ab ", []int32{271, 197, 163}, "ab "},
		{"a<tag> b", []int32{269, 277, 274, 261}, "a<tag>  b"},
	}},
	{"gemma", []spmCase{
		{"ab", []int32{270}, "ab"},
		{"hi ab", []int32{272, 271}, "hi ab"},
		{" hi  ab ", []int32{273, 259, 271, 259}, " hi  ab "},
		{"aaaaa", []int32{275, 276}, "aaaaa"},
		{"héllo", []int32{263, 265, 111, 111, 114}, "héllo"},
		{"xé中🙂z", []int32{266, 265, 231, 187, 176, 243, 162, 156, 133, 125}, "xé中🙂z"},
		{"<s>hi</s>", []int32{1, 272, 2}, "<s>hi</s>"},
		{"hi<tag>ab", []int32{272, 277, 270}, "hi<tag>ab"},
		{"a [X]  b", []int32{260, 259, 278, 274, 261}, "a [X]  b"},
		{"[X]a", []int32{278, 260}, "[X]a"},
		{"  ", []int32{274}, "  "},
		{"", []int32{}, ""},
		{"\t\n", []int32{12, 13}, "\t\n"},
		{"ab ", []int32{270, 197, 163}, "ab "},
		{"a<tag> b", []int32{260, 277, 259, 261}, "a<tag> b"},
	}},
	{"metaspace-split", []spmCase{
		{"ab", []int32{271}, "ab"},
		{"hi ab", []int32{273, 271}, "hi ab"},
		{" hi  ab ", []int32{273, 259, 271, 259}, "hi  ab "},
		{"aaaaa", []int32{269, 275, 275}, "aaaaa"},
		{"héllo", []int32{259, 263, 265, 0, 0, 0}, "hé<unk><unk><unk>"},
		{"xé中🙂z", []int32{259, 266, 265, 0, 0, 0}, "xé<unk><unk><unk>"},
		{"<s>hi</s>", []int32{1, 273, 2}, "<s> hi</s>"},
		{"hi<tag>ab", []int32{273, 277, 271}, "hi<tag> ab"},
		{"a [X]  b", []int32{269, 278, 259, 261}, "a[X] b"},
		{"[X]a", []int32{278, 269}, "[X] a"},
		{"  ", []int32{259, 259}, " "},
		{"", []int32{}, ""},
		{"\t\n", []int32{259, 0, 0}, "<unk><unk>"},
		{"ab ", []int32{271, 0}, "ab<unk>"},
		{"a<tag> b", []int32{269, 277, 259, 261}, "a<tag> b"},
	}},
}

func loadSPM(t testing.TB, name string) *Tokenizer {
	t.Helper()
	tok, err := Load(filepath.Join("testdata", "spm", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSentencePieceStyle(t *testing.T) {
	for _, f := range spmCases {
		tok := loadSPM(t, f.file)
		for _, c := range f.cases {
			got := tok.Encode(c.text)
			if !slices.Equal(got, c.ids) {
				t.Errorf("%s: Encode(%q) = %v, want %v", f.file, c.text, got, c.ids)
				continue
			}
			if d := tok.Decode(got); d != c.decoded {
				t.Errorf("%s: Decode(Encode(%q)) = %q, want %q", f.file, c.text, d, c.decoded)
			}
		}
		bos, ok := tok.BOS()
		if wantBOS := f.file != "metaspace-split"; tok.AddBOS() != wantBOS || ok != wantBOS || (ok && bos != 1) {
			t.Errorf("%s: AddBOS %v, BOS %d %v", f.file, tok.AddBOS(), bos, ok)
		}
	}
}

func TestSentencePieceSpecial(t *testing.T) {
	tok := loadSPM(t, "gemma")
	// Special tokens written in untrusted text are text.
	if got, want := tok.EncodeWithSpecial("<s>", false), []int32{267, 3 + 's', 268}; !slices.Equal(got, want) {
		t.Errorf("EncodeWithSpecial(<s>, false) = %v, want %v", got, want)
	}
	ids := tok.Encode("<s>hi</s>")
	if got := tok.DecodeSkipSpecial(ids); got != "hi" {
		t.Errorf("DecodeSkipSpecial = %q", got)
	}
	// AppendDecode gives each token's bytes, byte tokens as raw bytes.
	if got := string(tok.AppendDecode(nil, []int32{259, 3 + 0xE4}, false)); got != " \xE4" {
		t.Errorf("AppendDecode = %q", got)
	}
	// Invalid UTF-8 in the text falls back to its bytes, which decode to
	// one U+FFFD each, as the ByteFallback decoder writes them.
	if ids, want := tok.Encode("a\xff\xfeb"), []int32{260, 3 + 0xFF, 3 + 0xFE, 261}; !slices.Equal(ids, want) {
		t.Errorf("Encode(invalid UTF-8) = %v, want %v", ids, want)
	}
	if got := tok.Decode([]int32{260, 3 + 0xE4, 3 + 0xB8, 261}); got != "a\uFFFD\uFFFDb" {
		t.Errorf("Decode of a broken byte sequence = %q", got)
	}
}

func TestConfigOverridesPostProcessor(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", "spm", "llama.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		config  string
		bos     int32
		addBOS  bool
		hasBOS  bool
		comment string
	}{
		{`{}`, 1, true, true, "the post-processor decides"},
		{`{"add_bos_token": false, "bos_token": "</s>"}`, 2, false, true, "the configuration decides"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(c.config), 0o644); err != nil {
			t.Fatal(err)
		}
		tok, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		bos, ok := tok.BOS()
		if bos != c.bos || ok != c.hasBOS || tok.AddBOS() != c.addBOS || tok.AddEOS() {
			t.Errorf("%s: BOS %d %v, AddBOS %v, AddEOS %v", c.comment, bos, ok, tok.AddBOS(), tok.AddEOS())
		}
	}
}

func TestSplitLiteral(t *testing.T) {
	pieces := func(s string, behavior uint8, invert bool) []string {
		var out []string
		splitLiteral(s, " ", behavior, invert, func(i, j int) { out = append(out, s[i:j]) })
		return out
	}
	// The pieces the tokenizers library's Split pre-tokenizer gives.
	for _, c := range []struct {
		s        string
		behavior uint8
		invert   bool
		want     []string
	}{
		{"a  b c ", splitMergedWithNext, false, []string{"a", " ", " b", " c", " "}},
		{" a  b c ", splitMergedWithPrevious, false, []string{" ", "a ", " ", "b ", "c "}},
		{" a  b c ", splitContiguous, false, []string{" ", "a", "  ", "b", " ", "c", " "}},
		{" a  b c ", splitIsolated, false, []string{" ", "a", " ", " ", "b", " ", "c", " "}},
		{" a  b c ", splitRemoved, false, []string{"a", "b", "c"}},
		{" a  b c ", splitRemoved, true, []string{" ", " ", " ", " ", " "}},
		{" a  b c ", splitMergedWithNext, true, []string{" ", "a ", " ", "b ", "c "}},
		{"abc", splitMergedWithPrevious, false, []string{"abc"}},
		{"", splitIsolated, false, nil},
	} {
		if got := pieces(c.s, c.behavior, c.invert); !slices.Equal(got, c.want) {
			t.Errorf("split %q behavior %d invert %v: %q, want %q", c.s, c.behavior, c.invert, got, c.want)
		}
	}
}

func TestDecoders(t *testing.T) {
	for _, c := range []struct {
		d    decStep
		in   []string
		want string
	}{
		// The first token loses all its replacement characters.
		{decStep{kind: decMetaspace, from: "▁", prepend: prependAlways}, []string{"▁▁a▁b", "▁c"}, "ab c"},
		{decStep{kind: decMetaspace, from: "▁", prepend: prependNever}, []string{"▁▁a▁b", "▁c"}, "  a b c"},
		{decStep{kind: decByteFallback}, []string{"a", "<0xE2>", "<0x82>", "b", "<0xE2>", "<0x82>", "<0xAC>", "<0x+A>", "<0x0a>"}, "a\uFFFD\uFFFDb€\n\n"},
		{decStep{kind: decStrip, from: " ", start: 1}, []string{"  a ", " b"}, " a b"},
		// The tokenizers library panics on these; this strips what it can.
		{decStep{kind: decStrip, from: " ", start: 3, stop: 3}, []string{"  a ", " ", ""}, "a"},
	} {
		if got := strings.Join(c.d.apply(slices.Clone(c.in)), ""); got != c.want {
			t.Errorf("decoder %+v on %q: %q, want %q", c.d, c.in, got, c.want)
		}
	}
}

func TestSentencePieceParseErrors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "spm", "gemma.json"))
	if err != nil {
		t.Fatal(err)
	}
	good := string(data)
	for _, c := range []struct {
		name, old, new, field, msg string
	}{
		{"split behavior", `"MergedWithPrevious"`, `"Merged"`, "pre_tokenizer.behavior", "Merged"},
		{"split pattern", `"String": " "
  },
  "behavior"`, `"String": ""
  },
  "behavior"`, "pre_tokenizer.pattern.String", "empty"},
		{"replace regex", `"normalizer": {
  "type": "Replace",
  "pattern": {
   "String": " "`, `"normalizer": {"type": "Replace", "pattern": {"Regex": " "`, "normalizer.pattern", "String"},
		{"decoder", `"type": "Fuse"`, `"type": "CTC"`, "decoder.decoders[2].type", "CTC"},
		{"byte-level decoder", `"type": "Fuse"`, `"type": "ByteLevel"`, "pre_tokenizer", "ByteLevel"},
		{"strip", `"type": "Fuse"`, `"type": "Strip", "content": "ab"`, "decoder.decoders[2].content", "one character"},
		{"unk", `"unk_token": "<unk>"`, `"unk_token": "<nope>"`, "model.unk_token", "<nope>"},
		{"post-processor", `"type": "TemplateProcessing"`, `"type": "Chaos"`, "post_processor.type", "Chaos"},
		{"template token", `"SpecialToken": {
     "id": "<s>"`, `"SpecialToken": {"id": "<bos>"`, "post_processor.single[0].SpecialToken.id", "<bos>"},
		{"metaspace", `"type": "Split"`, `"type": "Metaspace", "prepend_scheme": "sometimes"`, "pre_tokenizer.prepend_scheme", "sometimes"},
		{"normalizer", `"type": "Replace",
  "pattern"`, `"type": "NFKD",
  "pattern"`, "normalizer.type", "NFKD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := strings.Replace(good, c.old, c.new, 1)
			if in == good {
				t.Fatal("the replacement did not apply")
			}
			_, err := Parse([]byte(in))
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v, want field %q and %q", err, c.field, c.msg)
			}
		})
	}
}

// TestMetaBoundaries checks that cutting words before "▁" changes nothing:
// on random text over a small alphabet, with merges that join ">" to a
// piece starting with "▁" (as Gemma's one such merge does) and "x" to "▁"
// through byte fallback, BPE gives the same ids on cut and uncut words.
func TestMetaBoundaries(t *testing.T) {
	vocab := map[string]int{"<unk>": 0}
	for b := 0; b < 256; b++ {
		vocab[byteTokenName(byte(b))] = len(vocab)
	}
	var merges [][2]string
	for _, tok := range []string{"▁", "a", "b", ">", "<", "é"} {
		vocab[tok] = len(vocab)
	}
	for _, m := range [][2]string{{"▁", "a"}, {"a", "b"}, {"▁", "▁"}, {"▁", "<"}, {">", "▁<"}, {"▁a", "b"},
		{"b", ">"}, {"b>", "▁<"}, {"<0x78>", "▁"}, {"▁▁", "a"}, {"a", "▁"}} {
		vocab[m[0]+m[1]] = len(vocab)
		merges = append(merges, m)
	}
	doc := map[string]any{
		"normalizer":    map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": "▁"},
		"pre_tokenizer": nil,
		"decoder":       map[string]any{"type": "Sequence", "decoders": []any{map[string]any{"type": "ByteFallback"}}},
		"model":         map[string]any{"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>", "vocab": vocab, "merges": merges},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.metaSplit || !tok.metaJoins['>'] || !tok.metaJoins['a'] || !tok.unknownJoins || tok.metaJoins['b'] {
		t.Fatalf("metaSplit %v, joins %v, unknown %v", tok.metaSplit, tok.metaJoins, tok.unknownJoins)
	}
	alphabet := []string{"a", "b", ">", "<", " ", " ", "é", "x", "中"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var sb strings.Builder
		for range rng.IntN(30) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := strings.ReplaceAll(sb.String(), " ", "▁")
		cut := tok.encodeCharWord(nil, s)
		whole := tok.bpe(nil, s)
		if !slices.Equal(cut, whole) {
			t.Fatalf("%q: cut %v, whole %v", s, cut, whole)
		}
	}
}
