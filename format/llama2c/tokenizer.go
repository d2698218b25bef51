package llama2c

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
)

// Special token ids of llama2.c tokenizers (the SentencePiece defaults).
const (
	UNK int32 = 0 // <unk>, also used when a byte has no byte-fallback token
	BOS int32 = 1 // beginning of sequence, <s>
	EOS int32 = 2 // end of sequence, </s>
)

// byteFallbackOffset is the id of the <0x00> token: byte b is token b+3.
const byteFallbackOffset = 3

// minMergeScore is run.c's starting best score: a merge whose token scores
// no more than this (as a float32) is never made.
var minMergeScore = float32(-1e10)

// Tokenizer is a llama2.c BPE tokenizer. Its methods reproduce run.c's
// encode and decode functions. A Tokenizer is safe for concurrent use.
type Tokenizer struct {
	pieces         []string
	scores         []float32
	ids            map[string]int32
	maxTokenLength int
}

// ReadTokenizer reads the llama2.c tokenizer file at path holding
// vocabSize tokens (run.c takes vocabSize from the checkpoint header; the
// file does not record it). The file is an int32 max_token_length followed,
// for each token, by a float32 merge score, an int32 byte length and the
// token's bytes, all little-endian. The file must end right after the last
// token. vocabSize must be at least 3: ids 0, 1 and 2 are <unk>, <s> and
// </s>. Errors name the file.
func ReadTokenizer(path string, vocabSize int) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	t, err := parseTokenizer(data, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %s: %w", path, err)
	}
	return t, nil
}

// ParseTokenizer decodes a llama2.c tokenizer file held in memory, as
// [ReadTokenizer] does. It never panics, whatever data holds.
func ParseTokenizer(data []byte, vocabSize int) (*Tokenizer, error) {
	t, err := parseTokenizer(data, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("llama2c: tokenizer: %w", err)
	}
	return t, nil
}

func parseTokenizer(data []byte, vocabSize int) (*Tokenizer, error) {
	if vocabSize < 3 {
		return nil, fmt.Errorf("vocab size is %d, need at least 3 for <unk>, <s> and </s>", vocabSize)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("file is %d bytes, too short for the max_token_length header", len(data))
	}
	maxLen := int32(binary.LittleEndian.Uint32(data))
	if maxLen < 0 {
		return nil, fmt.Errorf("max_token_length is %d", maxLen)
	}
	// Every token takes at least 8 bytes, so this bounds the allocation
	// by the input size.
	if rest := len(data) - 4; vocabSize > rest/8 {
		return nil, fmt.Errorf("file is %d bytes, too short for %d tokens", len(data), vocabSize)
	}
	t := &Tokenizer{
		pieces:         make([]string, vocabSize),
		scores:         make([]float32, vocabSize),
		ids:            make(map[string]int32, vocabSize),
		maxTokenLength: int(maxLen),
	}
	off := 4
	for i := 0; i < vocabSize; i++ {
		if len(data)-off < 8 {
			return nil, fmt.Errorf("token %d: file ends at byte %d, inside the score and length", i, len(data))
		}
		t.scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int32(binary.LittleEndian.Uint32(data[off+4:]))
		off += 8
		switch {
		case n < 0:
			return nil, fmt.Errorf("token %d: length is %d", i, n)
		case n > maxLen:
			return nil, fmt.Errorf("token %d: length %d exceeds max_token_length %d", i, n, maxLen)
		case int64(n) > int64(len(data)-off):
			return nil, fmt.Errorf("token %d: length %d runs past the end of the file (%d bytes left)", i, n, len(data)-off)
		}
		piece := string(data[off : off+int(n)])
		off += int(n)
		// run.c handles pieces as C strings, so a NUL ends the piece.
		if j := strings.IndexByte(piece, 0); j >= 0 {
			piece = piece[:j]
		}
		t.pieces[i] = piece
		if _, dup := t.ids[piece]; !dup {
			t.ids[piece] = int32(i)
		}
	}
	if off != len(data) {
		return nil, fmt.Errorf("%d bytes left after %d tokens (wrong vocab size?)", len(data)-off, vocabSize)
	}
	return t, nil
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// MaxTokenLength returns the max_token_length recorded in the file: no
// piece is longer than this many bytes.
func (t *Tokenizer) MaxTokenLength() int { return t.maxTokenLength }

// Piece returns the text of token id as stored (byte tokens read
// "<0x41>", BOS reads "\n<s>\n" in files from llama2.c's tokenizer.py), or
// "" if id is out of range.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Score returns the merge score of token id, or 0 if id is out of range.
func (t *Tokenizer) Score(id int32) float32 {
	if id < 0 || int(id) >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// Lookup returns the id of the token whose piece is exactly s. When
// several tokens share a piece it returns the lowest id.
func (t *Tokenizer) Lookup(s string) (id int32, ok bool) {
	id, ok = t.ids[s]
	return id, ok
}

// Encode tokenizes text as run.c's encode does:
//
//  1. BOS is emitted first if bos is set.
//  2. If text is not empty, the token for " " is added as a dummy prefix
//     (SentencePiece's add_dummy_prefix; spaces are not otherwise
//     normalised).
//  3. text is cut into UTF-8 code points (a leading byte plus up to three
//     continuation bytes; malformed input is cut the same way run.c cuts
//     it). A code point that is a token becomes that token; otherwise each
//     of its bytes b becomes the byte-fallback token b+3.
//  4. While some adjacent pair of tokens concatenates to the piece of a
//     token, the pair whose token has the highest score is merged into it,
//     the leftmost pair on ties. Scores of -1e10 or less never merge.
//  5. EOS is appended if eos is set.
//
// Unlike run.c, which reads a C string, Encode does not stop at a NUL byte;
// it encodes it like any other byte. If " " is not a token, the dummy prefix
// falls back to bytes as in step 3; a byte whose fallback id is not below
// VocabSize becomes UNK. The merge step takes O(n log n) time, not run.c's
// O(n²), and yields the same tokens.
func (t *Tokenizer) Encode(text string, bos, eos bool) []int32 {
	toks := make([]int32, 0, len(text)+3)
	if bos {
		toks = append(toks, BOS)
	}
	if text != "" {
		toks = t.appendCodePoint(toks, " ")
	}
	for i := 0; i < len(text); {
		j := i + 1
		for j < len(text) && j-i < 4 && text[j]&0xC0 == 0x80 {
			j++
		}
		toks = t.appendCodePoint(toks, text[i:j])
		i = j
	}
	toks = t.merge(toks)
	if eos {
		toks = append(toks, EOS)
	}
	return toks
}

// appendCodePoint appends the token for s, or its byte-fallback tokens.
func (t *Tokenizer) appendCodePoint(toks []int32, s string) []int32 {
	if id, ok := t.ids[s]; ok {
		return append(toks, id)
	}
	for i := 0; i < len(s); i++ {
		id := int32(s[i]) + byteFallbackOffset
		if int(id) >= len(t.pieces) {
			id = UNK
		}
		toks = append(toks, id)
	}
	return toks
}

// merge applies run.c's merge loop to toks in place and returns the
// shortened slice. toks is kept as a doubly linked list; a heap holds the
// candidate merges ordered by score, then by position, with stale entries
// dropped when popped. Because merging only ever removes nodes, the
// original index of a pair's left node orders pairs as their current
// positions do, so the heap's top valid entry is exactly the pair run.c's
// linear scan would choose.
func (t *Tokenizer) merge(toks []int32) []int32 {
	n := len(toks)
	if n < 2 {
		return toks
	}
	next := make([]int, n)
	prev := make([]int, n)
	version := make([]uint32, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	next[n-1] = -1
	h := &mergeHeap{}
	push := func(l int) {
		if l < 0 || next[l] < 0 {
			return
		}
		r := next[l]
		id, ok := t.ids[t.pieces[toks[l]]+t.pieces[toks[r]]]
		if !ok || !(t.scores[id] > minMergeScore) {
			return
		}
		heap.Push(h, mergeCand{score: t.scores[id], left: l, right: r, id: id, lv: version[l], rv: version[r]})
	}
	for i := 0; i < n-1; i++ {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(mergeCand)
		if next[c.left] != c.right || version[c.left] != c.lv || version[c.right] != c.rv {
			continue // stale: a neighbour merged since this was pushed
		}
		l, r := c.left, c.right
		toks[l] = c.id
		version[l]++
		version[r]++ // r is gone; no entry may refer to it any more
		next[l] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = l
		}
		if prev[l] >= 0 {
			push(prev[l])
		}
		push(l)
	}
	out := toks[:0]
	for i := 0; i >= 0; i = next[i] {
		out = append(out, toks[i])
	}
	return out
}

// mergeCand is a candidate merge of the adjacent nodes left and right into
// token id, valid while both nodes keep the versions lv and rv.
type mergeCand struct {
	score       float32
	left, right int
	id          int32
	lv, rv      uint32
}

type mergeHeap []mergeCand

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].left < h[j].left
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(mergeCand)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Decode returns the text of token as run.c's decode does when token
// follows prev: after BOS a leading space (the dummy prefix) is dropped,
// and a byte token "<0xXX>" becomes the single byte 0xXX. The result may
// thus be a lone byte of a multi-byte UTF-8 sequence. Decode returns "" for
// an out-of-range token.
func (t *Tokenizer) Decode(prev, token int32) string {
	if token < 0 || int(token) >= len(t.pieces) {
		return ""
	}
	p := t.pieces[token]
	if prev == BOS && len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	if b, ok := rawByte(p); ok {
		return string([]byte{b})
	}
	return p
}

// DecodeAll concatenates [Tokenizer.Decode] over ids, each token decoded
// after the one before it and the first one after BOS. BOS and EOS tokens
// produce no text. DecodeAll(Encode(s, bos, eos)) == s unless merges in s
// spell out a special piece such as "<0x41>" or "\n<s>\n".
func (t *Tokenizer) DecodeAll(ids []int32) string {
	var sb strings.Builder
	prev := BOS
	for _, id := range ids {
		if id != BOS && id != EOS {
			sb.WriteString(t.Decode(prev, id))
		}
		prev = id
	}
	return sb.String()
}

// rawByte parses a byte token "<0xXX>" (two hex digits of either case).
func rawByte(p string) (byte, bool) {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(p[3])
	lo, ok2 := hexDigit(p[4])
	if !ok1 || !ok2 {
		return 0, false
	}
	return hi<<4 | lo, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
