package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds Parse variations of small tokenizer.json files: it must
// return an error or a working tokenizer, never panic or hang.
func FuzzParse(f *testing.F) {
	for _, pairs := range []bool{false, true} {
		for _, pre := range []string{qwenPre, gpt2Pre} {
			f.Add(tinyTokenizer(pairs, pre))
		}
	}
	good := tinyTokenizer(false, qwenPre)
	f.Add(strings.Replace(good, `"ignore_merges":false`, `"ignore_merges":true`, 1))
	f.Add(strings.Replace(good, `"normalizer":null`, `"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"}]}`, 1))
	f.Add(strings.Replace(good, `"h i"`, `"h zz"`, 1))
	f.Add(`{"model":{"vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`)
	f.Add(`{"model":{"vocab":{"a":0},"merges":[["a"]]}}`)
	f.Add(`{"added_tokens":[{"id":1,"content":"x"}],"model":null}`)
	f.Add(`[]`)
	// SentencePiece style.
	for _, name := range []string{"gemma", "llama", "llama-legacy", "metaspace-split"} {
		data, err := os.ReadFile(filepath.Join("testdata", "spm", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(`{"model":{"vocab":{"<0x61>":0,"▁":1,"b":2,"▁b":3},"merges":[["▁","b"]],"byte_fallback":true,"unk_token":"b","fuse_unk":true},` +
		`"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},` +
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":"b"},"behavior":"Contiguous","invert":true},{"type":"Metaspace","prepend_scheme":"first","split":true}]},` +
		`"post_processor":{"type":"TemplateProcessing","single":[{"Sequence":{"id":"A"}},{"SpecialToken":{"id":"b"}}],"special_tokens":{"b":{"ids":[2]}}},` +
		`"decoder":{"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Metaspace"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":2}]}}`)
	f.Fuzz(func(t *testing.T, data string) {
		tok, err := Parse([]byte(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: tokenizer.json: ") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		for _, s := range []string{"", "abc hi <|eos|> [X] 123", "héllo\n\n  wörld's", "\xff\xfe", " ▁b<s>  aé中 ", "<0x61>"} {
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tok.VocabSize())
				}
			}
			tok.Decode(ids)
			tok.DecodeSkipSpecial(ids)
		}
	})
}

// FuzzEncode checks that decoding undoes encoding with the Qwen3 tokenizer,
// for valid UTF-8 text with or without special tokens.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{
		"", "Hello world", " this is 🦙.cpp", "\n \n\n \t\t \n", "I'm 3333 'RE",
		"<|im_start|>user\nHi<|im_end|>", "<think>\n\n</think>", "нещо на Български",
		"កាន់តែពិសេសអាចខលចេញ", "a\u00a0\u2003b", strings.Repeat("ab", 100),
	} {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got := tok.Decode(tok.Encode(s)); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
		if got := tok.Decode(tok.EncodeWithSpecial(s, false)); got != s {
			t.Errorf("Decode(EncodeWithSpecial(%q, false)) = %q", s, got)
		}
	})
}
