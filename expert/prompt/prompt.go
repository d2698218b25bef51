// Package prompt owns MEML-GRPO's expert prompts P_i, in their two
// forms: the persona a chat model answers as expert i under, written
// after the run's system prompt, and the suffix after a plain-text
// question that asks for expert i's style (the world's "@E<i>\n"). Both
// are templates with {i} for the expert's index and {name} for its name
// (task.ExpertName). Training's prompt variants, evaluation, serving and
// the collection of D_ME render them here, so that a model is asked under
// the prompt it was trained behind.
package prompt

import (
	"strconv"
	"strings"

	"rlvr/task"
	"rlvr/task/world"
)

// Paper is MEML-GRPO's expert prompt P_i, with {i} for the expert's
// index: the persona its experts' answers are collected under, and the
// one a chat model is trained and evaluated behind unless a config says
// otherwise.
const Paper = "You are Expert {i}, please provide an answer to the above question."

// Render returns an expert prompt template with {i} replaced by the
// expert's index and {name} by its name.
func Render(template string, i int, name string) string {
	return strings.NewReplacer("{i}", strconv.Itoa(i), "{name}", name).Replace(template)
}

// Templates are the two forms of the expert prompts, as templates:
// System is a chat's persona, Suffix follows a plain-text prompt.
type Templates struct {
	System, Suffix string
}

// Default are the expert prompts of every setting that names none: the
// paper's persona, and the world's suffix (world.ExpertPromptTemplate).
var Default = Templates{System: Paper, Suffix: world.ExpertPromptTemplate}

// Expert is one expert's prompt, rendered.
type Expert struct {
	Name   string // task.ExpertName of its index
	System string // a chat's persona
	Suffix string // after a plain-text prompt
}

// Of is expert i's prompt.
func (t Templates) Of(i int) Expert {
	name := task.ExpertName(i)
	return Expert{Name: name, System: Render(t.System, i, name), Suffix: Render(t.Suffix, i, name)}
}
