package task

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// parquetBatch is how many rows ReadParquet decodes at a time.
const parquetBatch = 64

// ReadParquet calls fn for each row of the Parquet file in r, of size
// bytes, made into an Example by cols. Columns are read as JSON would be:
// strings, numbers, booleans, lists as arrays and groups as objects. file
// names the input in errors, which give the 0-based row. ReadParquet stops
// at the first error, from the input (an *Error) or from fn (returned as
// it is). A malformed file is an error, never a panic; an empty one is an
// *Error wrapping [ErrEmpty].
func ReadParquet(r io.ReaderAt, size int64, file string, cols Columns, fn func(Example) error) error {
	return readParquet(r, size, file, cols.dataset(), cols.decode, fn)
}

// LoadParquet reads all the rows of the Parquet file at path, made into
// examples by cols.
func LoadParquet(path string, cols Columns) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	var out []Example
	err = ReadParquet(f, fi.Size(), path, cols, func(e Example) error {
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func readParquet(r io.ReaderAt, size int64, file, name string, dec decoder, fn func(Example) error) error {
	if size == 0 {
		return fileError(file, ErrEmpty)
	}
	if err := checkTrailer(r, size); err != nil {
		return fileError(file, fmt.Errorf("malformed Parquet file: %w", err))
	}
	var pf *parquet.File
	err := safely(func() (err error) {
		pf, err = parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
		return err
	})
	if err != nil {
		return fileError(file, fmt.Errorf("malformed Parquet file: %w", err))
	}
	var binary map[string]bool
	if err := safely(func() error { binary = binaryColumns(pf.Schema()); return nil }); err != nil {
		return fileError(file, fmt.Errorf("malformed Parquet file: %w", err))
	}
	var rd *parquet.GenericReader[any]
	if err := safely(func() error { rd = parquet.NewGenericReader[any](pf); return nil }); err != nil {
		return fileError(file, fmt.Errorf("malformed Parquet file: %w", err))
	}
	defer safely(rd.Close)

	rows := make([]any, parquetBatch)
	for index := 0; ; {
		var n int
		err := safely(func() (err error) {
			n, err = rd.Read(rows)
			return err
		})
		for i, row := range rows[:n] {
			rows[i] = nil
			m, ok := row.(map[string]any)
			if !ok {
				return locate(file, 0, index, "row", fmt.Errorf("want a group of columns, got %T", row))
			}
			if err := rowUTF8(m, binary); err != nil {
				return locate(file, 0, index, "row", err)
			}
			rec := newRecord(m)
			e, err := dec(rec)
			if err != nil {
				return locate(file, 0, index, "row", err)
			}
			finish(name, index, rec, &e)
			e.Source = file + ":row " + strconv.Itoa(index)
			if err := fn(e); err != nil {
				return err
			}
			index++
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return locate(file, 0, index, "row", fmt.Errorf("malformed Parquet file: %w", err))
		case n == 0:
			return nil // no progress and no error: treat as the end
		}
	}
}

// binaryColumns returns the top-level columns of bytes that are not typed
// as text (a string, enum or JSON), which the reader returns as strings:
// such a column is text only where a decoder reads it as text.
func binaryColumns(schema *parquet.Schema) map[string]bool {
	binary := map[string]bool{}
	for _, f := range schema.Fields() {
		if !f.Leaf() {
			continue
		}
		t := f.Type()
		if k := t.Kind(); k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			continue
		}
		if !isText(t) {
			binary[f.Name()] = true
		}
	}
	return binary
}

// isText reports whether a column of bytes is typed as text, by its
// logical type or, in files of older writers, its converted type.
func isText(t parquet.Type) bool {
	if lt := t.LogicalType(); lt != nil {
		switch lt.Value.(type) {
		case *format.StringType, *format.EnumType, *format.JsonType:
			return true
		}
	}
	if ct := t.ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.UTF8, deprecated.Enum, deprecated.Json:
			return true
		}
	}
	return false
}

// checkTrailer checks that the file ends with a footer length that fits
// in it and a magic number, before the library allocates a buffer of that
// length.
func checkTrailer(r io.ReaderAt, size int64) error {
	if size < 12 { // "PAR1", footer length, "PAR1"
		return fmt.Errorf("%d bytes, too short", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if m := string(tail[4:]); m != "PAR1" && m != "PARE" {
		return fmt.Errorf("no magic number at the end, found %q", m)
	}
	if n := binary.LittleEndian.Uint32(tail[:4]); int64(n) > size-12 {
		return fmt.Errorf("footer length %d exceeds the file", n)
	}
	return nil
}

// safely calls f, turning a panic into an error: the Parquet library
// panics on some malformed files.
func safely(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return f()
}
