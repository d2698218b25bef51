package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// splitter finds pre-token boundaries: given s and a start offset i < len(s),
// it returns the end of the pre-token that starts at i (always > i).
type splitter func(s string, i int) int

// The split patterns this package recognises, written exactly as they appear
// in tokenizer.json files. Go's regexp package lacks the (?!\S) lookahead,
// so each has a hand-written scanner with the same leftmost-first semantics.
const (
	// patternQwen2 is the Qwen2/Qwen2.5/Qwen3 split: numbers one at a time.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternLlama3 is the Llama-3 (and cl100k) split: numbers up to three at a time.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternGPT2 is the split the ByteLevel pre-tokenizer uses when use_regex is true.
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitterFor returns the scanner for a known split pattern.
func splitterFor(pattern string) (splitter, bool) {
	switch pattern {
	case patternQwen2:
		return func(s string, i int) int { return splitCL100K(s, i, 1) }, true
	case patternLlama3:
		return func(s string, i int) int { return splitCL100K(s, i, 3) }, true
	case patternGPT2:
		return splitGPT2, true
	}
	return nil, false
}

// Character classes used by the split patterns: \p{L}, \p{N}, \s and [\r\n].
const (
	clLetter uint8 = 1 << iota
	clNumber
	clSpace
	clNewline
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = slowClass(r)
	}
}

func slowClass(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		return clLetter
	case unicode.IsNumber(r):
		return clNumber
	case r == '\r' || r == '\n':
		return clSpace | clNewline
	case unicode.IsSpace(r): // the Unicode White_Space property, as \s in Oniguruma
		return clSpace
	}
	return 0
}

// runeAt decodes the rune at s[i] and its class. Invalid UTF-8 decodes as a
// one-byte U+FFFD, which belongs to none of the classes.
func runeAt(s string, i int) (r rune, size int, class uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, size, slowClass(r)
}

// skipClass advances i over runes whose class intersects mask.
func skipClass(s string, i int, mask uint8) int {
	for i < len(s) {
		_, n, c := runeAt(s, i)
		if c&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// skipOther advances i over runes that are not letters, numbers or spaces.
func skipOther(s string, i int) int {
	for i < len(s) {
		_, n, c := runeAt(s, i)
		if c&(clLetter|clNumber|clSpace) != 0 {
			break
		}
		i += n
	}
	return i
}

// contraction returns the length of the contraction suffix ('s, 't, 're,
// 've, 'm, 'll, 'd) at s[i], which holds an apostrophe, or 0. With fold set
// it matches as (?i:...) does under Unicode simple case folding, where the
// long s (U+017F) folds to s.
func contraction(s string, i int, fold bool) int {
	rest := s[i+1:]
	lower := func(k int) (byte, int) {
		if k >= len(rest) {
			return 0, 0
		}
		c := rest[k]
		if fold {
			if 'A' <= c && c <= 'Z' {
				return c + 'a' - 'A', 1
			}
			if c == 0xC5 && k+1 < len(rest) && rest[k+1] == 0xBF { // U+017F LATIN SMALL LETTER LONG S
				return 's', 2
			}
		}
		return c, 1
	}
	c0, n0 := lower(0)
	switch c0 {
	case 's', 't', 'm', 'd':
		return 1 + n0
	case 'r', 'v', 'l':
		want := byte('e')
		if c0 == 'l' {
			want = 'l'
		}
		if c1, n1 := lower(n0); c1 == want {
			return 1 + n0 + n1
		}
	}
	return 0
}

// splitCL100K scans one pre-token of the Qwen2 (maxDigits 1) or Llama-3
// (maxDigits 3) pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCL100K(s string, i, maxDigits int) int {
	r0, n0, c0 := runeAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r0 == '\'' {
		if n := contraction(s, i, true); n > 0 {
			return i + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0&clLetter != 0 {
		return skipClass(s, i+n0, clLetter)
	}
	if c0&(clNewline|clNumber) == 0 && i+n0 < len(s) {
		if _, n1, c1 := runeAt(s, i+n0); c1&clLetter != 0 {
			return skipClass(s, i+n0+n1, clLetter)
		}
	}
	// \p{N}{1,maxDigits}
	if c0&clNumber != 0 {
		j := i + n0
		for k := 1; k < maxDigits && j < len(s); k++ {
			_, n, c := runeAt(s, j)
			if c&clNumber == 0 {
				break
			}
			j += n
		}
		return j
	}
	// ' '?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if r0 == ' ' {
		j++
	}
	if j < len(s) {
		if _, n, c := runeAt(s, j); c&(clLetter|clNumber|clSpace) == 0 {
			j = skipOther(s, j+n)
			return skipClass(s, j, clNewline)
		}
	}
	// Only whitespace is left: r0 is a space here.
	end, lastNL, lastStart := i, -1, i
	for end < len(s) {
		_, n, c := runeAt(s, end)
		if c&clSpace == 0 {
			break
		}
		if c&clNewline != 0 {
			lastNL = end
		}
		lastStart = end
		end += n
	}
	// \s*[\r\n]+ ends right after the last line break of the run.
	if lastNL >= 0 {
		return lastNL + 1
	}
	// \s+(?!\S) takes the whole run at the end of the text, and otherwise
	// all of it but its last character, which must stay to precede the \S.
	// \s+ takes a lone space before \S.
	if end < len(s) && lastStart > i {
		return lastStart
	}
	return end
}

// splitGPT2 scans one pre-token of the GPT-2 pattern:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(s string, i int) int {
	r0, _, _ := runeAt(s, i)
	if r0 == '\'' {
		if n := contraction(s, i, false); n > 0 {
			return i + n
		}
	}
	j := i
	if r0 == ' ' {
		j++
	}
	if j < len(s) {
		_, n, c := runeAt(s, j)
		switch {
		case c&clLetter != 0:
			return skipClass(s, j+n, clLetter)
		case c&clNumber != 0:
			return skipClass(s, j+n, clNumber)
		case c&clSpace == 0:
			return skipOther(s, j+n)
		}
	}
	end, lastStart := i, i
	for end < len(s) {
		_, n, c := runeAt(s, end)
		if c&clSpace == 0 {
			break
		}
		lastStart = end
		end += n
	}
	if end < len(s) && lastStart > i {
		return lastStart
	}
	return end
}

// splitDigits is the Digits pre-tokenizer with individual_digits: every
// numeric character (Unicode N, Rust's char::is_numeric) is a piece of its
// own, and the text between them is one piece.
func splitDigits(s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	if unicode.IsNumber(r) {
		return i + n
	}
	for j := i + n; j < len(s); {
		r, n := utf8.DecodeRuneInString(s[j:])
		if unicode.IsNumber(r) {
			return j
		}
		j += n
	}
	return len(s)
}

// splitDigitRuns is the Digits pre-tokenizer without individual_digits:
// runs of numeric characters and the runs between them.
func splitDigitRuns(s string, i int) int {
	r, n := utf8.DecodeRuneInString(s[i:])
	num := unicode.IsNumber(r)
	for j := i + n; j < len(s); {
		r, n := utf8.DecodeRuneInString(s[j:])
		if unicode.IsNumber(r) != num {
			return j
		}
		j += n
	}
	return len(s)
}
