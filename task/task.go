// Package task holds the typed examples that every rlvr method trains and
// evaluates on, and the loaders for real datasets.
//
// An [Example] is one problem: the prompt a model sees, the gold answer as
// the dataset writes it, an optional reference solution, the kind of answer
// a grader should expect ([Math], [MultipleChoice] or [YesNo]) and the
// dataset's other fields as string metadata.
//
// Datasets are read by name (see [Names]): [Load] reads a whole file, and
// [NewReader], [Stream] and [Reader.All] read JSON Lines or a JSON array one
// record at a time, never holding the whole file. [LoadParquet] and
// [ReadParquet] read Hugging Face style Parquet files through a [Columns]
// mapping. [Shuffle] and [Split] order and split examples with a seeded
// generator whose output does not depend on the Go version.
//
// Malformed input is reported as an [*Error] that names the file, the line
// (JSON Lines), element (JSON array) or row (Parquet), and the field:
//
//	task: gsm8k/test.jsonl:12: field "answer": missing "####"
package task

import "strings"

// AnswerKind says what form a gold answer takes, and so how a grader
// compares a model's answer with it.
type AnswerKind string

// The kinds of answer.
const (
	// Math is a mathematical expression or number, compared after
	// normalization (e.g. "18", "\frac{1}{2}", "27.0", "1,080").
	Math AnswerKind = "math"
	// MultipleChoice is the letter of one of the example's Choices, "a" for
	// the first.
	MultipleChoice AnswerKind = "multiple-choice"
	// YesNo is "yes" or "no".
	YesNo AnswerKind = "yes-no"
)

// Message is one turn of a chat.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
}

// Example is one problem of a dataset.
type Example struct {
	// ID identifies the example within its file: the dataset's name, a
	// slash and the dataset's own id (e.g. "math500/test/precalculus/807.json",
	// "strategyqa/e0044a7b4d146d611e73") or, when it has none, the record's
	// 0-based position in the file ("gsm8k/0").
	ID string
	// Prompt is the problem as the model should see it. For multiple-choice
	// problems it lists the choices (see FormatChoices).
	Prompt string
	// Messages is the prompt as a chat, when the dataset provides one; nil
	// otherwise. See Chat.
	Messages []Message
	// Answer is the gold answer as the dataset writes it, without
	// normalization: "1,080" in GSM8K, "025" in AIME 2024, "27.0" in AMC
	// 2023 (whose JSON holds floats), a choice letter for multiple choice,
	// "yes" or "no" for yes-no questions.
	Answer string
	// Solution is a reference solution or rationale, when the dataset has
	// one.
	Solution string
	// Kind is the kind of answer.
	Kind AnswerKind
	// Choices are the options of a multiple-choice problem, without their
	// letters, in letter order.
	Choices []string
	// Meta holds the dataset's other fields as text (numbers as written),
	// such as "subject", "level", "url", and "dataset", the name the example
	// was loaded under.
	Meta map[string]string
	// Source says where the example was read: "path:line" in a JSON Lines
	// file, "path:element N" in a JSON array and "path:row N" in a Parquet
	// file (N 0-based, as in an [*Error]); path is the name a stream was
	// read under. It is "" for generated examples.
	Source string
}

// Where names the example for a person: its Source, or its ID when it has
// none.
func (e Example) Where() string {
	if e.Source != "" {
		return e.Source
	}
	return e.ID
}

// Chat returns the prompt as a chat: Messages when the example has them,
// and otherwise a single user message holding Prompt.
func (e Example) Chat() []Message {
	if len(e.Messages) > 0 {
		return e.Messages
	}
	return []Message{{Role: "user", Content: e.Prompt}}
}

// Choice returns the text of the correct choice of a multiple-choice
// example, and false when Answer is not the letter of one of Choices.
func (e Example) Choice() (string, bool) {
	i, ok := ChoiceIndex(e.Answer)
	if !ok || i >= len(e.Choices) {
		return "", false
	}
	return e.Choices[i], true
}

// ChoiceLetter returns the letter of the i'th choice: "a" for 0, "b" for 1,
// up to "z" for 25. It returns "" for other i.
func ChoiceLetter(i int) string {
	if i < 0 || i >= 26 {
		return ""
	}
	return string(rune('a' + i))
}

// ChoiceIndex returns the 0-based index of a choice letter, "a" or "A"
// being 0, and false when letter is not a single letter.
func ChoiceIndex(letter string) (int, bool) {
	if len(letter) != 1 {
		return 0, false
	}
	c := letter[0] | 0x20 // lower case
	if c < 'a' || c > 'z' {
		return 0, false
	}
	return int(c - 'a'), true
}

// FormatChoices returns question followed by one line per choice, each
// with its letter:
//
//	question
//	a) first choice
//	b) second choice
func FormatChoices(question string, choices []string) string {
	var b strings.Builder
	b.WriteString(question)
	for i, c := range choices {
		b.WriteString("\n")
		b.WriteString(ChoiceLetter(i))
		b.WriteString(") ")
		b.WriteString(c)
	}
	return b.String()
}
