// Package jsonl reads and writes JSON Lines files of one record type: the
// form rlvr's evaluation samples and the peer comparisons' measurements
// are kept in.
package jsonl

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"reflect"
	"strings"
	"time"

	"rlvr/internal/atomicfile"
)

// Compressed ends the name of a gzip-compressed file, which Open and Read
// decompress: results kept in the repository are stored that way.
const Compressed = ".gz"

// Open opens the file at path for reading, decompressing it when its name
// ends in [Compressed]; closing the result closes the file.
func Open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil || !strings.HasSuffix(path, Compressed) {
		return f, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return gzipFile{zr, f}, nil
}

// gzipFile reads the decompressed stream of an open file.
type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g gzipFile) Close() error {
	err := g.Reader.Close()
	if ferr := g.f.Close(); err == nil {
		err = ferr
	}
	return err
}

// Read decodes every record of the file at path (decompressed when its
// name ends in [Compressed]); an error names the file.
func Read[T any](path string) ([]T, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var x T
		if err := dec.Decode(&x); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, len(out)+1, err)
		}
		out = append(out, x)
	}
}

// Write writes xs to path, one record a line, HTML characters unescaped;
// the file appears whole or not at all.
func Write[T any](path string, xs []T) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		for _, x := range xs {
			if err := enc.Encode(x); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
}

// TypeName names the JSON type of a decoded value with its article ("an
// array", "null"), for errors that say what a field held instead of what
// was wanted.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string, []byte:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case json.Number, *big.Float:
		return "a number"
	case time.Time:
		return "a timestamp"
	case time.Duration:
		return "a duration"
	}
	switch reflect.ValueOf(v).Kind() { // a Parquet column's integers and floats
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
