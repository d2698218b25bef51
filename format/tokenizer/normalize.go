package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// nfcUnsafe holds the runes, other than combining marks, whose presence can
// make NFC change a string: the characters NFC always replaces
// (NFC_Quick_Check=No, derived from the Unicode Character Database) and the
// conjoining Hangul vowels and trailing consonants that compose with a
// preceding syllable (NFC_Quick_Check=Maybe).
var nfcUnsafe = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x0374, 0x0374, 1}, {0x037E, 0x037E, 1}, {0x0387, 0x0387, 1},
		{0x0958, 0x095F, 1}, {0x09DC, 0x09DD, 1}, {0x09DF, 0x09DF, 1},
		{0x0A33, 0x0A33, 1}, {0x0A36, 0x0A36, 1}, {0x0A59, 0x0A5B, 1},
		{0x0A5E, 0x0A5E, 1}, {0x0B5C, 0x0B5D, 1}, {0x0F43, 0x0F43, 1},
		{0x0F4D, 0x0F4D, 1}, {0x0F52, 0x0F52, 1}, {0x0F57, 0x0F57, 1},
		{0x0F5C, 0x0F5C, 1}, {0x0F69, 0x0F69, 1}, {0x1161, 0x1175, 1},
		{0x11A8, 0x11C2, 1}, {0x1F71, 0x1F71, 1}, {0x1F73, 0x1F73, 1},
		{0x1F75, 0x1F75, 1}, {0x1F77, 0x1F77, 1}, {0x1F79, 0x1F79, 1},
		{0x1F7B, 0x1F7B, 1}, {0x1F7D, 0x1F7D, 1}, {0x1FBB, 0x1FBB, 1},
		{0x1FBE, 0x1FBE, 1}, {0x1FC9, 0x1FC9, 1}, {0x1FCB, 0x1FCB, 1},
		{0x1FD3, 0x1FD3, 1}, {0x1FDB, 0x1FDB, 1}, {0x1FE3, 0x1FE3, 1},
		{0x1FEB, 0x1FEB, 1}, {0x1FEE, 0x1FEF, 1}, {0x1FF9, 0x1FF9, 1},
		{0x1FFB, 0x1FFB, 1}, {0x1FFD, 0x1FFD, 1}, {0x2000, 0x2001, 1},
		{0x2126, 0x2126, 1}, {0x212A, 0x212B, 1}, {0x2329, 0x232A, 1},
		{0x2ADC, 0x2ADC, 1}, {0xF900, 0xFA0D, 1}, {0xFA10, 0xFA10, 1},
		{0xFA12, 0xFA12, 1}, {0xFA15, 0xFA1E, 1}, {0xFA20, 0xFA20, 1},
		{0xFA22, 0xFA22, 1}, {0xFA25, 0xFA26, 1}, {0xFA2A, 0xFA6D, 1},
		{0xFA70, 0xFAD9, 1}, {0xFB1D, 0xFB1D, 1}, {0xFB1F, 0xFB1F, 1},
		{0xFB2A, 0xFB36, 1}, {0xFB38, 0xFB3C, 1}, {0xFB3E, 0xFB3E, 1},
		{0xFB40, 0xFB41, 1}, {0xFB43, 0xFB44, 1}, {0xFB46, 0xFB4E, 1},
	},
	R32: []unicode.Range32{
		{0x1D15E, 0x1D164, 1}, {0x1D1BB, 0x1D1C0, 1}, {0x2F800, 0x2FA1D, 1},
	},
}

// isNFC reports whether s is certainly in Unicode Normalization Form C. It
// is a quick check: it answers true for all ASCII text and for text without
// combining marks or the few characters NFC changes, and false when NFC
// might change s (a false answer does not prove that it would). Invalid
// UTF-8 counts as unchanged.
func isNFC(s string) bool {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	for i < len(s) {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r < 0x300 {
			continue // Latin-1 and the spacing letters before the combining marks
		}
		if unicode.Is(unicode.M, r) || unicode.Is(nfcUnsafe, r) {
			return false
		}
	}
	return true
}
