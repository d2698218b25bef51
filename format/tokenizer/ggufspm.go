package tokenizer

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tokenizer.json of a GGUF "llama" vocabulary (SentencePiece BPE with
// scores and byte fallback) follows transformers 5.x, which builds it as
// its LlamaTokenizer or GemmaTokenizer would:
//
//   - Gemma (general.architecture gemma, gemma2, gemma3) replaces spaces
//     with "▁" in its normalizer, splits nothing, and decodes without
//     stripping; its tokens of two or more spaces are stored with real
//     spaces and are renamed to "▁▁"..., as the published vocabulary
//     spells them. Merges are ranked by the merged token's position in the
//     vocabulary: Gemma's scores do not follow its merge order.
//   - Phi-3 prepends "▁" and replaces spaces in its normalizer.
//   - Any other architecture gets Metaspace with the "first" prepend scheme
//     and a decoder that strips the leading space. transformers ignores
//     tokenizer.ggml.add_space_prefix here, and so does this package.
//
// Without tokenizer.ggml.merges, merges are derived from the vocabulary:
// every split of a token into two tokens is a merge, ranked by the merged
// token's score (higher first), then by the longer left piece and the
// longer right piece, then by token id and by the pieces' ids.

// ggufSPMFlavor is how the tokenizer.json of a "llama" vocabulary is shaped.
type ggufSPMFlavor int

const (
	spmLlama ggufSPMFlavor = iota
	spmGemma
	spmPhi3
)

// spmFlavor picks the shape from the architecture. When the architecture is
// unknown, a vocabulary with tokens of spaces only, which only Gemma's
// conversion writes with real spaces, is taken for Gemma's.
func spmFlavor(v *GGUFVocab) ggufSPMFlavor {
	switch v.Architecture {
	case "gemma", "gemma2", "gemma3":
		return spmGemma
	case "phi3":
		return spmPhi3
	case "":
		for _, tok := range v.Tokens {
			if len(tok) >= 2 && strings.Trim(tok, " ") == "" {
				return spmGemma
			}
		}
	}
	return spmLlama
}

// spmDocument returns the tokenizer.json of a "llama" vocabulary as a JSON
// value, and the add_bos_token to report.
func spmDocument(v GGUFVocab, fail func(field, format string, args ...any) error) (doc map[string]any, addBOS bool, err error) {
	n := len(v.Tokens)
	if len(v.Types) != 0 && len(v.Types) != n {
		return nil, false, fail("tokenizer.ggml.token_type", "%d types for %d tokens", len(v.Types), n)
	}
	flavor := spmFlavor(&v)
	tokens := v.Tokens
	if flavor == spmGemma {
		tokens = slices.Clone(tokens)
		for i, tok := range tokens {
			tokens[i] = gemmaRespell(tok)
		}
	}
	vocab := make(map[string]int, n)
	for id, tok := range tokens {
		if prev, dup := vocab[tok]; dup {
			return nil, false, fail("tokenizer.ggml.tokens", "token %q appears twice (ids %d and %d)", tok, prev, id)
		}
		vocab[tok] = id
	}
	var merges any
	switch {
	case v.Merges != nil:
		if merges, err = splitGGUFMerges(v.Merges, fail); err != nil {
			return nil, false, err
		}
	case flavor == spmGemma:
		merges = deriveMerges(tokens, vocab, func(id int) float64 { return -float64(id) })
	default:
		if len(v.Scores) != n {
			return nil, false, fail("tokenizer.ggml.scores", "%d scores for %d tokens; merges are derived from scores when tokenizer.ggml.merges is absent", len(v.Scores), n)
		}
		merges = deriveMerges(tokens, vocab, func(id int) float64 { return float64(v.Scores[id]) })
	}

	// Control tokens and the named special tokens are special added tokens;
	// user-defined tokens are plain added tokens, unless renamed above.
	special := make([]bool, n)
	for _, id := range []int{v.BOS, v.EOS, v.UNK, v.PAD} {
		if id >= 0 && id < n {
			special[id] = true
		}
	}
	var added []map[string]any
	for id, tok := range v.Tokens {
		var typ int32
		if len(v.Types) > 0 {
			typ = v.Types[id]
		}
		isSpecial := special[id] || typ == GGUFTokenControl
		if _, ok := vocab[tok]; !isSpecial && (typ != GGUFTokenUserDefined || !ok) {
			continue
		}
		added = append(added, map[string]any{"id": id, "content": tok, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": isSpecial})
	}

	unk := any(nil)
	if _, ok := vocab["<unk>"]; ok && flavor == spmGemma {
		unk = "<unk>" // GemmaTokenizer's default; LlamaTokenizer's BPE has none
	}
	replace := func(from, to string) map[string]any {
		return map[string]any{"type": "Replace", "pattern": map[string]string{"String": from}, "content": to}
	}
	decoders := []any{replace("▁", " "), map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}
	var normalizer, pre any
	switch flavor {
	case spmGemma:
		normalizer = replace(" ", "▁")
		pre = map[string]any{"type": "Split", "pattern": map[string]string{"String": " "}, "behavior": "MergedWithPrevious", "invert": false}
	case spmPhi3:
		normalizer = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"}, replace(" ", "▁")}}
	default:
		pre = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	}
	if flavor != spmGemma {
		decoders = append(decoders, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}

	// llama.cpp adds BOS to a SentencePiece vocabulary that does not say
	// otherwise, and transformers follows it.
	addBOS = v.AddBOS || !v.HasAddBOS
	addEOS := v.AddEOS
	if v.BOS < 0 || v.BOS >= n {
		addBOS = false
	}
	if v.EOS < 0 || v.EOS >= n {
		addEOS = false
	}
	doc = map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   added,
		"normalizer":     normalizer,
		"pre_tokenizer":  pre,
		"post_processor": templateProcessing(v, addBOS, addEOS),
		"decoder":        map[string]any{"type": "Sequence", "decoders": decoders},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": unk, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	return doc, addBOS, nil
}

// templateProcessing is the post-processor transformers writes for
// add_bos_token and add_eos_token: the BOS token before each sequence and
// the EOS token after it.
func templateProcessing(v GGUFVocab, addBOS, addEOS bool) any {
	if !addBOS && !addEOS {
		return nil
	}
	special := map[string]any{}
	tmpl := func(typeID int, seq string) []any {
		var out []any
		if addBOS {
			out = append(out, map[string]any{"SpecialToken": map[string]any{"id": v.Tokens[v.BOS], "type_id": typeID}})
		}
		out = append(out, map[string]any{"Sequence": map[string]any{"id": seq, "type_id": typeID}})
		if addEOS {
			out = append(out, map[string]any{"SpecialToken": map[string]any{"id": v.Tokens[v.EOS], "type_id": typeID}})
		}
		return out
	}
	if addBOS {
		special[v.Tokens[v.BOS]] = map[string]any{"id": v.Tokens[v.BOS], "ids": []int{v.BOS}, "tokens": []string{v.Tokens[v.BOS]}}
	}
	if addEOS {
		special[v.Tokens[v.EOS]] = map[string]any{"id": v.Tokens[v.EOS], "ids": []int{v.EOS}, "tokens": []string{v.Tokens[v.EOS]}}
	}
	return map[string]any{"type": "TemplateProcessing", "single": tmpl(0, "A"),
		"pair": append(tmpl(0, "A"), tmpl(1, "B")...), "special_tokens": special}
}

// deriveMerges returns the merges a SentencePiece vocabulary implies: for
// each token, every split into two tokens, ranked by score(merged token's
// id) from high to low, then by the left and the right piece's length in
// characters from long to short, then in the order of the merged token's id
// and of the pieces' ids: transformers' generate_merges, whose stable sort
// keeps the order of equals.
func deriveMerges(tokens []string, vocab map[string]int, score func(id int) float64) *derivedMerges {
	type merge struct {
		score                 float64
		left, right           int32 // ids
		leftChars, rightChars int32
		merged, rank          int32 // merged id; order of the pieces within it
	}
	order := func(a, b merge) int {
		return cmp.Or(-cmp.Compare(a.score, b.score), -cmp.Compare(a.leftChars, b.leftChars),
			-cmp.Compare(a.rightChars, b.rightChars), cmp.Compare(a.merged, b.merged), cmp.Compare(a.rank, b.rank))
	}
	var all []merge
	var cuts []int
	for id, tok := range tokens {
		cuts = cuts[:0]
		for i := range tok {
			if i > 0 {
				cuts = append(cuts, i)
			}
		}
		chars := int32(len(cuts) + 1)
		start := len(all)
		for k, i := range cuts {
			l, ok := vocab[tok[:i]]
			if !ok {
				continue
			}
			r, ok := vocab[tok[i:]]
			if !ok {
				continue
			}
			all = append(all, merge{score: score(id), left: int32(l), right: int32(r), leftChars: int32(k + 1),
				rightChars: chars - int32(k+1), merged: int32(id)})
		}
		local := all[start:]
		slices.SortFunc(local, func(a, b merge) int {
			return cmp.Or(cmp.Compare(a.left, b.left), cmp.Compare(a.right, b.right))
		})
		for k := range local {
			local[k].rank = int32(k)
		}
		slices.SortFunc(local, order)
	}
	// Scores usually fall with the id (and Gemma's ranks are ids), so the
	// merges often come out in order already.
	if !slices.IsSortedFunc(all, order) {
		slices.SortFunc(all, order)
	}
	out := &derivedMerges{tokens: tokens, ids: make([][3]int32, len(all))}
	for i, m := range all {
		out.ids[i] = [3]int32{m.left, m.right, m.merged}
	}
	return out
}

// derivedMerges are merges by token id: left, right, merged. FromGGUF uses
// the ids; in tokenizer.json they are written as pairs of tokens.
type derivedMerges struct {
	tokens []string
	ids    [][3]int32
}

// pairs returns the merges as pairs of tokens.
func (d *derivedMerges) pairs() [][2]string {
	out := make([][2]string, len(d.ids))
	for i, m := range d.ids {
		out[i] = [2]string{d.tokens[m[0]], d.tokens[m[1]]}
	}
	return out
}

// MarshalJSON writes the merges as [["a","b"],...].
func (d *derivedMerges) MarshalJSON() ([]byte, error) {
	quoted := make(map[int32][]byte)
	quote := func(id int32) ([]byte, error) {
		q, ok := quoted[id]
		if !ok {
			var err error
			if q, err = json.Marshal(d.tokens[id]); err != nil {
				return nil, err
			}
			quoted[id] = q
		}
		return q, nil
	}
	b := []byte{'['}
	for i, m := range d.ids {
		if i > 0 {
			b = append(b, ',')
		}
		l, err := quote(m[0])
		if err != nil {
			return nil, err
		}
		r, err := quote(m[1])
		if err != nil {
			return nil, err
		}
		b = append(append(append(append(append(b, '['), l...), ','), r...), ']')
	}
	return append(b, ']'), nil
}

// splitGGUFMerges reads tokenizer.ggml.merges, "a b" by rank.
func splitGGUFMerges(ms []string, fail func(field, format string, args ...any) error) ([][2]string, error) {
	out := make([][2]string, len(ms))
	for i, m := range ms {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fail("tokenizer.ggml.merges["+strconv.Itoa(i)+"]", "%q is not two tokens separated by a space", m)
		}
		out[i] = [2]string{a, b}
	}
	return out, nil
}

// pyIsSpace is Python's str.isspace for one character: Go's unicode.IsSpace
// and the separators U+001C to U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F) }

// gemmaRespell returns the name transformers gives a Gemma token: "▁" for
// each character of a token of whitespace that has a space in it.
func gemmaRespell(tok string) string {
	if !strings.Contains(tok, " ") || strings.TrimFunc(tok, pyIsSpace) != "" {
		return tok
	}
	return strings.Repeat("▁", utf8.RuneCountInString(tok))
}
