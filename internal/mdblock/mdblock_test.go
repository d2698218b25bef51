package mdblock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "# t\n<!-- begin a -->\nold a\n<!-- end a -->\nkept\n<!-- begin b -->\n<!-- end b -->\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Replace(path, map[string]string{"a": "new a\n", "b": "| x |\n"}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# t\n<!-- begin a -->\nnew a\n<!-- end a -->\nkept\n<!-- begin b -->\n| x |\n<!-- end b -->\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	err := Replace(path, map[string]string{"c": "x\n"})
	if err == nil || !strings.Contains(err.Error(), "begin c") {
		t.Errorf("a missing block: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != want {
		t.Errorf("a failed Replace changed the file:\n%s", after)
	}
}
