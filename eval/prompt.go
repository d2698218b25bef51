package eval

import (
	"rlvr/format/tokenizer"
	"rlvr/task"
)

// ChatPrompt renders e's chat (see task.Example.Chat) through a model's
// chat template, such as checkpoint.Loaded.Chat. A system prompt that is
// not "" goes first and replaces the example's own system message, as
// training's system and expert prompts do, so that a model is evaluated
// under the prompt it was trained under; with "", the example's own system
// message, if any, stays.
func ChatPrompt(chat func(msgs []tokenizer.Message) (string, error), e task.Example, system string) (string, error) {
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
	if system != "" {
		msgs = append([]tokenizer.Message{{Role: "system", Content: system}}, msgs...)
	}
	return chat(msgs)
}
