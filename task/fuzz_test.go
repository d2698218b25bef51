package task

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
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
		`{"question": "caf` + "\xe9" + `", "answer": "#### 1"}`,
		`[{"problem": "p", "answer": "1", "k` + "\xff" + `": ["` + "\xc0" + `"]}]`,
	} {
		f.Add([]byte(seed))
	}
	names := Names()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range names {
			err := Stream(bytes.NewReader(data), name, func(e Example) error {
				if e.ID == "" || e.Kind == "" || e.Meta["dataset"] != name || !strings.HasPrefix(e.Source, name+":") {
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

// FuzzReadParquet feeds arbitrary bytes, starting from small valid files,
// to the Parquet reader: it must return examples of valid text or an
// *Error, never panic.
func FuzzReadParquet(f *testing.F) {
	type binRow struct {
		Question []byte `parquet:"question"`
		Answer   string `parquet:"answer"`
	}
	var r verlRow
	r.Prompt = []chatMessage{{"system", "s"}, {"user", "u"}}
	r.RewardModel.GroundTruth = "42"
	for _, rows := range []any{
		[]hfRow{{Problem: "1+1?", Answer: ptr("2"), Level: 1, Tags: []string{"a"}}, {Problem: "p", Answer: nil}},
		[]verlRow{r},
		[]binRow{{[]byte("q"), "1"}, {[]byte("\xff"), "2"}},
	} {
		var buf bytes.Buffer
		var err error
		switch rows := rows.(type) {
		case []hfRow:
			err = parquet.Write(&buf, rows)
		case []verlRow:
			err = parquet.Write(&buf, rows)
		case []binRow:
			err = parquet.Write(&buf, rows)
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ReadParquet(bytes.NewReader(data), int64(len(data)), "f.parquet", Columns{}, func(e Example) error {
			if e.ID == "" || e.Kind == "" || !strings.HasPrefix(e.Source, "f.parquet:row ") {
				t.Fatalf("incomplete example %+v", e)
			}
			for _, s := range []string{e.Prompt, e.Answer, e.Solution} {
				if !utf8.ValidString(s) {
					t.Fatalf("invalid UTF-8 in %+v", e)
				}
			}
			return nil
		})
		var te *Error
		if err != nil && !errors.As(err, &te) {
			t.Fatalf("error %T is no *Error: %v", err, err)
		}
	})
}
