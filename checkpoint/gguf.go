package checkpoint

import (
	"fmt"
	"path/filepath"

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
	m, err := model.NewEmpty(mc)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	if err := hf.Fill(m, h.Get, path); err != nil {
		return nil, err
	}
	l := &Loaded{Name: Name(path), Model: m, HFConfig: hc, Dir: filepath.Dir(path)}
	var tok *tokenizer.Tokenizer
	if tokenizerPath != "" {
		tok, err = tokenizer.Load(tokenizerPath)
	} else {
		tok, err = tokenizer.FromGGUF(v)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", path, err)
	}
	useTokenizer(l, tok)
	if eos, ok := l.Tokenizer.EOS(); ok {
		l.StopTokens = append(l.StopTokens, int32(eos))
	}
	if n := l.Tokenizer.VocabSize(); n > hc.VocabSize {
		return nil, fmt.Errorf("checkpoint: %s: the tokenizer has %d tokens but the model only %d", path, n, hc.VocabSize)
	}
	return l, nil
}
