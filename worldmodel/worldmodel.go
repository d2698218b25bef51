// Package worldmodel is the built-in world's pretrained model, kept in the
// repository and embedded in the binary, so that a fresh machine runs the
// world's commands at once instead of pretraining for ten minutes first.
//
// The files are what `rlvr pretrain` writes for the default configuration
// (train.DefaultPretrain): a complete Hugging Face model directory
// (config.json, model.safetensors in float32, the byte tokenizer's
// tokenizer.json and tokenizer_config.json) and pretrain.json, the
// training run's train.PretrainResult, with their SHA-256 sums in
// SHA256SUMS. [ConfigHash] is the hash of the configuration they were
// trained from (train.ConfigHash); train.EnsurePretrained installs them
// into the cache with [Install] when asked for a model of that
// configuration, and trains as before for any other.
//
// # Regenerating
//
// Pretraining is deterministic for a seed and a thread count: the same
// configuration on the same number of threads gives bit-identical
// weights on any machine with the same GEMM kernels. When the default
// pretraining configuration, the world's corpus or the engine's numerics
// change, regenerate the files (about ten minutes on two cores):
//
//	go generate ./worldmodel
//
// which runs gen.go: it pretrains train.DefaultPretrain() on 2 threads,
// writes the files into this directory, and rewrites SHA256SUMS and
// confighash.go. A test of package train fails while ConfigHash differs
// from the default configuration's hash.
package worldmodel

//go:generate go run gen.go -threads 2

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"rlvr/internal/atomicfile"
)

//go:embed config.json model.safetensors tokenizer.json tokenizer_config.json pretrain.json SHA256SUMS
var files embed.FS

// FS returns the embedded files: [Files] and [SumsFile].
func FS() fs.FS { return files }

// Files are the files of the model directory, in the order [Install]
// writes them. pretrain.json comes last: a cache directory holding it is
// complete.
var Files = []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "pretrain.json"}

// SumsFile lists the SHA-256 sum of each of [Files], one "sum  name" line
// per file, as sha256sum writes it (so `sha256sum -c SHA256SUMS` checks
// them).
const SumsFile = "SHA256SUMS"

// Sums returns the contents of a [SumsFile] for the [Files] in fsys.
func Sums(fsys fs.FS) ([]byte, error) {
	var b bytes.Buffer
	for _, name := range Files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("worldmodel: %w", err)
		}
		h := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h[:]), name)
	}
	return b.Bytes(), nil
}

// readSums parses fsys's SumsFile, which must list exactly [Files].
func readSums(fsys fs.FS) (map[string]string, error) {
	data, err := fs.ReadFile(fsys, SumsFile)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: %w", err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 2*sha256.Size || name == "" {
			return nil, fmt.Errorf("worldmodel: %s:%d: want \"<sha-256 in hex>  <file>\", got %q", SumsFile, line, sc.Text())
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("worldmodel: %s:%d: %s listed twice", SumsFile, line, name)
		}
		sums[name] = sum
	}
	for _, name := range Files {
		if _, ok := sums[name]; !ok {
			return nil, fmt.Errorf("worldmodel: %s does not list %s", SumsFile, name)
		}
	}
	if len(sums) != len(Files) {
		return nil, fmt.Errorf("worldmodel: %s lists %d files, want %d (%s)", SumsFile, len(sums), len(Files), strings.Join(Files, ", "))
	}
	return sums, nil
}

// readVerified reads name from fsys and checks it against sums.
func readVerified(fsys fs.FS, sums map[string]string, name string) ([]byte, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: %w", err)
	}
	h := sha256.Sum256(data)
	if got := hex.EncodeToString(h[:]); got != sums[name] {
		return nil, fmt.Errorf("worldmodel: %s: SHA-256 %s does not match %s (%s)", name, got, SumsFile, sums[name])
	}
	return data, nil
}

// Verify checks every one of [Files] in fsys against fsys's [SumsFile].
func Verify(fsys fs.FS) error {
	sums, err := readSums(fsys)
	if err != nil {
		return err
	}
	for _, name := range Files {
		if _, err := readVerified(fsys, sums, name); err != nil {
			return err
		}
	}
	return nil
}

// Install writes [Files] from fsys (normally [FS]) into dir, creating it.
// Each file is checked against fsys's [SumsFile] before it is written, and
// written atomically; a mismatch is an error naming the file, and leaves
// the files after it unwritten.
func Install(fsys fs.FS, dir string) error {
	sums, err := readSums(fsys)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("worldmodel: %w", err)
	}
	for _, name := range Files {
		data, err := readVerified(fsys, sums, name)
		if err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, name), data); err != nil {
			return fmt.Errorf("worldmodel: %w", err)
		}
	}
	return nil
}
