package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// decoder turns one record of a dataset into an Example. It leaves ID
// empty or sets it to the dataset's own id, and may leave Meta nil: the
// reader adds the name prefix, the record's unused scalar fields and
// Meta["dataset"].
type decoder func(r *record) (Example, error)

// formats maps each dataset name to its decoder.
var formats = map[string]decoder{
	"gsm8k":      decodeGSM8K,
	"math500":    decodeMATH500,
	"aime24":     decodeCompetition,
	"amc23":      decodeCompetition,
	"mathqa":     decodeMathQA,
	"strategyqa": decodeStrategyQA,
	"deepscaler": decodeDeepScaleR,
	"generic":    Columns{}.decode,
}

// Names returns the names of the datasets that Load, NewReader and Stream
// know, sorted:
//
//   - "gsm8k": GSM8K JSON Lines {question, answer}. Answer is the text after
//     "####", as written ("1,080"); Solution is the text before it with the
//     "<<48/2=24>>" calculator annotations removed, and Meta["raw_solution"]
//     keeps it with them.
//   - "math500": MATH-500 {problem, solution, answer, subject, level,
//     unique_id}; ID is the unique_id.
//   - "aime24", "amc23": Qwen2.5-Math's competition sets {id, problem,
//     answer, solution, url}. Answer is kept as written: AIME 2024 has
//     strings like "025", AMC 2023 has JSON floats, so "27.0".
//   - "mathqa": MathQA {problem, rationale, options, correct}. Kind is
//     MultipleChoice, Choices are parsed from options (see ParseChoices),
//     Prompt is the problem followed by the choices (see FormatChoices),
//     Answer is the letter of the correct choice as written ("a"), and
//     Solution is the rationale without its surrounding quotes.
//   - "strategyqa": StrategyQA {qid, question, answer, facts,
//     decomposition}. Kind is YesNo and the boolean answer becomes "yes" or
//     "no"; Solution is the facts joined by spaces and
//     Meta["decomposition"] the decomposition's questions, one a line.
//   - "deepscaler": DeepScaleR {problem, answer, solution}. Answers are
//     kept as written, and a null answer loads as "", so that counts match
//     the files: train_math.json has two null and two empty answers.
//   - "generic": any records, read with the default Columns.
//
// In every dataset the fields that a loader does not use and that hold a
// string, number or boolean go to Meta as text.
func Names() []string {
	names := make([]string, 0, len(formats))
	for name := range formats {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// lookup returns the decoder for a dataset name.
func lookup(name string) (decoder, error) {
	if dec, ok := formats[name]; ok {
		return dec, nil
	}
	return nil, fmt.Errorf("task: unknown dataset %q (known: %s)", name, strings.Join(Names(), ", "))
}

// finish completes an Example decoded from the record at index of dataset
// name: its ID, and Meta with the record's other fields.
func finish(name string, index int, r *record, e *Example) {
	if e.ID == "" {
		e.ID = strconv.Itoa(index)
	}
	e.ID = name + "/" + e.ID
	if e.Meta == nil {
		e.Meta = make(map[string]string)
	}
	r.restMeta(e.Meta)
	e.Meta["dataset"] = name
}

func decodeGSM8K(r *record) (Example, error) {
	q, err := r.str("question")
	if err != nil {
		return Example{}, err
	}
	a, err := r.str("answer")
	if err != nil {
		return Example{}, err
	}
	sol, ans, ok := SplitGSM8KAnswer(a)
	if !ok {
		return Example{}, fieldErrorf("answer", `missing "####"`)
	}
	if ans == "" {
		return Example{}, fieldErrorf("answer", `no answer after "####"`)
	}
	return Example{
		Prompt:   q,
		Answer:   ans,
		Solution: StripCalculatorAnnotations(sol),
		Kind:     Math,
		Meta:     map[string]string{"raw_solution": sol},
	}, nil
}

// SplitGSM8KAnswer splits a GSM8K answer field at its last "####" into the
// solution before it and the final answer after it, both trimmed of
// spaces. It returns false when there is no "####".
func SplitGSM8KAnswer(s string) (solution, answer string, ok bool) {
	i := strings.LastIndex(s, "####")
	if i < 0 {
		return "", "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+len("####"):]), true
}

// StripCalculatorAnnotations removes GSM8K's calculator annotations, the
// "<<48/2=24>>" in "48/2 = <<48/2=24>>24", from s. An unterminated "<<" is
// kept.
func StripCalculatorAnnotations(s string) string {
	if !strings.Contains(s, "<<") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.Index(s, "<<")
		if i < 0 {
			break
		}
		j := strings.Index(s[i+2:], ">>")
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		s = s[i+2+j+2:]
	}
	b.WriteString(s)
	return b.String()
}

func decodeMATH500(r *record) (Example, error) {
	return mathExample(r, "problem", "unique_id")
}

// mathExample reads a math problem with its answer and, when present, its
// solution and id.
func mathExample(r *record, problem, id string) (Example, error) {
	var e Example
	var err error
	for _, f := range []struct {
		dst      *string
		name     string
		optional bool
	}{{&e.Prompt, problem, false}, {&e.Answer, "answer", false}, {&e.Solution, "solution", true}, {&e.ID, id, true}} {
		if f.optional {
			*f.dst, err = r.optStr(f.name)
		} else {
			*f.dst, err = r.str(f.name)
		}
		if err != nil {
			return Example{}, err
		}
	}
	e.Kind = Math
	return e, nil
}

// decodeCompetition reads Qwen2.5-Math's AIME and AMC files, which repeat
// the problem as "question".
func decodeCompetition(r *record) (Example, error) {
	field := r.first("problem", "question")
	if field == "" {
		field = "problem"
	}
	if q, ok := r.m["question"].(string); ok && field == "problem" {
		if p, _ := r.m["problem"].(string); q == p {
			r.used["question"] = true
		}
	}
	return mathExample(r, field, "id")
}

func decodeMathQA(r *record) (Example, error) {
	p, err := r.str("problem")
	if err != nil {
		return Example{}, err
	}
	var choices []string
	if v, ok := r.get("options"); ok {
		if _, isList := v.([]any); isList {
			choices, err = r.strList("options")
			if err != nil {
				return Example{}, err
			}
			for i, c := range choices {
				choices[i] = trimLetter(c, i)
			}
		}
	}
	if choices == nil {
		opts, err := r.str("options")
		if err != nil {
			return Example{}, err
		}
		if choices, err = ParseChoices(opts); err != nil {
			return Example{}, fieldErr("options", err)
		}
	}
	correct, err := r.str("correct")
	if err != nil {
		return Example{}, err
	}
	if i, ok := ChoiceIndex(correct); !ok || i >= len(choices) {
		return Example{}, fieldErrorf("correct", fmt.Sprintf("%q is not a letter from a to %s", correct, ChoiceLetter(len(choices)-1)))
	}
	rationale, err := r.optStr("rationale")
	if err != nil {
		return Example{}, err
	}
	if len(rationale) >= 2 && rationale[0] == '"' && rationale[len(rationale)-1] == '"' {
		rationale = rationale[1 : len(rationale)-1]
	}
	return Example{
		Prompt:   FormatChoices(p, choices),
		Answer:   correct,
		Solution: strings.TrimSpace(rationale),
		Kind:     MultipleChoice,
		Choices:  choices,
		Meta:     map[string]string{"problem": p},
	}, nil
}

// ParseChoices parses MathQA's options, "a ) 12 , b ) 16 , c ) 18", into
// the choices without their letters: ["12", "16", "18"]. It also reads the
// two other forms found in MathQA: a Python list, "['a ) 12', 'b ) 16']",
// and doubled letters, "a ) a ) 12 , b ) b ) 16". The letters must run from
// "a" in order.
func ParseChoices(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	var items []string
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		var err error
		if items, err = parsePyStrings(s[1 : len(s)-1]); err != nil {
			return nil, err
		}
	} else {
		items = splitLettered(s)
	}
	if len(items) == 0 {
		return nil, errors.New("no choices")
	}
	if len(items) > 26 {
		return nil, fmt.Errorf("%d choices, more than a to z", len(items))
	}
	choices := make([]string, len(items))
	for i, item := range items {
		rest, ok := cutLetter(item, i)
		if !ok {
			return nil, fmt.Errorf("choice %d: want %q, got %q", i, ChoiceLetter(i)+" )", item)
		}
		choices[i] = trimLetter(rest, i)
	}
	return choices, nil
}

// cutLetter cuts the letter of choice i and its ")" from the start of s.
func cutLetter(s string, i int) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) == 0 || s[0]|0x20 != ChoiceLetter(i)[0] {
		return s, false
	}
	rest := strings.TrimLeft(s[1:], " ")
	if !strings.HasPrefix(rest, ")") {
		return s, false
	}
	return strings.TrimSpace(rest[1:]), true
}

// trimLetter removes a letter prefix of choice i from s if it has one, and
// the spaces around it.
func trimLetter(s string, i int) string {
	rest, _ := cutLetter(s, i)
	return rest
}

// splitLettered splits "a ) x , b ) y , c ) z" before each ", b )",
// ", c )", ... in turn. The first item is everything before ", b )".
func splitLettered(s string) []string {
	var items []string
	for i := 1; ; i++ {
		next := nextLetter(s, i)
		if next < 0 {
			return append(items, s)
		}
		items = append(items, s[:next])
		s = s[next+1:] // after the comma
	}
}

// nextLetter returns the index of the comma of the first ", L )" in s,
// where L is the letter of choice i, or -1.
func nextLetter(s string, i int) int {
	l := ChoiceLetter(i)
	if l == "" {
		return -1
	}
	for off := 0; ; {
		c := strings.IndexByte(s[off:], ',')
		if c < 0 {
			return -1
		}
		c += off
		rest := strings.TrimLeft(s[c+1:], " ")
		if rest != "" && rest[0]|0x20 == l[0] && strings.HasPrefix(strings.TrimLeft(rest[1:], " "), ")") {
			return c
		}
		off = c + 1
	}
}

// parsePyStrings parses the inside of a Python list of string literals,
// "'a', \"b\"", allowing backslash escapes of the quote and backslash.
func parsePyStrings(s string) ([]string, error) {
	var items []string
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return items, nil
		}
		if len(items) > 0 {
			if s[0] != ',' {
				return nil, fmt.Errorf("list: want ',' before item %d", len(items))
			}
			s = strings.TrimLeft(s[1:], " \t\r\n")
			if s == "" { // trailing comma
				return items, nil
			}
		}
		q := s[0]
		if q != '\'' && q != '"' {
			return nil, fmt.Errorf("list: item %d is not a quoted string", len(items))
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != q; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, fmt.Errorf("list: item %d has no closing quote", len(items))
		}
		items = append(items, b.String())
		s = s[i+1:]
	}
}

func decodeStrategyQA(r *record) (Example, error) {
	q, err := r.str("question")
	if err != nil {
		return Example{}, err
	}
	a, err := r.yesNo("answer")
	if err != nil {
		return Example{}, err
	}
	facts, err := r.strList("facts")
	if err != nil {
		return Example{}, err
	}
	decomp, err := r.strList("decomposition")
	if err != nil {
		return Example{}, err
	}
	id, err := r.optStr("qid")
	if err != nil {
		return Example{}, err
	}
	e := Example{ID: id, Prompt: q, Answer: a, Solution: strings.Join(facts, " "), Kind: YesNo, Meta: map[string]string{}}
	if len(decomp) > 0 {
		e.Meta["decomposition"] = strings.Join(decomp, "\n")
	}
	return e, nil
}

func decodeDeepScaleR(r *record) (Example, error) {
	p, err := r.str("problem")
	if err != nil {
		return Example{}, err
	}
	if !r.has("answer") {
		return Example{}, fieldErr("answer", errMissing)
	}
	a, err := r.optStr("answer")
	if err != nil {
		return Example{}, err
	}
	sol, err := r.optStr("solution")
	if err != nil {
		return Example{}, err
	}
	return Example{Prompt: p, Answer: a, Solution: sol, Kind: Math}, nil
}

// Columns says which fields of a record, JSON keys or Parquet columns, make
// an Example. Empty fields take defaults, so the zero Columns reads most
// Hugging Face datasets. A name may be a dotted path into nested objects,
// such as "reward_model.ground_truth".
type Columns struct {
	// Dataset names the data in IDs and Meta["dataset"]; default "generic".
	Dataset string
	// ID is the example's id; default the first present of "id" and
	// "unique_id", and else the row's position.
	ID string
	// Prompt is the problem; default the first present of "question",
	// "problem" and "prompt". A prompt that is a list of {role, content}
	// objects, as in verl's Parquet files, is read as Messages, and Prompt
	// is then the content of the last user message.
	Prompt string
	// Messages is a chat, a list of {role, content} objects; default
	// "messages", if present.
	Messages string
	// Answer is the gold answer; default the first present of "answer" and
	// "reward_model.ground_truth".
	Answer string
	// Solution is the reference solution; default "solution", if present.
	Solution string
	// Choices lists the options of a multiple-choice problem; default
	// "choices", if present.
	Choices string
	// Kind is the kind of answer: default MultipleChoice when the record
	// has choices, and Math otherwise. For MultipleChoice an integer answer
	// is read as the 0-based index of the correct choice and becomes its
	// letter; for YesNo, booleans become "yes" or "no".
	Kind AnswerKind
}

// dataset returns the name of the data read through c.
func (c Columns) dataset() string {
	if c.Dataset == "" {
		return "generic"
	}
	return c.Dataset
}

// field returns the field named by col if it is set, and else the first
// present of defaults, or defaults[0] if none is.
func field(r *record, col string, defaults ...string) string {
	if col != "" {
		return col
	}
	if f := r.first(defaults...); f != "" {
		return f
	}
	return defaults[0]
}

func (c Columns) decode(r *record) (Example, error) {
	var e Example
	var err error

	msgField := field(r, c.Messages, "messages")
	if e.Messages, err = r.messages(msgField); err != nil {
		return Example{}, err
	}
	pField := field(r, c.Prompt, "question", "problem", "prompt")
	if v, ok := r.get(pField); ok {
		if _, isList := v.([]any); isList {
			if e.Messages, err = r.messages(pField); err != nil {
				return Example{}, err
			}
		} else if e.Prompt, err = r.str(pField); err != nil {
			return Example{}, err
		}
	}
	if e.Prompt == "" && len(e.Messages) > 0 {
		e.Prompt = lastUser(e.Messages)
	}
	if e.Prompt == "" {
		if _, err := r.str(pField); err != nil {
			return Example{}, err
		}
		return Example{}, fieldErrorf(pField, "empty")
	}

	chField := field(r, c.Choices, "choices")
	if e.Choices, err = r.strList(chField); err != nil {
		return Example{}, err
	}
	e.Kind = c.Kind
	if e.Kind == "" {
		e.Kind = Math
		if len(e.Choices) > 0 {
			e.Kind = MultipleChoice
		}
	}
	if len(e.Choices) > 0 && len(e.Messages) == 0 {
		e.Prompt = FormatChoices(e.Prompt, e.Choices)
	}

	aField := field(r, c.Answer, "answer", "reward_model.ground_truth")
	if e.Kind == YesNo {
		e.Answer, err = r.yesNo(aField)
	} else {
		e.Answer, err = r.str(aField)
	}
	if err != nil {
		return Example{}, err
	}
	if e.Kind == MultipleChoice {
		if n, ok := choiceNumber(r, aField); ok {
			if n < 0 || n >= len(e.Choices) || n >= 26 {
				return Example{}, fieldErrorf(aField, fmt.Sprintf("choice %d out of range [0, %d)", n, len(e.Choices)))
			}
			e.Answer = ChoiceLetter(n)
		}
	}

	if e.Solution, err = r.optStr(field(r, c.Solution, "solution")); err != nil {
		return Example{}, err
	}
	if c.ID != "" {
		e.ID, err = r.str(c.ID)
	} else {
		e.ID, err = r.optStr(field(r, "", "id", "unique_id"))
	}
	if err != nil {
		return Example{}, err
	}
	return e, nil
}

// choiceNumber returns an integer answer field as an int.
func choiceNumber(r *record, f string) (int, bool) {
	v, _ := r.get(f)
	var s string
	switch v := v.(type) {
	case json.Number:
		s = string(v)
	case string, bool, nil, []any, map[string]any, []byte:
		return 0, false
	default:
		s, _ = scalarText(v)
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// lastUser returns the content of the last user message.
func lastUser(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}
