// Package worldmodel holds the built-in world's pretrained models, kept in
// the repository and embedded in the binary, so that a fresh machine runs
// the world's commands at once instead of pretraining first (ten minutes
// on two cores for world version 1, an hour for version 2).
//
// Each world version's model is a directory vN: what `rlvr pretrain
// --world N` writes for that version's configuration (train.WorldPretrain):
// a complete Hugging Face model directory (config.json, model.safetensors in
// float32, the byte tokenizer's tokenizer.json and tokenizer_config.json)
// and pretrain.json, the training run's train.PretrainResult, with their
// SHA-256 sums in SHA256SUMS, and in CONFIG_HASH the hash of the
// configuration they were trained from (train.ConfigHash).
// train.EnsurePretrained installs a model into the cache with [Install]
// when asked for a model of an embedded configuration ([Lookup]), and
// trains as before for any other.
//
// # Regenerating
//
// Pretraining is deterministic for a seed and a thread count: the same
// configuration on the same number of threads gives bit-identical
// weights on any machine with the same GEMM kernels. When a version's
// pretraining configuration, the world's corpus or the engine's numerics
// change, regenerate its files:
//
//	go generate ./worldmodel                                  # version 1, about ten minutes on two cores
//	cd worldmodel && go run gen.go -threads 2 -world 2       # version 2, about an hour
//
// which runs gen.go: it pretrains the version's configuration on 2
// threads and writes the files into vN. A test of package train fails
// while an embedded version's hash differs from its configuration's.
package worldmodel

//go:generate go run gen.go -threads 2 -world 1

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
	"regexp"
	"slices"
	"strconv"
	"strings"

	"rlvr/internal/atomicfile"
)

//go:embed v*
var files embed.FS

// Dir is the directory of a world version's model in the package.
func Dir(version int) string { return "v" + strconv.Itoa(version) }

// Versions lists the world versions whose model is embedded, ascending.
func Versions() []int {
	entries, _ := fs.ReadDir(files, ".") // embedded: it always reads
	var vs []int
	for _, e := range entries {
		if v, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "v")); err == nil && e.IsDir() && Dir(v) == e.Name() {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs
}

// FS returns the embedded files of version's model, [Files], [SumsFile]
// and [HashFile]; nil when no model of that version is embedded.
func FS(version int) fs.FS {
	if !slices.Contains(Versions(), version) {
		return nil
	}
	sub, _ := fs.Sub(files, Dir(version)) // a valid name: it always succeeds
	return sub
}

// ConfigHash is the configuration hash in version's [HashFile], "" when no
// model of that version is embedded or the file does not hold one.
func ConfigHash(version int) string {
	fsys := FS(version)
	if fsys == nil {
		return ""
	}
	h, _ := ReadHash(fsys)
	return h
}

// Lookup returns the embedded model trained from the configuration whose
// train.ConfigHash is hash.
func Lookup(hash string) (fs.FS, bool) {
	for _, v := range Versions() {
		if ConfigHash(v) == hash {
			return FS(v), true
		}
	}
	return nil, false
}

// HashFile holds the train.ConfigHash of the configuration a model
// directory was trained from: twelve hexadecimal digits and a newline.
const HashFile = "CONFIG_HASH"

var hashPattern = regexp.MustCompile(`^[0-9a-f]{12}$`)

// ReadHash reads fsys's [HashFile].
func ReadHash(fsys fs.FS) (string, error) {
	data, err := fs.ReadFile(fsys, HashFile)
	if err != nil {
		return "", fmt.Errorf("worldmodel: %w", err)
	}
	h := strings.TrimSuffix(string(data), "\n")
	if !hashPattern.MatchString(h) {
		return "", fmt.Errorf("worldmodel: %s: %q is not twelve hexadecimal digits", HashFile, data)
	}
	return h, nil
}

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
