// Package gzjson reads the gzip-compressed JSON files tests keep their
// reference values in.
package gzjson

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// Read decodes the gzip-compressed JSON file at path into v, failing t on
// any error.
func Read(t testing.TB, path string, v any) {
	t.Helper()
	if err := read(path, v); err != nil {
		t.Fatal(err)
	}
}

func read(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := json.NewDecoder(z).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
