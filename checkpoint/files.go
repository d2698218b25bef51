package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	for _, name := range TokenizerFiles {
		from := filepath.Join(src, name)
		st, err := os.Stat(from)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return copied, fmt.Errorf("checkpoint: %w", err)
		}
		if !st.Mode().IsRegular() {
			return copied, fmt.Errorf("checkpoint: %s is not a regular file", from)
		}
		if !same {
			if err := atomicfile.Copy(from, filepath.Join(dst, name)); err != nil {
				return copied, fmt.Errorf("checkpoint: %w", err)
			}
		}
		copied = append(copied, name)
	}
	return copied, nil
}
