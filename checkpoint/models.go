package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
)

// Models finds the models a command names by path: checkpoints on disk,
// and the built-in world's models, which live in rlvr's cache and are put
// there on first use. The packages above train cannot name the world's
// models themselves: the command that holds them all fills World and
// Install. The zero value knows no world model and opens what is on disk.
type Models struct {
	// World is the path of world version v's model, "" when there is no
	// such version.
	World func(v int) string
	// Versions are the world versions World knows.
	Versions []int
	// Install puts world version v's model at World(v), or says why it
	// cannot (a model that must be pretrained first).
	Install func(ctx context.Context, v int) error
}

// Path is the path of world version v's model, "" when there is no such
// version.
func (m Models) Path(v int) string {
	if m.World == nil {
		return ""
	}
	return m.World(v)
}

// Version is the world version whose model is at path, or 0.
func (m Models) Version(path string) int {
	for _, v := range m.Versions {
		if p := m.Path(v); p != "" && path == p {
			return v
		}
	}
	return 0
}

// Check says what is wrong with path as a model Open reads: a directory
// with a config.json, a .gguf file or a llama2.c .bin file; nil when
// nothing is. A world model not yet in the cache is left to Ensure, which
// installs it or explains how to get it. The error reads after the name
// of the flag that gave path.
func (m Models) Check(path string) error {
	if m.Version(path) != 0 {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	if path == "" {
		return errors.New("is empty")
	}
	if _, err := FormatOf(path); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "checkpoint: "))
	}
	return nil
}

// Ensure makes the model at path available when it is a world model that
// is not in the cache yet; any other path it leaves alone.
func (m Models) Ensure(ctx context.Context, path string) error {
	v := m.Version(path)
	if v == 0 {
		return nil
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return m.Install(ctx, v)
}

// Open opens the model at path with its tokenizer (see the package
// function Open), installing a world model first; the installation runs
// to its end whatever the caller's context.
func (m Models) Open(path, tokenizerPath string) (*Loaded, error) {
	if err := m.Ensure(context.Background(), path); err != nil {
		return nil, err
	}
	return Open(path, tokenizerPath)
}
