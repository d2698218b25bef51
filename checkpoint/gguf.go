package checkpoint

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"rlvr/engine/model"
	"rlvr/format/gguf"
	"rlvr/format/hf"
	"rlvr/format/hfconfig"
	"rlvr/format/tokenizer"
)

// OpenGGUF reads a .gguf file as the Hugging Face checkpoint it was
// converted from: its config.json, its weights dequantized to float32
// under Hugging Face names, and its tokenizer files. rlvr import writes
// the same to a directory.
func OpenGGUF(path string) (*gguf.HF, *hfconfig.Config, tokenizer.GGUFVocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, tokenizer.GGUFVocab{}, err
	}
	h, err := f.HF()
	if err != nil {
		f.Close()
		return nil, nil, tokenizer.GGUFVocab{}, err
	}
	hc, err := hfconfig.Parse(path+" (config from metadata)", h.Config)
	if err != nil {
		f.Close()
		return nil, nil, tokenizer.GGUFVocab{}, err
	}
	v, err := f.Vocab()
	if err != nil {
		f.Close()
		return nil, nil, tokenizer.GGUFVocab{}, err
	}
	return h, hc, v, nil
}

// openGGUF loads a .gguf model; tokenizerPath, when given, replaces the
// tokenizer of its metadata with a tokenizer.json.
func openGGUF(path, tokenizerPath string) (*Loaded, error) {
	h, hc, v, err := OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	mc, err := hf.ModelConfig(hc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err := checkAllRead(h, mc, path); err != nil {
		return nil, err
	}
	m, err := model.NewEmpty(mc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err := hf.Fill(m, h.Get, path); err != nil {
		return nil, err
	}
	l := &Loaded{Name: Name(path), Model: m, HFConfig: hc, Dir: filepath.Dir(path)}
	files, err := ggufTokenizerFiles(hc, v)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	var tok *tokenizer.Tokenizer
	if tokenizerPath != "" {
		tok, err = tokenizer.Load(tokenizerPath)
	} else {
		tok, err = filesTokenizer(files)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err := useTokenizer(l, tok, ggufTemplateFile(path, tokenizerPath, tok)); err != nil {
		return nil, err
	}
	ids, err := generationEOS(path+" (generation_config from metadata)", files["generation_config.json"], hc.VocabSize)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		l.StopTokens = appendNew(l.StopTokens, id)
	}
	if eos, ok := l.Tokenizer.EOS(); ok {
		l.StopTokens = appendNew(l.StopTokens, eos)
	}
	if n := l.Tokenizer.VocabSize(); n > hc.VocabSize {
		return nil, fmt.Errorf("checkpoint: %s: the tokenizer has %d tokens but the model only %d", path, n, hc.VocabSize)
	}
	return l, nil
}

// checkAllRead refuses a GGUF tensor the model of mc would not read (a
// bias the architecture has no place for, say): it would be dropped.
func checkAllRead(h *gguf.HF, mc model.Config, path string) error {
	source := make(map[string]string, len(h.Tensors))
	names := make([]string, len(h.Tensors))
	for i, t := range h.Tensors {
		names[i], source[t.Name] = t.Name, t.Source
	}
	unread, err := hf.Unread(mc, names)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if len(unread) > 0 {
		more := ""
		if len(unread) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(unread)-1)
		}
		return fmt.Errorf("checkpoint: %s: tensor %q (%s) is not part of the model its metadata describes%s", path, source[unread[0]], unread[0], more)
	}
	return nil
}

// gemma3ChatTemplate is the chat template Gemma 3's instruction-tuned
// models publish in their tokenizer_config.json; GGUF files of them may
// carry none.
//
//go:embed gemma3_chat_template.jinja
var gemma3ChatTemplate string

// endOfTurn are the end-of-turn tokens of the chat formats rlvr knows; the
// one a vocabulary has joins EOS among the tokens that stop generation.
var endOfTurn = []string{"<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end▁of▁sentence|>"}

// ggufTokenizerFiles are the Hugging Face tokenizer files of a GGUF model:
// tokenizer.json and tokenizer_config.json built from its metadata (with
// Gemma 3's published chat template when a gemma3 file has none) and a
// generation_config.json whose eos_token_id lists EOS and the end-of-turn
// token.
func ggufTokenizerFiles(hc *hfconfig.Config, v tokenizer.GGUFVocab) (map[string][]byte, error) {
	if v.ChatTemplate == "" && hc.IsGemma3() {
		v.ChatTemplate = gemma3ChatTemplate
	}
	tj, cj, err := tokenizer.HFFilesFromGGUF(v)
	if err != nil {
		return nil, err
	}
	gen := map[string]any{}
	if v.BOS >= 0 {
		gen["bos_token_id"] = v.BOS
	}
	if v.PAD >= 0 {
		gen["pad_token_id"] = v.PAD
	}
	var eos []int
	if v.EOS >= 0 {
		eos = append(eos, v.EOS)
	}
	if v.EOT >= 0 && v.EOT != v.EOS {
		eos = append(eos, v.EOT)
	}
	for id, t := range v.Tokens {
		for _, end := range endOfTurn {
			if t == end && id != v.EOS && id != v.EOT && strings.Contains(v.ChatTemplate, end) {
				eos = append(eos, id)
			}
		}
	}
	if len(eos) > 0 {
		gen["eos_token_id"] = eos
	}
	gj, err := json.MarshalIndent(gen, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": cj, "generation_config.json": append(gj, '\n')}, nil
}

// filesTokenizer builds the tokenizer of ggufTokenizerFiles.
func filesTokenizer(files map[string][]byte) (*tokenizer.Tokenizer, error) {
	tok, err := tokenizer.Parse(files["tokenizer.json"])
	if err != nil {
		return nil, err
	}
	cfg, err := tokenizer.ParseConfig(files["tokenizer_config.json"])
	if err != nil {
		return nil, err
	}
	return tok.WithConfig(cfg)
}

// GGUFTokenizerFiles reads the .gguf file at path and returns its
// tokenizer files by name (see [TokenizerFiles]).
func GGUFTokenizerFiles(path string) (map[string][]byte, error) {
	h, hc, v, err := OpenGGUF(path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	files, err := ggufTokenizerFiles(hc, v)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	return files, nil
}
