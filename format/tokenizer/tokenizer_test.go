package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"rlvr/internal/shareddata"
)

var qwen3Cache struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// qwen3 loads the Qwen3 tokenizer from the shared data once per test binary.
func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	p := shareddata.Path(t, "tokenizers/qwen3/tokenizer.json")
	qwen3Cache.once.Do(func() { qwen3Cache.tok, qwen3Cache.err = Load(p) })
	if qwen3Cache.err != nil {
		t.Fatal(qwen3Cache.err)
	}
	return qwen3Cache.tok
}

type conformanceCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func TestQwen2Conformance(t *testing.T) {
	tok := qwen3(t)
	data, err := os.ReadFile(shareddata.Path(t, "tokenizer-vectors/qwen2_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []conformanceCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 43 {
		t.Errorf("got %d cases, want 43", len(cases))
	}
	pass := 0
	for _, c := range cases {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
			continue
		}
		if back := tok.Decode(got); back != c.Text {
			t.Errorf("Decode(Encode(%q)) = %q", c.Text, back)
			continue
		}
		pass++
	}
	t.Logf("%d/%d conformance cases pass", pass, len(cases))
}

func TestQwen3Basics(t *testing.T) {
	tok := qwen3(t)
	if got, want := tok.VocabSize(), 151669; got != want {
		t.Errorf("VocabSize = %d, want %d", got, want)
	}
	if tok.Normalization() != "NFC" {
		t.Errorf("Normalization = %q, want NFC", tok.Normalization())
	}
	for _, c := range []struct {
		f    func() (int32, bool)
		name string
		want int32
		ok   bool
	}{{tok.BOS, "BOS", -1, false}, {tok.EOS, "EOS", 151645, true}, {tok.PAD, "PAD", 151643, true}} {
		if id, ok := c.f(); id != c.want || ok != c.ok {
			t.Errorf("%s = %d, %v; want %d, %v", c.name, id, ok, c.want, c.ok)
		}
	}
	if id, ok := tok.TokenID("<|im_start|>"); !ok || id != 151644 {
		t.Errorf("TokenID(<|im_start|>) = %d, %v", id, ok)
	}
	if id, ok := tok.TokenID("Ġthe"); !ok || id != 279 {
		t.Errorf("TokenID(Ġthe) = %d, %v", id, ok)
	}
	if s, ok := tok.Token(279); !ok || s != "Ġthe" {
		t.Errorf("Token(279) = %q, %v", s, ok)
	}
	if _, ok := tok.Token(-1); ok {
		t.Error("Token(-1) reported a token")
	}
	if !tok.IsSpecial(151644) || tok.IsSpecial(151667) || tok.IsSpecial(279) {
		t.Error("IsSpecial wrong for <|im_start|>, <think> or Ġthe")
	}
}

func TestSpecialTokens(t *testing.T) {
	tok := qwen3(t)
	text := "<|im_start|>user\nHi<|im_end|>\n<think>x</think>"
	got := tok.Encode(text)
	want := []int32{151644, 872, 198, 13048, 151645, 198, 151667, 87, 151668}
	if !slices.Equal(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", text, got, want)
	}
	if back := tok.Decode(got); back != text {
		t.Errorf("Decode = %q", back)
	}
	if back := tok.DecodeSkipSpecial(got); back != "user\nHi\n<think>x</think>" {
		t.Errorf("DecodeSkipSpecial = %q", back)
	}
	// With specials disallowed, <|im_start|> is text, while <think>, an
	// added token that is not special, is still recognised.
	plain := tok.EncodeWithSpecial(text, false)
	if slices.Contains(plain, 151644) || slices.Contains(plain, 151645) || !slices.Contains(plain, 151667) {
		t.Errorf("EncodeWithSpecial(false) = %v", plain)
	}
	if back := tok.Decode(plain); back != text {
		t.Errorf("Decode(EncodeWithSpecial(false)) = %q", back)
	}
	if got := tok.Decode([]int32{-5, 1 << 30, 9707}); got != "Hello" {
		t.Errorf("Decode with invalid ids = %q", got)
	}
}

func TestDecodeInvalidUTF8(t *testing.T) {
	tok := qwen3(t)
	// "🦙" is split over three tokens; a prefix of them is not valid UTF-8.
	ids := tok.Encode(" 🦙")
	if len(ids) < 2 {
		t.Fatalf("Encode(\" 🦙\") = %v, want several tokens", ids)
	}
	got := tok.Decode(ids[:len(ids)-1])
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "\uFFFD") {
		t.Errorf("Decode of a split rune = %q", got)
	}
	raw := tok.AppendDecode(nil, ids, false)
	if string(raw) != " 🦙" {
		t.Errorf("AppendDecode = %q", raw)
	}
}

func TestValidUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"a\xffb", "a\uFFFDb"},
		{"\xe2\x82", "\uFFFD"},                 // truncated 3-byte sequence: one replacement
		{"\xe2\x82x", "\uFFFDx"},               //
		{"\xf0\x9f\xa6", "\uFFFD"},             // truncated 4-byte sequence
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED A0 is ill-formed at once
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\x80\x80", "\uFFFD\uFFFD"},
		{"é\xe9", "é\uFFFD"},
	} {
		if got := validUTF8([]byte(c.in)); got != c.want {
			t.Errorf("validUTF8(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRoundTripGSM8K(t *testing.T) {
	tok := qwen3(t)
	texts := gsm8kTexts(t)
	if len(texts) > 2000 {
		texts = texts[:2000]
	}
	for _, s := range texts {
		if got := tok.Decode(tok.Encode(s)); got != s {
			t.Fatalf("round trip of %q gave %q", s, got)
		}
	}
}

func TestNormalizerHook(t *testing.T) {
	tok := qwen3(t)
	decomposed := "Cafe\u0301" // e + COMBINING ACUTE ACCENT
	composed := "Café"
	calls := 0
	nfc := func(s string) string {
		calls++
		return strings.ReplaceAll(s, "e\u0301", "é")
	}
	if slices.Equal(tok.Encode(decomposed), tok.Encode(composed)) {
		t.Fatal("without a normalizer, decomposed text should tokenize as written")
	}
	withNFC := tok.WithNormalizer(nfc)
	if got, want := withNFC.Encode(decomposed), tok.Encode(composed); !slices.Equal(got, want) {
		t.Errorf("with a normalizer: %v, want %v", got, want)
	}
	calls = 0
	withNFC.Encode("plain ASCII and Führer, 数学")
	if calls != 0 {
		t.Errorf("the normalizer ran %d times on text that is NFC", calls)
	}
}

func TestIsNFC(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"", true}, {"hello", true}, {"Führer ½ 数学 🦙", true}, {"нещо", true},
		{"e\u0301", false}, {"\u212B", false}, {"\u1100\u1161", false}, {"\U0002F800", false},
	} {
		if got := isNFC(c.s); got != c.want {
			t.Errorf("isNFC(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// TestSplitters checks the hand-written scanners against splits worked out
// by hand from the regular expressions.
func TestSplitters(t *testing.T) {
	split := func(f splitter, s string) []string {
		var out []string
		for i := 0; i < len(s); {
			j := f(s, i)
			if j <= i || j > len(s) {
				t.Fatalf("splitter returned %d at %d for %q", j, i, s)
			}
			out = append(out, s[i:j])
			i = j
		}
		return out
	}
	qwen, _ := splitterFor(patternQwen2)
	llama, _ := splitterFor(patternLlama3)
	gpt2, _ := splitterFor(patternGPT2)
	for _, c := range []struct {
		f    splitter
		in   string
		want []string
	}{
		{qwen, "Hello world", []string{"Hello", " world"}},
		{qwen, "I'm  here's 'RE'", []string{"I", "'m", " ", " here", "'s", " '", "RE", "'"}},
		{qwen, "it'ſ", []string{"it", "'ſ"}},
		{qwen, "12345", []string{"1", "2", "3", "4", "5"}},
		{llama, "12345", []string{"123", "45"}},
		{qwen, "a  \n\n b", []string{"a", "  \n\n", " b"}},
		{qwen, "x   ", []string{"x", "   "}},
		{qwen, "x   y", []string{"x", "  ", " y"}},
		{qwen, "x\t y", []string{"x", "\t", " y"}},
		{qwen, "(foo) ...\n\nbar", []string{"(foo", ")", " ...\n\n", "bar"}},
		{qwen, "\tHello", []string{"\tHello"}},
		{qwen, "a\r\nb", []string{"a", "\r\n", "b"}},
		{qwen, " \u00a0x", []string{" ", "\u00a0x"}},
		{qwen, "a\xffb", []string{"a", "\xffb"}},
		{gpt2, "Hello  world's 123!!", []string{"Hello", " ", " world", "'s", " 123", "!!"}},
		{gpt2, "a\n\nb ", []string{"a", "\n", "\n", "b", " "}},
		{gpt2, "'RE", []string{"'", "RE"}},
	} {
		if got := split(c.f, c.in); !slices.Equal(got, c.want) {
			t.Errorf("split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if _, ok := splitterFor(`\s+`); ok {
		t.Error("an unknown pattern was recognised")
	}
}

// TestBPELargeMatchesSmall checks the heap-based merge against the
// quadratic one on random words over a small alphabet, where merges chain.
func TestBPELargeMatchesSmall(t *testing.T) {
	tok := qwen3(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "aeinrst "
	for range 2000 {
		n := 2 + rng.IntN(smallWord-1)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		word := string(b)
		small := tok.bpe(nil, word)
		large := tok.bpeLarge(nil, word)
		if !slices.Equal(small, large) {
			t.Fatalf("bpe(%q): small %v, large %v", word, small, large)
		}
	}
	// A long pre-token goes through the heap and must still round-trip.
	long := strings.Repeat("abracadabra", 100)
	if got := tok.Decode(tok.Encode(long)); got != long {
		t.Error("long word round trip failed")
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := qwen3(t)
	texts := gsm8kTexts(t)[:200]
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range texts {
				k := (i + g*25) % len(texts)
				if got := tok.Encode(texts[k]); !slices.Equal(got, want[k]) {
					t.Errorf("concurrent Encode differs for text %d", k)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestLoadDirAndConfig(t *testing.T) {
	tok := qwen3(t)
	if tok.Config() == nil || tok.Config().EOSToken != "<|im_end|>" || tok.Config().PADToken != "<|endoftext|>" {
		t.Fatalf("Config = %+v", tok.Config())
	}
	tpl, err := tok.ChatTemplate()
	if err != nil || tpl.Family() != "ChatML" || !strings.Contains(tpl.Source, "enable_thinking") {
		t.Fatalf("ChatTemplate = %+v, %v", tpl, err)
	}
	// Parse knows nothing of the configuration until given one.
	data, err := os.ReadFile(shareddata.Path(t, "tokenizers/qwen3/tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bare.EOS(); ok {
		t.Error("Parse result has an EOS")
	}
	cfg, err := ParseConfig([]byte(`{"eos_token": {"content": "<|im_end|>"}, "bos_token": null, "pad_token": "<|endoftext|>"}`))
	if err != nil {
		t.Fatal(err)
	}
	withCfg, err := bare.WithConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := withCfg.EOS(); !ok || id != 151645 {
		t.Errorf("EOS = %d, %v", id, ok)
	}
	if _, err := bare.WithConfig(&Config{EOSToken: "<nope>"}); err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Errorf("WithConfig with an unknown token: %v", err)
	}
}

func gsm8kTexts(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(shareddata.Path(t, "gsm8k/train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for line := range strings.Lines(string(data)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec struct{ Question, Answer string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, rec.Question, rec.Answer)
	}
	return texts
}

func TestByteTokenizer(t *testing.T) {
	var enc Encoder = NewByteTokenizer()
	ids := enc.Encode("<s>12+7=19</s>")
	want := []int32{ByteBOS, '1', '2', '+', '7', '=', '1', '9', ByteEOS}
	if !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got := enc.Decode(ids); got != "<s>12+7=19</s>" {
		t.Errorf("Decode = %q", got)
	}
	if got := enc.DecodeSkipSpecial(append(ids, BytePAD)); got != "12+7=19" {
		t.Errorf("DecodeSkipSpecial = %q", got)
	}
	if got := enc.EncodeWithSpecial("<pad>", false); len(got) != 5 {
		t.Errorf("EncodeWithSpecial(false) = %v", got)
	}
	if enc.VocabSize() != 259 {
		t.Errorf("VocabSize = %d", enc.VocabSize())
	}
	if id, ok := enc.PAD(); !ok || id != BytePAD {
		t.Errorf("PAD = %d, %v", id, ok)
	}
	s := "héllo 🦙 <s"
	if got := enc.Decode(enc.Encode(s)); got != s {
		t.Errorf("round trip %q -> %q", s, got)
	}
}

// tinyTokenizer builds a small tokenizer.json: a byte alphabet, a few merges
// and added tokens, with the given merges form and pre-tokenizer.
func tinyTokenizer(pairs bool, preTokenizer string) string {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	merges := [][2]string{{"a", "b"}, {"ab", "c"}, {"Ġ", "a"}, {"h", "i"}}
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
	}
	var mj []byte
	if pairs {
		mj, _ = json.Marshal(merges)
	} else {
		var lines []string
		for _, m := range merges {
			lines = append(lines, m[0]+" "+m[1])
		}
		mj, _ = json.Marshal(lines)
	}
	vj, _ := json.Marshal(vocab)
	return fmt.Sprintf(`{"version":"1.0","added_tokens":[
		{"id":300,"content":"<|eos|>","special":true,"normalized":false},
		{"id":301,"content":"[X]","special":false,"lstrip":true,"rstrip":true,"normalized":true},
		{"id":302,"content":"<w>","special":false,"single_word":true,"normalized":false}],
	"normalizer":null,"pre_tokenizer":%s,"post_processor":null,
	"decoder":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false},
	"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"","fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":%s,"merges":%s}}`,
		preTokenizer, vj, mj)
}

const qwenPre = `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":false}]}`

const gpt2Pre = `{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}`

func TestTinyTokenizer(t *testing.T) {
	for _, pairs := range []bool{false, true} {
		for _, pre := range []string{qwenPre, gpt2Pre} {
			tok, err := Parse([]byte(tinyTokenizer(pairs, pre)))
			if err != nil {
				t.Fatal(err)
			}
			abc, _ := tok.TokenID("abc")
			ab, _ := tok.TokenID("ab")
			ga, _ := tok.TokenID("Ġa")
			hi, _ := tok.TokenID("hi")
			for _, c := range []struct {
				in   string
				want []int32
			}{
				{"abc", []int32{abc}},
				{"abcab a", []int32{abc, ab, ga}},
				{"hi<|eos|>", []int32{hi, 300}},
				{"hi [X]  hi", []int32{hi, 301, hi}}, // lstrip and rstrip absorb the spaces
				{"hi <w> x<w>", []int32{hi, ' ', 302, ' ', 'x', '<', 'w', '>'}},
			} {
				if got := tok.Encode(c.in); !slices.Equal(got, c.want) {
					t.Errorf("pairs=%v pre=%.20s: Encode(%q) = %v, want %v", pairs, pre, c.in, got, c.want)
				}
			}
			if got := tok.EncodeWithSpecial("<|eos|>", false); slices.Contains(got, 300) {
				t.Errorf("special token recognised with allowSpecial=false: %v", got)
			}
			if tok.VocabSize() != 303 {
				t.Errorf("VocabSize = %d", tok.VocabSize())
			}
		}
	}
}

func TestIgnoreMerges(t *testing.T) {
	src := strings.Replace(tinyTokenizer(false, qwenPre), `"hi":259`, `"hi":259,"zq":400`, 1)
	for _, ignore := range []bool{false, true} {
		tok, err := Parse([]byte(strings.Replace(src, `"ignore_merges":false`, fmt.Sprintf(`"ignore_merges":%v`, ignore), 1)))
		if err != nil {
			t.Fatal(err)
		}
		want := []int32{'z', 'q'}
		if ignore {
			want = []int32{400}
		}
		if got := tok.Encode("zq"); !slices.Equal(got, want) {
			t.Errorf("ignore_merges=%v: Encode(zq) = %v, want %v", ignore, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := tinyTokenizer(false, qwenPre)
	for _, c := range []struct {
		name, in, field, msg string
	}{
		{"not json", `{"model":`, "", "unexpected end"},
		{"not object", `[1,2]`, "", "want an object"},
		{"no model", `{"decoder":{"type":"ByteLevel"}}`, "model", "missing"},
		{"model type", strings.Replace(good, `"type":"BPE"`, `"type":"WordPiece"`, 1), "model.type", "WordPiece"},
		{"merge not in vocab", strings.Replace(good, `"h i"`, `"h zz"`, 1), "model.merges[3]", `"zz" is not in model.vocab`},
		{"merge bad form", strings.Replace(good, `"h i"`, `"hi"`, 1), "model.merges[3]", "two tokens"},
		{"merge bad element", strings.Replace(good, `"h i"`, `7`, 1), "model.merges[3]", "want a string"},
		{"merge pair length", strings.Replace(tinyTokenizer(true, qwenPre), `["h","i"]`, `["h","i","x"]`, 1), "model.merges[3]", "got 3"},
		{"vocab id", strings.Replace(good, `"hi":259`, `"hi":"x"`, 1), `model.vocab["hi"]`, "integer"},
		{"vocab negative", strings.Replace(good, `"hi":259`, `"hi":-4`, 1), `model.vocab["hi"]`, "out of range"},
		{"vocab sparse", strings.Replace(good, `"hi":259`, `"hi":99999999`, 1), "model.vocab", "token ids up to"},
		{"added content", strings.Replace(good, `"content":"<|eos|>"`, `"content":""`, 1), "added_tokens[0].content", "empty"},
		{"added id", strings.Replace(good, `{"id":300,`, `{`, 1), "added_tokens[0].id", "missing"},
		{"added type", strings.Replace(good, `"special":true`, `"special":"yes"`, 1), "added_tokens[0].special", "want a boolean"},
		{"pattern", strings.Replace(good, `\\p{N}|`, `\\p{N}{1,2}|`, 1), "pre_tokenizer.pretokenizers[0].pattern.Regex", "unsupported split pattern"},
		{"behavior", strings.Replace(good, `"Isolated"`, `"Removed"`, 1), "pre_tokenizer.pretokenizers[0].behavior", "Removed"},
		{"no byte level", strings.Replace(good, qwenPre, `null`, 1), "pre_tokenizer", "ByteLevel"},
		{"pre-tokenizer", strings.Replace(good, qwenPre, `{"type":"Whitespace"}`, 1), "pre_tokenizer.type", "Whitespace"},
		{"normalizer", strings.Replace(good, `"normalizer":null`, `"normalizer":{"type":"NFKC"}`, 1), "normalizer.type", "NFKC"},
		{"decoder", strings.Replace(good, `"decoder":{"type":"ByteLevel"`, `"decoder":{"type":"WordPiece"`, 1), "decoder.type", "WordPiece"},
		{"dropout", strings.Replace(good, `"dropout":null`, `"dropout":0.1`, 1), "model.dropout", "not supported"},
		{"prefix", strings.Replace(good, `"continuing_subword_prefix":""`, `"continuing_subword_prefix":"##"`, 1), "model.continuing_subword_prefix", "##"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.in == good {
				t.Fatal("the replacement did not apply")
			}
			_, err := Parse([]byte(c.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error = %v, want a *ParseError", err)
			}
			if pe.File != "tokenizer.json" || pe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q (field %q), want field %q and %q", err, pe.Field, c.field, c.msg)
			}
			if !strings.HasPrefix(err.Error(), "tokenizer: tokenizer.json: ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of an empty dir: %v", err)
	}
	bad := strings.Replace(tinyTokenizer(false, qwenPre), `"h i"`, `"h zz"`, 1)
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), path+": model.merges[3]") {
		t.Errorf("Load error %v does not name the file and field", err)
	}
	if err := os.WriteFile(path, []byte(tinyTokenizer(false, qwenPre)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(cfg, []byte(`{"eos_token": 5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), cfg+": eos_token") {
		t.Errorf("Load with a bad config: %v", err)
	}
	if err := os.WriteFile(cfg, []byte(`{"eos_token": "<|eos|>", "chat_template": [{"name": "default", "template": "<|start_header_id|>"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.EOS(); !ok || id != 300 {
		t.Errorf("EOS = %d, %v", id, ok)
	}
	if tpl, err := tok.ChatTemplate(); err != nil || tpl.Source != "<|start_header_id|>" {
		t.Errorf("ChatTemplate = %v, %v", tpl, err)
	}
}
