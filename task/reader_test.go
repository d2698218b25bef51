package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	gsmOK  = `{"question": "q", "answer": "1+1=<<1+1=2>>2\n#### 2"}`
	sqaOK  = `{"qid": "x", "question": "q?", "answer": true, "facts": ["f"], "decomposition": ["d"]}`
	mqaOpt = `"options": "a ) 1 , b ) 2 , c ) 3 , d ) 4 , e ) 5"`
)

// TestMalformed writes malformed files and checks the exact errors; FILE in
// a wanted error stands for the file's path.
func TestMalformed(t *testing.T) {
	tests := []struct {
		desc, name, file, data string
		want                   string
		line, index            int // of the *Error
		field                  string
	}{
		{"no ####", "gsm8k", "test.jsonl", gsmOK + "\n" + `{"question": "q", "answer": "2"}` + "\n",
			`task: FILE:2: field "answer": missing "####"`, 2, -1, "answer"},
		{"nothing after ####", "gsm8k", "test.jsonl", `{"question": "q", "answer": "x ####  "}`,
			`task: FILE:1: field "answer": no answer after "####"`, 1, -1, "answer"},
		{"missing field", "gsm8k", "test.jsonl", `{"answer": "#### 2"}`,
			`task: FILE:1: field "question": missing`, 1, -1, "question"},
		{"null field", "gsm8k", "test.jsonl", gsmOK + "\n\n\n" + `{"question": "q", "answer": null}`,
			`task: FILE:4: field "answer": null`, 4, -1, "answer"},
		{"wrong type", "gsm8k", "test.jsonl", `{"question": ["q"], "answer": "#### 2"}`,
			`task: FILE:1: field "question": want a string, got an array`, 1, -1, "question"},
		{"bad JSON", "gsm8k", "test.jsonl", gsmOK + "\n" + `{"question": "q", "answer" "#### 2"}`,
			`task: FILE:2: invalid JSON at column 28: invalid character '"' after object key`, 2, -1, ""},
		{"bad JSON after spaces", "gsm8k", "test.jsonl", "\t  " + `{"question" 1}`,
			`task: FILE:1: invalid JSON at column 16: invalid character '1' after object key`, 1, -1, ""},
		{"truncated line", "gsm8k", "test.jsonl", gsmOK + "\n" + `{"question": "q", "ans`,
			`task: FILE:2: invalid JSON: unexpected end of input`, 2, -1, ""},
		{"not an object", "gsm8k", "test.jsonl", gsmOK + "\n[1, 2]\n",
			`task: FILE:2: want a JSON object, got an array`, 2, -1, ""},
		{"two objects on a line", "gsm8k", "test.jsonl", gsmOK + " {}\n",
			`task: FILE:1: invalid JSON: more data after the object`, 1, -1, ""},
		{"CRLF and blank lines", "gsm8k", "test.jsonl", "\r\n\r\n" + gsmOK + "\r\n" + `{"question": "q", "answer": "2"}` + "\r\n",
			`task: FILE:4: field "answer": missing "####"`, 4, -1, "answer"},
		{"not JSON", "gsm8k", "test.jsonl", "question,answer\n",
			`task: FILE: want JSON Lines or a JSON array, found 'q'`, 0, -1, ""},
		{"bad boolean", "strategyqa", "dev.json", "[" + sqaOK + `, {"question": "q?", "answer": "maybe"}]`,
			`task: FILE: element 1: field "answer": want a boolean, got "maybe"`, 0, 1, "answer"},
		{"bad facts", "strategyqa", "dev.json", `[{"question": "q?", "answer": false, "facts": "f"}]`,
			`task: FILE: element 0: field "facts": want an array of strings, got a string`, 0, 0, "facts"},
		{"element not an object", "strategyqa", "dev.json", "[" + sqaOK + ", 3]",
			`task: FILE: element 1: want a JSON object, got a number`, 0, 1, ""},
		{"truncated array", "strategyqa", "dev.json", "[" + sqaOK + `, {"question": `,
			`task: FILE: element 1: invalid JSON: unexpected end of input`, 0, 1, ""},
		{"unclosed array", "strategyqa", "dev.json", "[" + sqaOK,
			`task: FILE: element 1: invalid JSON: unexpected end of input`, 0, 1, ""},
		{"syntax error in array", "deepscaler", "x.json", `[{"problem": "p", "answer": "1"}, {"problem" "p"}]`,
			`task: FILE: element 1: invalid JSON: invalid character '"' after object key`, 0, 1, ""},
		{"data after array", "deepscaler", "x.json", `[{"problem": "p", "answer": "1"}] []`,
			`task: FILE: invalid JSON: more data after the array`, 0, -1, ""},
		{"missing answer", "deepscaler", "x.json", `[{"problem": "p"}]`,
			`task: FILE: element 0: field "answer": missing`, 0, 0, "answer"},
		{"bad correct letter", "mathqa", "test.jsonl", `{"problem": "p", ` + mqaOpt + `, "correct": "f"}`,
			`task: FILE:1: field "correct": "f" is not a letter from a to e`, 1, -1, "correct"},
		{"bad options", "mathqa", "test.jsonl", `{"problem": "p", "options": "x ) 1 , y ) 2", "correct": "a"}`,
			`task: FILE:1: field "options": choice 0: want "a )", got "x ) 1 , y ) 2"`, 1, -1, "options"},
		{"math500 answer", "math500", "test.jsonl", `{"problem": "p", "answer": {"x": 1}}`,
			`task: FILE:1: field "answer": want a string, got an object`, 1, -1, "answer"},
		{"competition problem", "amc23", "test.jsonl", `{"id": 0, "answer": 27.0}`,
			`task: FILE:1: field "problem": missing`, 1, -1, "problem"},
		{"generic answer", "generic", "g.jsonl", `{"question": "q"}`,
			`task: FILE:1: field "answer": missing`, 1, -1, "answer"},
		{"generic prompt", "generic", "g.jsonl", `{"answer": "1"}`,
			`task: FILE:1: field "question": missing`, 1, -1, "question"},
		{"invalid UTF-8 in a value", "gsm8k", "test.jsonl", gsmOK + "\n  {\"question\": \"caf\xe9?\", \"answer\": \"#### 2\"}",
			`task: FILE:2: field "question": invalid UTF-8 at column 20`, 2, -1, "question"},
		{"truncated UTF-8 sequence", "gsm8k", "test.jsonl", `{"question": "q", "answer": "#### 2` + "\xe2\x82" + `"}`,
			`task: FILE:1: field "answer": invalid UTF-8 at column 36`, 1, -1, "answer"},
		{"invalid UTF-8 in an unused field", "math500", "test.jsonl", `{"problem": "p", "answer": "1", "subject": "` + "\xff" + `"}`,
			`task: FILE:1: field "subject": invalid UTF-8 at column 45`, 1, -1, "subject"},
		{"invalid UTF-8 in a name", "gsm8k", "test.jsonl", `{"question": "q", "answer": "#### 2", "n` + "\xc0" + `te": 1}`,
			"task: FILE:1: field \"n\ufffdte\": invalid UTF-8 in the field's name at column 41", 1, -1, "n\ufffdte"},
		{"invalid UTF-8 in a nested value", "generic", "g.jsonl", `{"prompt": [{"role": "user", "content": "` + "\x80" + `"}], "answer": "1"}`,
			`task: FILE:1: field "prompt[0].content": invalid UTF-8 at column 42`, 1, -1, "prompt[0].content"},
		{"invalid UTF-8 after bad JSON", "gsm8k", "test.jsonl", `{"question" 1, "a": "` + "\xff" + `"}`,
			`task: FILE:1: invalid UTF-8 at column 22`, 1, -1, ""},
		{"invalid UTF-8 before bad JSON", "gsm8k", "test.jsonl", `{"question": "` + "\xff" + `" "answer"}`,
			`task: FILE:1: field "question": invalid UTF-8 at column 15`, 1, -1, "question"},
		{"invalid UTF-8 in an element", "strategyqa", "dev.json", "[" + sqaOK + `, {"question": "q?", "answer": true, "facts": ["ok", "` + "\xed\xa0\x80" + `"]}]`,
			`task: FILE: element 1: field "facts[1]": invalid UTF-8`, 0, 1, "facts[1]"},
		{"invalid UTF-8 in an element's name", "deepscaler", "x.json", `[{"problem": "p", "answer": "1", "` + "\xfe" + `": 2}]`,
			"task: FILE: element 0: field \"\ufffd\": invalid UTF-8 in the field's name", 0, 0, "\ufffd"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, []byte(tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			ex, err := Load(tt.name, path)
			if err == nil {
				t.Fatalf("no error; %d examples", len(ex))
			}
			if ex != nil {
				t.Errorf("%d examples with the error", len(ex))
			}
			if want := strings.ReplaceAll(tt.want, "FILE", path); err.Error() != want {
				t.Errorf("error\n %s\nwant\n %s", err, want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is no *Error", err)
			}
			if e.File != path || e.Line != tt.line || e.Index != tt.index || e.Field != tt.field {
				t.Errorf("Error{File: %q, Line: %d, Index: %d, Field: %q}, want {%q, %d, %d, %q}",
					e.File, e.Line, e.Index, e.Field, path, tt.line, tt.index, tt.field)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("nope", "x.jsonl")
	if err == nil || !strings.HasPrefix(err.Error(), `task: unknown dataset "nope" (known: aime24, amc23, deepscaler, generic, gsm8k, math500, mathqa, strategyqa)`) {
		t.Errorf("unknown dataset: %v", err)
	}
	_, err = Load("gsm8k", filepath.Join(t.TempDir(), "missing.jsonl"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := NewReader(strings.NewReader(""), "nope"); err == nil {
		t.Error("NewReader accepted an unknown dataset")
	}
}

// TestEmptyInput reads inputs that are empty or only white space, which
// are errors, and inputs with no records, which are not.
func TestEmptyInput(t *testing.T) {
	dir := t.TempDir()
	for i, data := range []string{"", "\n\n", " \r\n", "\t", "\xef\xbb\xbf", "\xef\xbb\xbf \n"} {
		err := Stream(strings.NewReader(data), "gsm8k", func(Example) error { return nil })
		want(t, fmt.Sprintf("Stream(%q)", data), errString(err), "task: gsm8k: the file is empty")
		if !errors.Is(err, ErrEmpty) {
			t.Errorf("Stream(%q): %v is not ErrEmpty", data, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("empty%d.jsonl", i))
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, load := range []struct {
			name string
			f    func(string) ([]Example, error)
		}{
			{"Load", LoadGSM8K},
			{"LoadColumns", func(p string) ([]Example, error) { return LoadColumns(p, Columns{}) }},
			{"LoadParquet", func(p string) ([]Example, error) { return LoadParquet(p, Columns{}) }},
		} {
			if load.name == "LoadParquet" && data != "" {
				continue // white space is no Parquet file
			}
			ex, err := load.f(path)
			want(t, fmt.Sprintf("%s(%q)", load.name, data), errString(err), "task: "+path+": the file is empty")
			var e *Error
			if !errors.As(err, &e) || e.File != path || ex != nil {
				t.Errorf("%s(%q) = %d examples, %#v", load.name, data, len(ex), err)
			}
		}
	}
	for _, data := range []string{"[]", " [ ] \n", "\xef\xbb\xbf[]"} {
		n := 0
		err := Stream(strings.NewReader(data), "gsm8k", func(Example) error { n++; return nil })
		if err != nil || n != 0 {
			t.Errorf("%q: %d examples, %v", data, n, err)
		}
	}
}

// TestSource checks where each reader says an example came from.
func TestSource(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "test.jsonl")
	if err := os.WriteFile(jsonl, []byte("\xef\xbb\xbf\n"+gsmOK+"\r\n\n  "+gsmOK+"\n"+gsmOK), 0o644); err != nil {
		t.Fatal(err)
	}
	array := filepath.Join(dir, "dev.json")
	if err := os.WriteFile(array, []byte("[\n"+sqaOK+",\n\n"+sqaOK+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	sources := func(ex []Example, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ex {
			out = append(out, e.Source)
		}
		return out
	}
	want(t, "JSON Lines", sources(Load("gsm8k", jsonl)), []string{jsonl + ":2", jsonl + ":4", jsonl + ":5"})
	want(t, "JSON array", sources(Load("strategyqa", array)), []string{array + ":element 0", array + ":element 1"})
	want(t, "columns", sources(LoadColumns(jsonl, Columns{Answer: "answer"})), []string{jsonl + ":2", jsonl + ":4", jsonl + ":5"})

	var streamed []Example
	err := Stream(strings.NewReader(gsmOK+"\n\n"+gsmOK), "gsm8k", func(e Example) error {
		streamed = append(streamed, e)
		return nil
	})
	want(t, "stream", sources(streamed, err), []string{"gsm8k:1", "gsm8k:3"})

	r, _ := NewReader(strings.NewReader("["+sqaOK+"]"), "strategyqa")
	r.File = "mem.json"
	e, err := r.Read()
	want(t, "reader", sources([]Example{e}, err), []string{"mem.json:element 0"})
	want(t, "Where", e.Where(), "mem.json:element 0")
	want(t, "Where without a source", Example{ID: "world/x"}.Where(), "world/x")
}

func TestReaderStopsAtError(t *testing.T) {
	r, err := NewReader(strings.NewReader(gsmOK+"\nnot json\n"+gsmOK+"\n"), "gsm8k")
	if err != nil {
		t.Fatal(err)
	}
	r.File = "mem.jsonl"
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	_, err1 := r.Read()
	_, err2 := r.Read()
	if err1 == nil || err1 != err2 {
		t.Errorf("errors %v then %v, want the same error twice", err1, err2)
	}
	want(t, "error", err1.Error(), "task: mem.jsonl:2: invalid JSON at column 2: invalid character 'o' in literal null (expecting 'u')")

	r, _ = NewReader(strings.NewReader(gsmOK+"\n"), "gsm8k")
	for range 3 {
		if _, err := r.Read(); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Errorf("after the end: %v, want io.EOF", err)
	}
}

func TestStreamReturnsCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Stream(strings.NewReader(gsmOK+"\n"+gsmOK+"\n"), "gsm8k", func(Example) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Errorf("Stream = %v after %d calls, want stop after 1", err, n)
	}
}

func TestStreamRejectsParquet(t *testing.T) {
	err := Stream(bytes.NewReader([]byte("PAR1\x00\x00")), "generic", func(Example) error { return nil })
	want(t, "error", err.Error(), "task: generic: a Parquet file: read it with Load, LoadParquet or ReadParquet")
}

func TestSplitGSM8KAnswer(t *testing.T) {
	tests := []struct {
		in, sol, ans string
		ok           bool
	}{
		{"a\nb\n#### 18", "a\nb", "18", true},
		{"#### 1,080", "", "1,080", true},
		{"x #### 1 #### 2", "x #### 1", "2", true},
		{"no marker", "", "", false},
		{"x\n####", "x", "", true},
	}
	for _, tt := range tests {
		sol, ans, ok := SplitGSM8KAnswer(tt.in)
		if sol != tt.sol || ans != tt.ans || ok != tt.ok {
			t.Errorf("SplitGSM8KAnswer(%q) = %q, %q, %v; want %q, %q, %v", tt.in, sol, ans, ok, tt.sol, tt.ans, tt.ok)
		}
	}
}

func TestStripCalculatorAnnotations(t *testing.T) {
	tests := []struct{ in, want string }{
		{"48/2 = <<48/2=24>>24 clips", "48/2 = 24 clips"},
		{"<<1+1=2>>2 and <<2*3=6>>6", "2 and 6"},
		{"no annotations", "no annotations"},
		{"open << only", "open << only"},
		{"a <<1=1>> b << c", "a  b << c"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := StripCalculatorAnnotations(tt.in); got != tt.want {
			t.Errorf("StripCalculatorAnnotations(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseChoices(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{"a ) 12 , b ) 16 , c ) 18 , d ) 24 , e ) 26", []string{"12", "16", "18", "24", "26"}, ""},
		{"a ) 1 : 1 , b ) 1 : 87", []string{"1 : 1", "1 : 87"}, ""},
		{"a ) rs . 1 , 200 , b ) rs . 2 , 400", []string{"rs . 1 , 200", "rs . 2 , 400"}, ""},
		{"a ) a ) 4.8 , b ) b ) 6.333 , c ) c ) 7", []string{"4.8", "6.333", "7"}, ""},
		{"a ) 124 % , b ) b ) 120 %", []string{"124 %", "120 %"}, ""},
		{"['a ) 462 cm ²', 'b ) 530 cm ²', 'c ) none']", []string{"462 cm ²", "530 cm ²", "none"}, ""},
		{`['a ) it\'s', "b ) two"]`, []string{"it's", "two"}, ""},
		{"a) 1, b) 2", []string{"1", "2"}, ""},
		{"A ) 1 , B ) 2", []string{"1", "2"}, ""},
		{"a ) only", []string{"only"}, ""},
		{"", nil, `choice 0: want "a )", got ""`},
		{"12 , 16", nil, `choice 0: want "a )", got "12 , 16"`},
		{"['a ) 1', 'b ) 2'", nil, `choice 0: want "a )", got "['a ) 1', 'b ) 2'"`},
		{"['a ) 1' 'b ) 2']", nil, "list: want ',' before item 1"},
		{"['a ) 1', b ) 2]", nil, "list: item 1 is not a quoted string"},
		{"['a ) 1', 'b ) 2]", nil, "list: item 1 has no closing quote"},
		{"[]", nil, "no choices"},
		{"['b ) 1']", nil, `choice 0: want "a )", got "b ) 1"`},
	}
	for _, tt := range tests {
		got, err := ParseChoices(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseChoices(%q) error = %v, want %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !equal(got, tt.want) {
			t.Errorf("ParseChoices(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestChoices(t *testing.T) {
	for i, l := range []string{"a", "b", "z"} {
		n := []int{0, 1, 25}[i]
		if ChoiceLetter(n) != l {
			t.Errorf("ChoiceLetter(%d) = %q", n, ChoiceLetter(n))
		}
		if got, ok := ChoiceIndex(strings.ToUpper(l)); got != n || !ok {
			t.Errorf("ChoiceIndex(%q) = %d, %v", strings.ToUpper(l), got, ok)
		}
	}
	for _, bad := range []string{"", "ab", "1", "["} {
		if _, ok := ChoiceIndex(bad); ok {
			t.Errorf("ChoiceIndex(%q) ok", bad)
		}
	}
	if ChoiceLetter(-1) != "" || ChoiceLetter(26) != "" {
		t.Error("ChoiceLetter out of range")
	}
	e := Example{Answer: "B", Choices: []string{"x", "y"}}
	if c, ok := e.Choice(); c != "y" || !ok {
		t.Errorf("Choice() = %q, %v", c, ok)
	}
	e.Answer = "c"
	if _, ok := e.Choice(); ok {
		t.Error("Choice() ok for a letter past the choices")
	}
	want(t, "FormatChoices", FormatChoices("q?", []string{"x", "y"}), "q?\na) x\nb) y")
	want(t, "Chat", Example{Prompt: "p"}.Chat(), []Message{{"user", "p"}})
	msgs := []Message{{"system", "s"}, {"user", "u"}}
	want(t, "Chat with messages", Example{Prompt: "u", Messages: msgs}.Chat(), msgs)
}

// TestGenericJSON reads records through the default and custom Columns.
func TestGenericJSON(t *testing.T) {
	tests := []struct {
		desc string
		cols Columns
		data string
		want Example
	}{
		{"defaults", Columns{}, `{"problem": "p", "answer": 3.50, "solution": "s", "id": 7, "level": 2, "tags": ["x"]}`,
			Example{ID: "generic/7", Prompt: "p", Answer: "3.50", Solution: "s", Kind: Math, Meta: map[string]string{"dataset": "generic", "level": "2"}, Source: "generic:1"}},
		{"mapping", Columns{Dataset: "mine", Prompt: "query", Answer: "target", Solution: "why"}, `{"query": "p", "target": "t", "why": "w", "answer": "ignored"}`,
			Example{ID: "mine/0", Prompt: "p", Answer: "t", Solution: "w", Kind: Math, Meta: map[string]string{"dataset": "mine", "answer": "ignored"}, Source: "mine:1"}},
		{"multiple choice", Columns{}, `{"question": "q", "choices": ["x", "y", "z"], "answer": 2}`,
			Example{ID: "generic/0", Prompt: "q\na) x\nb) y\nc) z", Answer: "c", Kind: MultipleChoice, Choices: []string{"x", "y", "z"}, Meta: map[string]string{"dataset": "generic"}, Source: "generic:1"}},
		{"yes-no", Columns{Kind: YesNo}, `{"question": "q", "answer": false}`,
			Example{ID: "generic/0", Prompt: "q", Answer: "no", Kind: YesNo, Meta: map[string]string{"dataset": "generic"}, Source: "generic:1"}},
		{"verl chat", Columns{}, `{"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "reward_model": {"ground_truth": "42", "style": "rule"}, "data_source": "ds"}`,
			Example{ID: "generic/0", Prompt: "u", Messages: []Message{{"system", "s"}, {"user", "u"}}, Answer: "42", Kind: Math, Meta: map[string]string{"dataset": "generic", "data_source": "ds"}, Source: "generic:1"}},
		{"messages", Columns{Answer: "gold"}, `{"messages": [{"role": "user", "content": "u"}], "gold": "g"}`,
			Example{ID: "generic/0", Prompt: "u", Messages: []Message{{"user", "u"}}, Answer: "g", Kind: Math, Meta: map[string]string{"dataset": "generic"}, Source: "generic:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			r := NewColumnsReader(strings.NewReader(tt.data), tt.cols)
			e, err := r.Read()
			if err != nil {
				t.Fatal(err)
			}
			want(t, "example", e, tt.want)
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
