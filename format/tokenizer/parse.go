package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseError reports a problem with a tokenizer file. Its message names the
// file and the JSON field, as in
//
//	tokenizer: tokenizer.json: model.merges[12]: "Ġ x": token "x" is not in model.vocab
type ParseError struct {
	File  string // the path given to Load, or the file's usual name for Parse
	Field string // the JSON path of the offending value; empty for the whole file
	Err   error
}

// Error implements the error interface.
func (e *ParseError) Error() string {
	if e.Field == "" {
		return "tokenizer: " + e.File + ": " + e.Err.Error()
	}
	return "tokenizer: " + e.File + ": " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// parser carries the file name into the errors it makes.
type parser struct{ file string }

func (p parser) errorf(field, format string, args ...any) error {
	return &ParseError{File: p.file, Field: field, Err: fmt.Errorf(format, args...)}
}

// jsonError turns a decoding error for the value at field into a ParseError,
// extending the path with the member encoding/json names, if any.
func (p parser) jsonError(field string, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return p.errorf(field, "invalid JSON at byte %d: %v", se.Offset, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			field = joinField(field, te.Field)
		}
		return p.errorf(field, "got JSON %s, want %s", te.Value, jsonTypeName(te.Type.Kind().String()))
	}
	return &ParseError{File: p.file, Field: field, Err: err}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int", "int32", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "another type"
}

func joinField(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// decode decodes raw into v, reporting errors at field.
func (p parser) decode(field string, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return p.jsonError(field, err)
	}
	return nil
}

// tokenizerJSON is the top level of a tokenizer.json file.
type tokenizerJSON struct {
	AddedTokens   json.RawMessage `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         *modelJSON      `json:"model"`
}

type modelJSON struct {
	Type                    *string         `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	Dropout                 *float64        `json:"dropout"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	IgnoreMerges            bool            `json:"ignore_merges"`

	// vocabulary and merges already decoded, by FromGGUF, which need not
	// go through JSON; used when Vocab and Merges are absent.
	vocab    map[string]int
	merges   [][2]string
	mergeIDs [][3]int32 // left, right, merged

	ByteFallback bool    `json:"byte_fallback"`
	FuseUnk      bool    `json:"fuse_unk"`
	UnkToken     *string `json:"unk_token"`
}

type addedTokenJSON struct {
	ID         *int    `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized bool    `json:"normalized"`
	Special    bool    `json:"special"`
}

// componentJSON is the common shape of normalizers, pre-tokenizers,
// post-processors and decoders: an object with a "type" member.
type componentJSON struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	// Replace (normalizer and decoder), Strip (decoder)
	Content json.RawMessage `json:"content"`
	// Prepend
	Prepend *string `json:"prepend"`
	// Metaspace
	Replacement   *string `json:"replacement"`
	PrependScheme *string `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
	// Strip
	Start int `json:"start"`
	Stop  int `json:"stop"`
	// TemplateProcessing
	Single        []json.RawMessage `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
	// ByteLevel
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Digits
	IndividualDigits bool `json:"individual_digits"`
	// Split
	Pattern  json.RawMessage `json:"pattern"`
	Behavior string          `json:"behavior"`
	Invert   bool            `json:"invert"`
}

// maxSparseIDs bounds how far token ids may exceed the number of tokens, so
// that a malformed file cannot make Parse allocate without limit.
const maxSparseIDs = 1 << 16

func (p parser) parse(data []byte) (*core, error) {
	var top tokenizerJSON
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, p.jsonError("", err)
	}
	return p.parseTop(&top)
}

func (p parser) parseTop(top *tokenizerJSON) (*core, error) {
	if top.Model == nil {
		return nil, p.errorf("model", "missing")
	}
	c := &core{cache: newWordCache()}
	if err := p.parseModel(c, top.Model); err != nil {
		return nil, err
	}
	if err := p.parseAdded(c, top.AddedTokens); err != nil {
		return nil, err
	}
	if err := p.parseNormalizer(c, "normalizer", top.Normalizer); err != nil {
		return nil, err
	}
	if err := p.parsePreTokenizer(c, "pre_tokenizer", top.PreTokenizer, false); err != nil {
		return nil, err
	}
	// Without a ByteLevel pre-tokenizer, the vocabulary is one of
	// characters, as SentencePiece models converted to BPE have.
	c.charLevel = !c.byteLevel
	if err := p.parseDecoder(c, "decoder", top.Decoder); err != nil {
		return nil, err
	}
	if err := p.parsePostProcessor(c, "post_processor", top.PostProcessor); err != nil {
		return nil, err
	}
	c.finish()
	return c, nil
}

func (p parser) parseModel(c *core, m *modelJSON) error {
	if m.Type != nil && *m.Type != "BPE" {
		return p.errorf("model.type", "unsupported model type %q (only BPE is supported)", *m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return p.errorf("model.dropout", "BPE dropout %v is not supported", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return p.errorf("model.continuing_subword_prefix", "%q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return p.errorf("model.end_of_word_suffix", "%q is not supported", *m.EndOfWordSuffix)
	}
	c.ignoreMerges = m.IgnoreMerges
	c.byteFallback, c.fuseUnk = m.ByteFallback, m.FuseUnk
	vocab := m.vocab
	if vocab == nil {
		if isNull(m.Vocab) {
			return p.errorf("model.vocab", "missing")
		}
		var err error
		if vocab, err = p.parseVocab(m.Vocab); err != nil {
			return err
		}
	}
	c.vocab = vocab
	maxID := -1
	for _, id := range vocab {
		maxID = max(maxID, id)
	}
	if maxID >= len(vocab)+maxSparseIDs {
		return p.errorf("model.vocab", "token ids up to %d for only %d tokens", maxID, len(vocab))
	}
	c.tokens = make([]string, maxID+1)
	c.flags = make([]uint8, maxID+1)
	for tok, id := range vocab {
		if c.flags[id]&flagPresent != 0 {
			a, b := tok, c.tokens[id]
			if b < a {
				a, b = b, a
			}
			return p.errorf("model.vocab", "tokens %q and %q share id %d", a, b, id)
		}
		c.tokens[id] = tok
		c.flags[id] = flagPresent
	}
	for i := range c.byteID {
		c.byteID[i] = -1
		if id, ok := vocab[string(byteToRune[i])]; ok {
			c.byteID[i] = int32(id)
		}
		c.byteToken[i] = -1
		if id, ok := vocab[byteTokenName(byte(i))]; ok {
			c.byteToken[i] = int32(id)
		}
	}
	for i := range c.asciiID {
		c.asciiID[i] = -1
		if id, ok := vocab[string(rune(i))]; ok {
			c.asciiID[i] = int32(id)
		}
	}
	c.unk = -1
	if m.UnkToken != nil && *m.UnkToken != "" {
		id, ok := vocab[*m.UnkToken]
		if !ok {
			return p.errorf("model.unk_token", "%q is not in model.vocab", *m.UnkToken)
		}
		c.unk = int32(id)
	}
	if m.mergeIDs != nil {
		c.merges = make(map[uint64]uint64, len(m.mergeIDs))
		for i, mg := range m.mergeIDs {
			for _, id := range mg {
				if id < 0 || int(id) >= len(c.tokens) || c.flags[id]&flagPresent == 0 {
					return p.errorf("model.merges["+strconv.Itoa(i)+"]", "id %d is not in model.vocab", id)
				}
			}
			c.merges[pairKey(mg[0], mg[1])] = uint64(i)<<32 | uint64(uint32(mg[2]))
		}
		return nil
	}
	merges := m.merges
	if merges == nil {
		if isNull(m.Merges) {
			if len(vocab) > 256 {
				return p.errorf("model.merges", "missing")
			}
			m.Merges = json.RawMessage("[]")
		}
		var err error
		if merges, err = p.parseMerges(m.Merges); err != nil {
			return err
		}
	}
	if len(merges) >= math.MaxUint32 {
		return p.errorf("model.merges", "too many merges")
	}
	c.merges = make(map[uint64]uint64, len(merges))
	for i, mg := range merges {
		field := "model.merges[" + strconv.Itoa(i) + "]"
		a, ok := vocab[mg[0]]
		if !ok {
			return p.errorf(field, "%q: token %q is not in model.vocab", mg[0]+" "+mg[1], mg[0])
		}
		b, ok := vocab[mg[1]]
		if !ok {
			return p.errorf(field, "%q: token %q is not in model.vocab", mg[0]+" "+mg[1], mg[1])
		}
		ab, ok := vocab[mg[0]+mg[1]]
		if !ok {
			return p.errorf(field, "%q: merged token %q is not in model.vocab", mg[0]+" "+mg[1], mg[0]+mg[1])
		}
		c.merges[pairKey(int32(a), int32(b))] = uint64(i)<<32 | uint64(uint32(ab))
	}
	return nil
}

func (p parser) parseVocab(raw json.RawMessage) (map[string]int, error) {
	var vocab map[string]int
	if err := json.Unmarshal(raw, &vocab); err == nil {
		for tok, id := range vocab {
			if id < 0 || id > math.MaxInt32 {
				return nil, p.errorf("model.vocab["+strconv.Quote(tok)+"]", "id %d out of range", id)
			}
		}
		return vocab, nil
	}
	// Find the member at fault for a precise message.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, p.jsonError("model.vocab", err)
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var id int
		if err := json.Unmarshal(members[k], &id); err != nil {
			return nil, p.errorf("model.vocab["+strconv.Quote(k)+"]", "want an integer id, got %s", truncate(string(members[k])))
		}
	}
	return nil, p.errorf("model.vocab", "not an object of token ids")
}

// parseMerges reads model.merges in either of its forms: a list of "a b"
// strings, or a list of ["a", "b"] pairs.
func (p parser) parseMerges(raw json.RawMessage) ([][2]string, error) {
	// Try the form the first element has; a failed attempt costs a pass
	// over megabytes.
	pairsFirst := false
	if t, ok := bytes.CutPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("[")); ok {
		pairsFirst = bytes.HasPrefix(bytes.TrimLeft(t, " \t\r\n"), []byte("["))
	}
	var lines []string
	if pairsFirst {
		// The pairs form; see below.
	} else if err := json.Unmarshal(raw, &lines); err == nil {
		out := make([][2]string, len(lines))
		for i, l := range lines {
			a, b, ok := strings.Cut(l, " ")
			if !ok || a == "" || b == "" {
				return nil, p.errorf("model.merges["+strconv.Itoa(i)+"]", "%q is not two tokens separated by a space", l)
			}
			out[i] = [2]string{a, b}
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		out := make([][2]string, len(pairs))
		for i, pr := range pairs {
			if len(pr) != 2 {
				return nil, p.errorf("model.merges["+strconv.Itoa(i)+"]", "a pair has 2 tokens, got %d", len(pr))
			}
			out[i] = [2]string{pr[0], pr[1]}
		}
		return out, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, p.jsonError("model.merges", err)
	}
	for i, e := range elems {
		var s string
		var pr []string
		if json.Unmarshal(e, &s) != nil && json.Unmarshal(e, &pr) != nil {
			return nil, p.errorf("model.merges["+strconv.Itoa(i)+"]", "want a string \"a b\" or a pair [\"a\", \"b\"], got %s", truncate(string(e)))
		}
	}
	return nil, p.errorf("model.merges", "mixes strings and pairs")
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func (p parser) parseAdded(c *core, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var elems []json.RawMessage
	if err := p.decode("added_tokens", raw, &elems); err != nil {
		return err
	}
	c.added = make(map[string]*addedToken, len(elems))
	for i, e := range elems {
		field := "added_tokens[" + strconv.Itoa(i) + "]"
		var a addedTokenJSON
		if err := p.decode(field, e, &a); err != nil {
			return err
		}
		if a.ID == nil {
			return p.errorf(field+".id", "missing")
		}
		if a.Content == nil || *a.Content == "" {
			return p.errorf(field+".content", "missing or empty")
		}
		id := *a.ID
		if id < 0 || id >= len(c.tokens)+len(elems)+maxSparseIDs {
			return p.errorf(field+".id", "id %d out of range", id)
		}
		if prev, ok := c.added[*a.Content]; ok && int(prev.id) != id {
			return p.errorf(field+".content", "%q is also added token %d", *a.Content, prev.id)
		}
		for id >= len(c.tokens) {
			c.tokens = append(c.tokens, "")
			c.flags = append(c.flags, 0)
		}
		if c.flags[id]&flagAdded != 0 && c.tokens[id] != *a.Content {
			return p.errorf(field+".id", "id %d is also added token %q", id, c.tokens[id])
		}
		t := &addedToken{
			id: int32(id), content: *a.Content, special: a.Special,
			lstrip: a.LStrip, rstrip: a.RStrip, singleWord: a.SingleWord, normalized: a.Normalized,
		}
		c.added[t.content] = t
		c.tokens[id] = t.content
		c.flags[id] = flagPresent | flagAdded
		if t.special {
			c.flags[id] |= flagSpecial
		}
	}
	return nil
}

func (p parser) parseNormalizer(c *core, field string, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var n componentJSON
	if err := p.decode(field, raw, &n); err != nil {
		return err
	}
	switch n.Type {
	case "NFC":
		c.nfc = true
		c.norms = append(c.norms, normStep{kind: normNFC})
		return nil
	case "Replace":
		from, err := p.stringPattern(field, n.Pattern)
		if err != nil {
			return err
		}
		to, err := p.stringMember(field+".content", n.Content)
		if err != nil {
			return err
		}
		c.norms = append(c.norms, normStep{kind: normReplace, from: from, to: to})
		return nil
	case "Prepend":
		if n.Prepend == nil {
			return p.errorf(field+".prepend", "missing")
		}
		c.norms = append(c.norms, normStep{kind: normPrepend, to: *n.Prepend})
		return nil
	case "Sequence":
		for i, sub := range n.Normalizers {
			if err := p.parseNormalizer(c, field+".normalizers["+strconv.Itoa(i)+"]", sub); err != nil {
				return err
			}
		}
		return nil
	}
	return p.errorf(joinField(field, "type"), "unsupported normalizer %q (supported: NFC, Replace, Prepend, Sequence)", n.Type)
}

// stringMember reads a required string member.
func (p parser) stringMember(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", p.errorf(field, "missing")
	}
	var s string
	if err := p.decode(field, raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// stringPattern reads the pattern of a Replace or Split component, which
// must be a non-empty String pattern.
func (p parser) stringPattern(field string, raw json.RawMessage) (string, error) {
	var pat struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	}
	if isNull(raw) {
		return "", p.errorf(field+".pattern", "missing")
	}
	if err := p.decode(field+".pattern", raw, &pat); err != nil {
		return "", err
	}
	if pat.String == nil {
		return "", p.errorf(field+".pattern", "only String patterns are supported here")
	}
	if *pat.String == "" {
		return "", p.errorf(field+".pattern.String", "empty")
	}
	return *pat.String, nil
}

func (p parser) parsePreTokenizer(c *core, field string, raw json.RawMessage, nested bool) error {
	if isNull(raw) {
		return nil
	}
	var t componentJSON
	if err := p.decode(field, raw, &t); err != nil {
		return err
	}
	if c.byteLevel {
		return p.errorf(joinField(field, "type"), "%s after ByteLevel is not supported", t.Type)
	}
	switch t.Type {
	case "Sequence":
		if nested {
			return p.errorf(field+".type", "nested Sequence is not supported")
		}
		for i, sub := range t.PreTokenizers {
			if err := p.parsePreTokenizer(c, field+".pretokenizers["+strconv.Itoa(i)+"]", sub, true); err != nil {
				return err
			}
		}
		return nil
	case "ByteLevel":
		if t.AddPrefixSpace != nil && *t.AddPrefixSpace {
			return p.errorf(field+".add_prefix_space", "true is not supported")
		}
		for _, st := range c.pre {
			if st.kind != preScan {
				return p.errorf(field+".type", "ByteLevel after Metaspace or a Split on a String pattern is not supported")
			}
		}
		if t.UseRegex == nil || *t.UseRegex {
			c.splitters = append(c.splitters, splitGPT2)
		}
		c.byteLevel = true
		return nil
	case "Digits":
		s := splitDigitRuns
		if t.IndividualDigits {
			s = splitDigits
		}
		c.splitters = append(c.splitters, s)
		c.pre = append(c.pre, preStep{kind: preScan, scan: s})
		return nil
	case "Split":
		var pat struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		}
		if err := p.decode(field+".pattern", t.Pattern, &pat); err != nil {
			return err
		}
		behavior, ok := splitBehaviors[t.Behavior]
		if !ok {
			return p.errorf(field+".behavior", "unknown split behavior %q", t.Behavior)
		}
		switch {
		case pat.String != nil:
			if *pat.String == "" {
				return p.errorf(field+".pattern.String", "empty")
			}
			c.pre = append(c.pre, preStep{kind: preLiteral, literal: *pat.String, behavior: behavior, invert: t.Invert})
			return nil
		case pat.Regex == nil:
			return p.errorf(field+".pattern", "want a Regex or a String pattern")
		}
		s, ok := splitterFor(*pat.Regex)
		if !ok {
			return p.errorf(field+".pattern.Regex", "unsupported split pattern %q (supported: the Qwen2, Llama-3 and GPT-2 patterns)", *pat.Regex)
		}
		if behavior != splitIsolated {
			return p.errorf(field+".behavior", "unsupported split behavior %q for a Regex pattern (only Isolated is supported)", t.Behavior)
		}
		if t.Invert {
			return p.errorf(field+".invert", "true is not supported for a Regex pattern")
		}
		c.splitters = append(c.splitters, s)
		c.pre = append(c.pre, preStep{kind: preScan, scan: s})
		return nil
	case "Metaspace":
		rep, scheme, err := p.metaspace(field, &t)
		if err != nil {
			return err
		}
		c.pre = append(c.pre, preStep{kind: preMetaspace, literal: rep, prepend: scheme, split: t.Split == nil || *t.Split})
		return nil
	}
	return p.errorf(joinField(field, "type"), "unsupported pre-tokenizer %q (supported: ByteLevel, Digits, Split, Metaspace, Sequence)", t.Type)
}

// metaspace reads the replacement character and the prepend scheme of a
// Metaspace pre-tokenizer or decoder. Files written before prepend_scheme
// existed say add_prefix_space instead.
func (p parser) metaspace(field string, t *componentJSON) (string, uint8, error) {
	rep := "▁"
	if t.Replacement != nil {
		rep = *t.Replacement
		if utf8.RuneCountInString(rep) != 1 {
			return "", 0, p.errorf(field+".replacement", "%q is not one character", rep)
		}
	}
	scheme := prependAlways
	switch {
	case t.PrependScheme != nil:
		s, ok := prependSchemes[*t.PrependScheme]
		if !ok {
			return "", 0, p.errorf(field+".prepend_scheme", "unknown scheme %q (want always, first or never)", *t.PrependScheme)
		}
		scheme = s
	case t.AddPrefixSpace != nil && !*t.AddPrefixSpace:
		scheme = prependNever
	}
	return rep, scheme, nil
}

func (p parser) parseDecoder(c *core, field string, raw json.RawMessage) error {
	if isNull(raw) {
		if c.byteLevel {
			return p.errorf(field, "missing (a ByteLevel decoder is required)")
		}
		return p.errorf(field, "missing")
	}
	var d componentJSON
	if err := p.decode(field, raw, &d); err != nil {
		return err
	}
	if c.byteLevel {
		if d.Type != "ByteLevel" {
			return p.errorf(joinField(field, "type"), "unsupported decoder %q (only ByteLevel is supported with a ByteLevel pre-tokenizer)", d.Type)
		}
		return nil
	}
	switch d.Type {
	case "Sequence":
		for i, sub := range d.Decoders {
			if err := p.parseDecoder(c, field+".decoders["+strconv.Itoa(i)+"]", sub); err != nil {
				return err
			}
		}
		return nil
	case "Replace":
		from, err := p.stringPattern(field, d.Pattern)
		if err != nil {
			return err
		}
		to, err := p.stringMember(field+".content", d.Content)
		if err != nil {
			return err
		}
		c.decoders = append(c.decoders, decStep{kind: decReplace, from: from, to: to})
		return nil
	case "ByteFallback":
		c.decoders = append(c.decoders, decStep{kind: decByteFallback})
		return nil
	case "Fuse":
		c.decoders = append(c.decoders, decStep{kind: decFuse})
		return nil
	case "Strip":
		ch, err := p.stringMember(field+".content", d.Content)
		if err != nil {
			return err
		}
		if utf8.RuneCountInString(ch) != 1 {
			return p.errorf(field+".content", "%q is not one character", ch)
		}
		if d.Start < 0 || d.Stop < 0 {
			return p.errorf(field, "negative start or stop")
		}
		c.decoders = append(c.decoders, decStep{kind: decStrip, from: ch, start: d.Start, stop: d.Stop})
		return nil
	case "Metaspace":
		rep, scheme, err := p.metaspace(field, &d)
		if err != nil {
			return err
		}
		c.decoders = append(c.decoders, decStep{kind: decMetaspace, from: rep, prepend: scheme})
		return nil
	case "ByteLevel":
		return p.errorf("pre_tokenizer", "a ByteLevel pre-tokenizer is required by the ByteLevel decoder (%s)", field)
	}
	return p.errorf(joinField(field, "type"), "unsupported decoder %q (supported: Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)", d.Type)
}

// parsePostProcessor records the special tokens the post-processor puts
// around a single sequence. Encode does not add them; AddBOS and AddEOS
// report them.
func (p parser) parsePostProcessor(c *core, field string, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var t componentJSON
	if err := p.decode(field, raw, &t); err != nil {
		return err
	}
	checkID := func(f string, id int) error {
		if id < 0 || id >= len(c.tokens) || c.flags[id]&flagPresent == 0 {
			return p.errorf(f, "id %d is not a token", id)
		}
		return nil
	}
	switch t.Type {
	case "ByteLevel":
		return nil // it only adjusts offsets
	case "Sequence":
		for i, sub := range t.Processors {
			if err := p.parsePostProcessor(c, field+".processors["+strconv.Itoa(i)+"]", sub); err != nil {
				return err
			}
		}
		return nil
	case "BertProcessing", "RobertaProcessing":
		var tp struct {
			CLS []json.RawMessage `json:"cls"`
			SEP []json.RawMessage `json:"sep"`
		}
		if err := p.decode(field, raw, &tp); err != nil {
			return err
		}
		var ids [2]int
		for k, pair := range [][]json.RawMessage{tp.CLS, tp.SEP} {
			name := field + "." + []string{"cls", "sep"}[k]
			if len(pair) != 2 {
				return p.errorf(name, "want a [token, id] pair")
			}
			if err := p.decode(name+"[1]", pair[1], &ids[k]); err != nil {
				return err
			}
			if err := checkID(name+"[1]", ids[k]); err != nil {
				return err
			}
		}
		c.postPrefix, c.postSuffix = []int32{int32(ids[0])}, []int32{int32(ids[1])}
		return nil
	case "TemplateProcessing":
		var prefix, suffix []int32
		seq := false
		for i, raw := range t.Single {
			f := field + ".single[" + strconv.Itoa(i) + "]"
			var item struct {
				SpecialToken *struct {
					ID string `json:"id"`
				}
				Sequence *struct {
					ID string `json:"id"`
				}
			}
			if err := p.decode(f, raw, &item); err != nil {
				return err
			}
			switch {
			case item.Sequence != nil:
				if seq {
					return p.errorf(f, "a second sequence in the single template")
				}
				seq = true
			case item.SpecialToken != nil:
				st, ok := t.SpecialTokens[item.SpecialToken.ID]
				if !ok {
					return p.errorf(f+".SpecialToken.id", "%q is not in special_tokens", item.SpecialToken.ID)
				}
				for _, id := range st.IDs {
					if err := checkID(field+".special_tokens["+strconv.Quote(item.SpecialToken.ID)+"].ids", id); err != nil {
						return err
					}
					if seq {
						suffix = append(suffix, int32(id))
					} else {
						prefix = append(prefix, int32(id))
					}
				}
			default:
				return p.errorf(f, "want a SpecialToken or a Sequence")
			}
		}
		c.postPrefix, c.postSuffix = prefix, suffix
		return nil
	}
	return p.errorf(joinField(field, "type"), "unsupported post-processor %q (supported: TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence)", t.Type)
}
