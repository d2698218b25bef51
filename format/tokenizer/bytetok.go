package tokenizer

import "strings"

// The special tokens of ByteTokenizer: ids 0 to 255 are the bytes.
const (
	ByteBOS int32 = 256 // "<s>"
	ByteEOS int32 = 257 // "</s>"
	BytePAD int32 = 258 // "<pad>"
)

var byteSpecials = [...]string{ByteBOS - 256: "<s>", ByteEOS - 256: "</s>", BytePAD - 256: "<pad>"}

// ByteTokenizer is a tiny tokenizer for the built-in toy worlds: each byte of
// the text is a token (ids 0 to 255), followed by three special tokens,
// [ByteBOS], [ByteEOS] and [BytePAD]. The zero value is ready to use and it
// is safe for concurrent use.
type ByteTokenizer struct{}

// NewByteTokenizer returns a ByteTokenizer.
func NewByteTokenizer() *ByteTokenizer { return &ByteTokenizer{} }

// Encode returns the bytes of text as ids, with "<s>", "</s>" and "<pad>"
// written in it becoming their special tokens.
func (b *ByteTokenizer) Encode(text string) []int32 { return b.EncodeWithSpecial(text, true) }

// EncodeWithSpecial returns the bytes of text as ids; the special tokens'
// names are recognised only if allowSpecial is true.
func (b *ByteTokenizer) EncodeWithSpecial(text string, allowSpecial bool) []int32 {
	ids := make([]int32, 0, len(text))
	for i := 0; i < len(text); i++ {
		if allowSpecial && text[i] == '<' {
			if id, n := byteSpecialAt(text[i:]); n > 0 {
				ids = append(ids, id)
				i += n - 1
				continue
			}
		}
		ids = append(ids, int32(text[i]))
	}
	return ids
}

func byteSpecialAt(s string) (id int32, n int) {
	for k, name := range byteSpecials {
		if strings.HasPrefix(s, name) {
			return 256 + int32(k), len(name)
		}
	}
	return 0, 0
}

// Decode returns the text of ids, special tokens written by name. Other ids
// outside the vocabulary are skipped, and invalid UTF-8 becomes U+FFFD.
func (b *ByteTokenizer) Decode(ids []int32) string { return b.decode(ids, false) }

// DecodeSkipSpecial is like Decode but leaves out the special tokens.
func (b *ByteTokenizer) DecodeSkipSpecial(ids []int32) string { return b.decode(ids, true) }

func (b *ByteTokenizer) decode(ids []int32, skipSpecial bool) string {
	buf := make([]byte, 0, len(ids))
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			buf = append(buf, byte(id))
		case id >= 256 && int(id) < 256+len(byteSpecials) && !skipSpecial:
			buf = append(buf, byteSpecials[id-256]...)
		}
	}
	return validUTF8(buf)
}

// VocabSize returns 259: the 256 bytes and the three special tokens.
func (b *ByteTokenizer) VocabSize() int { return 256 + len(byteSpecials) }

// BOS returns ByteBOS.
func (b *ByteTokenizer) BOS() (int32, bool) { return ByteBOS, true }

// EOS returns ByteEOS.
func (b *ByteTokenizer) EOS() (int32, bool) { return ByteEOS, true }

// PAD returns BytePAD.
func (b *ByteTokenizer) PAD() (int32, bool) { return BytePAD, true }

var (
	_ Encoder = (*Tokenizer)(nil)
	_ Encoder = (*ByteTokenizer)(nil)
)
