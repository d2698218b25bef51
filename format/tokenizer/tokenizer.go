package tokenizer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Encoder is what rlvr needs from a tokenizer: text to ids and back, the
// vocabulary size, and the ids of the sequence-control tokens.
// [*Tokenizer] and [*ByteTokenizer] implement it.
type Encoder interface {
	// Encode returns the ids of text, recognising special tokens written
	// in it.
	Encode(text string) []int32
	// EncodeWithSpecial returns the ids of text; special tokens written in
	// it are recognised only if allowSpecial is true, and are otherwise
	// encoded as ordinary text.
	EncodeWithSpecial(text string, allowSpecial bool) []int32
	// Decode returns the text of ids, special tokens included.
	Decode(ids []int32) string
	// DecodeSkipSpecial returns the text of ids without special tokens.
	DecodeSkipSpecial(ids []int32) string
	// VocabSize returns one more than the largest token id.
	VocabSize() int
	// BOS returns the beginning-of-sequence id, if there is one.
	BOS() (int32, bool)
	// EOS returns the end-of-sequence id, if there is one.
	EOS() (int32, bool)
	// PAD returns the padding id, if there is one.
	PAD() (int32, bool)
}

// Tokenizer is a byte-level BPE tokenizer read from a Hugging Face
// tokenizer.json by [Load] or [Parse]; the zero value is not usable. It is
// safe for concurrent use. It caches the ids of recently seen pre-tokens,
// within a fixed bound on memory.
type Tokenizer struct {
	*core
	config        *Config
	bos, eos, pad int32 // -1 when unknown
	normalize     func(string) string
}

// Token flags, per id.
const (
	flagPresent uint8 = 1 << iota
	flagAdded
	flagSpecial
	flagNormalized // an added token matched after normalization
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	id                                  int32
	content                             string
	match                               string // what the text must contain: content, normalized if normalized is set
	special, lstrip, rstrip, singleWord bool
	normalized                          bool
}

// core is the part of a Tokenizer shared by its copies: immutable once
// parsed, apart from the internally synchronized word cache.
type core struct {
	vocab  map[string]int // model vocabulary, in the byte-level alphabet
	tokens []string       // id -> token as written in the file ("" if none)
	flags  []uint8        // id -> flag bits
	decode [][]byte       // id -> bytes it decodes to

	byteID       [256]int32        // byte -> id of its one-byte token, or -1
	merges       map[uint64]uint64 // pairKey(a, b) -> rank<<32 | merged id
	ignoreMerges bool
	whole        map[string]int32 // raw bytes -> id, when ignoreMerges

	added               map[string]*addedToken
	rawAdded, normAdded *addedMatcher // added tokens matched before and after normalization
	nfc, byteLevel      bool
	norms               []normStep // the normalizer, in order; NFC is also flagged by nfc
	splitters           []splitter // the pre-tokenizer of a byte-level vocabulary
	cache               *wordCache

	// A vocabulary that is not byte-level (SentencePiece style) starts BPE
	// from characters, and has its own pre-tokenizers and decoders.
	charLevel    bool
	asciiID      [utf8.RuneSelf]int32 // ASCII character -> id of its token, or -1
	byteToken    [256]int32           // byte -> id of its <0xXX> token, or -1
	byteFallback bool                 // model.byte_fallback
	fuseUnk      bool                 // model.fuse_unk
	unk          int32                // model.unk_token's id, or -1
	pre          []preStep
	decoders     []decStep
	// Pieces of a word that no merge can join (see metaBoundaries).
	metaSplit    bool
	metaJoins    map[rune]bool // last characters of left pieces merged with "▁..."
	unknownJoins bool          // whether byte-fallback or unknown tokens are among them

	// The post-processor's single-sequence template: the special tokens it
	// puts before and after the text.
	postPrefix, postSuffix []int32
}

// finish builds the derived tables once parsing succeeded.
func (c *core) finish() {
	var raw, norm []*addedToken
	for _, t := range c.added {
		if t.normalized {
			// The Hugging Face library looks for the normalized content in
			// normalized text (NFC aside: that needs WithNormalizer).
			t.match = c.normalizeText(t.content, nil)
			c.flags[t.id] |= flagNormalized
			if t.match != "" {
				norm = append(norm, t)
			}
		} else {
			t.match = t.content
			raw = append(raw, t)
		}
	}
	c.rawAdded = newAddedMatcher(raw)
	c.normAdded = newAddedMatcher(norm)
	c.decode = make([][]byte, len(c.tokens))
	for id, tok := range c.tokens {
		switch {
		case c.flags[id]&flagAdded != 0 && !c.charLevel:
			c.decode[id] = []byte(tok) // added tokens decode to their content
		case c.flags[id]&flagPresent != 0 && c.charLevel:
			c.decode[id] = c.pieceBytes(c.decodeToken(id))
		case c.flags[id]&flagPresent != 0:
			if b, ok := byteLevelDecode(tok); ok {
				c.decode[id] = b
			} else {
				c.decode[id] = []byte(tok)
			}
		}
	}
	if c.charLevel {
		c.metaBoundaries()
	}
	if c.ignoreMerges && !c.charLevel {
		c.whole = make(map[string]int32, len(c.vocab))
		for tok, id := range c.vocab {
			if b, ok := byteLevelDecode(tok); ok {
				c.whole[string(b)] = int32(id)
			}
		}
	}
}

// Load reads a tokenizer from path, which is either a tokenizer.json file or
// a directory holding one. A tokenizer_config.json in the same directory, if
// there is one, is read too: it names the BOS, EOS and PAD tokens and holds
// the chat template (or a chat_template.jinja beside it does).
func Load(path string) (*Tokenizer, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c, err := parser{file: file}.parse(data)
	if err != nil {
		return nil, err
	}
	t := newTokenizer(c)
	cfgPath := filepath.Join(filepath.Dir(file), "tokenizer_config.json")
	cfg, err := LoadConfig(cfgPath)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return nil, err
	}
	// Newer transformers versions keep the chat template in a file of its
	// own, chat_template.jinja.
	if cfg == nil || cfg.ChatTemplateSource == "" {
		jinja, err := os.ReadFile(filepath.Join(filepath.Dir(file), ChatTemplateFile))
		switch {
		case err == nil:
			if cfg == nil {
				cfg = &Config{}
			}
			cfg.ChatTemplateSource = string(jinja)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	if cfg == nil {
		return t, nil
	}
	return t.withConfig(cfg, cfgPath)
}

// ChatTemplateFile is the file beside tokenizer.json that newer
// transformers versions write the chat template to, instead of
// tokenizer_config.json's chat_template. [Load] reads it when
// tokenizer_config.json has no chat template.
const ChatTemplateFile = "chat_template.jinja"

// Parse reads a tokenizer from the contents of a tokenizer.json file. The
// result knows no BOS, EOS or PAD token until given a [Config] with
// [Tokenizer.WithConfig].
func Parse(data []byte) (*Tokenizer, error) {
	c, err := parser{file: "tokenizer.json"}.parse(data)
	if err != nil {
		return nil, err
	}
	return newTokenizer(c), nil
}

// newTokenizer returns a Tokenizer without a configuration, whose BOS and
// EOS are the tokens the post-processor adds, if it adds one each.
func newTokenizer(c *core) *Tokenizer {
	t := &Tokenizer{core: c, pad: -1}
	t.bos, t.eos = c.postBOS(), c.postEOS()
	return t
}

func (c *core) postBOS() int32 {
	if len(c.postPrefix) == 1 {
		return c.postPrefix[0]
	}
	return -1
}

func (c *core) postEOS() int32 {
	if len(c.postSuffix) == 1 {
		return c.postSuffix[0]
	}
	return -1
}

// WithConfig returns a copy of t that takes its BOS, EOS and PAD tokens and
// its chat template from cfg. It fails if cfg names a token t does not have.
// A BOS or EOS token cfg does not name stays the one the tokenizer.json
// post-processor adds, if any. The copy shares t's tables and cache.
func (t *Tokenizer) WithConfig(cfg *Config) (*Tokenizer, error) {
	return t.withConfig(cfg, "tokenizer_config.json")
}

func (t *Tokenizer) withConfig(cfg *Config, file string) (*Tokenizer, error) {
	u := *t
	u.config = cfg
	u.bos, u.eos, u.pad = t.postBOS(), t.postEOS(), -1
	if cfg == nil {
		return &u, nil
	}
	for _, s := range []struct {
		name, tok string
		dst       *int32
	}{{"bos_token", cfg.BOSToken, &u.bos}, {"eos_token", cfg.EOSToken, &u.eos}, {"pad_token", cfg.PADToken, &u.pad}} {
		if s.tok == "" {
			continue
		}
		id, ok := t.TokenID(s.tok)
		if !ok {
			return nil, &ParseError{File: file, Field: s.name, Err: fmt.Errorf("token %q is not in the vocabulary", s.tok)}
		}
		*s.dst = id
	}
	return &u, nil
}

// WithNormalizer returns a copy of t that applies nfc to text the quick
// NFC check cannot prove normalized, when the tokenizer.json asks for NFC.
// Pass golang.org/x/text/unicode/norm's NFC.String for results identical to
// Hugging Face tokenizers on any input; nfc must be safe for concurrent use.
// The copy shares t's tables and cache.
func (t *Tokenizer) WithNormalizer(nfc func(string) string) *Tokenizer {
	u := *t
	u.normalize = nfc
	return &u
}

// Normalization returns "NFC" when the tokenizer.json asks for NFC
// normalization, and "" when it asks for none.
func (t *Tokenizer) Normalization() string {
	if t.nfc {
		return "NFC"
	}
	return ""
}

// Config returns the tokenizer_config.json read with the tokenizer, or nil.
func (t *Tokenizer) Config() *Config { return t.config }

// ChatTemplate returns the chat template of the tokenizer's configuration,
// recognised with [ParseChatTemplate].
func (t *Tokenizer) ChatTemplate() (ChatTemplate, error) {
	if t.config == nil {
		return ChatTemplate{}, errors.New("tokenizer: no tokenizer_config.json, so no chat template")
	}
	return t.config.ChatTemplate()
}

// VocabSize returns one more than the largest token id, counting added
// tokens: the number of rows an embedding table needs at least.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID returns the id of a token written as in tokenizer.json: an added
// token's content such as "<|im_end|>", or a vocabulary entry in the
// byte-level alphabet such as "Ġthe" for " the".
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	if a, ok := t.added[token]; ok {
		return a.id, true
	}
	id, ok := t.vocab[token]
	return int32(id), ok
}

// Token returns the token with the given id, written as in tokenizer.json.
func (t *Tokenizer) Token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.tokens) || t.flags[id]&flagPresent == 0 {
		return "", false
	}
	return t.tokens[id], true
}

// IsSpecial reports whether id is an added token marked special, the kind
// [Tokenizer.DecodeSkipSpecial] leaves out.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(t.flags) && t.flags[id]&flagSpecial != 0
}

// BOS returns the id of the configuration's bos_token, if it names one, or
// else of the one token the tokenizer.json post-processor puts first.
func (t *Tokenizer) BOS() (int32, bool) { return t.bos, t.bos >= 0 }

// EOS returns the id of the configuration's eos_token, if it names one, or
// else of the one token the tokenizer.json post-processor puts last.
func (t *Tokenizer) EOS() (int32, bool) { return t.eos, t.eos >= 0 }

// AddBOS reports whether the model expects the BOS token at the start of
// every sequence, as the Hugging Face libraries add it by default:
// tokenizer_config.json's add_bos_token when it is set, and otherwise
// whether the tokenizer.json post-processor (TemplateProcessing) puts a
// special token before the text. Encode never adds it.
func (t *Tokenizer) AddBOS() bool {
	if t.config != nil && t.config.HasAddBOSToken {
		return t.config.AddBOSToken
	}
	return len(t.postPrefix) > 0
}

// AddEOS is like AddBOS for the EOS token at the end of every sequence
// (add_eos_token, or a special token after the text in the template).
func (t *Tokenizer) AddEOS() bool {
	if t.config != nil && t.config.HasAddEOSToken {
		return t.config.AddEOSToken
	}
	return len(t.postSuffix) > 0
}

// PAD returns the id of the configuration's pad_token, if it names one.
func (t *Tokenizer) PAD() (int32, bool) { return t.pad, t.pad >= 0 }

// Encode returns the ids of text. Added tokens written in the text, special
// or not, are recognised, as the Hugging Face library does by default; use
// EncodeWithSpecial to encode untrusted text. No BOS or EOS is added. Bytes
// of text that are not valid UTF-8 are encoded as themselves, and
// AppendDecode gives them back.
func (t *Tokenizer) Encode(text string) []int32 { return t.EncodeWithSpecial(text, true) }

// EncodeWithSpecial returns the ids of text. When allowSpecial is false,
// added tokens marked special are encoded as ordinary text, like the Hugging
// Face option split_special_tokens; other added tokens are still recognised.
func (t *Tokenizer) EncodeWithSpecial(text string, allowSpecial bool) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+1), text, allowSpecial)
}

// AppendEncode appends the ids of text to dst and returns the extended
// slice, as EncodeWithSpecial.
func (t *Tokenizer) AppendEncode(dst []int32, text string, allowSpecial bool) []int32 {
	if len(t.added) == 0 {
		return t.encodeNormalized(dst, text, allowSpecial, true)
	}
	return t.rawAdded.encode(dst, text, allowSpecial, func(dst []int32, seg string, first bool) []int32 {
		return t.encodeNormalized(dst, seg, allowSpecial, first)
	})
}

// encodeNormalized normalizes a piece of text between raw added tokens, then
// splits off normalized added tokens and encodes the rest. first says
// whether seg starts the text.
func (t *Tokenizer) encodeNormalized(dst []int32, seg string, allowSpecial, first bool) []int32 {
	if len(t.norms) > 0 {
		seg = t.normalizeText(seg, t.normalize)
	}
	if t.normAdded.empty() {
		return t.encodePlain(dst, seg, first)
	}
	return t.normAdded.encode(dst, seg, allowSpecial, func(dst []int32, s string, f bool) []int32 {
		return t.encodePlain(dst, s, first && f)
	})
}

// encodePlain pre-tokenizes s and encodes each pre-token with BPE.
func (c *core) encodePlain(dst []int32, s string, first bool) []int32 {
	if c.charLevel {
		return c.preTokenize(dst, s, first, c.pre)
	}
	return c.split(dst, s, c.splitters)
}

func (c *core) split(dst []int32, s string, splitters []splitter) []int32 {
	if len(splitters) == 0 {
		if s == "" {
			return dst
		}
		return c.encodeWord(dst, s)
	}
	next, rest := splitters[0], splitters[1:]
	for i := 0; i < len(s); {
		j := next(s, i)
		if len(rest) == 0 {
			dst = c.encodeWord(dst, s[i:j])
		} else {
			dst = c.split(dst, s[i:j], rest)
		}
		i = j
	}
	return dst
}

// Decode returns the text of ids, special tokens included. Ids that name no
// token are skipped, and bytes that do not form valid UTF-8 become U+FFFD, as
// in the Hugging Face library.
//
// For a vocabulary that is not byte-level, the tokenizer.json decoders
// apply as in the Hugging Face library: a run of byte-fallback tokens that
// is not valid UTF-8 becomes one U+FFFD per byte, and a Strip or Metaspace
// decoder may remove the leading space of the whole text.
func (t *Tokenizer) Decode(ids []int32) string {
	if t.charLevel {
		return t.decodeChain(ids, false)
	}
	return validUTF8(t.AppendDecode(nil, ids, false))
}

// DecodeSkipSpecial is like Decode but leaves out special tokens.
func (t *Tokenizer) DecodeSkipSpecial(ids []int32) string {
	if t.charLevel {
		return t.decodeChain(ids, true)
	}
	return validUTF8(t.AppendDecode(nil, ids, true))
}

// AppendDecode appends the raw bytes of ids to dst, without replacing
// invalid UTF-8, which lets a caller decode a stream token by token. Each
// token contributes what it decodes to on its own: for a vocabulary that is
// not byte-level, its text with the decoders' replacements made (such as
// "▁" to " "), and the byte a byte-fallback token stands for; decoders that
// act on the whole text, such as Strip, do not apply.
func (t *Tokenizer) AppendDecode(dst []byte, ids []int32, skipSpecial bool) []byte {
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.decode) || (skipSpecial && t.flags[id]&flagSpecial != 0) {
			continue
		}
		dst = append(dst, t.decode[id]...)
	}
	return dst
}

// validUTF8 converts b to a string, replacing each maximal ill-formed
// subsequence with one U+FFFD, as Rust's String::from_utf8_lossy does.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			sb.WriteByte(b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			sb.Write(b[i : i+n])
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += illFormedLen(b[i:])
	}
	return sb.String()
}

// illFormedLen returns the length of the maximal prefix of b (which does not
// start with a valid UTF-8 sequence) that could begin a valid sequence: at
// least 1.
func illFormedLen(b []byte) int {
	lo, hi, need := byte(0x80), byte(0xBF), 0
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		lo, need = 0xA0, 2
	case c == 0xED:
		hi, need = 0x9F, 2
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		lo, need = 0x90, 3
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		hi, need = 0x8F, 3
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// addedMatcher finds added tokens in text, leftmost-longest, as the
// Aho-Corasick automaton of the Hugging Face library does. It is a trie of
// the tokens' match strings: Gemma has thousands of added tokens, most of
// them starting with "<".
type addedMatcher struct {
	root  [256]int32       // node reached from the root by a byte; 0 if none
	edges map[uint64]int32 // node<<8 | byte -> node, below the root
	toks  []*addedToken    // node -> the token ending there, or nil; node 0 is the root
	first int              // the only first byte in use, or -1
	n     int              // number of tokens
}

func newAddedMatcher(toks []*addedToken) *addedMatcher {
	m := &addedMatcher{first: -1, n: len(toks), edges: map[uint64]int32{}, toks: []*addedToken{nil}}
	used := 0
	for _, t := range toks {
		b := t.match[0]
		node := m.root[b]
		if node == 0 {
			used++
			m.first = int(b)
			node = int32(len(m.toks))
			m.toks = append(m.toks, nil)
			m.root[b] = node
		}
		for k := 1; k < len(t.match); k++ {
			key := uint64(node)<<8 | uint64(t.match[k])
			next, ok := m.edges[key]
			if !ok {
				next = int32(len(m.toks))
				m.toks = append(m.toks, nil)
				m.edges[key] = next
			}
			node = next
		}
		// Of two tokens with the same match string, the lower id, for
		// determinism.
		if prev := m.toks[node]; prev == nil || t.id < prev.id {
			m.toks[node] = t
		}
	}
	if used != 1 {
		m.first = -1
	}
	return m
}

func (m *addedMatcher) empty() bool { return m.n == 0 }

// find returns the leftmost-longest added token in s at or after from.
func (m *addedMatcher) find(s string, from int) (int, *addedToken) {
	for i := from; i < len(s); i++ {
		if m.first >= 0 {
			k := strings.IndexByte(s[i:], byte(m.first))
			if k < 0 {
				return -1, nil
			}
			i += k
		}
		node := m.root[s[i]]
		if node == 0 {
			continue
		}
		best := m.toks[node]
		for j := i + 1; j < len(s); j++ {
			next, ok := m.edges[uint64(node)<<8|uint64(s[j])]
			if !ok {
				break
			}
			node = next
			if t := m.toks[node]; t != nil {
				best = t
			}
		}
		if best != nil {
			return i, best
		}
	}
	return -1, nil
}

// encode splits text on added tokens and appends their ids, calling rest
// for the text between them, with whether that text starts text.
func (m *addedMatcher) encode(dst []int32, text string, allowSpecial bool, rest func([]int32, string, bool) []int32) []int32 {
	start, pos := 0, 0
	for pos < len(text) {
		i, tok := m.find(text, pos)
		if tok == nil {
			break
		}
		end := i + len(tok.match)
		pos = end
		if tok.special && !allowSpecial {
			continue
		}
		if tok.singleWord && (endsWithWord(text[:i]) || startsWithWord(text[end:])) {
			continue
		}
		if tok.lstrip {
			i = max(start, len(strings.TrimRightFunc(text[:i], unicode.IsSpace)))
		}
		if tok.rstrip {
			end = len(text) - len(strings.TrimLeftFunc(text[end:], unicode.IsSpace))
		}
		if start < i {
			dst = rest(dst, text[start:i], start == 0)
		}
		dst = append(dst, tok.id)
		start, pos = end, end
	}
	if start < len(text) {
		dst = rest(dst, text[start:], start == 0)
	}
	return dst
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}
