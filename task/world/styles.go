package world

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// A Style is one way of writing a solution, with its own format and its own
// systematic slip: the world's heterogeneous "expert models" (MEML-GRPO's
// Table 1 in miniature). Style 0 is the reference solution and never slips;
// each other style slips on a different kind of step, and only on about
// half of the steps of that kind (chosen by a hash, so a style always makes
// the same mistakes on the same problem), so their errors overlap little.
type Style struct {
	Name string
	// Slip describes the mistake the style makes, for documentation.
	Slip string
	// line writes one step; wrong is the (possibly slipped) result.
	line func(a int64, op byte, b, result int64) string
	// slip returns the style's result for a step, and whether it slipped.
	slip func(style int, a int64, op byte, b int64) (int64, bool)
}

// Styles are the world's solution styles; index i is Expert i.
var Styles = []Style{
	{Name: "reference", Slip: "none",
		line: func(a int64, op byte, b, r int64) string { return fmt.Sprintf("%d%c%d=%d", a, op, b, r) },
		slip: func(int, int64, byte, int64) (int64, bool) { return 0, false }},
	{Name: "spaced", Slip: "drops the carry into the hundreds when both the units and the tens carry",
		line: func(a int64, op byte, b, r int64) string { return fmt.Sprintf("%d %c %d = %d", a, op, b, r) },
		slip: slipsOn('+')},
	{Name: "arrow", Slip: "subtracts the units the wrong way round instead of borrowing",
		line: func(a int64, op byte, b, r int64) string { return fmt.Sprintf("%d%c%d -> %d", a, op, b, r) },
		slip: slipsOn('-')},
	{Name: "worded", Slip: "is ten short on products by 7, 8 or 9 of two-digit numbers",
		line: func(a int64, op byte, b, r int64) string {
			return fmt.Sprintf("%d %s %d is %d", a, map[byte]string{'+': "plus", '-': "minus", '*': "times"}[op], b, r)
		},
		slip: slipsOn('*')},
}

// SlipKind is a kind of step on which solutions go wrong, one per
// operator: which steps are prone to it, and the wrong result written.
type SlipKind struct {
	Prone func(a, b int64) bool
	Wrong func(a, b int64) int64
}

// SlipKinds are the world's three kinds of slip, keyed by operator: the
// scripted styles' mistakes (each style makes one kind, on half of the
// prone steps) and, in world version 2, the policy's habit (Habit).
var SlipKinds = map[byte]SlipKind{
	// A dropped carry into the hundreds when both units and tens carry.
	'+': {Prone: func(a, b int64) bool { return a%10+b%10 >= 10 && a/10%10+b/10%10+1 >= 10 },
		Wrong: func(a, b int64) int64 { return a + b - 100 }},
	// Units subtracted the wrong way round instead of borrowing.
	'-': {Prone: func(a, b int64) bool { return a%10 < b%10 },
		Wrong: func(a, b int64) int64 { return (a - a%10) - (b - b%10) + (b%10 - a%10) }},
	// Ten short on a product of a two-digit number by 7, 8 or 9.
	'*': {Prone: func(a, b int64) bool { return b >= 7 && a >= 10 },
		Wrong: func(a, b int64) int64 { return a*b - 10 }},
}

// slipsOn is the slip of a style that makes op's kind of mistake on half
// of the prone steps.
func slipsOn(op byte) func(style int, a int64, o byte, b int64) (int64, bool) {
	k := SlipKinds[op]
	return func(style int, a int64, o byte, b int64) (int64, bool) {
		if o != op || !k.Prone(a, b) || !coin(style, a, o, b) {
			return 0, false
		}
		return k.Wrong(a, b), true
	}
}

// coin is a fair, deterministic coin per style and step.
func coin(style int, a int64, op byte, b int64) bool {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d|%d%c%d", style, a, op, b)
	return h.Sum32()&1 == 0
}

// Solve writes p's solution in style s: one line per step, each step
// continuing from the previous (possibly slipped) result, then the final
// answer after "####". It returns the text and the answer it reached.
func Solve(p Problem, s int) (string, int64) { return solve(p, s, false) }

// SolveWrong writes p's solution in style s as Solve does, but its last
// step always slips (its operator's SlipKinds mistake, or ten off where
// that would reach p's answer all the same), so its answer is always
// wrong: EAPO App. E's high-error experts, in the world's own kinds of
// error.
func SolveWrong(p Problem, s int) (string, int64) { return solve(p, s, true) }

func solve(p Problem, s int, wrongLast bool) (string, int64) {
	st := Styles[s]
	var b strings.Builder
	var acc int64
	for i, step := range p.Ops {
		a := acc
		if i == 0 {
			a = p.First
		}
		r := apply(a, step.Op, step.Arg)
		if w, slipped := st.slip(s, a, step.Op, step.Arg); slipped {
			r = w
		}
		if wrongLast && i == len(p.Ops)-1 {
			right := apply(a, step.Op, step.Arg)
			if r = SlipKinds[step.Op].Wrong(a, step.Arg); r == right || r == p.Answer {
				r = right - 10
			}
			if r == p.Answer {
				r = right + 10
			}
		}
		b.WriteString(st.line(a, step.Op, step.Arg, r))
		b.WriteByte('\n')
		acc = r
	}
	b.WriteString("####" + strconv.FormatInt(acc, 10) + "\n")
	return b.String(), acc
}

func apply(a int64, op byte, b int64) int64 {
	switch op {
	case '+':
		return a + b
	case '-':
		return a - b
	}
	return a * b
}
