// Package checkpoint opens the models rlvr samples from and trains: a
// Hugging Face directory (config.json, model.safetensors, tokenizer.json),
// a llama2.c checkpoint with its tokenizer, or a model of the built-in
// world (byte tokenizer). It pairs each model with its tokenizer, chat
// template and stop tokens, so commands and servers treat them alike.
//
// It also writes model directories: [InitRandom] builds a randomly
// initialised model of a named [Shape] around a tokenizer, and
// [CopyTokenizerFiles] carries a model's tokenizer files over to a
// checkpoint derived from it, so that every directory rlvr writes is a
// complete Hugging Face model.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/hfconfig"
	"rlvr/format/llama2c"
	"rlvr/format/tokenizer"
)

// Loaded is a model ready to sample from or train, with what it takes to
// turn text into its tokens and back.
type Loaded struct {
	Name      string
	Model     *model.Model
	Tokenizer tokenizer.Encoder
	// Chat renders a conversation as a prompt ending with the generation
	// prompt; nil when the model has no chat template.
	Chat func(msgs []tokenizer.Message) (string, error)
	// AddBOS says prompts start with the BOS token (llama2.c, Llama-2).
	AddBOS bool
	// StopTokens end a generation: EOS, and the chat template's
	// end-of-turn token.
	StopTokens []int32
	// Dir is the Hugging Face directory the model was read from, whose
	// tokenizer files a checkpoint of it should carry (see
	// [CopyTokenizerFiles]); "" for a llama2.c checkpoint.
	Dir string
	// HFConfig is Dir's config.json; nil for a llama2.c checkpoint.
	HFConfig *hfconfig.Config
}

// Encode turns a prompt into tokens, with BOS first when the model wants it
// and the text does not already start with it: a chat template that writes
// its own BOS (Gemma's) gets one, as transformers' apply_chat_template gives.
func (l *Loaded) Encode(text string) []int32 {
	ids := l.Tokenizer.Encode(text)
	bos, ok := l.Tokenizer.BOS()
	if !ok || !l.AddBOS || (len(ids) > 0 && ids[0] == bos) {
		return ids
	}
	return append([]int32{bos}, ids...)
}

// Decode turns generated tokens into text, without special tokens.
func (l *Loaded) Decode(ids []int32) string {
	return l.Tokenizer.DecodeSkipSpecial(ids)
}

// Open loads the model at path:
//   - a directory with config.json: a Hugging Face checkpoint, with the
//     tokenizer.json (and tokenizer_config.json) beside it, or the byte
//     tokenizer of the built-in world when there is none and the vocabulary
//     matches it (models saved before rlvr wrote the byte tokenizer's
//     tokenizer.json); a tokenizer.json that describes the byte tokenizer
//     (see [tokenizer.Tokenizer.ByteTokenizer]) gives the native
//     [tokenizer.ByteTokenizer];
//   - a .gguf file: a llama.cpp model of the llama or gemma3
//     architecture, its tokenizer and chat template read from its metadata;
//   - a .bin file: a llama2.c checkpoint; tokenizerPath names its
//     tokenizer (default: tok512.bin or tokenizer.bin beside it).
func Open(path, tokenizerPath string) (*Loaded, error) {
	f, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	switch f {
	case HF:
		return openHF(path, tokenizerPath)
	case Llama2C:
		return openLlama2C(path, tokenizerPath)
	default:
		return openGGUF(path, tokenizerPath)
	}
}

// Format is a kind of model file Open reads.
type Format int

const (
	HF      Format = iota // a Hugging Face directory
	GGUF                  // a llama.cpp .gguf file
	Llama2C               // a llama2.c .bin file
)

// FormatOf tells which kind of model path is, from its name and, for a
// directory, its config.json, without reading the weights: commands check
// a --model flag with it before any work.
func FormatOf(path string) (Format, error) {
	st, err := os.Stat(path)
	switch {
	case path == "":
		return 0, fmt.Errorf("checkpoint: the model path is empty")
	case err != nil:
		// The path's own error, named once: "m.gguf: no such file or directory".
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, fmt.Errorf("checkpoint: %s: %w", path, err)
	case st.IsDir():
		if cs, err := os.Stat(filepath.Join(path, "config.json")); err != nil || !cs.Mode().IsRegular() {
			return 0, fmt.Errorf("checkpoint: %s has no config.json: not a Hugging Face model directory", path)
		}
		return HF, nil
	case st.Mode().IsRegular() && strings.HasSuffix(path, ".bin"):
		return Llama2C, nil
	case st.Mode().IsRegular() && strings.HasSuffix(path, ".gguf"):
		return GGUF, nil
	}
	return 0, fmt.Errorf("checkpoint: %s is neither a Hugging Face directory, a .gguf file nor a llama2.c .bin file", path)
}

// Name is the name Open gives the model at path, found without reading
// it: the path's last element without a .bin or .gguf suffix. (A Hugging Face
// directory whose own name ends in .bin is the exception: Open keeps the
// suffix.)
func Name(path string) string {
	base := filepath.Base(filepath.Clean(path))
	if strings.HasSuffix(base, ".gguf") {
		return strings.TrimSuffix(base, ".gguf")
	}
	return strings.TrimSuffix(base, ".bin")
}

func openHF(dir, tokenizerPath string) (*Loaded, error) {
	m, hc, err := hf.Load(dir)
	if err != nil {
		return nil, err
	}
	l, err := openHFText(dir, tokenizerPath, hc)
	if err != nil {
		return nil, err
	}
	l.Model = m
	return l, nil
}

// OpenText loads the text side of the Hugging Face model in dir — its
// config.json and tokenizer, no weights — for a run whose weights live on
// a remote training service. Loaded.Model is nil; HFConfig gives the
// vocabulary and the context length.
func OpenText(dir string) (*Loaded, error) {
	hc, err := hfconfig.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	return openHFText(dir, "", hc)
}

// openHFText reads the tokenizer of a Hugging Face directory whose
// config.json is hc.
func openHFText(dir, tokenizerPath string, hc *hfconfig.Config) (*Loaded, error) {
	l := &Loaded{Name: filepath.Base(filepath.Clean(dir)), Dir: dir, HFConfig: hc}
	if tokenizerPath == "" {
		tokenizerPath = filepath.Join(dir, "tokenizer.json")
	}
	tok, err := tokenizer.Load(tokenizerPath)
	switch {
	case err == nil:
		if err := useTokenizer(l, tok, templateFile(tokenizerPath, tok)); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		ids, err := generationEOS(filepath.Join(dir, "generation_config.json"), data, hc.VocabSize)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			l.StopTokens = appendNew(l.StopTokens, id)
		}
	case errors.Is(err, fs.ErrNotExist) && hc.VocabSize == tokenizer.NewByteTokenizer().VocabSize():
		// A model of the built-in world: bytes plus BOS, EOS and PAD.
		l.Tokenizer, l.AddBOS = tokenizer.NewByteTokenizer(), true
	default:
		return nil, err
	}
	if eos, ok := l.Tokenizer.EOS(); ok {
		l.StopTokens = appendNew(l.StopTokens, eos)
	}
	if v := l.Tokenizer.VocabSize(); v > hc.VocabSize {
		return nil, fmt.Errorf("checkpoint: %s: the tokenizer has %d tokens but the model only %d", dir, v, hc.VocabSize)
	}
	return l, nil
}

// useTokenizer gives l the tokenizer tok, with what its config says: BOS,
// the chat template and the end-of-turn tokens. templateFile names where
// the chat template came from, in its errors. A template that does not
// parse is an error naming that file and the template's line: taking the
// model for one without a template would silently prompt it without its
// chat format.
func useTokenizer(l *Loaded, tok *tokenizer.Tokenizer, templateFile string) error {
	l.Tokenizer = tok
	if bt, ok := tok.ByteTokenizer(); ok {
		// The file describes the byte tokenizer; the native one is
		// faster and encodes and decodes identically.
		l.Tokenizer = bt
	}
	l.AddBOS = tok.AddBOS()
	cfg := tok.Config()
	if cfg == nil || cfg.ChatTemplateSource == "" {
		return nil
	}
	tmpl, err := tokenizer.ParseChatTemplateFile(templateFile, cfg.ChatTemplateSource)
	if err != nil {
		return err
	}
	tmpl.BOSToken, tmpl.EOSToken = cfg.BOSToken, cfg.EOSToken
	l.Chat = func(msgs []tokenizer.Message) (string, error) { return tokenizer.RenderChat(tmpl, msgs, true) }
	// Generation stops at the end of the assistant's turn: the template's
	// end-of-turn strings that are single tokens (EOS joins them apart).
	for _, end := range tmpl.StopStrings {
		if id, ok := tok.TokenID(end); ok {
			l.StopTokens = appendNew(l.StopTokens, id)
		}
	}
	return nil
}

// templateFile names the file the chat template of tok, loaded from
// tokenizerPath (a tokenizer.json or its directory), came from:
// chat_template.jinja beside it when that is the template, else
// tokenizer_config.json's chat_template.
func templateFile(tokenizerPath string, tok *tokenizer.Tokenizer) string {
	dir := tokenizerPath
	if st, err := os.Stat(tokenizerPath); err != nil || !st.IsDir() {
		dir = filepath.Dir(tokenizerPath)
	}
	jinja := filepath.Join(dir, tokenizer.ChatTemplateFile)
	if data, err := os.ReadFile(jinja); err == nil && tok.Config() != nil && string(data) == tok.Config().ChatTemplateSource {
		return jinja
	}
	return filepath.Join(dir, "tokenizer_config.json") + ": chat_template"
}

// ggufTemplateFile names the file the chat template of a GGUF model came
// from: its metadata, or the tokenizer given to replace it.
func ggufTemplateFile(path, tokenizerPath string, tok *tokenizer.Tokenizer) string {
	if tokenizerPath != "" {
		return templateFile(tokenizerPath, tok)
	}
	return path + ": tokenizer.chat_template"
}

func openLlama2C(path, tokenizerPath string) (*Loaded, error) {
	ck, err := llama2c.ReadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	m, err := ck.Model()
	if err != nil {
		return nil, err
	}
	if tokenizerPath == "" {
		for _, name := range []string{"tok512.bin", "tokenizer.bin"} {
			p := filepath.Join(filepath.Dir(path), name)
			if _, err := os.Stat(p); err == nil {
				tokenizerPath = p
				break
			}
		}
		if tokenizerPath == "" {
			return nil, fmt.Errorf("checkpoint: %s: no tokenizer beside it; pass one", path)
		}
	}
	tok, err := llama2c.ReadTokenizer(tokenizerPath, ck.Config.Vocab)
	if err != nil {
		return nil, err
	}
	return &Loaded{Name: Name(path), Model: m, Tokenizer: runCTokenizer{tok},
		AddBOS: true, StopTokens: []int32{llama2c.BOS, llama2c.EOS}}, nil
}

// runCTokenizer adapts a llama2.c tokenizer to tokenizer.Encoder. BOS and
// EOS are its only special tokens; BOS also marks the end of a story, so it
// stops generation as run.c does.
type runCTokenizer struct{ t *llama2c.Tokenizer }

func (r runCTokenizer) Encode(text string) []int32 { return r.t.Encode(text, false, false) }
func (r runCTokenizer) EncodeWithSpecial(text string, _ bool) []int32 {
	return r.t.Encode(text, false, false)
}
func (r runCTokenizer) Decode(ids []int32) string            { return r.decode(ids) }
func (r runCTokenizer) DecodeSkipSpecial(ids []int32) string { return r.decode(ids) }
func (r runCTokenizer) VocabSize() int                       { return r.t.VocabSize() }
func (r runCTokenizer) BOS() (int32, bool)                   { return llama2c.BOS, true }
func (r runCTokenizer) EOS() (int32, bool)                   { return llama2c.EOS, true }
func (r runCTokenizer) PAD() (int32, bool)                   { return 0, false }

// decode concatenates the pieces of ids as run.c prints a continuation:
// a piece keeps its leading space unless it follows BOS, and BOS and EOS
// print nothing.
func (r runCTokenizer) decode(ids []int32) string {
	var b strings.Builder
	prev := int32(-1)
	for _, id := range ids {
		if id != llama2c.BOS && id != llama2c.EOS {
			b.WriteString(r.t.Decode(prev, id))
		}
		prev = id
	}
	return b.String()
}

// appendNew appends id unless ids has it.
func appendNew(ids []int32, id int32) []int32 {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// generationEOS reads eos_token_id, a number or a list of numbers, from
// the generation_config.json path holds (data); an empty file or a missing
// field gives none. An id outside the vocabulary of vocab tokens is an
// error: generation would never stop at it.
func generationEOS(path string, data []byte, vocab int) ([]int32, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var cfg struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %v", path, err)
	}
	if len(cfg.EOS) == 0 || string(cfg.EOS) == "null" {
		return nil, nil
	}
	var list []int32
	var one int32
	if json.Unmarshal(cfg.EOS, &one) == nil {
		list = []int32{one}
	} else if err := json.Unmarshal(cfg.EOS, &list); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: eos_token_id: want a token id or a list of them, got %s", path, cfg.EOS)
	}
	for _, id := range list {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("checkpoint: %s: eos_token_id %d is outside the model's vocabulary [0, %d)", path, id, vocab)
		}
	}
	return list, nil
}
