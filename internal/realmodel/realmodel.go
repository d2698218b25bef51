// Package realmodel locates, for tests and benchmarks, the real pretrained
// models scripts/models.sh fetches from PyPI into rlvr's cache. They are
// never part of the repository. When one is missing, a test is skipped
// with a message naming the command, or fails when CI is "true" (CI runs
// scripts/models.sh first).
package realmodel

import (
	"os"
	"path/filepath"
	"testing"
)

// The GGUF files scripts/models.sh leaves in Dir.
const (
	SmolLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf" // Llama architecture, Q4_1/Q8_0
	Gemma3  = "gemma-3-270m-q4_k_m.gguf"        // Gemma 3, Q4_K/Q5_0/Q6_K/Q8_0

	// SmolLM2Imported and Gemma3Imported are the Hugging Face
	// directories rlvr import writes from the GGUFs.
	SmolLM2Imported = "SmolLM2-135M-Instruct.Q4_1"
	Gemma3Imported  = "gemma-3-270m-q4_k_m"
)

// Dir is where scripts/models.sh puts the models: $RLVR_CACHE/models,
// else rlvr/models in the user's cache directory.
func Dir() string {
	if d := os.Getenv("RLVR_CACHE"); d != "" {
		return filepath.Join(d, "models")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rlvr", "models")
	}
	return filepath.Join(os.TempDir(), "rlvr-cache", "models")
}

// Path returns the path of name (a file or directory) in Dir. If it does
// not exist, Path calls t.Fatal when CI=true and t.Skip otherwise.
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(), name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("realmodel: %v (CI=true requires the real models: run scripts/models.sh)", err)
		}
		t.Skipf("realmodel: %s is missing: run scripts/models.sh to fetch the real models", p)
	}
	return p
}
