package jsonl

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type record struct {
	Name string
	N    int
}

func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	in := []record{{"a<b", 1}, {"c", 2}}
	if err := Write(path, in); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "{\"Name\":\"a<b\",\"N\":1}\n{\"Name\":\"c\",\"N\":2}\n" {
		t.Errorf("file %q", b)
	}
	out, err := Read[record](path)
	if err != nil || !slices.Equal(in, out) {
		t.Errorf("read %v, %v; want %v", out, err, in)
	}
	if err := os.WriteFile(path, []byte("{\"N\":1}\n{\"N\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read[record](path); err == nil || !strings.Contains(err.Error(), "record 2") {
		t.Errorf("a bad second record: %v", err)
	}
}

// TestReadCompressed reads a gzip-compressed file as the plain one, and
// names a .gz file that is not gzip.
func TestReadCompressed(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte("{\"Name\":\"a\",\"N\":1}\n{\"Name\":\"b\",\"N\":2}\n"))
	zw.Close()
	path := filepath.Join(dir, "r.jsonl"+Compressed)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := Read[record](path); err != nil || !slices.Equal(out, []record{{"a", 1}, {"b", 2}}) {
		t.Errorf("read %v, %v", out, err)
	}
	plain := filepath.Join(dir, "plain.jsonl"+Compressed)
	if err := os.WriteFile(plain, []byte("{\"N\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read[record](plain); err == nil || !strings.Contains(err.Error(), plain) {
		t.Errorf("a .gz file that is not gzip: %v", err)
	}
}

// TestTypeName names every kind of value the readers meet.
func TestTypeName(t *testing.T) {
	for v, want := range map[any]string{nil: "null", "s": "a string", true: "a boolean", 1.5: "a number",
		json.Number("2"): "a number", int32(3): "a number", uint8(4): "a number", time.Second: "a duration"} {
		if got := TypeName(v); got != want {
			t.Errorf("TypeName(%#v) = %q, want %q", v, got, want)
		}
	}
	for _, c := range []struct {
		v    any
		want string
	}{{[]any{}, "an array"}, {map[string]any{}, "an object"}, {time.Time{}, "a timestamp"}, {struct{}{}, "a struct {}"}} {
		if got := TypeName(c.v); got != c.want {
			t.Errorf("TypeName(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}
