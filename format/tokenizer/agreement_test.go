package tokenizer_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"rlvr/format/gguf"
	"rlvr/format/tokenizer"
	"rlvr/internal/gzjson"
	"rlvr/internal/realmodel"
	"rlvr/internal/shareddata"
)

// agreementRef is python/tokenizer_ref.py's record: for each text (inline,
// or a dataset field named by file, line and field, read in place, or a
// question and its answer in chat turns), the ids Hugging Face's tokenizers
// give it, and its decoding of them (inline, or as a SHA-256 prefix).
type agreementRef struct {
	Wrap  [2]string
	Chat  [3]string // around a question and its answer
	Cases []struct {
		Text          *string
		Src           string
		Wrap          bool
		Chat          []string
		IDs           []int32
		Decoded       *string
		DecodedSHA256 string `json:"decoded_sha256"`
	}
	// The ids of SpecialSample with the special tokens the library adds
	// by default.
	SpecialSample string  `json:"special_sample"`
	SpecialIDs    []int32 `json:"special_ids"`
	// The SHA-256 of the merges transformers derives from the GGUF, as
	// "a\x00b" lines.
	MergesSHA256 string `json:"merges_sha256"`
}

// TestAgreementWithHFTokenizers encodes 1,320 texts per tokenizer (GSM8K
// and MATH500 questions and answers, the same in chat turns, and Unicode
// edge cases), 1,488 for the SentencePiece ones (with more edge cases and
// question-answer chats), and requires Hugging Face's ids for every one,
// and its decoding. SmolLM2's, Gemma 3's and Llama 2's tokenizers are the
// ones rlvr builds from the GGUF metadata; the references are transformers'
// built from the same files, for SmolLM2 with the published Digits
// pre-tokenizer its converter drops. llama2-legacy reads Llama 2's
// tokenizer.json with the normalizer of the published file (Prepend and
// Replace) in place of Metaspace. For the SentencePiece GGUFs, the merges
// HFFilesFromGGUF derives must also be transformers', in the same order.
func TestAgreementWithHFTokenizers(t *testing.T) {
	for _, name := range []string{"smollm2", "qwen3", "gemma3", "llama2", "llama2-legacy"} {
		t.Run(name, func(t *testing.T) {
			ref := readAgreement(t, name)
			var tok *tokenizer.Tokenizer
			switch name {
			case "smollm2", "gemma3", "llama2", "llama2-legacy":
				var path string
				switch name {
				case "smollm2":
					path = realmodel.Path(t, realmodel.SmolLM2)
				case "gemma3":
					path = realmodel.Path(t, realmodel.Gemma3)
				default:
					path = shareddata.Path(t, "ollama-llama2-tiny-random/llama-2-tiny-random.gguf")
				}
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
				if ref.MergesSHA256 != "" {
					checkMerges(t, v, ref.MergesSHA256)
				}
				if name == "llama2-legacy" {
					tok = legacyLlama2(t, v)
				} else if tok, err = tokenizer.FromGGUF(v); err != nil {
					t.Fatal(err)
				}
			case "qwen3":
				var err error
				if tok, err = tokenizer.Load(shareddata.Path(t, "tokenizers/qwen3/tokenizer.json")); err != nil {
					t.Fatal(err)
				}
				tok = tok.WithNormalizer(norm.NFC.String) // Qwen's normalizer is NFC
			}
			lines := map[string][]string{}
			agree := 0
			for i, c := range ref.Cases {
				var text string
				switch {
				case c.Text != nil:
					text = *c.Text
				case c.Chat != nil:
					text = ref.Chat[0] + datasetField(t, lines, c.Chat[0]) + ref.Chat[1] + datasetField(t, lines, c.Chat[1]) + ref.Chat[2]
				default:
					text = datasetField(t, lines, c.Src)
					if c.Wrap {
						text = ref.Wrap[0] + text + ref.Wrap[1]
					}
				}
				got := tok.EncodeWithSpecial(text, true)
				if !slices.Equal(got, c.IDs) {
					if agree+10 > i { // report the first few only
						t.Errorf("case %d %q: ids %v, Hugging Face %v", i, truncateText(text), got, c.IDs)
					}
					continue
				}
				if c.Decoded != nil && tok.Decode(got) != *c.Decoded {
					t.Errorf("case %d %q: decodes to %q, Hugging Face %q", i, truncateText(text), tok.Decode(got), *c.Decoded)
					continue
				}
				if sum := sha256.Sum256([]byte(tok.Decode(got))); c.DecodedSHA256 != "" && hex.EncodeToString(sum[:8]) != c.DecodedSHA256 {
					t.Errorf("case %d %q: decodes to %q, not Hugging Face's decoding", i, truncateText(text), truncateText(tok.Decode(got)))
					continue
				}
				agree++
			}
			if ref.SpecialIDs != nil {
				var want []int32
				if bos, ok := tok.BOS(); ok && tok.AddBOS() {
					want = append(want, bos)
				}
				want = append(want, tok.Encode(ref.SpecialSample)...)
				if eos, ok := tok.EOS(); ok && tok.AddEOS() {
					want = append(want, eos)
				}
				if !slices.Equal(want, ref.SpecialIDs) {
					t.Errorf("with BOS and EOS as AddBOS and AddEOS say: %v, Hugging Face %v", want, ref.SpecialIDs)
				}
			}
			t.Logf("%s: %d/%d texts encode to Hugging Face's ids", name, agree, len(ref.Cases))
			if agree != len(ref.Cases) {
				t.Errorf("%d of %d texts differ", len(ref.Cases)-agree, len(ref.Cases))
			}
		})
	}
}

// checkMerges requires the merges HFFilesFromGGUF writes for v to be
// transformers' (whose hash is want), in the same order.
func checkMerges(t *testing.T, v tokenizer.GGUFVocab, want string) {
	t.Helper()
	tj, _, err := tokenizer.HFFilesFromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Model struct{ Merges [][2]string }
	}
	if err := json.Unmarshal(tj, &doc); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for i, m := range doc.Model.Merges {
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(m[0] + "\x00" + m[1]))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("the %d merges HFFilesFromGGUF writes are not transformers' (SHA-256 %s, want %s)", len(doc.Model.Merges), got, want)
	}
}

// legacyLlama2 reads the tokenizer.json HFFilesFromGGUF writes for v, with
// the normalizer of Llama 2's published tokenizer.json in place of its
// Metaspace pre-tokenizer.
func legacyLlama2(t *testing.T, v tokenizer.GGUFVocab) *tokenizer.Tokenizer {
	tj, cj, err := tokenizer.HFFilesFromGGUF(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(tj, &doc); err != nil {
		t.Fatal(err)
	}
	doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
		map[string]any{"type": "Prepend", "prepend": "▁"},
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
	}}
	doc["pre_tokenizer"] = nil
	if tj, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Parse(tj)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tokenizer.ParseConfig(cj)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err = tok.WithConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return tok
}

func readAgreement(t *testing.T, name string) *agreementRef {
	t.Helper()
	var ref agreementRef
	gzjson.Read(t, filepath.Join("testdata", "agreement", name+".json.gz"), &ref)
	if len(ref.Cases) < 1000 {
		t.Fatalf("%d texts; the agreement test wants at least 1,000", len(ref.Cases))
	}
	return &ref
}

// datasetField reads "file:line:field" of a JSONL file in the shared data.
func datasetField(t *testing.T, cache map[string][]string, src string) string {
	t.Helper()
	rest, field, _ := strings.Cut(src[strings.Index(src, ":")+1:], ":")
	file := src[:strings.Index(src, ":")]
	line, err := strconv.Atoi(rest)
	if err != nil {
		t.Fatalf("source %q", src)
	}
	rows, ok := cache[file]
	if !ok {
		f, err := os.Open(shareddata.Path(t, file))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		s.Buffer(nil, 1<<24)
		for s.Scan() {
			rows = append(rows, s.Text())
		}
		cache[file] = rows
	}
	if line < 1 || line > len(rows) {
		t.Fatalf("%s: no line %d", file, line)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(rows[line-1]), &row); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(row[field])
}

func truncateText(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
