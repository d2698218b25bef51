package expert

import "strings"

// CompletionPrompt is what an expert asked by completion reads: template
// with {question} and {system} replaced, or Concat(question, system) when
// template is "".
func CompletionPrompt(question, system, template string) string {
	if template == "" {
		return Concat(question, system)
	}
	return strings.NewReplacer("{question}", question, "{system}", system).Replace(template)
}

// Concat is MEML-GRPO's Concat(Q, P): the question, then the prompt on a
// line of its own; a question alone when the prompt is "". It is how a
// completion puts an expert prompt or an expert's persona.
func Concat(question, prompt string) string {
	if prompt == "" || question == "" || strings.HasSuffix(question, "\n") {
		return question + prompt
	}
	return question + "\n" + prompt
}
