package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"rlvr/internal/jsonl"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// record is one decoded JSON object or Parquet row. JSON numbers are
// json.Number, so that they keep the text the file has; Parquet values are
// Go scalars, []any and map[string]any. A record remembers which fields a
// decoder used, so the others can go to Example.Meta.
type record struct {
	m    map[string]any
	used map[string]bool
}

var (
	errMissing = errors.New("missing")
	errNull    = errors.New("null")
)

func newRecord(m map[string]any) *record {
	return &record{m: m, used: make(map[string]bool, len(m))}
}

// get returns the value of field, which may be a dotted path into nested
// objects ("reward_model.ground_truth") when no top-level field has that
// name.
func (r *record) get(field string) (any, bool) {
	if v, ok := r.m[field]; ok {
		r.used[field] = true
		return v, true
	}
	top, rest, ok := strings.Cut(field, ".")
	if !ok {
		return nil, false
	}
	v, ok := r.m[top]
	if !ok {
		return nil, false
	}
	for {
		obj, isObj := v.(map[string]any)
		if !isObj {
			return nil, false
		}
		var key string
		key, rest, ok = strings.Cut(rest, ".")
		if v, isObj = obj[key]; !isObj {
			return nil, false
		}
		if !ok {
			r.used[top] = true
			return v, true
		}
	}
}

// has reports whether field is present, even if null.
func (r *record) has(field string) bool {
	_, ok := r.get(field)
	return ok
}

// str returns a required text field. Numbers and booleans are accepted and
// returned as text.
func (r *record) str(field string) (string, error) {
	v, ok := r.get(field)
	if !ok {
		return "", fieldErr(field, errMissing)
	}
	if v == nil {
		return "", fieldErr(field, errNull)
	}
	return text(field, v)
}

// text returns the scalar v of field as text, which must be valid UTF-8:
// a Parquet column of bytes without a text type may hold any bytes.
func text(field string, v any) (string, error) {
	s, ok := scalarText(v)
	if !ok {
		return "", fieldErrorf(field, "want a string, got "+jsonl.TypeName(v))
	}
	if !utf8.ValidString(s) {
		return "", fieldErrorf(field, "invalid UTF-8")
	}
	return s, nil
}

// optStr returns an optional text field; a missing or null field is "".
func (r *record) optStr(field string) (string, error) {
	v, ok := r.get(field)
	if !ok || v == nil {
		return "", nil
	}
	return text(field, v)
}

// first returns the first of fields that is present, and "" if none is.
func (r *record) first(fields ...string) string {
	for _, f := range fields {
		if _, ok := r.m[f]; ok {
			return f
		}
	}
	for _, f := range fields {
		if _, ok := r.get(f); ok {
			return f
		}
	}
	return ""
}

// strList returns an optional list of text; a missing or null field is nil.
func (r *record) strList(field string) ([]string, error) {
	v, ok := r.get(field)
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fieldErrorf(field, "want an array of strings, got "+jsonl.TypeName(v))
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := scalarText(x)
		if !ok || x == nil {
			return nil, fieldErrorf(field, fmt.Sprintf("element %d: want a string, got %s", i, jsonl.TypeName(x)))
		}
		if !utf8.ValidString(s) {
			return nil, fieldErrorf(field, fmt.Sprintf("element %d: invalid UTF-8", i))
		}
		out[i] = s
	}
	return out, nil
}

// yesNo returns a required yes-no field as "yes" or "no". It accepts
// booleans and the strings yes, no, true and false in any case.
func (r *record) yesNo(field string) (string, error) {
	v, ok := r.get(field)
	if !ok {
		return "", fieldErr(field, errMissing)
	}
	switch v := v.(type) {
	case nil:
		return "", fieldErr(field, errNull)
	case bool:
		if v {
			return "yes", nil
		}
		return "no", nil
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "yes", "true":
			return "yes", nil
		case "no", "false":
			return "no", nil
		}
		return "", fieldErrorf(field, fmt.Sprintf("want a boolean, got %q", v))
	}
	return "", fieldErrorf(field, "want a boolean, got "+jsonl.TypeName(v))
}

// messages returns an optional chat: a list of objects with "role" and
// "content". A missing or null field is nil.
func (r *record) messages(field string) ([]Message, error) {
	v, ok := r.get(field)
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fieldErrorf(field, "want an array of messages, got "+jsonl.TypeName(v))
	}
	out := make([]Message, len(list))
	for i, x := range list {
		obj, ok := x.(map[string]any)
		if !ok {
			return nil, fieldErrorf(field, fmt.Sprintf("element %d: want a message object, got %s", i, jsonl.TypeName(x)))
		}
		for _, k := range [...]string{"role", "content"} {
			s, ok := obj[k].(string)
			if !ok {
				return nil, fieldErrorf(field, fmt.Sprintf("element %d: %q: want a string, got %s", i, k, jsonl.TypeName(obj[k])))
			}
			if k == "role" {
				out[i].Role = s
			} else {
				out[i].Content = s
			}
		}
	}
	return out, nil
}

// restMeta adds the record's unused scalar fields to meta, as text.
func (r *record) restMeta(meta map[string]string) {
	for k, v := range r.m {
		if r.used[k] || v == nil {
			continue
		}
		if _, done := meta[k]; done {
			continue
		}
		if s, ok := scalarText(v); ok && utf8.ValidString(s) { // binary data is no text
			meta[k] = s
		}
	}
}

// scalarText returns a scalar value as text: strings as they are, JSON
// numbers as written, other numbers in their shortest exact form, booleans
// as "true" or "false". It returns false for null, arrays and objects.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), true
	case []byte:
		return string(v), true
	case bool:
		return strconv.FormatBool(v), true
	case int:
		return strconv.Itoa(v), true
	case int8:
		return strconv.FormatInt(int64(v), 10), true
	case int16:
		return strconv.FormatInt(int64(v), 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case uint8:
		return strconv.FormatUint(uint64(v), 10), true
	case uint16:
		return strconv.FormatUint(uint64(v), 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case *big.Float:
		if v == nil {
			return "", false
		}
		return v.Text('f', -1), true
	case time.Time:
		return v.Format(time.RFC3339Nano), true
	case time.Duration:
		return v.String(), true
	}
	return "", false
}
