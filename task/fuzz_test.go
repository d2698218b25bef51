package task

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzStreamJSONL feeds arbitrary input to every dataset's reader: it must
// return examples or an *Error, never panic.
func FuzzStreamJSONL(f *testing.F) {
	for _, seed := range []string{
		gsmOK + "\n" + gsmOK + "\n",
		`{"question": "q", "answer": "no marker"}`,
		"[" + sqaOK + "]",
		`{"problem": "p", ` + mqaOpt + `, "correct": "c", "rationale": "\"r\""}`,
		`{"problem": "p", "options": "['a ) 1', 'b ) 2']", "correct": "b"}`,
		`{"problem": "p", "answer": 27.0, "id": 3, "solution": null}`,
		`{"prompt": [{"role": "user", "content": "u"}], "reward_model": {"ground_truth": "1"}}`,
		`{"question": "q", "choices": ["x"], "answer": 5}`,
		`[{"problem": "p", "answer": null}, 1, {]`,
		"\xef\xbb\xbf\n\n{\"a\":1}\r\n",
		"PAR1",
		"",
	} {
		f.Add([]byte(seed))
	}
	names := Names()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range names {
			err := Stream(bytes.NewReader(data), name, func(e Example) error {
				if e.ID == "" || e.Kind == "" || e.Meta["dataset"] != name {
					t.Fatalf("%s: incomplete example %+v", name, e)
				}
				return nil
			})
			var te *Error
			if err != nil && !errors.As(err, &te) {
				t.Fatalf("%s: error %T is no *Error: %v", name, err, err)
			}
		}
	})
}
