package tokenizer

// The byte-level alphabet of GPT-2: every byte gets a printable rune so that
// BPE vocabularies can be written as JSON strings. Printable Latin-1 bytes
// stand for themselves; the rest are shifted to U+0100 and up, in order.
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = 256 + n
			n++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
	}
}

// byteLevelDecode maps a vocabulary entry written in the byte-level alphabet
// back to the bytes it stands for. It reports false when the entry has a rune
// outside the alphabet; the Hugging Face ByteLevel decoder then uses the
// entry's own UTF-8 bytes.
func byteLevelDecode(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
