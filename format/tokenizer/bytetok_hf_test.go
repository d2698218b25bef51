package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// byteFile parses ByteTokenizerJSON with its configuration.
func byteFile(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Parse(ByteTokenizerJSON())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(ByteTokenizerConfigJSON())
	if err != nil {
		t.Fatal(err)
	}
	if tok, err = tok.WithConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return tok
}

// allBytes is every byte value once, in order.
func allBytes() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return string(b)
}

// byteAdversarial are texts where a byte tokenizer written as BPE could go
// wrong: special-token names whole, broken and nested, invalid UTF-8,
// characters of the byte-level alphabet written literally, and texts longer
// than the BPE word cache and the small-word merge buffer.
var byteAdversarial = []string{
	"", "a", "<s>", "</s>", "<pad>", "<s", "s>", "</s", "<pad", "<<s>>", "<</s>>", "<s/>", "< s>",
	"<s></s><pad>", "</s></s>", "<s><s>", "<pa<pad>d>", "Q:(12+7)*3-5\n12+7=19\n####52", "<s>Q:1+2\n</s><pad><pad>",
	"\x00", "\xff\xfe", "\xe2<s>\x82\xac", "\xf0\x9f\xa6", "héllo 🦙 wörld", "\u0120\u010a", "Ġthe Ċ", "<|im_start|>user",
	"  \n\t \r\n", "'s 're 'll", "a\u00a0\u2003b", strings.Repeat("ab", 40), strings.Repeat("<s>x", 30),
	strings.Repeat("\xff", 100), allBytes(), allBytes() + "<pad>" + allBytes(),
}

// sameAsByteTokenizer fails t unless tok and the native ByteTokenizer agree
// on every Encoder method for text, and on decoding ids.
func sameAsByteTokenizer(t *testing.T, tok Encoder, text string, ids []int32) {
	t.Helper()
	want := NewByteTokenizer()
	if got, w := tok.Encode(text), want.Encode(text); !slices.Equal(got, w) {
		t.Errorf("Encode(%q) = %v, want %v", text, got, w)
	}
	for _, allow := range []bool{false, true} {
		if got, w := tok.EncodeWithSpecial(text, allow), want.EncodeWithSpecial(text, allow); !slices.Equal(got, w) {
			t.Errorf("EncodeWithSpecial(%q, %v) = %v, want %v", text, allow, got, w)
		}
	}
	for _, in := range [][]int32{ids, want.Encode(text)} {
		if got, w := tok.Decode(in), want.Decode(in); got != w {
			t.Errorf("Decode(%v) = %q, want %q", in, got, w)
		}
		if got, w := tok.DecodeSkipSpecial(in), want.DecodeSkipSpecial(in); got != w {
			t.Errorf("DecodeSkipSpecial(%v) = %q, want %q", in, got, w)
		}
	}
}

func TestByteTokenizerFile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	parsed := byteFile(t)
	want := NewByteTokenizer()
	for name, tok := range map[string]*Tokenizer{"Load": loaded, "Parse": parsed} {
		t.Run(name, func(t *testing.T) {
			if got := tok.VocabSize(); got != want.VocabSize() {
				t.Errorf("VocabSize = %d, want %d", got, want.VocabSize())
			}
			for _, f := range []struct {
				name string
				got  func() (int32, bool)
				want int32
			}{{"BOS", tok.BOS, ByteBOS}, {"EOS", tok.EOS, ByteEOS}, {"PAD", tok.PAD, BytePAD}} {
				if id, ok := f.got(); !ok || id != f.want {
					t.Errorf("%s = %d, %v; want %d", f.name, id, ok, f.want)
				}
			}
			cfg := tok.Config()
			if cfg == nil || !cfg.AddBOSToken || cfg.AddEOSToken || cfg.ChatTemplateSource != "" {
				t.Errorf("Config = %+v, want add_bos_token and no chat template", cfg)
			}
			if _, err := tok.ChatTemplate(); err == nil {
				t.Error("ChatTemplate: no error, want none configured")
			}
			for i, s := range byteAdversarial {
				ids := []int32{-1, 0, 255, 256, 257, 258, 259, 1 << 20, 0xe2, 0x82, 0xac, int32(i)}
				sameAsByteTokenizer(t, tok, s, ids)
			}
			if _, ok := tok.ByteTokenizer(); !ok {
				t.Error("ByteTokenizer() = false for the byte tokenizer's own file")
			}
		})
	}
}

// FuzzByteTokenizerFile checks that the tokenizer.json of ByteTokenizer
// encodes and decodes any text and any ids as ByteTokenizer does.
func FuzzByteTokenizerFile(f *testing.F) {
	for _, s := range byteAdversarial {
		f.Add(s, []byte{0, 1, 2, 3})
	}
	f.Add("<s>x</s>", []byte{0xff, 0x00, 0x01, 0x02, 0x03})
	tok := byteFile(f)
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		// Two bytes per id, so ids reach past the vocabulary and below 0.
		var ids []int32
		for i := 0; i+1 < len(raw); i += 2 {
			ids = append(ids, int32(raw[i])<<1|int32(raw[i+1]&1)-3)
		}
		sameAsByteTokenizer(t, tok, s, ids)
	})
}

func TestByteTokenizerDetection(t *testing.T) {
	file := string(ByteTokenizerJSON())
	config := string(ByteTokenizerConfigJSON())
	replace := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("%q is not in the file", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	for _, c := range []struct {
		name         string
		file, config string
		want         bool
	}{
		{"as written", file, config, true},
		{"reformatted", strings.ReplaceAll(file, "\n", " "), config, true},
		{"regex split", replace(file, `"use_regex": false}`, `"use_regex": true}`), config, false},
		{"regex split by default", replace(file, `, "use_regex": false}`, `}`), config, false},
		{"NFC", replace(file, `"normalizer": null`, `"normalizer": {"type": "NFC"}`), config, false},
		{"byte ids permuted", replace(replace(file, `"A": 65`, `"A": 66`), `"B": 66`, `"B": 65`), config, false},
		{"a merge", replace(replace(file, `"merges": []`, `"merges": ["a b"]`), `"ÿ": 255`, `"ÿ": 255, "ab": 259`), config, false},
		{"special not special", replace(file, `"content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true`,
			`"content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false`), config, false},
		{"lstrip", replace(file, `"content": "</s>", "single_word": false, "lstrip": false`, `"content": "</s>", "single_word": false, "lstrip": true`), config, false},
		{"specials renamed", replace(file, `"content": "<pad>"`, `"content": "[PAD]"`), replace(config, `"pad_token": "<pad>"`, `"pad_token": "[PAD]"`), false},
		{"no pad in config", file, replace(config, `"pad_token": "<pad>"`, `"pad_token": null`), false},
		{"eos is bos", file, replace(config, `"eos_token": "</s>"`, `"eos_token": "<s>"`), false},
		{"no config", file, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := Parse([]byte(c.file))
			if err != nil {
				t.Fatal(err)
			}
			if c.config != "" {
				cfg, err := ParseConfig([]byte(c.config))
				if err != nil {
					t.Fatal(err)
				}
				if tok, err = tok.WithConfig(cfg); err != nil {
					t.Fatal(err)
				}
			}
			bt, ok := tok.ByteTokenizer()
			if ok != c.want || (bt != nil) != c.want {
				t.Errorf("ByteTokenizer() = %v, %v; want ok=%v", bt, ok, c.want)
			}
		})
	}
}

func TestChatTemplateFile(t *testing.T) {
	const chatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	withTemplate := strings.Replace(string(ByteTokenizerConfigJSON()), `"add_bos_token": true,`,
		`"add_bos_token": true, "chat_template": `+jsonString(chatML+"{# from config #}")+`,`, 1)
	for _, c := range []struct {
		name         string
		config       string // "" writes no tokenizer_config.json
		jinja        string // "" writes no chat_template.jinja
		wantTemplate string // "" wants none
		wantEOS      bool
	}{
		{"config only", string(ByteTokenizerConfigJSON()), "", "", true},
		{"jinja beside config", string(ByteTokenizerConfigJSON()), chatML, chatML, true},
		{"config template wins", withTemplate, chatML, chatML + "{# from config #}", true},
		{"jinja without config", "", chatML, chatML, false},
		{"neither", "", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"tokenizer.json": string(ByteTokenizerJSON()), "tokenizer_config.json": c.config, ChatTemplateFile: c.jinja}
			for name, data := range files {
				if data != "" {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			tok, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if cfg := tok.Config(); cfg != nil {
				got = cfg.ChatTemplateSource
			}
			if got != c.wantTemplate {
				t.Errorf("chat template %q, want %q", got, c.wantTemplate)
			}
			if _, ok := tok.EOS(); ok != c.wantEOS {
				t.Errorf("EOS known = %v, want %v", ok, c.wantEOS)
			}
			if tpl, err := tok.ChatTemplate(); (err == nil) != (c.wantTemplate != "") || (err == nil && tpl.Family() != "ChatML") {
				t.Errorf("ChatTemplate = %+v, %v", tpl, err)
			}
		})
	}
}
