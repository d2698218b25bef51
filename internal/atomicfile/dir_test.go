package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// stage makes a staged directory for dir holding files.
func stage(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	tmp, err := StageDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

func keepSame(staged string) func(string) (bool, error) {
	return func(dir string) (bool, error) { return SameTree(staged, dir) }
}

// TestPublishDir: a staged directory replaces a missing or empty one; over
// one with contents, existing keeps it or has it replaced, or refuses,
// when the staged directory is left to the caller.
func TestPublishDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "model")
	one := map[string]string{"config.json": "{}", "model.safetensors": "weights"}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	staged := stage(t, dir, one)
	if st, _ := os.Stat(staged); st.Mode().Perm() != 0o755 || !strings.HasPrefix(filepath.Base(staged), ".model.tmp-") {
		t.Fatalf("staged %s with mode %v", staged, st.Mode())
	}
	if kept, err := PublishDir(staged, dir, nil); err != nil || kept {
		t.Fatalf("over an empty directory: kept %v, %v", kept, err)
	}
	// The same files again: kept.
	staged = stage(t, dir, one)
	if kept, err := PublishDir(staged, dir, keepSame(staged)); err != nil || !kept {
		t.Fatalf("the same files: kept %v, %v", kept, err)
	}
	// Other files: refused, then replaced.
	two := map[string]string{"config.json": "{}", "model.safetensors": "other"}
	refuse := errors.New("refused")
	staged = stage(t, dir, two)
	if _, err := PublishDir(staged, dir, func(string) (bool, error) { return false, refuse }); !errors.Is(err, refuse) {
		t.Fatalf("refusing: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); string(b) != "weights" {
		t.Fatalf("a refused publish changed the directory: %q", b)
	}
	if err := os.RemoveAll(staged); err != nil {
		t.Fatal(err)
	}
	staged = stage(t, dir, two)
	if kept, err := PublishDir(staged, dir, keepSame(staged)); err != nil || kept {
		t.Fatalf("other files: kept %v, %v", kept, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.safetensors")); string(b) != "other" {
		t.Fatalf("not replaced: %q", b)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Fatalf("left beside the directory: %v", entries)
	}
}

// TestPublishDirConcurrently: processes publishing the same files at once
// all succeed, one publishing and the others keeping its result.
func TestPublishDirConcurrently(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "model")
	files := map[string]string{"config.json": "{}", "model.safetensors": strings.Repeat("w", 3<<20)}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	published := make([]bool, len(errs))
	for i := range errs {
		staged := stage(t, dir, files)
		wg.Go(func() {
			var kept bool
			kept, errs[i] = PublishDir(staged, dir, keepSame(staged))
			published[i] = !kept
		})
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("publisher %d: %v", i, err)
		}
		if published[i] {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d publishers renamed their directory into place, want 1", n)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Fatalf("left beside the directory: %v", entries)
	}
}

func TestSameTree(t *testing.T) {
	root := t.TempDir()
	write := func(dir string, files map[string]string) string {
		dir = filepath.Join(root, dir)
		for name, text := range files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	a := write("a", map[string]string{"x": "1", "sub/y": strings.Repeat("2", 3<<20)})
	for _, tc := range []struct {
		files map[string]string
		same  bool
	}{
		{map[string]string{"x": "1", "sub/y": strings.Repeat("2", 3<<20)}, true},
		{map[string]string{"x": "1", "sub/y": strings.Repeat("2", 3<<20-1) + "3"}, false},
		{map[string]string{"x": "1"}, false},
		{map[string]string{"x": "1", "sub/y": strings.Repeat("2", 3<<20), "z": ""}, false},
		{map[string]string{"x": "1", "sub/z": strings.Repeat("2", 3<<20)}, false},
	} {
		b := write(t.Name()+"b", tc.files)
		if same, err := SameTree(a, b); err != nil || same != tc.same {
			t.Errorf("%v: same %v, %v", tc.files, same, err)
		}
		os.RemoveAll(b)
	}
	if _, err := SameTree(a, filepath.Join(root, "missing")); err == nil {
		t.Error("a missing directory compared")
	}
}
