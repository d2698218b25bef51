package world

import (
	"strconv"
	"strings"
)

// StepTally counts the steps of solutions in the reference style
// ("a+b=r", one a line) by what each writes for its own operands: on a
// step prone to its operator's slip kind, the right result, the slip, or
// anything else; on any other step, the right result or anything else. A
// policy that follows a version's corpus exactly writes no "anything
// else": those are the model's own arithmetic errors, which no context
// corrects.
type StepTally struct {
	Prone, ProneRight, ProneSlip int // steps prone to a slip kind
	Other, OtherRight            int // the other steps
	Unread                       int // lines neither a step nor the answer
}

// Add counts the step lines of one solution.
func (t *StepTally) Add(text string) {
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "####") {
			continue
		}
		a, op, b, r, ok := readStep(line)
		if !ok {
			t.Unread++
			continue
		}
		right := r == apply(a, op, b)
		if k := SlipKinds[op]; k.Prone(a, b) {
			t.Prone++
			switch {
			case right:
				t.ProneRight++
			case r == k.Wrong(a, b):
				t.ProneSlip++
			}
			continue
		}
		t.Other++
		if right {
			t.OtherRight++
		}
	}
}

// readStep reads a reference-style step line "a<op>b=r"; a and r may be
// negative.
func readStep(line string) (a int64, op byte, b, r int64, ok bool) {
	lhs, rhs, found := strings.Cut(line, "=")
	if !found || len(lhs) < 3 {
		return 0, 0, 0, 0, false
	}
	i := 1 + strings.IndexAny(lhs[1:], "+-*") // past a leading minus sign
	if i < 1 {
		return 0, 0, 0, 0, false
	}
	var err1, err2, err3 error
	a, err1 = strconv.ParseInt(lhs[:i], 10, 64)
	b, err2 = strconv.ParseInt(lhs[i+1:], 10, 64)
	r, err3 = strconv.ParseInt(rhs, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, 0, false
	}
	return a, lhs[i], b, r, true
}
