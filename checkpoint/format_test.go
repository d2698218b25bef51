package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFormatOf classifies each kind of path Open takes, and names the
// path in every refusal.
func TestFormatOf(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("hf/config.json")
	for _, c := range []struct {
		path string
		want Format
		err  string // "" when it is a model
	}{
		{filepath.Join(dir, "hf"), HF, ""},
		{write("m.gguf"), GGUF, ""},
		{write("m.bin"), Llama2C, ""},
		{dir, 0, "has no config.json"},
		{write("m.txt"), 0, "is neither"},
		{filepath.Join(dir, "nosuch.gguf"), 0, "nosuch.gguf: no such file"},
		{"", 0, "empty"},
	} {
		f, err := FormatOf(c.path)
		switch {
		case c.err == "" && (err != nil || f != c.want):
			t.Errorf("%s: %v, %v; want %v", c.path, f, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one saying %q", c.path, err, c.err)
		}
	}
}
