// Package world is rlvr's built-in task world: procedurally generated
// arithmetic problems with exact answers and a difficulty knob, so every
// method runs end to end on a CPU with no downloads.
//
// A problem is a chain of operations evaluated left to right and written
// with the parentheses that order needs, e.g. "(12+7)*3-5". Its reference
// solution writes one step per line and ends with the answer after "####":
//
//	12+7=19
//	19*3=57
//	57-5=52
//	####52
package world

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"rlvr/task"
)

// Level is a difficulty setting: how many operations, how large the
// operands, which operators.
type Level struct {
	Name    string
	Ops     int    // operations in the chain (at least)
	MaxOps  int    // if above Ops, the count is drawn from [Ops, MaxOps]
	MaxOp   int    // operands of + and − are drawn from [1, MaxOp]
	MaxMul  int    // multipliers are drawn from [2, MaxMul]; 0 forbids ×
	Allowed string // operators to draw from, among "+-*"
}

// Levels run from one addition to chains a tiny model almost never gets
// right.
var Levels = []Level{
	{Name: "add", Ops: 1, MaxOp: 99, Allowed: "+"},
	{Name: "add-sub", Ops: 2, MaxOp: 99, Allowed: "+-"},
	{Name: "mul-add", Ops: 2, MaxOp: 99, MaxMul: 9, Allowed: "*+"},
	{Name: "three-ops", Ops: 3, MaxOp: 99, MaxMul: 9, Allowed: "+-*"},
	{Name: "four-ops", Ops: 4, MaxOp: 999, MaxMul: 9, Allowed: "+-*"},
	{Name: "five-six-ops", Ops: 5, MaxOps: 6, MaxOp: 999, MaxMul: 9, Allowed: "+-*"},
	{Name: "seven-eight-ops", Ops: 7, MaxOps: 8, MaxOp: 9999, MaxMul: 19, Allowed: "+-*"},
}

// Problem is one generated question with its exact answer.
type Problem struct {
	Level    int
	Question string // e.g. "(12+7)*3-5"
	First    int64  // the first operand
	Ops      []Step // the operations, applied left to right
	Answer   int64
}

// Step is one operation of a problem's chain.
type Step struct {
	Op  byte // '+', '-' or '*'
	Arg int64
}

// Generate draws a problem of the given level (an index into Levels).
func Generate(r *rand.Rand, level int) Problem {
	lv := Levels[level]
	acc := int64(1 + r.IntN(lv.MaxOp))
	if strings.HasPrefix(lv.Allowed, "*") { // "d·NN + c": start from a product
		acc = int64(10 + r.IntN(90))
	}
	p := Problem{Level: level, First: acc}
	expr := strconv.FormatInt(acc, 10)
	lastAdd := false // whether expr ends in + or − at top level
	ops := lv.Ops
	if lv.MaxOps > ops {
		ops += r.IntN(lv.MaxOps - ops + 1)
	}
	for i := 0; i < ops; i++ {
		op := lv.Allowed[r.IntN(len(lv.Allowed))]
		if lv.Allowed == "*+" { // one product, then additions
			op = "*+"[min(i, 1)]
		}
		var arg int64
		switch op {
		case '*':
			arg = int64(2 + r.IntN(lv.MaxMul-1))
		default:
			arg = int64(1 + r.IntN(lv.MaxOp))
		}
		if op == '-' && arg > acc { // keep every intermediate non-negative
			op = '+'
		}
		acc = apply(acc, op, arg)
		if op == '*' && lastAdd {
			expr = "(" + expr + ")"
		}
		expr += string(op) + strconv.FormatInt(arg, 10)
		lastAdd = op != '*'
		p.Ops = append(p.Ops, Step{Op: op, Arg: arg})
	}
	p.Question, p.Answer = expr, acc
	return p
}

// Prompt is what the model is shown: the question and the cue to solve it.
func (p Problem) Prompt() string { return "Q:" + p.Question + "\n" }

// Solution is the reference solution: each step on its own line, then the
// answer after "####".
func (p Problem) Solution() string {
	s, _ := Solve(p, 0)
	return s
}

// Mix draws n problems with levels chosen uniformly from levels, from a
// seeded source so a corpus is reproducible.
func Mix(seed uint64, n int, levels []int) []Problem {
	r := rand.New(rand.NewPCG(seed, 0x776f726c64))
	out := make([]Problem, n)
	for i := range out {
		out[i] = Generate(r, levels[r.IntN(len(levels))])
	}
	return out
}

// Example is the problem as a task example: the prompt, the answer and the
// reference solution.
func (p Problem) Example() task.Example {
	return task.Example{ID: "world/" + Levels[p.Level].Name + "/" + p.Question, Prompt: p.Prompt(),
		Answer: strconv.FormatInt(p.Answer, 10), Solution: p.Solution(), Kind: task.Math,
		Meta: map[string]string{"level": Levels[p.Level].Name}}
}

// NaturalQuestion is the question as a chat model is asked it: the
// expression in words around it and the answer format the verifier reads
// first. The world's parentheses already make the order of operations the
// usual one, so the expression is given as written.
func (p Problem) NaturalQuestion() string {
	return "Calculate " + strings.NewReplacer("+", " + ", "-", " - ", "*", " × ").Replace(p.Question) +
		". Think step by step, then give the final answer as a number after \"####\"."
}

// Examples draws n problems of the given levels as task examples.
func Examples(seed uint64, n int, levels []int) []task.Example {
	out := make([]task.Example, 0, n)
	for _, p := range Mix(seed, n, levels) {
		out = append(out, p.Example())
	}
	return out
}

// ChatExamples draws n problems like Examples, each also asked as a chat
// in natural language (NaturalQuestion): how a chat model meets the world
// through its template. The plain-text prompt is unchanged.
func ChatExamples(seed uint64, n int, levels []int) []task.Example {
	out := Examples(seed, n, levels)
	for i, p := range Mix(seed, n, levels) {
		out[i].Messages = []task.Message{{Role: "user", Content: p.NaturalQuestion()}}
	}
	return out
}
