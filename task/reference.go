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
