package collect

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"rlvr/expert"
	"strings"
	"testing"
)

const (
	goodLine = `{"id":"gsm8k/3","source":"test.jsonl:4","question":"What is 2+2?","answer":"4","expert":1,"expert_name":"r1","api":"chat","model":"deepseek-r1","prompt":"You are Expert 1.","response":"#### 4","correct":true}`
	refLine  = `{"id":"gsm8k/3","source":"test.jsonl:4","question":"What is 2+2?","answer":"4","expert":0,"expert_name":"reference","reference":true,"prompt":"You are Expert 0.","response":"2+2=4\n#### 4","correct":true}`
	failLine = `{"id":"gsm8k/3","source":"","question":"What is 2+2?","answer":"4","expert":2,"expert_name":"gpt","api":"completion","prompt":"P","response":"","correct":false,"failure":"timeout","error":"no answer within 10m0s"}`
)

// TestParseRecord reads good lines and names the field of each bad one.
func TestParseRecord(t *testing.T) {
	good := Record{ID: "gsm8k/3", Source: "test.jsonl:4", Question: "What is 2+2?", Answer: "4", Expert: 1, Name: "r1", API: expert.APIChat,
		Model: "deepseek-r1", Prompt: "You are Expert 1.", Response: "#### 4", Correct: true}
	for _, tc := range []struct {
		name, line string
		want       *Record
		field, msg string // of the error
	}{
		{name: "expert", line: goodLine, want: &good},
		{name: "reference", line: refLine},
		{name: "failure", line: failLine},
		{name: "not JSON", line: `{"id":`, msg: "not a JSON object"},
		{name: "array", line: `[1]`, msg: "not a JSON object: a JSON array"},
		{name: "null", line: `null`, msg: "not a JSON object: null"},
		{name: "missing correct", line: strings.Replace(goodLine, `,"correct":true`, "", 1), field: "correct", msg: "missing"},
		{name: "missing id", line: strings.Replace(goodLine, `"id":"gsm8k/3",`, "", 1), field: "id", msg: "missing"},
		{name: "correct as text", line: strings.Replace(goodLine, `"correct":true`, `"correct":"yes"`, 1), field: "correct", msg: `want true or false, got "yes"`},
		{name: "fractional expert", line: strings.Replace(goodLine, `"expert":1`, `"expert":1.5`, 1), field: "expert", msg: "want an integer"},
		{name: "negative expert", line: strings.Replace(goodLine, `"expert":1`, `"expert":-1`, 1), field: "expert", msg: "-1"},
		{name: "huge expert", line: strings.Replace(goodLine, `"expert":1`, `"expert":99999999999999999999`, 1), field: "expert"},
		{name: "expert 0 not reference", line: strings.Replace(goodLine, `"expert":1`, `"expert":0`, 1), field: "reference"},
		{name: "reference not 0", line: strings.Replace(refLine, `"expert":0`, `"expert":2`, 1), field: "expert"},
		{name: "reference with api", line: strings.Replace(refLine, `"reference":true`, `"reference":true,"api":"chat"`, 1), field: "api"},
		{name: "unknown api", line: strings.Replace(goodLine, `"api":"chat"`, `"api":"smoke"`, 1), field: "api"},
		{name: "no api", line: strings.Replace(goodLine, `"api":"chat",`, ``, 1), field: "api"},
		{name: "unknown failure", line: strings.Replace(failLine, `"timeout"`, `"meltdown"`, 1), field: "failure"},
		{name: "failed but correct", line: strings.Replace(failLine, `"correct":false`, `"correct":true`, 1), field: "correct"},
		{name: "error without failure", line: strings.Replace(goodLine, `"correct":true`, `"correct":true,"error":"x"`, 1), field: "error"},
		{name: "unknown key", line: strings.Replace(goodLine, `"id"`, `"colour":"red","id"`, 1), field: "colour", msg: "unknown key"},
		{name: "empty id", line: strings.Replace(goodLine, `"id":"gsm8k/3"`, `"id":""`, 1), field: "id", msg: "empty"},
		{name: "null name", line: strings.Replace(goodLine, `"expert_name":"r1"`, `"expert_name":null`, 1), field: "expert_name", msg: "null"},
		{name: "numeric id", line: strings.Replace(goodLine, `"id":"gsm8k/3"`, `"id":5`, 1), field: "id", msg: "want a string, got 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRecord([]byte(tc.line))
			wantErr := tc.field != "" || tc.msg != ""
			switch {
			case !wantErr && err != nil:
				t.Fatal(err)
			case !wantErr && tc.want != nil && !reflect.DeepEqual(r, *tc.want):
				t.Fatalf("got %+v, want %+v", r, *tc.want)
			case !wantErr:
				return
			case err == nil:
				t.Fatalf("no error; got %+v", r)
			}
			if FieldOf(err) != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q (field %q), want field %q saying %q", err, FieldOf(err), tc.field, tc.msg)
			}
		})
	}
}

// TestReadDMENamesLine: a bad line's error names the file, the line and
// the field; blank lines are skipped; a second answer of an expert to a
// question, and one expert under two indices, are errors naming both
// lines.
func TestReadDMENamesLine(t *testing.T) {
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 65536
	dir := t.TempDir()
	for _, tc := range []struct {
		name, data, want string
		field            string
	}{
		{"bad field", goodLine + "\n\n" + strings.Replace(failLine, `"correct":false`, `"correct":1`, 1) + "\n", ":3: field \"correct\": want true or false, got 1", "correct"},
		{"duplicate", goodLine + "\n" + refLine + "\n" + goodLine + "\n", ":3: field \"expert_name\": a second answer of r1 to gsm8k/3 (the first is at line 1)", "expert_name"},
		{"two indices", goodLine + "\n" + strings.Replace(strings.Replace(goodLine, `"expert":1`, `"expert":4`, 1), "gsm8k/3", "gsm8k/4", 1) + "\n",
			":2: field \"expert\": 4: r1 is expert 1 at line 1", "expert"},
		{"other gold", goodLine + "\n" + strings.Replace(refLine, `"answer":"4"`, `"answer":"5"`, 1) + "\n", ":2: field \"answer\"", "answer"},
		{"truncated", goodLine + "\n" + refLine[:30], ":2: truncated", ""},
		{"long line", goodLine + "\n" + `{"id":"` + strings.Repeat("x", 100_000) + "\n", ":2: longer than 65536 bytes", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadDME(path)
			var e *Error
			if !errors.As(err, &e) || e.Field != tc.field || !strings.Contains(err.Error(), "collect: "+path+tc.want) {
				t.Errorf("error %v, want %q in %s (field %q)", err, tc.want, path, tc.field)
			}
		})
	}
	path := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(path, []byte(refLine+"\r\n\n"+goodLine+"\n"+failLine), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadDME(path)
	if err != nil || len(recs) != 3 || recs[0].Name != ReferenceName || recs[2].Failure != expert.FailTimeout {
		t.Errorf("%v %+v", err, recs)
	}
}

// TestWriteDMERoundTrip writes records and reads them back.
func TestWriteDMERoundTrip(t *testing.T) {
	var recs []Record
	for _, l := range []string{refLine, goodLine, failLine} {
		r, err := ParseRecord([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	path := filepath.Join(t.TempDir(), "dme.jsonl")
	if err := WriteDME(path, recs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDME(path)
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Errorf("%v\n%+v\n%+v", err, got, recs)
	}
}

// FuzzParseRecord: ParseRecord never panics, and what it accepts it
// writes back as a line it reads to the same record.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{goodLine, refLine, failLine, `{}`, `null`, `{"id":"\xff"}`, `{"expert":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRecord(line)
		if err != nil {
			return
		}
		b, err := r.MarshalLine()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRecord(b)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%q → %+v → %q → %+v, %v", line, r, b, again, err)
		}
	})
}
