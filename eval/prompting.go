package eval

import (
	"fmt"
	"io"

	"rlvr/checkpoint"
	"rlvr/expert/prompt"
	"rlvr/task"
)

// NoExpert is Prompting.Expert when no expert prompt is asked for.
const NoExpert = -1

// Prompting is how an evaluation asks its examples: through a model's chat
// template or as plain text, under which system prompt or suffix, and
// under which expert prompts.
type Prompting struct {
	// Chat is "auto" (through the model's chat template when it has one),
	// "on" (the template is required; an endpoint is sent chats) or "off"
	// (plain text; an endpoint is sent completions unless "on").
	Chat   string
	System string // a chat's system prompt, in place of an example's own
	// Prefix precedes and Suffix follows every plain-text prompt: how a
	// base model is asked ("Question: " … "\nAnswer:"), few-shot examples,
	// or an expert's suffix.
	Prefix, Suffix string
	// Expert asks every problem under expert Expert's prompt
	// (prompt.Default, as training renders it), or under none when
	// NoExpert: in a chat, its persona after System in the one system
	// message; on plain text, the world's suffix "@E<i>\n".
	Expert int
	// Experts is how many expert prompts E0, E1, … Config.Experts gets.
	Experts int
}

// persona is expert i's persona in a chat, "" when i is NoExpert.
func persona(i int) string {
	if i < 0 {
		return ""
	}
	return prompt.Default.Of(i).System
}

// Under returns the system prompt and suffix of every prompt under
// p.Expert: in a chat, its persona after System; on plain text, the
// world's suffix in place of Suffix. Without an expert they are System
// and Suffix.
func (p Prompting) Under(chat bool) (system, suffix string) {
	switch {
	case p.Expert < 0:
		return p.System, p.Suffix
	case chat:
		return SystemPrompt(p.System, persona(p.Expert)), p.Suffix
	default:
		return p.System, prompt.Default.Of(p.Expert).Suffix
	}
}

// Local prompts examples for the local model l and returns them with
// Config.Experts, saying to w how: through l's chat template with the
// system prompt and the expert's persona, or as plain text followed by the
// suffix. The caller's examples are not changed.
func (p Prompting) Local(w io.Writer, l *checkpoint.Loaded, examples []task.Example) ([]task.Example, []Expert, error) {
	chat := p.Chat == "on" || p.Chat == "auto" && l.Chat != nil
	switch {
	case p.Chat == "on" && l.Chat == nil:
		return nil, nil, fmt.Errorf("--chat on: model %s has no chat template (tokenizer_config.json chat_template)", l.Name)
	case chat && p.Suffix != "":
		return nil, nil, fmt.Errorf("--prompt-suffix: model %s is prompted through its chat template; give its expert prompt with --expert I, or send plain text with --chat off", l.Name)
	case chat && p.Prefix != "":
		return nil, nil, fmt.Errorf("--prompt-prefix: model %s is prompted through its chat template; send plain text with --chat off", l.Name)
	case !chat && p.System != "":
		return nil, nil, fmt.Errorf("--system: model %s has no chat template; give its expert prompt with --prompt-suffix", l.Name)
	}
	if !chat {
		system, suffix := p.Under(false)
		describePrompts(w, l.Name, false, system, p.Prefix, suffix)
		return withAffixes(examples, p.Prefix, suffix), p.suffixExperts(), nil
	}
	describePrompts(w, l.Name, true, SystemPrompt(p.System, persona(p.Expert)), "", "")
	render := func(persona string) ([]string, error) {
		out := make([]string, len(examples))
		for i, e := range examples {
			text, err := ChatPrompt(l.Chat, e, p.System, persona)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Where(), err)
			}
			out[i] = text
		}
		return out, nil
	}
	texts, err := render(persona(p.Expert))
	if err != nil {
		return nil, nil, err
	}
	out := make([]task.Example, len(examples))
	for i, e := range examples {
		e.Prompt = texts[i]
		out[i] = e
	}
	var xs []Expert
	for x := range p.Experts {
		prompts, err := render(persona(x))
		if err != nil {
			return nil, nil, err
		}
		xs = append(xs, Expert{Name: prompt.Default.Of(x).Name, Prompts: prompts})
	}
	return out, xs, nil
}

// Endpoint prompts examples for the OpenAI-compatible endpoint named
// name, saying to w how, and returns them with the system prompt of its
// chats (Remote.System) and Config.Experts. It sends chats only when Chat
// is "on"; a chat's expert prompt is in its system message, so Experts is
// for plain text.
func (p Prompting) Endpoint(w io.Writer, name string, examples []task.Example) ([]task.Example, string, []Expert) {
	chat := p.Chat == "on"
	system, suffix := p.Under(chat)
	describePrompts(w, name, chat, system, p.Prefix, suffix)
	return withAffixes(examples, p.Prefix, suffix), system, p.suffixExperts()
}

// suffixExperts are the world's first p.Experts expert prompts, suffixes
// of plain text.
func (p Prompting) suffixExperts() []Expert {
	var xs []Expert
	for x := range p.Experts {
		p := prompt.Default.Of(x)
		xs = append(xs, Expert{Name: p.Name, Suffix: p.Suffix})
	}
	return xs
}

// withAffixes puts prefix before and suffix after every example's prompt.
func withAffixes(examples []task.Example, prefix, suffix string) []task.Example {
	if prefix == "" && suffix == "" {
		return examples
	}
	out := make([]task.Example, len(examples))
	for i, e := range examples {
		e.Prompt = prefix + e.Prompt + suffix
		out[i] = e
	}
	return out
}

// describePrompts says to w how model is prompted, unless as bare plain
// text.
func describePrompts(w io.Writer, model string, chat bool, system, prefix, suffix string) {
	switch {
	case chat && system != "":
		fmt.Fprintf(w, "prompting %s with chats, system prompt %q\n", model, system)
	case chat:
		fmt.Fprintf(w, "prompting %s with chats, no system prompt\n", model)
	case prefix != "":
		fmt.Fprintf(w, "prompting %s with plain text after %q and followed by %q\n", model, prefix, suffix)
	case suffix != "":
		fmt.Fprintf(w, "prompting %s with plain text followed by %q\n", model, suffix)
	}
}
