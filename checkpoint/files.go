package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"rlvr/internal/atomicfile"
)

// TokenizerFiles are the files of a Hugging Face model directory that a
// model derived from it (a fine-tuned checkpoint, or a random model built
// around its tokenizer) keeps unchanged: the tokenizer, its configuration
// and chat template, the generation defaults, and the license they come
// under. The weights and config.json are not among them.
var TokenizerFiles = []string{
	"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
	"vocab.json", "merges.txt", "chat_template.jinja", "generation_config.json", "LICENSE",
}

// CopyTokenizerFiles copies those of [TokenizerFiles] that exist in src
// into dst, which must exist, and returns their names. Each file is
// replaced atomically. Copying a directory onto itself does nothing.
func CopyTokenizerFiles(src, dst string) ([]string, error) {
	ss, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if !ss.IsDir() {
		return nil, fmt.Errorf("checkpoint: %s is not a directory", src)
	}
	ds, err := os.Stat(dst)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	same := os.SameFile(ss, ds)
	var copied []string
	err = eachTokenizerFile(src, func(name, from string) error {
		if !same {
			if err := atomicfile.Copy(from, filepath.Join(dst, name)); err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
		}
		copied = append(copied, name)
		return nil
	})
	return copied, err
}

// ReadTokenizerFiles reads those of [TokenizerFiles] that exist in src,
// by name: what a saver keeps in memory when src may be gone by the time
// it writes them. A .gguf file src gives the files of its metadata.
func ReadTokenizerFiles(src string) (map[string][]byte, error) {
	if strings.HasSuffix(src, ".gguf") {
		return GGUFTokenizerFiles(src)
	}
	files := map[string][]byte{}
	err := eachTokenizerFile(src, func(name, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		files[name] = b
		return nil
	})
	return files, err
}

// eachTokenizerFile calls fn for each of [TokenizerFiles] present in src,
// in order, with its path; one that is not a regular file is an error.
func eachTokenizerFile(src string, fn func(name, path string) error) error {
	for _, name := range TokenizerFiles {
		path := filepath.Join(src, name)
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("checkpoint: %s is not a regular file", path)
		}
		if err := fn(name, path); err != nil {
			return err
		}
	}
	return nil
}
