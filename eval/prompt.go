package eval

import (
	"strings"

	"rlvr/format/tokenizer"
	"rlvr/task"
)

// ChatPrompt renders e's chat (see task.Example.Chat) through a model's
// chat template, such as checkpoint.Loaded.Chat. Its system message is
// system, or the example's own when system is "", followed by each part of
// more that is not "" (an expert's persona, then a grant of the consult
// action), separated by blank lines: see SystemPrompt. Training's system
// and expert prompts are rendered here, so that a model is evaluated under
// the prompt it was trained under.
func ChatPrompt(chat func(msgs []tokenizer.Message) (string, error), e task.Example, system string, more ...string) (string, error) {
	var msgs []tokenizer.Message
	for _, m := range e.Chat() {
		if m.Role == "system" {
			if system == "" {
				system = m.Content
			}
			continue
		}
		msgs = append(msgs, tokenizer.Message{Role: m.Role, Content: m.Content})
	}
	if system = SystemPrompt(append([]string{system}, more...)...); system != "" {
		msgs = append([]tokenizer.Message{{Role: "system", Content: system}}, msgs...)
	}
	return chat(msgs)
}

// SystemPrompt joins the parts of a chat's system prompt that are not "",
// in order, with a blank line between two. The order is the run's system
// prompt (the task and its answer format, the same for every expert), then
// an expert's persona (MEML-GRPO's P_i): the persona is what tells the
// expert prompts apart, so they share their start, and it comes last as
// in the paper's Concat(Q, P_i), whose wording ("… the above question")
// follows what it refers to.
func SystemPrompt(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n\n")
}
