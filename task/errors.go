package task

import (
	"errors"

	"rlvr/internal/located"
)

// ErrEmpty is wrapped by the *Error for a dataset file that is empty or
// holds only white space.
var ErrEmpty = errors.New("the file is empty")

// Error reports malformed input: where it is and what is wrong, such as
//
//	task: gsm8k/test.jsonl:12: field "answer": missing "####"
//	task: strategyqa/dev.json: element 3: field "answer": want a boolean, got "maybe"
//	task: train.parquet: row 7: field "question": null
//
// Index is −1 when Line places the error, or when it is about the whole
// file.
type Error = located.Error

// fieldErr is a decoder's complaint about one field of a record; readers
// place it in an *Error that says where the record is.
func fieldErr(field string, err error) error { return located.Field(field, err) }

func fieldErrorf(field, msg string) error { return located.Field(field, errors.New(msg)) }

// locate turns err, from decoding the record at line or index, into an
// *Error. A line > 0 means JSON Lines; otherwise index counts elements of
// unit ("element" or "row").
func locate(file string, line, index int, unit string, err error) *Error {
	return located.At("task", file, line, index, unit, err)
}

// fileError is an *Error about a whole file.
func fileError(file string, err error) *Error {
	return located.At("task", file, 0, -1, "", err)
}
