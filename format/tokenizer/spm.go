package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds what SentencePiece-style BPE vocabularies (Gemma, Llama 2)
// need beyond byte-level BPE: the normalizers, pre-tokenizers and decoders
// of their tokenizer.json, and the character-level initial symbols with
// byte fallback.

// normStep is one normalizer of a tokenizer.json normalizer section.
type normStep struct {
	kind     uint8  // normNFC, normReplace or normPrepend
	from, to string // normReplace: the String pattern and its replacement; normPrepend: to
}

const (
	normNFC uint8 = iota
	normReplace
	normPrepend
)

// normalizeText applies the normalizers to s, with nfc as the NFC function (nil
// leaves text the quick check cannot prove normalized unchanged).
func (c *core) normalizeText(s string, nfc func(string) string) string {
	for _, n := range c.norms {
		switch n.kind {
		case normNFC:
			if nfc != nil && !isNFC(s) {
				s = nfc(s)
			}
		case normReplace:
			s = strings.ReplaceAll(s, n.from, n.to)
		case normPrepend:
			// The Hugging Face library leaves empty text empty.
			if s != "" {
				s = n.to + s
			}
		}
	}
	return s
}

// Split behaviours of the Split pre-tokenizer (SplitDelimiterBehavior).
const (
	splitRemoved uint8 = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

var splitBehaviors = map[string]uint8{
	"Removed": splitRemoved, "Isolated": splitIsolated, "MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext": splitMergedWithNext, "Contiguous": splitContiguous,
}

// Metaspace prepend schemes.
const (
	prependAlways uint8 = iota
	prependFirst
	prependNever
)

var prependSchemes = map[string]uint8{"always": prependAlways, "first": prependFirst, "never": prependNever}

// preStep is one pre-tokenizer of a tokenizer that is not byte-level.
type preStep struct {
	kind     uint8    // preScan, preLiteral or preMetaspace
	scan     splitter // preScan: Digits or a known split pattern, isolated
	literal  string   // preLiteral: the String pattern; preMetaspace: the replacement
	behavior uint8    // preLiteral
	invert   bool     // preLiteral
	prepend  uint8    // preMetaspace: the prepend scheme
	split    bool     // preMetaspace: whether to split before each replacement
}

const (
	preScan uint8 = iota
	preLiteral
	preMetaspace
)

// preTokenize splits s with steps and encodes each piece. first says
// whether s starts the text being encoded, which Metaspace's "first"
// prepend scheme asks (the Hugging Face library checks that the piece's
// offset in the original text is 0).
func (c *core) preTokenize(dst []int32, s string, first bool, steps []preStep) []int32 {
	if len(steps) == 0 {
		return c.encodeCharWord(dst, s)
	}
	st, rest := &steps[0], steps[1:]
	switch st.kind {
	case preScan:
		for i := 0; i < len(s); {
			j := st.scan(s, i)
			dst = c.preTokenize(dst, s[i:j], first && i == 0, rest)
			i = j
		}
	case preLiteral:
		splitLiteral(s, st.literal, st.behavior, st.invert, func(i, j int) {
			dst = c.preTokenize(dst, s[i:j], first && i == 0, rest)
		})
	case preMetaspace:
		s = strings.ReplaceAll(s, " ", st.literal)
		if s != "" && !strings.HasPrefix(s, st.literal) &&
			(st.prepend == prependAlways || st.prepend == prependFirst && first) {
			s = st.literal + s
		}
		if !st.split {
			return c.preTokenize(dst, s, first, rest)
		}
		splitLiteral(s, st.literal, splitMergedWithNext, false, func(i, j int) {
			dst = c.preTokenize(dst, s[i:j], first && i == 0, rest)
		})
	}
	return dst
}

// metaBoundaries finds out where words may be cut before BPE without
// changing its result. SentencePiece-style vocabularies have long words
// (Gemma's and Llama's pre-tokenizers split nothing), which BPE merges
// slowly and the word cache cannot hold. But a boundary between a character
// and a following "▁" can only be crossed by a merge of a piece ending with
// that character and a piece starting with "▁": the first merge whose
// result spans the boundary joins there. Such merges are rare (Gemma has
// one, of ">" and "▁</"; Llama 2 none), so a word can be cut before each
// "▁" that follows another character than "▁" and than the last
// characters of those merges' left pieces. A character outside the
// vocabulary becomes byte-fallback or unknown tokens, whose last character
// is that of their names. Cutting also requires "▁" to be a token (so that
// no unknown token fuses across the cut) and ignore_merges to be off.
func (c *core) metaBoundaries() {
	if _, ok := c.vocab["▁"]; !ok || c.ignoreMerges {
		return
	}
	c.metaSplit = true
	c.metaJoins = map[rune]bool{}
	for key := range c.merges {
		a, b := c.tokens[key>>32], c.tokens[uint32(key)]
		last, _ := utf8.DecodeLastRuneInString(a)
		if last != '▁' && strings.HasPrefix(b, "▁") {
			c.metaJoins[last] = true
		}
	}
	ends := []string{">"} // of <0xXX>
	if c.unk >= 0 {
		ends = append(ends, c.tokens[c.unk])
	}
	for _, e := range ends {
		if last, _ := utf8.DecodeLastRuneInString(e); c.metaJoins[last] {
			c.unknownJoins = true
		}
	}
}

// encodeCharWord encodes a pre-token of a vocabulary that is not
// byte-level, cut where metaBoundaries allows.
func (c *core) encodeCharWord(dst []int32, word string) []int32 {
	if !c.metaSplit {
		if word == "" {
			return dst
		}
		return c.encodeWord(dst, word)
	}
	start := 0
	for i := 1; i < len(word); {
		k := strings.Index(word[i:], "▁")
		if k < 0 {
			break
		}
		p := i + k
		i = p + len("▁")
		r, n := utf8.DecodeLastRuneInString(word[:p])
		if r == '▁' || c.metaJoins[r] {
			continue
		}
		if c.unknownJoins {
			if id := c.charID(word[p-n : p]); id < 0 {
				continue
			}
		}
		dst = c.encodeWord(dst, word[start:p])
		start = p
	}
	if start < len(word) {
		dst = c.encodeWord(dst, word[start:])
	}
	return dst
}

// charID returns the id of the token of one character, or -1.
func (c *core) charID(ch string) int32 {
	if len(ch) == 1 && ch[0] < utf8.RuneSelf {
		return c.asciiID[ch[0]]
	}
	if id, ok := c.vocab[ch]; ok {
		return int32(id)
	}
	return -1
}

// splitLiteral calls emit(i, j) for each piece s[i:j] that the Split
// pre-tokenizer keeps, in order, when it splits s on the non-overlapping
// occurrences of pat (not empty) with the given behaviour. The text is cut
// into alternating spans of matches and non-matches (flipped by invert); a
// behaviour decides which neighbouring spans join into one piece, and
// Removed drops the matches.
func splitLiteral(s, pat string, behavior uint8, invert bool, emit func(i, j int)) {
	start, end := 0, 0 // the piece being built
	prevMatch := false
	span := func(i, j int, match bool) {
		if i == j {
			return
		}
		var join bool
		switch behavior {
		case splitMergedWithPrevious:
			join = !prevMatch && match
		case splitMergedWithNext:
			join = prevMatch && !match
		case splitContiguous:
			join = prevMatch == match
		}
		if end > start && join {
			end = j
		} else {
			if end > start && !(behavior == splitRemoved && prevMatch) {
				emit(start, end)
			}
			start, end = i, j
		}
		prevMatch = match
	}
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], pat)
		if k < 0 {
			span(i, len(s), invert)
			break
		}
		span(i, i+k, invert)
		span(i+k, i+k+len(pat), !invert)
		i += k + len(pat)
	}
	if end > start && !(behavior == splitRemoved && prevMatch) {
		emit(start, end)
	}
}

// charSymbols appends the initial BPE symbols of word for a vocabulary that
// is not byte-level: the id of each character, or for a character not in the
// vocabulary the ids of its bytes' <0xXX> tokens when byte fallback is on and
// all of them exist, or else the unknown token (one for a run of unknown
// characters when fuse_unk is set), or nothing when there is no unknown
// token. As in the Hugging Face library, a pending unknown token is written
// only when a known character or the end of the word follows. A byte of
// invalid UTF-8 counts as a character of its own.
func (c *core) charSymbols(dst []int32, word string) []int32 {
	unk := int32(-1) // pending unknown token
	for i := 0; i < len(word); {
		n := 1
		id := int32(-1)
		if b := word[i]; b < utf8.RuneSelf {
			id = c.asciiID[b]
		} else {
			_, n = utf8.DecodeRuneInString(word[i:])
			if v, ok := c.vocab[word[i:i+n]]; ok {
				id = int32(v)
			}
		}
		ch := word[i : i+n]
		i += n
		if id >= 0 {
			if unk >= 0 {
				dst = append(dst, unk)
				unk = -1
			}
			dst = append(dst, id)
			continue
		}
		if c.byteFallback && c.hasByteTokens(ch) {
			for k := 0; k < len(ch); k++ {
				dst = append(dst, c.byteToken[ch[k]])
			}
			continue
		}
		if c.unk >= 0 {
			if unk >= 0 && !c.fuseUnk {
				dst = append(dst, unk)
			}
			unk = c.unk
		}
	}
	if unk >= 0 {
		dst = append(dst, unk)
	}
	return dst
}

func (c *core) hasByteTokens(ch string) bool {
	for k := 0; k < len(ch); k++ {
		if c.byteToken[ch[k]] < 0 {
			return false
		}
	}
	return true
}

// byteTokenName returns the name of the byte-fallback token for b, as the
// Hugging Face library spells it: <0x0A>.
func byteTokenName(b byte) string {
	const hex = "0123456789ABCDEF"
	return string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})
}

// parseByteToken reports the byte a token of the form <0xXX> stands for, as
// the ByteFallback decoder reads it: six bytes, and two hexadecimal digits
// of either case, or a plus sign and one (Rust's from_str_radix).
func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || tok[:3] != "<0x" || tok[5] != '>' {
		return 0, false
	}
	digits := tok[3:5]
	if digits[0] == '+' {
		digits = digits[1:]
	}
	v, err := strconv.ParseUint(digits, 16, 8)
	return byte(v), err == nil
}

// decStep is one decoder of a tokenizer that is not byte-level. Decoders
// work on the list of token strings, as in the Hugging Face library.
type decStep struct {
	kind        uint8  // decReplace, decByteFallback, decFuse, decStrip or decMetaspace
	from, to    string // decReplace: pattern and content; decStrip, decMetaspace: from is the character
	start, stop int    // decStrip: how many characters to strip at most
	prepend     uint8  // decMetaspace: the prepend scheme
}

const (
	decReplace uint8 = iota
	decByteFallback
	decFuse
	decStrip
	decMetaspace
)

func (d *decStep) apply(toks []string) []string {
	switch d.kind {
	case decReplace:
		for i, t := range toks {
			toks[i] = strings.ReplaceAll(t, d.from, d.to)
		}
	case decByteFallback:
		return byteFallback(toks)
	case decFuse:
		if len(toks) > 1 {
			return []string{strings.Join(toks, "")}
		}
	case decStrip:
		for i, t := range toks {
			toks[i] = stripChar(t, d.from, d.start, d.stop)
		}
	case decMetaspace:
		for i, t := range toks {
			// The first token loses all its replacement characters, unless
			// the pre-tokenizer never prepends one.
			if i == 0 && d.prepend != prependNever {
				toks[i] = strings.ReplaceAll(t, d.from, "")
			} else {
				toks[i] = strings.ReplaceAll(t, d.from, " ")
			}
		}
	}
	return toks
}

// byteFallback joins each run of <0xXX> tokens into the text its bytes
// spell, or into one U+FFFD per byte when they are not valid UTF-8.
func byteFallback(toks []string) []string {
	out := toks[:0:0]
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range toks {
		if b, ok := parseByteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// stripChar removes up to start leading and stop trailing copies of the
// character ch from t. The Hugging Face library panics when the two would
// overlap; this returns "" instead.
func stripChar(t, ch string, start, stop int) string {
	i := 0
	for k := 0; k < start && strings.HasPrefix(t[i:], ch); k++ {
		i += len(ch)
	}
	j := len(t)
	for k := 0; k < stop && j >= i+len(ch) && strings.HasSuffix(t[:j], ch); k++ {
		j -= len(ch)
	}
	return t[i:j]
}

// decodeChain returns the text of ids through the decoders.
func (c *core) decodeChain(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(c.tokens) || c.flags[id]&flagPresent == 0 || (skipSpecial && c.flags[id]&flagSpecial != 0) {
			continue
		}
		toks = append(toks, c.decodeToken(int(id)))
	}
	for i := range c.decoders {
		toks = c.decoders[i].apply(toks)
	}
	return strings.Join(toks, "")
}

// decodeToken returns the string the decoders receive for id: its token, or
// for an added token matched after normalization its normalized content, as
// the Hugging Face library has it.
func (c *core) decodeToken(id int) string {
	if c.flags[id]&flagNormalized != 0 {
		if a, ok := c.added[c.tokens[id]]; ok && a.match != "" {
			return a.match
		}
	}
	return c.tokens[id]
}

// pieceBytes returns what a token decodes to on its own, for AppendDecode:
// its text after the Replace and Metaspace decoders, or the byte a <0xXX>
// token stands for when there is a ByteFallback decoder.
func (c *core) pieceBytes(tok string) []byte {
	for i := range c.decoders {
		d := &c.decoders[i]
		switch d.kind {
		case decReplace:
			tok = strings.ReplaceAll(tok, d.from, d.to)
		case decMetaspace:
			tok = strings.ReplaceAll(tok, d.from, " ")
		case decByteFallback:
			if b, ok := parseByteToken(tok); ok {
				return []byte{b}
			}
		}
	}
	return []byte(tok)
}
