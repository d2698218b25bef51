// Package modeltest writes models for tests: random weights of a named
// shape around a real tokenizer, a complete Hugging Face directory that
// every part of rlvr opens like a real checkpoint.
package modeltest

import (
	"path/filepath"
	"testing"

	"rlvr/checkpoint"
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
