package task

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// hfRow is a row of a Hugging Face style math dataset.
type hfRow struct {
	Problem    string  `parquet:"problem"`
	Answer     *string `parquet:"answer,optional"`
	Solution   *string `parquet:"solution,optional"`
	Level      int64   `parquet:"level"`
	Difficulty float64 `parquet:"difficulty"`
	Tags       []string
}

// verlRow is a row of a verl style RL dataset.
type verlRow struct {
	DataSource  string        `parquet:"data_source"`
	Prompt      []chatMessage `parquet:"prompt,list"`
	Ability     string        `parquet:"ability"`
	RewardModel struct {
		GroundTruth string `parquet:"ground_truth"`
		Style       string `parquet:"style"`
	} `parquet:"reward_model"`
}

type chatMessage struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}

// writeParquet writes rows to a Parquet file in dir and returns its path.
func writeParquet[T any](t *testing.T, name string, rows []T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func ptr(s string) *string { return &s }

func TestParquetDefaults(t *testing.T) {
	rows := []hfRow{
		{Problem: "1+1?", Answer: ptr("2"), Solution: ptr("1+1=2"), Level: 1, Difficulty: 2.5, Tags: []string{"easy"}},
		{Problem: "2*3?", Answer: ptr("6"), Level: 3, Difficulty: 4},
	}
	path := writeParquet(t, "train.parquet", rows)
	ex, err := LoadParquet(path, Columns{})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "examples", ex, []Example{
		{ID: "generic/0", Prompt: "1+1?", Answer: "2", Solution: "1+1=2", Kind: Math,
			Meta: map[string]string{"dataset": "generic", "level": "1", "difficulty": "2.5"}, Source: path + ":row 0"},
		{ID: "generic/1", Prompt: "2*3?", Answer: "6", Kind: Math,
			Meta: map[string]string{"dataset": "generic", "level": "3", "difficulty": "4"}, Source: path + ":row 1"},
	})
}

func TestParquetMapping(t *testing.T) {
	type row struct {
		Query  string  `parquet:"query"`
		Target float64 `parquet:"target"`
		Why    string  `parquet:"why"`
		Key    string  `parquet:"key"`
	}
	path := writeParquet(t, "custom.parquet", []row{{"q", 27, "w", "k1"}})
	ex, err := LoadParquet(path, Columns{Dataset: "mine", ID: "key", Prompt: "query", Answer: "target", Solution: "why"})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "examples", ex, []Example{{ID: "mine/k1", Prompt: "q", Answer: "27", Solution: "w", Kind: Math,
		Meta: map[string]string{"dataset": "mine"}, Source: path + ":row 0"}})
}

func TestParquetVerl(t *testing.T) {
	var r verlRow
	r.DataSource = "openai/gsm8k"
	r.Prompt = []chatMessage{{"system", "Think step by step."}, {"user", "What is 6*7?"}}
	r.Ability = "math"
	r.RewardModel.GroundTruth = "42"
	r.RewardModel.Style = "rule"
	path := writeParquet(t, "verl.parquet", []verlRow{r})
	ex, err := LoadColumns(path, Columns{Dataset: "verl"})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "examples", ex, []Example{{ID: "verl/0", Prompt: "What is 6*7?",
		Messages: []Message{{"system", "Think step by step."}, {"user", "What is 6*7?"}},
		Answer:   "42", Kind: Math,
		Meta: map[string]string{"dataset": "verl", "data_source": "openai/gsm8k", "ability": "math"}, Source: path + ":row 0"}})
}

func TestParquetMultipleChoice(t *testing.T) {
	type row struct {
		Question string   `parquet:"question"`
		Choices  []string `parquet:"choices,list"`
		Answer   int64    `parquet:"answer"`
		Subject  string   `parquet:"subject"`
	}
	path := writeParquet(t, "mmlu.parquet", []row{{"Which?", []string{"x", "y", "z", "w"}, 3, "logic"}})
	ex, err := LoadParquet(path, Columns{})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "examples", ex, []Example{{ID: "generic/0", Prompt: "Which?\na) x\nb) y\nc) z\nd) w", Answer: "d",
		Kind: MultipleChoice, Choices: []string{"x", "y", "z", "w"},
		Meta: map[string]string{"dataset": "generic", "subject": "logic"}, Source: path + ":row 0"}})

	path = writeParquet(t, "bad.parquet", []row{{"Which?", []string{"x", "y"}, 2, "logic"}})
	_, err = LoadParquet(path, Columns{})
	want(t, "error", errString(err), "task: "+path+`: row 0: field "answer": choice 2 out of range [0, 2)`)
}

// TestParquetNamedFormat reads a Parquet file through a dataset's own
// rules, as for Hugging Face's openai/gsm8k files.
func TestParquetNamedFormat(t *testing.T) {
	type row struct {
		Question string `parquet:"question"`
		Answer   string `parquet:"answer"`
	}
	path := writeParquet(t, "test-00000-of-00001.parquet", []row{
		{"q0", "a <<1+1=2>>2\n#### 2"},
		{"q1", "no marker"},
	})
	_, err := Load("gsm8k", path)
	want(t, "error", errString(err), "task: "+path+`: row 1: field "answer": missing "####"`)
	var e *Error
	if !errors.As(err, &e) || e.Index != 1 || e.Line != 0 || e.Field != "answer" {
		t.Errorf("error %#v", err)
	}

	path = writeParquet(t, "ok.parquet", []row{{"q0", "a <<1+1=2>>2\n#### 2"}})
	ex, err := Load("gsm8k", path)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "examples", ex, []Example{{ID: "gsm8k/0", Prompt: "q0", Answer: "2", Solution: "a 2", Kind: Math,
		Meta: map[string]string{"dataset": "gsm8k", "raw_solution": "a <<1+1=2>>2"}, Source: path + ":row 0"}})
}

func TestParquetFieldErrors(t *testing.T) {
	path := writeParquet(t, "nulls.parquet", []hfRow{
		{Problem: "p", Answer: ptr("1")},
		{Problem: "p", Answer: nil},
	})
	_, err := LoadParquet(path, Columns{})
	want(t, "null answer", errString(err), "task: "+path+`: row 1: field "answer": null`)

	type noAnswer struct {
		Question string `parquet:"question"`
	}
	path = writeParquet(t, "noanswer.parquet", []noAnswer{{"q"}})
	_, err = LoadParquet(path, Columns{})
	want(t, "no answer column", errString(err), "task: "+path+`: row 0: field "answer": missing`)
	_, err = LoadParquet(path, Columns{Answer: "gold"})
	want(t, "no mapped column", errString(err), "task: "+path+`: row 0: field "gold": missing`)
}

func TestParquetMalformed(t *testing.T) {
	var good bytes.Buffer
	if err := parquet.Write(&good, []hfRow{{Problem: "p", Answer: ptr("1"), Level: 1}}); err != nil {
		t.Fatal(err)
	}
	g := good.Bytes()
	// Corrupt the column data, before the footer, keeping the footer.
	footer := int(binary.LittleEndian.Uint32(g[len(g)-8:]))
	corrupt := bytes.Clone(g)
	for i := 4; i < len(corrupt)-8-footer; i++ {
		corrupt[i] ^= 0x5a
	}
	corruptFooter := bytes.Clone(g)
	for i := len(g) - 8 - footer; i < len(g)-8; i += 3 {
		corruptFooter[i] ^= 0x5a
	}
	tests := []struct {
		desc string
		data []byte
	}{
		{"not parquet", []byte("question,answer\nq,1\n")},
		{"magic only", []byte("PAR1")},
		{"magic and garbage", []byte("PAR1 this is not a parquet file PAR1")},
		{"truncated", g[:len(g)/2]},
		{"no footer", g[:len(g)-8]},
		{"corrupt data", corrupt},
		{"corrupt footer", corruptFooter},
		{"bad footer length", append(bytes.Clone(g[:len(g)-8]), 0xff, 0xff, 0xff, 0x7f, 'P', 'A', 'R', '1')},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.parquet")
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			ex, err := LoadParquet(path, Columns{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("LoadParquet = %d examples, %v; want an *Error", len(ex), err)
			}
			t.Log(err)
			if e.File != path || !strings.HasPrefix(err.Error(), "task: "+path+":") || !strings.Contains(err.Error(), "malformed Parquet file") {
				t.Errorf("error %q", err)
			}
		})
	}
	// Through Load, a file that starts with "PAR1" is Parquet.
	path := filepath.Join(t.TempDir(), "bad.parquet")
	if err := os.WriteFile(path, []byte("PAR1 garbage PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("gsm8k", path); err == nil || !strings.HasPrefix(err.Error(), "task: "+path+": malformed Parquet file: ") {
		t.Errorf("Load: %v", err)
	}
}

func TestReadParquetCallbackError(t *testing.T) {
	var buf bytes.Buffer
	rows := make([]hfRow, 200) // more than one batch
	for i := range rows {
		rows[i] = hfRow{Problem: "p", Answer: ptr("1")}
	}
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err := ReadParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "mem", Columns{}, func(e Example) error {
		n++
		if n == 150 {
			return stop
		}
		return nil
	})
	if err != stop || n != 150 {
		t.Errorf("ReadParquet = %v after %d rows", err, n)
	}
	n = 0
	err = ReadParquet(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "mem", Columns{}, func(e Example) error {
		if e.ID != "generic/"+strconv.Itoa(n) {
			t.Fatalf("row %d: ID %q", n, e.ID)
		}
		n++
		return nil
	})
	if err != nil || n != 200 {
		t.Errorf("ReadParquet = %v after %d rows", err, n)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestParquetInvalidUTF8 checks that text that is not UTF-8 is an error
// naming the row and column, and that binary columns are not text unless
// read as text.
func TestParquetInvalidUTF8(t *testing.T) {
	type textRow struct {
		Question string `parquet:"question"`
		Answer   string `parquet:"answer"`
		Note     string `parquet:"note"`
	}
	type binRow struct {
		Question []byte `parquet:"question"`
		Answer   string `parquet:"answer"`
		Image    []byte `parquet:"image"`
	}
	tests := []struct {
		desc, want string
		field      string
		index      int
		path       func(t *testing.T) string
	}{
		{"question", `row 1: field "question": invalid UTF-8`, "question", 1, func(t *testing.T) string {
			return writeParquet(t, "q.parquet", []textRow{{"q", "1", ""}, {"caf\xe9", "1", ""}})
		}},
		{"unused column", `row 0: field "note": invalid UTF-8`, "note", 0, func(t *testing.T) string {
			return writeParquet(t, "n.parquet", []textRow{{"q", "1", "\xff"}})
		}},
		{"nested", `row 0: field "prompt[1].content": invalid UTF-8`, "prompt[1].content", 0, func(t *testing.T) string {
			var r verlRow
			r.Prompt = []chatMessage{{"system", "s"}, {"user", "\x80"}}
			r.RewardModel.GroundTruth = "1"
			return writeParquet(t, "v.parquet", []verlRow{r})
		}},
		{"binary read as text", `row 0: field "question": invalid UTF-8`, "question", 0, func(t *testing.T) string {
			return writeParquet(t, "b.parquet", []binRow{{[]byte("\xfe"), "1", nil}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			path := tt.path(t)
			ex, err := LoadColumns(path, Columns{})
			want(t, "error", errString(err), "task: "+path+": "+tt.want)
			var e *Error
			if !errors.As(err, &e) || e.Index != tt.index || e.Field != tt.field || ex != nil {
				t.Errorf("%d examples, error %#v", len(ex), err)
			}
		})
	}

	path := writeParquet(t, "image.parquet", []binRow{{[]byte("q"), "1", []byte{0x89, 'P', 'N', 'G', 0xff}}})
	ex, err := LoadColumns(path, Columns{})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "examples", ex, []Example{{ID: "generic/0", Prompt: "q", Answer: "1", Kind: Math,
		Meta: map[string]string{"dataset": "generic"}, Source: path + ":row 0"}})
}
