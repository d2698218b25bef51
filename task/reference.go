package task

import "strings"

// ReferenceResponse is the example's reference solution written as an
// answer: the solution, and, unless it already states its final answer
// ("####" or \boxed), a last line "#### <gold answer>". It is "" for an
// example without a solution. method.ReferenceResponse and the reference
// expert (package expert) write the same text.
func ReferenceResponse(e Example) string {
	s := strings.TrimRight(e.Solution, "\n")
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "####") && !strings.Contains(s, `\boxed`) {
		s += "\n#### " + e.Answer
	}
	return s + "\n"
}

// AnySolution reports whether some example has a reference solution: what
// everything that answers from the solutions (the reference expert, MEL's
// reference_positive) needs of the training data before it runs.
func AnySolution(examples []Example) bool {
	for _, e := range examples {
		if strings.TrimSpace(e.Solution) != "" {
			return true
		}
	}
	return false
}
