package expert

import (
	"strconv"
	"strings"

	"rlvr/task/world"
)

// DefaultPrompt is MEML-GRPO's expert prompt P_i, with {i} for the
// expert's index: the persona a chat model answers as expert i under.
const DefaultPrompt = "You are Expert {i}, please provide an answer to the above question."

// WorldPrompt is the built-in world's expert prompt P_i, the line after a
// question that asks for expert i's style (world.ExpertPrompt renders it).
const WorldPrompt = world.ExpertPromptTemplate

// RenderPrompt returns an expert prompt template with {i} replaced by the
// expert's index and {name} by its name.
func RenderPrompt(template string, i int, name string) string {
	return strings.NewReplacer("{i}", strconv.Itoa(i), "{name}", name).Replace(template)
}

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
