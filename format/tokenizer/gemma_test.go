package tokenizer_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"rlvr/format/gguf"
	"rlvr/format/tokenizer"
	"rlvr/internal/realmodel"
	"rlvr/internal/shareddata"
)

// gemmaVocab reads the vocabulary of a GGUF (Gemma 3's, mostly), with the
// architecture that shapes its tokenizer.
func gemmaVocab(t testing.TB, path string) tokenizer.GGUFVocab {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	v.Architecture = f.String("general.architecture")
	return v
}

var gemmaCache struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	err  error
}

// gemma3 builds Gemma 3's tokenizer from its GGUF once per test binary.
func gemma3(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	v := gemmaVocab(t, realmodel.Path(t, realmodel.Gemma3))
	gemmaCache.once.Do(func() { gemmaCache.tok, gemmaCache.err = tokenizer.FromGGUF(v) })
	if gemmaCache.err != nil {
		t.Fatal(gemmaCache.err)
	}
	return gemmaCache.tok
}

// TestFromGGUFGemma3Time builds Gemma 3's 262,144-token tokenizer, deriving
// its 514,906 merges; it takes about a second (BenchmarkFromGGUFGemma3),
// and fails only far beyond that, which would mean a slower algorithm
// rather than a busy machine.
func TestFromGGUFGemma3Time(t *testing.T) {
	v := gemmaVocab(t, realmodel.Path(t, realmodel.Gemma3))
	start := time.Now()
	tok, err := tokenizer.FromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("FromGGUF(Gemma 3): %v", d)
	if d > 15*time.Second {
		t.Errorf("FromGGUF(Gemma 3) took %v", d)
	}
	if tok.VocabSize() != 262144 || !tok.AddBOS() {
		t.Errorf("VocabSize %d, AddBOS %v", tok.VocabSize(), tok.AddBOS())
	}
	// Callers that do not know the architecture still get Gemma's shape.
	v.Architecture = ""
	if !tokenizer.GGUFShapedAsGemma(v) {
		t.Error("Gemma 3's vocabulary without its architecture is not shaped as Gemma's")
	}
}

// BenchmarkFromGGUFGemma3 builds Gemma 3's tokenizer from its GGUF
// metadata (already read).
func BenchmarkFromGGUFGemma3(b *testing.B) {
	v := gemmaVocab(b, realmodel.Path(b, realmodel.Gemma3))
	for b.Loop() {
		if _, err := tokenizer.FromGGUF(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeGSM8KGemma3 is BenchmarkEncodeGSM8K for Gemma 3's
// SentencePiece-style tokenizer, whose pre-tokenizer leaves whole lines
// (Gemma's newlines are added tokens) to BPE.
func BenchmarkEncodeGSM8KGemma3(b *testing.B) {
	benchmarkEncodeGSM8K(b, gemma3(b))
}

// BenchmarkEncodeGSM8KLlama2 is BenchmarkEncodeGSM8K for Llama 2's
// vocabulary, from the tiny Llama GGUF in the shared data; its Metaspace
// pre-tokenizer leaves whole texts to BPE.
func BenchmarkEncodeGSM8KLlama2(b *testing.B) {
	tok, err := tokenizer.FromGGUF(gemmaVocab(b, shareddata.Path(b, "ollama-llama2-tiny-random/llama-2-tiny-random.gguf")))
	if err != nil {
		b.Fatal(err)
	}
	benchmarkEncodeGSM8K(b, tok)
}

func benchmarkEncodeGSM8K(b *testing.B, tok *tokenizer.Tokenizer) {
	texts := tokenizer.GSM8KTexts(b)
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var ids []int32
	tokens := 0
	for b.Loop() {
		b.StopTimer()
		tokenizer.ResetWordCache(tok)
		b.StartTimer()
		tokens = 0
		for _, s := range texts {
			ids = tok.AppendEncode(ids[:0], s, true)
			tokens += len(ids)
		}
	}
	b.ReportMetric(float64(tokens), "tokens/op")
}

// FuzzEncodeSentencePiece encodes arbitrary text with SentencePiece-style
// tokenizers: the small ones in testdata/spm and, when it is present, Gemma
// 3's. Encoding must not panic and must give ids in range; for valid UTF-8
// without "▁" (which decodes to a space), decoding must give the text back
// where the Hugging Face library does: always for Gemma's shape, and for
// Llama's (Metaspace, then Strip when decoding) when the text does not start
// with a space, which then loses one space.
func FuzzEncodeSentencePiece(f *testing.F) {
	for _, s := range []string{
		"", "Hello world", " two  spaces\tand tab\n\nnew", "<start_of_turn>user\nhi<end_of_turn>",
		"日本語 🙂", "a\xff\xfeb", "<0x41>", "x\u3000y", "<table><tr>", strings.Repeat("ab ", 40), "\n\n\n\t",
	} {
		f.Add(s)
	}
	type spm struct {
		tok    *tokenizer.Tokenizer
		llama  bool
		hasTag bool // the small ones have [X], which strips spaces around it
	}
	var toks []spm
	for _, name := range []string{"gemma", "llama"} {
		tok, err := tokenizer.Load(filepath.Join("testdata", "spm", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, spm{tok, name == "llama", true})
	}
	if p := filepath.Join(realmodel.Dir(), realmodel.Gemma3); fileExists(p) {
		toks = append(toks, spm{tok: gemma3(f)})
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, sp := range toks {
			for _, allow := range []bool{true, false} {
				ids := sp.tok.EncodeWithSpecial(s, allow)
				for _, id := range ids {
					if id < 0 || int(id) >= sp.tok.VocabSize() {
						t.Fatalf("EncodeWithSpecial(%q, %v) gave id %d", s, allow, id)
					}
				}
				got := sp.tok.Decode(ids)
				if !utf8.ValidString(s) || strings.Contains(s, "▁") || (sp.hasTag && strings.Contains(s, "[X]")) ||
					(sp.llama && strings.HasPrefix(s, " ")) {
					continue
				}
				if got != s {
					t.Errorf("Decode(EncodeWithSpecial(%q, %v)) = %q", s, allow, got)
				}
			}
		}
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
