package task

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"rlvr/internal/jsonl"
	"strconv"
)

// Reader reads the examples of a dataset from JSON Lines (one object a
// line) or a JSON array of objects, one record at a time: it never holds
// more than one record in memory. Which of the two the input is, it tells
// from the first character that is not white space.
type Reader struct {
	// File names the input in errors; NewReader sets it to the dataset's
	// name, and a caller reading a file may set it to the path before the
	// first Read.
	File string

	name  string
	dec   decoder
	br    *bufio.Reader
	state int // stateStart, stateLines, stateArray or stateDone
	line  int // lines read so far (JSON Lines)
	skip  int // white space start skipped on the first line
	index int // records decoded so far
	js    *json.Decoder
	err   error // sticky error
}

const (
	stateStart = iota
	stateLines
	stateArray
	stateDone
)

// NewReader returns a Reader of the examples of dataset name (see Names)
// from r.
func NewReader(r io.Reader, name string) (*Reader, error) {
	dec, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return newReader(r, name, dec), nil
}

// NewColumnsReader returns a Reader of the examples in r, made by cols.
func NewColumnsReader(r io.Reader, cols Columns) *Reader {
	return newReader(r, cols.dataset(), cols.decode)
}

func newReader(r io.Reader, name string, dec decoder) *Reader {
	return &Reader{File: name, name: name, dec: dec, br: bufio.NewReaderSize(r, 64<<10)}
}

// Read returns the next example. At the end of the input it returns io.EOF;
// for malformed input an *Error, after which every call returns the same
// error. An input that is empty or only white space is an *Error wrapping
// [ErrEmpty].
func (r *Reader) Read() (Example, error) {
	if r.err != nil {
		return Example{}, r.err
	}
	e, err := r.read()
	if err != nil {
		r.err = err
		r.state = stateDone
	}
	return e, err
}

// All returns an iterator over the remaining examples. It stops after the
// first error, which it yields with a zero Example; it yields no io.EOF.
func (r *Reader) All() iter.Seq2[Example, error] {
	return func(yield func(Example, error) bool) {
		for {
			e, err := r.Read()
			if err == io.EOF {
				return
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

func (r *Reader) read() (Example, error) {
	if r.state == stateStart {
		if err := r.start(); err != nil {
			return Example{}, err
		}
	}
	switch r.state {
	case stateLines:
		return r.readLine()
	case stateArray:
		return r.readElement()
	}
	return Example{}, io.EOF
}

// start skips a byte order mark and white space, counting lines, and
// tells JSON Lines from a JSON array.
func (r *Reader) start() error {
	if bom, _ := r.br.Peek(3); bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		r.br.Discard(3)
	}
	for {
		c, err := r.br.ReadByte()
		if err == io.EOF {
			return fileError(r.File, ErrEmpty)
		}
		if err != nil {
			return fileError(r.File, err)
		}
		switch c {
		case '\n':
			r.line++
			r.skip = 0
			continue
		case ' ', '\t', '\r':
			r.skip++
			continue
		}
		r.br.UnreadByte()
		switch c {
		case '{':
			r.state = stateLines
		case '[':
			r.state = stateArray
			r.js = json.NewDecoder(r.br)
			r.js.UseNumber()
			r.js.Token() // the '[', already seen
		case 'P':
			if magic, _ := r.br.Peek(4); string(magic) == "PAR1" {
				return fileError(r.File, errors.New("a Parquet file: read it with Load, LoadParquet or ReadParquet"))
			}
			fallthrough
		default:
			return fileError(r.File, fmt.Errorf("want JSON Lines or a JSON array, found %q", c))
		}
		return nil
	}
}

// readLine decodes the next non-blank line.
func (r *Reader) readLine() (Example, error) {
	for {
		line, err := r.br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return Example{}, io.EOF
		}
		if err != nil && err != io.EOF {
			return Example{}, fileError(r.File, err)
		}
		r.line++
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		lead := bytes.Index(line, trimmed[:1]) + r.skip // leading white space
		r.skip = 0
		m, err := decodeObject(trimmed, lead)
		if err != nil {
			return Example{}, locate(r.File, r.line, -1, "", err)
		}
		return r.decode(m, r.line, r.File+":"+strconv.Itoa(r.line))
	}
}

// decodeObject decodes one JSON object that fills line, which starts after
// lead bytes of white space. Invalid UTF-8 is an error, which
// encoding/json would replace with U+FFFD.
func decodeObject(line []byte, lead int) (map[string]any, error) {
	if err := checkUTF8(line, lead); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			// Offset counts the bytes read, the bad one included.
			return nil, fmt.Errorf("invalid JSON at column %d: %v", int64(lead)+syn.Offset, syn)
		}
		return nil, jsonError(err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: more data after the object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a JSON object, got %s", jsonl.TypeName(v))
	}
	return m, nil
}

// readElement decodes the next element of a JSON array.
func (r *Reader) readElement() (Example, error) {
	if !r.js.More() {
		// The closing ']', then nothing but white space.
		tok, err := r.js.Token()
		if err != nil {
			return Example{}, r.elementError(err)
		}
		if tok != json.Delim(']') {
			return Example{}, locate(r.File, 0, r.index, "element", errors.New("invalid JSON: want an object or ']'"))
		}
		if _, err := r.js.Token(); err != io.EOF {
			return Example{}, fileError(r.File, errors.New("invalid JSON: more data after the array"))
		}
		return Example{}, io.EOF
	}
	// The raw bytes first: decoding them into values would replace
	// invalid UTF-8 with U+FFFD.
	var raw json.RawMessage
	if err := r.js.Decode(&raw); err != nil {
		return Example{}, r.elementError(err)
	}
	if err := checkUTF8(raw, -1); err != nil {
		return Example{}, locate(r.File, 0, r.index, "element", err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return Example{}, locate(r.File, 0, r.index, "element", jsonError(err))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Example{}, locate(r.File, 0, r.index, "element", fmt.Errorf("want a JSON object, got %s", jsonl.TypeName(v)))
	}
	return r.decode(m, 0, r.File+":element "+strconv.Itoa(r.index))
}

// elementError reports err, from the JSON decoder, at the current element.
func (r *Reader) elementError(err error) error {
	var syn *json.SyntaxError
	if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &syn) {
		return fileError(r.File, err) // reading failed
	}
	return locate(r.File, 0, r.index, "element", jsonError(err))
}

// jsonError describes a JSON decoding error.
func jsonError(err error) error {
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return errors.New("invalid JSON: unexpected end of input")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// decode makes an Example of the record m, at line (JSON Lines) or at
// element r.index, read from source.
func (r *Reader) decode(m map[string]any, line int, source string) (Example, error) {
	rec := newRecord(m)
	e, err := r.dec(rec)
	if err != nil {
		return Example{}, locate(r.File, line, r.index, "element", err)
	}
	finish(r.name, r.index, rec, &e)
	e.Source = source
	r.index++
	return e, nil
}

// Stream calls fn for each example of dataset name (see Names) in r, JSON
// Lines or a JSON array, reading one record at a time. It stops at the
// first error, from the input (an *Error) or from fn (returned as it is).
// An input that is empty or only white space is an *Error wrapping
// [ErrEmpty].
func Stream(r io.Reader, name string, fn func(Example) error) error {
	rd, err := NewReader(r, name)
	if err != nil {
		return err
	}
	return rd.each(fn)
}

func (r *Reader) each(fn func(Example) error) error {
	for e, err := range r.All() {
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Load reads all the examples of dataset name (see Names) from the file at
// path: JSON Lines, a JSON array, or a Parquet file (which starts with
// "PAR1"), whose columns are read as the fields of the dataset's JSON.
// Errors name the file by path; an empty file, or one of only white space,
// is an *Error wrapping [ErrEmpty].
func Load(name, path string) ([]Example, error) {
	dec, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return load(path, name, dec)
}

// LoadColumns reads all the examples in the file at path, JSON Lines, a
// JSON array or Parquet, made by cols.
func LoadColumns(path string, cols Columns) ([]Example, error) {
	return load(path, cols.dataset(), cols.decode)
}

func load(path, name string, dec decoder) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	defer f.Close()
	var out []Example
	add := func(e Example) error {
		out = append(out, e)
		return nil
	}
	var magic [4]byte
	if n, _ := io.ReadFull(f, magic[:]); n == 4 && string(magic[:]) == "PAR1" {
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("task: %w", err)
		}
		if err := readParquet(f, fi.Size(), path, name, dec, add); err != nil {
			return nil, err
		}
		return out, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	rd := newReader(f, name, dec)
	rd.File = path
	if err := rd.each(add); err != nil {
		return nil, err
	}
	return out, nil
}

// LoadGSM8K reads a GSM8K JSON Lines file, such as test.jsonl.
func LoadGSM8K(path string) ([]Example, error) { return Load("gsm8k", path) }

// LoadMATH500 reads the MATH-500 test set.
func LoadMATH500(path string) ([]Example, error) { return Load("math500", path) }

// LoadAIME24 reads the AIME 2024 problems.
func LoadAIME24(path string) ([]Example, error) { return Load("aime24", path) }

// LoadAMC23 reads the AMC 2023 problems; answers keep the float form of
// the file, such as "27.0".
func LoadAMC23(path string) ([]Example, error) { return Load("amc23", path) }

// LoadMathQA reads MathQA problems as multiple-choice examples.
func LoadMathQA(path string) ([]Example, error) { return Load("mathqa", path) }

// LoadStrategyQA reads a StrategyQA JSON file as yes-no examples.
func LoadStrategyQA(path string) ([]Example, error) { return Load("strategyqa", path) }

// LoadDeepScaleR reads a DeepScaleR JSON file.
func LoadDeepScaleR(path string) ([]Example, error) { return Load("deepscaler", path) }
