package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesOrLeavesAlone(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteBytes(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("a failed write changed the file to %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files left in the directory, want 1", len(entries))
	}
	if err := WriteBytes(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("file holds %q", b)
	}
}

func TestCopy(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(from, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(to, []byte("old and longer"), 0o644)
	if err := Copy(from, to); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(to); string(b) != "weights" {
		t.Fatalf("copied %q", b)
	}
	if err := Copy(filepath.Join(dir, "missing"), to); err == nil {
		t.Fatal("copying a missing file succeeded")
	}
	if b, _ := os.ReadFile(to); string(b) != "weights" {
		t.Fatalf("a failed copy changed the target: %q", b)
	}
}
