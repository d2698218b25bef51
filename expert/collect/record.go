package collect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"rlvr/expert"
	"rlvr/internal/atomicfile"
	"rlvr/internal/located"
)

// Record is one line of D_ME: one expert's answer to one question, with
// its verdict. The same schema serves the collection cache and the D_ME
// file. In JSON:
//
//	{"id": "world/four-ops/12+7-3*2", "source": "", "question": "Q:(12+7-3)*2\n",
//	 "answer": "32", "expert": 1, "expert_name": "E1", "api": "completion",
//	 "model": "E1", "prompt": "@E1\n", "response": "12 + 7 = 19\n…####32\n",
//	 "correct": true}
//
// Expert0, the dataset's reference solution, has "expert": 0,
// "reference": true and no "api" or "model". A failed answer has
// "correct": false, a "failure" kind and the "error" that caused it.
type Record struct {
	ID       string `json:"id"`       // the question's task.Example.ID
	Source   string `json:"source"`   // the question's task.Example.Source ("file:line"; "" for generated questions)
	Question string `json:"question"` // the question as a model sees it (task.Example.Prompt)
	Answer   string `json:"answer"`   // the gold answer, as the dataset writes it
	Expert   int    `json:"expert"`   // the expert's index i: 0 for the reference, 1 to N for the experts asked
	Name     string `json:"expert_name"`
	// Reference marks Expert0: the dataset's own reference solution.
	Reference bool `json:"reference,omitempty"`
	// API is how the expert was asked: expert.APICompletion or expert.APIChat; "" for
	// the reference.
	API string `json:"api,omitempty"`
	// Model is the model the expert named (an endpoint's model, or a
	// local checkpoint's path); informational.
	Model string `json:"model,omitempty"`
	// Prompt is the expert prompt P_i: appended to the question for a
	// completion, the system message of a chat.
	Prompt string `json:"prompt"`
	// System is the persona the expert was asked under in P_i's place,
	// when it had its own (expert.Config.System); "" when it was asked
	// under Prompt. Training reads Prompt: the policy learns the answer
	// behind P_i whatever persona the expert answered under.
	System string `json:"system,omitempty"`
	// Template is the completion prompt the expert was asked with, when it
	// had one (expert.Config.Template).
	Template string `json:"template,omitempty"`
	Response string `json:"response"` // the expert's answer A_i; "" when it failed
	Correct  bool   `json:"correct"`  // the verdict of eval.Reward on Response
	Failure  string `json:"failure,omitempty"`
	Error    string `json:"error,omitempty"` // what failed, when Failure is set
}

// maxExpert bounds an expert's index in a D_ME line.
const maxExpert = 1 << 20

// Error reports a malformed line of a D_ME or cache file: where it is and
// what is wrong, as
//
//	collect: dme.jsonl:12: field "correct": want true or false, got "yes"
type Error = located.Error

// lineError is an *Error about line n of file, with the field of a
// ParseRecord error apart.
func lineError(file string, n int, err error) *Error {
	return located.At("collect", file, n, -1, "", err)
}

// FieldOf returns the JSON key a ParseRecord error is about, or "".
func FieldOf(err error) string { return located.FieldOf(err) }

// ParseRecord reads one D_ME line. Every key of the schema but "source",
// "reference", "api", "model", "system", "failure" and "error" is required; unknown
// keys, values of the wrong type and inconsistent fields are errors, which
// name their key (see FieldOf).
func ParseRecord(line []byte) (Record, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Record{}, fmt.Errorf("not a JSON object: %v", syntaxMessage(err))
	}
	if raw == nil {
		return Record{}, errors.New("not a JSON object: null")
	}
	var r Record
	type spec struct {
		key      string
		required bool
		dst      any
	}
	specs := []spec{
		{"id", true, &r.ID}, {"source", false, &r.Source}, {"question", true, &r.Question},
		{"answer", true, &r.Answer}, {"expert", true, &r.Expert}, {"expert_name", true, &r.Name},
		{"reference", false, &r.Reference}, {"api", false, &r.API}, {"model", false, &r.Model},
		{"prompt", true, &r.Prompt}, {"system", false, &r.System}, {"template", false, &r.Template}, {"response", true, &r.Response}, {"correct", true, &r.Correct},
		{"failure", false, &r.Failure}, {"error", false, &r.Error},
	}
	known := map[string]bool{}
	for _, s := range specs {
		known[s.key] = true
		v, ok := raw[s.key]
		if !ok {
			if s.required {
				return Record{}, located.Field(s.key, errors.New("missing"))
			}
			continue
		}
		if err := decodeField(v, s.dst); err != nil {
			return Record{}, located.Field(s.key, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !known[k] {
			return Record{}, located.Field(k, errors.New("unknown key"))
		}
	}
	return r, r.check()
}

// check reports the first inconsistency of a record, naming its field.
func (r Record) check() error {
	bad := func(field, format string, args ...any) error {
		return located.Field(field, fmt.Errorf(format, args...))
	}
	switch {
	case r.ID == "":
		return bad("id", "is empty")
	case r.Name == "":
		return bad("expert_name", "is empty")
	case r.Expert < 0 || r.Expert > maxExpert:
		return bad("expert", "%d: want an index in [0, %d]", r.Expert, maxExpert)
	case r.Reference && r.Expert != 0:
		return bad("expert", "%d: the reference is expert 0", r.Expert)
	case !r.Reference && r.Expert == 0:
		return bad("reference", "expert 0 is the reference solution, but reference is not true")
	case r.Reference && r.System != "":
		return bad("system", "%q: the reference solution was not asked under a persona", r.System)
	case r.Template != "" && r.API != expert.APICompletion:
		return bad("template", "%q: a template is the prompt of a completion, and api is %q", r.Template, r.API)
	case r.Reference && r.API != "":
		return bad("api", "%q: the reference solution was not asked through an API", r.API)
	case !r.Reference && r.API != expert.APICompletion && r.API != expert.APIChat:
		return bad("api", "%q: want %q or %q", r.API, expert.APICompletion, expert.APIChat)
	case r.Failure != "" && !slices.Contains(expert.FailureKinds, r.Failure):
		return bad("failure", "%q: not a kind of failure (%s)", r.Failure, strings.Join(expert.FailureKinds, ", "))
	case r.Failure != "" && r.Correct:
		return bad("correct", "true, but the answer failed (%s)", r.Failure)
	case r.Failure == "" && r.Error != "":
		return bad("error", "set, but no failure is")
	}
	return nil
}

// decodeField unmarshals one value, refusing null and naming the JSON
// type wanted.
func decodeField(v json.RawMessage, dst any) error {
	want := "a string"
	switch dst.(type) {
	case *int:
		want = "an integer"
	case *bool:
		want = "true or false"
	}
	if t := bytes.TrimSpace(v); bytes.Equal(t, []byte("null")) {
		return fmt.Errorf("want %s, got null", want)
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("want %s, got %s", want, excerpt(v))
	}
	return nil
}

// syntaxMessage shortens a JSON error.
func syntaxMessage(err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("%v (byte %d)", se, se.Offset)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return "a JSON " + te.Value
	}
	return err.Error()
}

// excerpt quotes the start of a value, for error messages.
func excerpt(v []byte) string {
	const n = 40
	s := string(bytes.TrimSpace(v))
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// MarshalLine returns r as one JSON line, newline included. Invalid
// UTF-8 in its strings becomes U+FFFD.
func (r Record) MarshalLine() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("collect: encoding the answer of %s to %s: %w", r.Name, r.ID, err)
	}
	return append(b, '\n'), nil
}

// ReadDME reads a D_ME file. A malformed line is an *Error naming the
// file, the line and the field; blank lines are skipped.
func ReadDME(path string) ([]Record, error) {
	recs, _, err := ReadDMELines(path)
	return recs, err
}

// ReadDMELines is ReadDME that also returns the 1-based line each record
// was read from, so that what uses a record can say where it came from.
func ReadDMELines(path string) ([]Record, []int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return readRecords(f, path)
}

// ReadRecords reads D_ME lines from r; name is the file's name in errors.
// Besides malformed lines, it refuses a second answer of an expert to a
// question, a question or gold answer that differs between the lines of
// one id, and an expert whose index and name disagree between lines.
func ReadRecords(r io.Reader, name string) ([]Record, error) {
	recs, _, err := readRecords(r, name)
	return recs, err
}

// readRecords is ReadRecords with each record's line.
func readRecords(r io.Reader, name string) ([]Record, []int, error) {
	var out []Record
	var lines []int
	err := eachLine(r, name, func(l line) error {
		if !l.complete && len(l.text) > 0 && !json.Valid(l.text) {
			return lineError(name, l.n, errors.New("truncated: the last line has no newline and is not valid JSON"))
		}
		rec, err := ParseRecord(l.text)
		if err != nil {
			return lineError(name, l.n, err)
		}
		out, lines = append(out, rec), append(lines, l.n)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	err = consistent(out, func(j int) string { return fmt.Sprintf("line %d", lines[j]) }, func(i int, field string, err error) error {
		return lineError(name, lines[i], located.Field(field, err))
	})
	if err != nil {
		return nil, nil, err
	}
	return out, lines, nil
}

// WriteDME writes records to path as JSONL, atomically: a reader sees the
// old file or the whole new one.
func WriteDME(path string, records []Record) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		for _, r := range records {
			b, err := r.MarshalLine()
			if err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
}
