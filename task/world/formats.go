package world

import (
	"fmt"
	"strconv"
	"strings"

	"rlvr/task"
)

// The text formats of the world, all line-based so a character-level model
// learns them quickly:
//
//	Q:(12+7)*3-5               a question (Problem.Prompt)
//	12+7=19                    a reference solution step
//	####52                     the final answer
//	@E2                        an expert prompt: answer in style 2 (MEML-GRPO)
//	?E1:19*3;E3:12+7?          a consultation: queries to experts (EAPO)
//	!E1:57                     an expert's reply ("!E1:-" when none came)
//	R:(12+7)*3-5               a reflection request on a question (MEL),
//	+12+7=19|19*3=57|…|####52  followed by a correct trajectory
//	-12+7=19|19*3=47|…|####42  and a wrong one;
//	S:19*3=57                  the reflection: the bifurcation step,
//	C:19*3=47 is wrong         a critique,
//	H:check products by 7…     and a heuristic
//	M:S:…|C:…|H:…              a meta-experience shown before a question

// ExpertPromptTemplate is ExpertPrompt with {i} for the expert's index,
// "@" and the expert's name (task.ExpertName) on a line: the form expert
// prompt settings take (package expert/prompt renders it).
const ExpertPromptTemplate = "@E{i}\n"

// ExpertPrompt is the line that asks for an answer in expert i's style,
// placed after the question (MEML-GRPO's Concat(Q, P_i)).
func ExpertPrompt(i int) string {
	return strings.ReplaceAll(ExpertPromptTemplate, "{i}", strconv.Itoa(i))
}

// QuestionText is the expression of a question prompt "Q:<expression>\n",
// or the text itself, trimmed, when it is not one.
func QuestionText(q string) string {
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(q), "Q:"))
}

// ParseQuestion reads a question back into a Problem: a left-to-right
// chain of +, − and × over non-negative integers, written with exactly the
// parentheses Generate writes. Level is left 0.
func ParseQuestion(q string) (Problem, error) {
	s := QuestionText(q)
	if len(s) > 256 {
		return Problem{}, fmt.Errorf("world: question of %d bytes is too long", len(s))
	}
	expr := strings.NewReplacer("(", "", ")", "").Replace(s)
	p := Problem{Question: s}
	num := func(i int) (int64, int, error) {
		j := i
		for j < len(expr) && expr[j] >= '0' && expr[j] <= '9' {
			j++
		}
		if j == i || j-i > 12 {
			return 0, 0, fmt.Errorf("world: question %q: expected a number at byte %d", s, i)
		}
		v, err := strconv.ParseInt(expr[i:j], 10, 64)
		return v, j, err
	}
	// The first operand may be negative: an accumulator that went below
	// zero after a slip, asked about as one step (version 2's queries).
	neg := strings.HasPrefix(expr, "-")
	start := 0
	if neg {
		start = 1
	}
	v, i, err := num(start)
	if err != nil {
		return Problem{}, err
	}
	if neg {
		v = -v
	}
	p.First, p.Answer = v, v
	for i < len(expr) {
		op := expr[i]
		if op != '+' && op != '-' && op != '*' {
			return Problem{}, fmt.Errorf("world: question %q: unexpected %q at byte %d", s, op, i)
		}
		arg, j, err := num(i + 1)
		if err != nil {
			return Problem{}, err
		}
		p.Ops = append(p.Ops, Step{Op: op, Arg: arg})
		p.Answer = apply(p.Answer, op, arg)
		i = j
	}
	if len(p.Ops) == 0 {
		return Problem{}, fmt.Errorf("world: question %q has no operation", s)
	}
	// Only the world's own spelling is accepted: its parentheses make the
	// left-to-right order explicit, and anything else would be ambiguous.
	if c := p.Prefix(len(p.Ops)).Question; c != s {
		return Problem{}, fmt.Errorf("world: question %q is not written as the world writes it (%q)", s, c)
	}
	return p, nil
}

// Prefix is the sub-problem made of p's first k operations.
func (p Problem) Prefix(k int) Problem {
	q := Problem{Level: p.Level, First: p.First, Ops: p.Ops[:k], Answer: p.First}
	expr := strconv.FormatInt(p.First, 10)
	lastAdd := false
	for _, s := range q.Ops {
		q.Answer = apply(q.Answer, s.Op, s.Arg)
		if s.Op == '*' && lastAdd {
			expr = "(" + expr + ")"
		}
		expr += string(s.Op) + strconv.FormatInt(s.Arg, 10)
		lastAdd = s.Op != '*'
	}
	q.Question = expr
	return q
}

// Query is one question to one expert in a consultation.
type Query struct {
	Expert   int
	Question string
}

// Reply is an expert's answer to a query; OK is false when no answer came
// (declined by the annealing schedule, or the call failed).
type Reply struct {
	Expert int
	Answer string
	OK     bool
}

// FormatConsult writes a consultation line.
func FormatConsult(qs []Query) string {
	parts := make([]string, len(qs))
	for i, q := range qs {
		parts[i] = task.ExpertName(q.Expert) + ":" + q.Question
	}
	return "?" + strings.Join(parts, ";") + "?\n"
}

// ConsultEnd is the text that ends a consultation line: sampling stops on
// it so the environment can answer.
const ConsultEnd = "?\n"

// ParseConsult reads the consultation on the last line of text (a policy's
// turn ending in ConsultEnd). It returns an error naming what is malformed:
// the policy wrote it, so this is data, not a bug.
func ParseConsult(text string) ([]Query, error) {
	text = strings.TrimSuffix(text, "\n")
	line := text[strings.LastIndexByte(text, '\n')+1:]
	if len(line) < 2 || line[0] != '?' || line[len(line)-1] != '?' {
		return nil, fmt.Errorf("world: consultation %q is not ?E<i>:<question>;…?", clip(line))
	}
	var qs []Query
	for _, part := range strings.Split(line[1:len(line)-1], ";") {
		name, q, ok := strings.Cut(part, ":")
		if !ok || !strings.HasPrefix(name, "E") {
			return nil, fmt.Errorf("world: consultation query %q is not E<i>:<question>", clip(part))
		}
		e, err := strconv.Atoi(name[1:])
		if err != nil || e < 0 || e > 99 {
			return nil, fmt.Errorf("world: consultation query %q names no expert", clip(part))
		}
		qs = append(qs, Query{Expert: e, Question: q})
	}
	return qs, nil
}

// FormatReplies writes the environment's reply lines, one per query.
func FormatReplies(rs []Reply) string {
	var b strings.Builder
	for _, r := range rs {
		a := r.Answer
		if !r.OK {
			a = "-"
		}
		b.WriteString("!" + task.ExpertName(r.Expert) + ":" + a + "\n")
	}
	return b.String()
}

// Reflection is a meta-experience (MEL): where a wrong trajectory left the
// right one, what went wrong, and a rule to avoid it.
type Reflection struct {
	Step      string // the bifurcation step, as the correct trajectory wrote it
	Critique  string
	Heuristic string
}

// ReflectionPrompt asks for a reflection on a question from a correct and a
// wrong trajectory (solution texts).
func ReflectionPrompt(question, correct, wrong string) string {
	flat := func(s string) string { return strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "|") }
	return "R:" + question + "\n+" + flat(correct) + "\n-" + flat(wrong) + "\n"
}

// Format writes the reflection as the policy does.
func (r Reflection) Format() string {
	return "S:" + r.Step + "\nC:" + r.Critique + "\nH:" + r.Heuristic + "\n"
}

// Memory writes the reflection as the one-line meta-experience shown
// before a question when it is replayed.
func (r Reflection) Memory() string {
	return "M:S:" + r.Step + "|C:" + r.Critique + "|H:" + r.Heuristic + "\n"
}

// ParseReflection reads the S:, C: and H: lines a policy wrote, in that
// order; it names the first one missing or empty.
func ParseReflection(text string) (Reflection, error) {
	var r Reflection
	fields := []struct {
		prefix string
		dst    *string
	}{{"S:", &r.Step}, {"C:", &r.Critique}, {"H:", &r.Heuristic}}
	lines := strings.Split(text, "\n")
	i := 0
	for _, f := range fields {
		for i < len(lines) && !strings.HasPrefix(lines[i], f.prefix) {
			i++
		}
		if i == len(lines) || strings.TrimSpace(lines[i][len(f.prefix):]) == "" {
			return Reflection{}, fmt.Errorf("world: reflection has no %q line", f.prefix)
		}
		*f.dst = strings.TrimSpace(lines[i][len(f.prefix):])
		i++
	}
	return r, nil
}

// Reflect writes the world's reference reflection on a correct and a wrong
// solution of p: the first step where they differ, what the wrong one
// wrote there, and the heuristic for that kind of step. ok is false when
// the texts do not differ in a step.
func Reflect(p Problem, correct, wrong string) (Reflection, bool) {
	c, w := strings.Split(correct, "\n"), strings.Split(wrong, "\n")
	for i := 0; i < len(c) && i < len(w); i++ {
		if c[i] == w[i] {
			continue
		}
		r := Reflection{Step: c[i], Critique: w[i] + " is wrong", Heuristic: "recheck each step"}
		if i < len(p.Ops) {
			r.Heuristic = heuristics[p.Ops[i].Op]
		}
		return r, true
	}
	return Reflection{}, false
}

// heuristics are the world's rules of thumb, one per kind of step.
var heuristics = map[byte]string{
	'+': "when units and tens both carry, carry into the hundreds",
	'-': "borrow when the units are smaller",
	'*': "check products by 7, 8 and 9",
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
