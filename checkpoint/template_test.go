package checkpoint

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
)

// chatModelDir writes a model of the built-in world with the byte
// tokenizer's files, for a chat template to be added beside them.
func chatModelDir(t *testing.T) string {
	t.Helper()
	cfg := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	cfg.Layers = 1
	m, _ := model.New(cfg, 1)
	dir := filepath.Join(t.TempDir(), "chat")
	if err := hf.Save(dir, m, hf.Config(m.Config, []int32{tokenizer.ByteBOS}, []int32{tokenizer.ByteEOS}), safetensors.F32); err != nil {
		t.Fatal(err)
	}
	if err := tokenizer.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// setConfigTemplate sets tokenizer_config.json's chat_template in dir.
func setConfigTemplate(t *testing.T, dir, source string) {
	t.Helper()
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chat_template"] = source
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deepTemplate does not parse: it nests past the parser's limit on its
// second line.
var deepTemplate = "Hello\n{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}"

// TestOpenRefusesBrokenTemplate checks that a chat template that does not
// parse fails Open with an error naming the file it is in and its line,
// instead of leaving the model without a template.
func TestOpenRefusesBrokenTemplate(t *testing.T) {
	dir := chatModelDir(t)
	setConfigTemplate(t, dir, deepTemplate)
	_, err := Open(dir, "")
	if want := filepath.Join(dir, "tokenizer_config.json") + ": chat_template: line 2: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %.300v, want one naming %q", err, want)
	}

	dir = chatModelDir(t)
	if err := os.WriteFile(filepath.Join(dir, tokenizer.ChatTemplateFile), []byte(deepTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, "")
	if want := filepath.Join(dir, tokenizer.ChatTemplateFile) + ": line 2: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %.300v, want one naming %q", err, want)
	}
}

// TestChatErrorsNameTheirFile checks that a template that parses but
// fails to render (a macro calling itself through an argument, which
// used to overflow the stack) gives an error naming the template's file
// and line, for a Hugging Face directory and for a GGUF file.
func TestChatErrorsNameTheirFile(t *testing.T) {
	recursive := "{% macro a(f) %}{{ f(f) }}{% endmacro %}{% macro z() %}{% endmacro %}\n{{ a(a) }}"
	msgs := []tokenizer.Message{{Role: "user", Content: "Hi"}}

	dir := chatModelDir(t)
	setConfigTemplate(t, dir, recursive)
	l, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Chat(msgs)
	if want := filepath.Join(dir, "tokenizer_config.json") + ": chat_template: line 1: "; !errors.Is(err, tokenizer.ErrChatTemplateLimit) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want a limit error naming %q", err, want)
	}

	// A GGUF's template comes from its metadata, not from the
	// tokenizer_config.json rlvr derives from it.
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(t.TempDir(), "model.gguf")
	var g Loaded
	if err := useTokenizer(&g, tok, ggufTemplateFile(gguf, "", tok)); err != nil {
		t.Fatal(err)
	}
	_, err = g.Chat(msgs)
	if want := gguf + ": tokenizer.chat_template: line 1: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one naming %q", err, want)
	}
	setConfigTemplate(t, dir, deepTemplate)
	if tok, err = tokenizer.Load(dir); err != nil {
		t.Fatal(err)
	}
	err = useTokenizer(&g, tok, ggufTemplateFile(gguf, "", tok))
	if want := gguf + ": tokenizer.chat_template: line 2: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %.300v, want one naming %q", err, want)
	}
	// A tokenizer given to replace the GGUF's is named instead.
	err = useTokenizer(&g, tok, ggufTemplateFile(gguf, dir, tok))
	if want := filepath.Join(dir, "tokenizer_config.json") + ": chat_template: line 2: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %.300v, want one naming %q", err, want)
	}
}
