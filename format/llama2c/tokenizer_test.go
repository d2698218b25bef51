package llama2c

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func readStoriesTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := ReadTokenizer(stories(t, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestReadTokenizerStories(t *testing.T) {
	tok := readStoriesTokenizer(t)
	if tok.VocabSize() != 512 || tok.MaxTokenLength() != 7 {
		t.Fatalf("VocabSize, MaxTokenLength = %d, %d, want 512, 7", tok.VocabSize(), tok.MaxTokenLength())
	}
	for id, want := range map[int32]string{0: "<unk>", BOS: "\n<s>\n", EOS: "\n</s>\n", 3: "<0x00>", 258: "<0xFF>", 259: " t", 511: "\u200a"} {
		if got := tok.Piece(id); got != want {
			t.Errorf("Piece(%d) = %q, want %q", id, got, want)
		}
	}
	if got := tok.Score(260); got != -1 {
		t.Errorf("Score(260) = %v, want -1", got)
	}
	if id, ok := tok.Lookup(" the"); !ok || id != 265 {
		t.Errorf("Lookup(\" the\") = %d, %v, want 265", id, ok)
	}
	if tok.Piece(-1) != "" || tok.Piece(512) != "" || tok.Score(512) != 0 {
		t.Error("out-of-range Piece or Score not empty")
	}
}

// The ids below were produced by SentencePiece 0.1.97 from tok512.model
// (SentencePieceProcessor.encode), for text on which SentencePiece and
// run.c agree (single spaces, no normalisation).
var sentencePieceIDs = []struct {
	text string
	ids  []int32
}{
	{"Once upon a time", []int32{403, 407, 261, 378}},
	{"Hello, world!", []int32{346, 306, 414, 432, 263, 304, 341, 443}},
	{"x", []int32{410, 444}},
	{"Once upon a time, there was a little girl named Lily.", []int32{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}},
	{`Lily's mom said, "Lily, let's go to the park."`, []int32{317, 439, 419, 357, 336, 432, 313, 438, 310, 432, 278, 316, 439, 419, 298, 414, 267, 265, 282, 295, 433, 426, 436}},
	{"The quick brown fox jumps over the lazy dog.", []int32{291, 410, 456, 425, 417, 340, 268, 420, 327, 416, 272, 414, 444, 410, 449, 425, 423, 427, 419, 334, 330, 265, 278, 412, 451, 422, 400, 428, 426}},
	// é is a token; ü and 日本 fall back to UTF-8 bytes.
	{"café ü 日本", []int32{280, 412, 431, 485, 410, 198, 191, 410, 233, 154, 168, 233, 159, 175}},
	{"Tom's 3 cats & 2 dogs: {zip}!", []int32{274, 287, 439, 419, 410, 472, 280, 294, 419, 410, 499, 410, 479, 400, 428, 419, 467, 410, 126, 451, 417, 427, 128, 443}},
}

func TestEncodeStories(t *testing.T) {
	tok := readStoriesTokenizer(t)
	for _, tc := range sentencePieceIDs {
		if got := tok.Encode(tc.text, false, false); fmt.Sprint(got) != fmt.Sprint(tc.ids) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.ids)
		}
		want := append(append([]int32{BOS}, tc.ids...), EOS)
		if got := tok.Encode(tc.text, true, true); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Encode(%q, bos, eos) = %v, want %v", tc.text, got, want)
		}
	}
	for _, tc := range []struct {
		bos, eos bool
		want     []int32
	}{{false, false, []int32{}}, {true, false, []int32{BOS}}, {false, true, []int32{EOS}}, {true, true, []int32{BOS, EOS}}} {
		if got := tok.Encode("", tc.bos, tc.eos); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Encode(\"\", %v, %v) = %v, want %v", tc.bos, tc.eos, got, tc.want)
		}
	}
}

// roundTripTexts are encoded and decoded by several tests.
var roundTripTexts = []string{
	"",
	"a",
	" ",
	"Once upon a time",
	"  two leading spaces and  double  spaces ",
	"tabs\tand\nnewlines\r\n",
	"café ü 日本 🙂 \u200a",
	"NUL\x00byte and \x01 control",
	"invalid \xff\xfe utf-8 \xe6\x97 cut \x80\x80\x80\x80\x80 continuation",
	"<0x41> <s> </s> <unk>",
	wantGreedy,
}

func TestRoundTripStories(t *testing.T) {
	tok := readStoriesTokenizer(t)
	for _, s := range roundTripTexts {
		for _, be := range [][2]bool{{false, false}, {true, false}, {true, true}} {
			ids := tok.Encode(s, be[0], be[1])
			if got := tok.DecodeAll(ids); got != s {
				t.Errorf("DecodeAll(Encode(%q, %v, %v)) = %q (ids %v)", s, be[0], be[1], got, ids)
			}
		}
	}
}

// naiveEncode is a direct transcription of run.c's encode: byte loop with
// a code point buffer, then the quadratic merge loop.
func naiveEncode(t *Tokenizer, text string, bos, eos bool) []int32 {
	var toks []int32
	if bos {
		toks = append(toks, BOS)
	}
	if text != "" {
		if id, ok := t.Lookup(" "); ok {
			toks = append(toks, id)
		} else {
			toks = append(toks, byteToken(t, ' '))
		}
	}
	var buf []byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c&0xC0 != 0x80 {
			buf = buf[:0]
		}
		buf = append(buf, c)
		if i+1 < len(text) && text[i+1]&0xC0 == 0x80 && len(buf) < 4 {
			continue
		}
		if id, ok := t.Lookup(string(buf)); ok {
			toks = append(toks, id)
		} else {
			for _, b := range buf {
				toks = append(toks, byteToken(t, b))
			}
		}
		buf = buf[:0]
	}
	for {
		best, bestID, bestIdx := float32(-1e10), int32(-1), -1
		for i := 0; i+1 < len(toks); i++ {
			id, ok := t.Lookup(t.Piece(toks[i]) + t.Piece(toks[i+1]))
			if ok && t.Score(id) > best {
				best, bestID, bestIdx = t.Score(id), id, i
			}
		}
		if bestIdx < 0 {
			break
		}
		toks[bestIdx] = bestID
		toks = append(toks[:bestIdx+1], toks[bestIdx+2:]...)
	}
	if eos {
		toks = append(toks, EOS)
	}
	if toks == nil {
		toks = []int32{}
	}
	return toks
}

func byteToken(t *Tokenizer, b byte) int32 {
	if id := int32(b) + 3; int(id) < t.VocabSize() {
		return id
	}
	return UNK
}

func TestEncodeMatchesNaiveStories(t *testing.T) {
	tok := readStoriesTokenizer(t)
	texts := append([]string(nil), roundTripTexts...)
	for _, tc := range sentencePieceIDs {
		texts = append(texts, tc.text)
	}
	for _, s := range texts {
		for _, bos := range []bool{false, true} {
			got, want := tok.Encode(s, bos, !bos), naiveEncode(tok, s, bos, !bos)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Encode(%q) = %v, run.c algorithm gives %v", s, got, want)
			}
		}
	}
}

// tokenizerFile builds a llama2.c tokenizer file.
func tokenizerFile(maxLen int32, pieces []string, scores []float32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(maxLen))
	for i, p := range pieces {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scores[i]))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// tiedTokenizer has byte tokens and merges with many equal scores, to
// exercise the leftmost-on-ties rule and scores at the -1e10 cutoff.
func tiedTokenizer() ([]string, []float32) {
	pieces := []string{"<unk>", "\n<s>\n", "\n</s>\n"}
	for b := range 256 {
		pieces = append(pieces, fmt.Sprintf("<0x%02X>", b))
	}
	extra := []struct {
		p string
		s float32
	}{
		{" ", 0}, {"a", 0}, {"b", 0}, {"c", 0}, {"é", 0},
		{"aa", -1}, {"ab", -1}, {"ba", -1}, {"bb", -1}, {" a", -1},
		{"aaa", -1}, {"aab", -2}, {"abab", -1}, {"bab", -2}, {" aa", -2},
		{"ca", -3}, {"ac", float32(-1e10)}, {"cc", float32(math.NaN())},
		{"cb", -1e9}, {"aa", -5}, // duplicate piece: the first id wins
		{"éa", -1}, {"<0x", -1}, {"\x00z", -1},
	}
	scores := make([]float32, len(pieces))
	for _, e := range extra {
		pieces = append(pieces, e.p)
		scores = append(scores, e.s)
	}
	return pieces, scores
}

func TestEncodeTies(t *testing.T) {
	pieces, scores := tiedTokenizer()
	tok, err := ParseTokenizer(tokenizerFile(6, pieces, scores), len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	id := func(p string) int32 {
		i, ok := tok.Lookup(p)
		if !ok {
			t.Fatalf("no token %q", p)
		}
		return i
	}
	if got, want := id("aa"), int32(264); got != want {
		t.Fatalf("Lookup(aa) = %d, want the first id %d", got, want)
	}
	if got := tok.Piece(int32(len(pieces) - 1)); got != "" {
		t.Fatalf("piece with NUL = %q, want it cut at the NUL", got)
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		// " a" (-1) is leftmost among the -1 merges of " ", a, a, a;
		// then "aa" (-1) beats " aa" (-2).
		{"aaa", []string{" a", "aa"}},
		{"abab", []string{" a", "bab"}},
		{"bbbb", []string{" ", "bb", "bb"}},
		{"\x01ac", []string{" ", "<0x01>", "a", "c"}}, // score -1e10 never merges
		{"cc", []string{" ", "c", "c"}},               // NaN never merges
		{"cb", []string{" ", "cb"}},
		{"éa", []string{" ", "éa"}},
		{"z", []string{" ", "<0x7A>"}},
	} {
		var want []int32
		for _, p := range tc.want {
			want = append(want, id(p))
		}
		got := tok.Encode(tc.text, false, false)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, want)
		}
		if naive := naiveEncode(tok, tc.text, false, false); fmt.Sprint(naive) != fmt.Sprint(want) {
			t.Errorf("naive Encode(%q) = %v, want %v", tc.text, naive, want)
		}
	}
}

func FuzzEncode(f *testing.F) {
	for _, s := range roundTripTexts {
		f.Add(s)
	}
	for _, s := range []string{"aaaaaaa", "abababab a", "bbabbaab", "ccacbcb", "éaéaé"} {
		f.Add(s)
	}
	pieces, scores := tiedTokenizer()
	tied, err := ParseTokenizer(tokenizerFile(6, pieces, scores), len(pieces))
	if err != nil {
		f.Fatal(err)
	}
	// A vocabulary too small for byte fallback.
	small, err := ParseTokenizer(tokenizerFile(5, []string{"<unk>", "", "", " ", "a", " a"}, []float32{0, 0, 0, 0, 0, 1}), 6)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range []*Tokenizer{tied, small} {
			got, want := tok.Encode(s, true, false), naiveEncode(tok, s, true, false)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Encode(%q) = %v, run.c algorithm gives %v", s, got, want)
			}
		}
		if got := tied.DecodeAll(tied.Encode(s, true, true)); got != s && !strings.Contains(s, "<0x") {
			t.Fatalf("DecodeAll(Encode(%q)) = %q", s, got)
		}
	})
}

func TestDecode(t *testing.T) {
	tok := readStoriesTokenizer(t)
	once := tok.Encode("Once", false, false)
	if len(once) != 1 || tok.Piece(once[0]) != " Once" {
		t.Fatalf("Encode(Once) = %v", once)
	}
	for _, tc := range []struct {
		prev, tok int32
		want      string
	}{
		{BOS, once[0], "Once"},
		{EOS, once[0], " Once"},
		{5, once[0], " Once"},
		{BOS, 3 + '\n', "\n"},
		{7, 3 + 0xE6, "\xe6"},
		{BOS, BOS, "\n<s>\n"},
		{BOS, -1, ""},
		{BOS, 512, ""},
	} {
		if got := tok.Decode(tc.prev, tc.tok); got != tc.want {
			t.Errorf("Decode(%d, %d) = %q, want %q", tc.prev, tc.tok, got, tc.want)
		}
	}
	if got := tok.DecodeAll([]int32{BOS, once[0], once[0], EOS, once[0], -3}); got != "Once Once Once" {
		t.Errorf("DecodeAll = %q", got)
	}
}

func TestRawByte(t *testing.T) {
	for p, want := range map[string]int{"<0x00>": 0, "<0x41>": 0x41, "<0xff>": 0xff, "<0xFf>": 0xff, "<0x4>": -1, "<0x411>": -1, "<0xG1>": -1, "<1x41>": -1, "<0x41]": -1} {
		b, ok := rawByte(p)
		if got := map[bool]int{true: int(b), false: -1}[ok]; got != want {
			t.Errorf("rawByte(%q) = %d, want %d", p, got, want)
		}
	}
}

func TestReadTokenizerCorrupt(t *testing.T) {
	// A 512-token file like tok512.bin.
	pieces, scores := tiedTokenizer()
	for len(pieces) < 512 {
		pieces = append(pieces, fmt.Sprintf("p%d", len(pieces)))
		scores = append(scores, 0)
	}
	real := tokenizerFile(6, pieces[:512], scores[:512])
	if _, err := ParseTokenizer(real, 512); err != nil {
		t.Fatalf("512-token file: %v", err)
	}
	good := tokenizerFile(8, []string{"abcdefgh", "b", "c"}, []float32{0, 1, 2}) // 38 bytes
	negLen := append([]byte(nil), good[:4+16]...)
	negLen = binary.LittleEndian.AppendUint32(negLen, 0)
	negLen = binary.LittleEndian.AppendUint32(negLen, 0xFFFFFFFF)
	negLen = append(negLen, make([]byte, 16)...)
	tests := []struct {
		name  string
		data  []byte
		vocab int
		want  string
	}{
		{"truncated real", real[:1000], 512, "file is 1000 bytes, too short for 512 tokens"},
		{"truncated in piece", good[:37], 3, "token 2: length 1 runs past the end of the file (0 bytes left)"},
		{"truncated in score", good[:34], 3, "token 2: file ends at byte 34, inside the score and length"},
		{"too short for vocab", good, 512, "too short for 512 tokens"},
		{"trailing bytes", real, 511, "bytes left after 511 tokens (wrong vocab size?)"},
		{"empty", nil, 3, "too short for the max_token_length header"},
		{"zero vocab", good, 0, "vocab size is 0, need at least 3"},
		{"negative max length", tokenizerFile(-1, []string{"a", "b", "c"}, []float32{0, 0, 0}), 3, "max_token_length is -1"},
		{"piece too long", tokenizerFile(1, []string{"ab", "b", "c"}, []float32{0, 0, 0}), 3, "token 0: length 2 exceeds max_token_length 1"},
		{"negative length", negLen, 3, "token 1: length is -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, "tok512.bin", tc.data)
			_, err := ReadTokenizer(path, tc.vocab)
			if err == nil {
				t.Fatal("no error")
			}
			if want := "llama2c: " + path + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	if _, err := ParseTokenizer(good, 3); err != nil {
		t.Errorf("good file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "missing.bin")
	if _, err := ReadTokenizer(path, 3); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("missing file: error %v does not name %s", err, path)
	}
}

func FuzzParseTokenizer(f *testing.F) {
	pieces, scores := tiedTokenizer()
	f.Add(tokenizerFile(6, pieces, scores), len(pieces))
	f.Add(tokenizerFile(3, []string{"a", "bc", "def"}, []float32{0, 1, 2}), 3)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f}, 1)
	f.Add(tokenizerFile(1, []string{"a", "b", "c"}, []float32{0, 0, 0}), 3)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		tok, err := ParseTokenizer(data, vocab)
		if err != nil {
			return
		}
		if tok.VocabSize() != vocab {
			t.Fatalf("VocabSize = %d, want %d", tok.VocabSize(), vocab)
		}
		ids := tok.Encode("héllo wörld \xff", true, true)
		for _, id := range ids {
			if id < 0 || int(id) >= vocab {
				t.Fatalf("Encode produced id %d outside [0, %d)", id, vocab)
			}
		}
		tok.DecodeAll(append(ids, -1, int32(vocab)))
	})
}
