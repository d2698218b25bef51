// Package located is the error of malformed input that says where the
// input is wrong — file, line or element, field — so that whoever wrote
// it can find the place, as json.SyntaxError carries its offset. A
// reader returns an *Error; a decoder of one record returns a
// *FieldError, which the reader places with At.
package located

import (
	"errors"
	"strconv"
	"strings"
)

// Error reports malformed input: where it is and what is wrong, as
//
//	task: gsm8k/test.jsonl:12: field "answer": missing "####"
//	task: strategyqa/dev.json: element 3: field "answer": want a boolean, got "maybe"
//	collect: dme.jsonl:12: field "correct": want true or false, got "yes"
type Error struct {
	// Pkg names the package that read the input; the message starts
	// with it.
	Pkg string
	// File is the path of the file, or the name the input was read under.
	File string
	// Line is the 1-based line of a line-oriented file, or 0.
	Line int
	// Index is the 0-based element of a JSON array or row of a Parquet
	// file (see Unit), or -1. It is shown when Line is 0.
	Index int
	// Unit is what Index counts, "element" or "row"; "" means "element".
	Unit string
	// Field is the record's field (JSON key or Parquet column), or "".
	Field string
	// Err is what is wrong.
	Err error
}

// Error returns the error as one line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pkg)
	b.WriteString(": ")
	b.WriteString(e.File)
	switch {
	case e.Line > 0:
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	case e.Index >= 0:
		unit := e.Unit
		if unit == "" {
			unit = "element"
		}
		b.WriteString(": ")
		b.WriteString(unit)
		b.WriteString(" ")
		b.WriteString(strconv.Itoa(e.Index))
	}
	if e.Field != "" {
		b.WriteString(": field ")
		b.WriteString(strconv.Quote(e.Field))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// FieldError is a decoder's complaint about one field of a record, before
// a reader says where the record is.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "field " + strconv.Quote(e.Field) + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *FieldError) Unwrap() error { return e.Err }

// Field returns err as a complaint about field.
func Field(field string, err error) error { return &FieldError{field, err} }

// FieldOf returns the field a *FieldError in err's chain is about, or "".
func FieldOf(err error) string {
	if fe, ok := errors.AsType[*FieldError](err); ok {
		return fe.Field
	}
	return ""
}

// At places err, from reading the record at line of file (a line > 0) or
// else at element index of unit (index ≥ 0), in an *Error of package pkg;
// the field of a *FieldError goes apart, into Error.Field. Line 0 and
// index −1 place it in the whole file.
func At(pkg, file string, line, index int, unit string, err error) *Error {
	e := &Error{Pkg: pkg, File: file, Line: line, Index: index, Unit: unit, Err: err}
	if line > 0 {
		e.Index = -1
	}
	if fe, ok := errors.AsType[*FieldError](err); ok {
		e.Field, e.Err = fe.Field, fe.Err
	}
	return e
}
