// Package modeltest writes models for tests: random weights of a named
// shape around a real tokenizer, or a tiny chat model over the byte
// tokenizer, each a complete Hugging Face directory that every part of
// rlvr opens like a real checkpoint.
package modeltest

import (
	"os"
	"path/filepath"
	"testing"

	"rlvr/checkpoint"
	"rlvr/format/tokenizer"
)

// Random writes a model of the named shape (checkpoint.LookupShape) with
// weights drawn from seed 1, around the tokenizer files in tokDir, to a
// temporary directory, and returns the directory.
func Random(t testing.TB, tokDir, shape string) string {
	t.Helper()
	s, err := checkpoint.LookupShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), shape)
	if _, err := checkpoint.InitRandom(checkpoint.InitOptions{Tokenizer: tokDir, Shape: s, Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ChatML is a ChatML chat template (Qwen's form): each message between
// <|im_start|>role and <|im_end|>, then the assistant's opening.
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// ByteChat writes a small random Llama model over the byte tokenizer with
// the ChatML template and a context of maxSeq tokens to dir: a chat model
// that trains and samples in milliseconds, and needs no files beside the
// repository.
func ByteChat(t testing.TB, dir string, maxSeq int) { byteModel(t, dir, maxSeq, ChatML) }

// Byte writes the model ByteChat writes without a chat template: a base
// model, which is only ever asked by completion.
func Byte(t testing.TB, dir string, maxSeq int) { byteModel(t, dir, maxSeq, "") }

// byteModel writes a small random Llama model over the byte tokenizer,
// with the chat template chat unless it is "", to dir.
func byteModel(t testing.TB, dir string, maxSeq int, chat string) {
	t.Helper()
	tokDir := t.TempDir()
	if err := tokenizer.WriteByteTokenizer(tokDir); err != nil {
		t.Fatal(err)
	}
	if chat != "" {
		if err := os.WriteFile(filepath.Join(tokDir, tokenizer.ChatTemplateFile), []byte(chat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shape, err := checkpoint.LookupShape("llama-tiny")
	if err != nil {
		t.Fatal(err)
	}
	shape.Dim, shape.Heads, shape.KVHeads, shape.Layers, shape.Hidden, shape.MaxSeq = 16, 2, 1, 1, 32, maxSeq
	if _, err := checkpoint.InitRandom(checkpoint.InitOptions{Tokenizer: tokDir, Shape: shape, Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
}
