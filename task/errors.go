package task

import (
	"errors"
	"strconv"
	"strings"
)

// ErrEmpty is wrapped by the *Error for a dataset file that is empty or
// holds only white space.
var ErrEmpty = errors.New("the file is empty")

// Error reports malformed input: where it is and what is wrong.
type Error struct {
	// File is the path of the file, or the name the input was read under.
	File string
	// Line is the 1-based line of a JSON Lines file, or 0.
	Line int
	// Index is the 0-based element of a JSON array or row of a Parquet
	// file, or -1.
	Index int
	// Field is the record's field (JSON key or Parquet column), or "".
	Field string
	// Err is what is wrong.
	Err error

	unit string // "element" or "row", naming Index
}

// Error returns the error as one line, such as
//
//	task: gsm8k/test.jsonl:12: field "answer": missing "####"
//	task: strategyqa/dev.json: element 3: field "answer": want a boolean, got "maybe"
//	task: train.parquet: row 7: field "question": null
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("task: ")
	b.WriteString(e.File)
	switch {
	case e.Line > 0:
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
	case e.Index >= 0:
		unit := e.unit
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

// fieldError is a decoder's complaint about one field of a record; readers
// turn it into an *Error that says where the record is.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return "field " + strconv.Quote(e.field) + ": " + e.err.Error() }

func fieldErr(field string, err error) error { return &fieldError{field, err} }

func fieldErrorf(field, msg string) error { return &fieldError{field, errors.New(msg)} }

// locate turns err, from decoding the record at line or index, into an
// *Error. A line > 0 means JSON Lines; otherwise index counts elements of
// unit ("element" or "row").
func locate(file string, line, index int, unit string, err error) *Error {
	e := &Error{File: file, Line: line, Index: index, unit: unit, Err: err}
	if line > 0 {
		e.Index = -1
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		e.Field, e.Err = fe.field, fe.err
	}
	return e
}

// fileError is an *Error about a whole file.
func fileError(file string, err error) *Error {
	return &Error{File: file, Index: -1, Err: err}
}
