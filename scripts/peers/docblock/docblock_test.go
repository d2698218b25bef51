package docblock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	page := "# Page\n\nprose\n<!-- begin a -->\nold a\n<!-- end a -->\nmore prose\n<!-- begin b -->\n<!-- end b -->\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Replace(path, map[string]string{"a": "new a\n", "b": "| b |\n"}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# Page\n\nprose\n<!-- begin a -->\nnew a\n<!-- end a -->\nmore prose\n<!-- begin b -->\n| b |\n<!-- end b -->\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	err := Replace(path, map[string]string{"c": "x"})
	if err == nil || !strings.Contains(err.Error(), "<!-- begin c -->") {
		t.Errorf("a missing block: %v", err)
	}
	if again, _ := os.ReadFile(path); string(again) != want {
		t.Errorf("a failed Replace changed the page")
	}
}
