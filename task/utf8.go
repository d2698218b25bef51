package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkUTF8 returns an error naming the field that holds the first invalid
// UTF-8 in raw, the bytes of one JSON value, or nil when raw is valid. A
// lead ≥ 0 is the white space before raw on its line, and the error then
// gives the column.
func checkUTF8(raw []byte, lead int) error {
	if utf8.Valid(raw) {
		return nil
	}
	off := invalidUTF8(raw)
	field, inKey := utf8Field(raw, off)
	msg := "invalid UTF-8"
	if inKey {
		msg += " in the field's name"
	}
	if lead >= 0 {
		msg += " at column " + strconv.Itoa(lead+off+1)
	}
	if field == "" {
		return errors.New(msg)
	}
	return fieldErrorf(field, msg)
}

// invalidUTF8 returns the offset of the first byte of s that is not valid
// UTF-8, or -1.
func invalidUTF8(s []byte) int {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// utf8Field returns the path of the field of the JSON value raw whose name
// or string value holds the byte at off: object keys joined by dots, array
// indexes in brackets ("prompt[1].content"). inKey says off is in the name
// itself, which is then the path's last part, invalid bytes replaced. It
// returns "" when off is in no field, or raw stops being JSON before it.
func utf8Field(raw []byte, off int) (field string, inKey bool) {
	type frame struct {
		obj     bool
		wantKey bool   // object: the next token is a key
		key     string // object: the current key
		index   int    // array: the current element
	}
	var stack []frame
	// path is the path to the value of the innermost container, or to
	// its key last.
	path := func(last string) string {
		var b strings.Builder
		frames := stack
		if last != "" {
			frames = stack[:len(stack)-1]
		}
		for _, f := range frames {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			}
		}
		if last != "" {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(last)
		}
		return b.String()
	}
	// next moves the innermost container past a value.
	next := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	for {
		start := d.InputOffset()
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		end := d.InputOffset()
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].obj && stack[top].wantKey
		if int64(off) >= start && int64(off) < end {
			if s, ok := tok.(string); ok && isKey {
				return path(strings.ToValidUTF8(s, "\uFFFD")), true
			}
			return path(""), false
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
			next()
		default:
			if isKey {
				stack[top].key, stack[top].wantKey = tok.(string), false
			} else {
				next()
			}
		}
	}
}

// rowUTF8 returns an error naming the first field, in sorted order, of a
// Parquet row whose name or text is not valid UTF-8, or nil. The columns
// in binary hold bytes, text only where a decoder reads them as text (see
// text in record.go), and are not checked here.
func rowUTF8(row map[string]any, binary map[string]bool) error {
	text := row
	if len(binary) > 0 {
		text = make(map[string]any, len(row))
		for k, v := range row {
			if !binary[k] {
				text[k] = v
			}
		}
	}
	if validText(text) {
		return nil
	}
	f, inKey := badText(text, "")
	if inKey {
		return fieldErrorf(f, "invalid UTF-8 in the field's name")
	}
	return fieldErrorf(f, "invalid UTF-8")
}

// validText reports whether every string and name in v is valid UTF-8.
func validText(v any) bool {
	switch v := v.(type) {
	case string:
		return utf8.ValidString(v)
	case map[string]any:
		for k, x := range v {
			if !utf8.ValidString(k) || !validText(x) {
				return false
			}
		}
	case []any:
		for _, x := range v {
			if !validText(x) {
				return false
			}
		}
	}
	return true
}

// badText returns the path, under prefix, of the first string or name in
// v, which is not validText, that is not valid UTF-8, and whether it is a
// name.
func badText(v any, prefix string) (field string, inKey bool) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			if !utf8.ValidString(k) {
				return strings.ToValidUTF8(p, "\uFFFD"), true
			}
			if !validText(v[k]) {
				return badText(v[k], p)
			}
		}
	case []any:
		for i, x := range v {
			if !validText(x) {
				return badText(x, prefix+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	return prefix, false
}
