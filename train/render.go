package train

import (
	"fmt"
	"strings"

	"rlvr/checkpoint"
	"rlvr/eval"
	"rlvr/format/tokenizer"
	"rlvr/method"
	"rlvr/task"
)

// renderer turns examples into a model's prompts (method.Renderer): through
// its chat template with the run's system prompt, or as plain text.
//
// A chat's system message is the run's system prompt (chat.system, or the
// example's own without one), then a variant's (an expert's persona), then
// in prompts that open an episode the consult grant: each kept whole, so
// that an expert prompt never drops the answer format the run asks for
// (eval.SystemPrompt says why in this order).
type renderer struct {
	l      *checkpoint.Loaded
	chat   bool
	system string
	maxLen int // the model's context
	// grant is added to a chat's system prompt in training prompts that
	// open an episode (EAPO's consult action), not in evaluation ones nor
	// in single-turn ones (method.Variant.SingleTurn).
	grant string
}

// newRenderer checks the chat setting against the model.
func newRenderer(l *checkpoint.Loaded, c ChatConfig, maxLen int) (*renderer, error) {
	r := &renderer{l: l, system: c.System, maxLen: maxLen}
	switch c.Template {
	case "on":
		if l.Chat == nil {
			return nil, fmt.Errorf("train: chat.template is on but model %s has no chat template (tokenizer_config.json chat_template)", l.Name)
		}
		r.chat = true
	case "auto", "":
		r.chat = l.Chat != nil
	}
	if !r.chat && c.System != "" {
		return nil, fmt.Errorf("train: chat.system is set but model %s is prompted without a chat template", l.Name)
	}
	return r, nil
}

// NewRenderer is the method.Renderer of a model prompted as c says, with
// the model's context of maxLen tokens: what a training run renders
// through, for code that runs a method's parts outside a run (rlvr eval's
// consultation workflows).
func NewRenderer(l *checkpoint.Loaded, c ChatConfig, maxLen int) (method.Renderer, error) {
	return newRenderer(l, c, maxLen)
}

// Text is the evaluation prompt as text.
func (r *renderer) Text(e task.Example, v method.Variant) (string, error) { return r.text(e, v, "") }

// text is the prompt as text, with grant added to a chat's system prompt.
func (r *renderer) text(e task.Example, v method.Variant, grant string) (string, error) {
	if !r.chat {
		return e.Prompt + v.Suffix, nil
	}
	return eval.ChatPrompt(r.l.Chat, e, r.system, v.System, grant)
}

// Prompt implements method.Renderer: the training prompt, which grants the
// consult action unless v is single-turn.
func (r *renderer) Prompt(e task.Example, v method.Variant) ([]int32, error) {
	grant := r.grant
	if v.SingleTurn {
		grant = ""
	}
	s, err := r.text(e, v, grant)
	if err != nil {
		return nil, err
	}
	toks := r.l.Encode(s)
	if len(toks) >= r.maxLen {
		return nil, fmt.Errorf("example %s: %d prompt tokens, context %d: %w", e.ID, len(toks), r.maxLen, method.ErrPromptTooLong)
	}
	return toks, nil
}

// Response implements method.Renderer: the text's tokens, then the
// end-of-turn token in a chat, else end-of-sequence.
func (r *renderer) Response(text string) []int32 {
	out := r.l.Tokenizer.Encode(text)
	if eos, ok := r.l.Tokenizer.EOS(); ok && !r.chat {
		return append(out, eos)
	}
	if len(r.l.StopTokens) > 0 {
		out = append(out, r.l.StopTokens[0])
	}
	return out
}

// EnvTurn implements method.Renderer. In a chat, the turn is what the
// template writes between an assistant message and the generation prompt
// that follows a user message holding text: found by rendering such a
// conversation around a marker, so that every template family the
// tokenizer renders works alike.
func (r *renderer) EnvTurn(text string) ([]int32, error) {
	if !r.chat {
		return r.Encode(text), nil
	}
	const mark = "\u27e6policy-turn\u27e7"
	s, err := r.l.Chat([]tokenizer.Message{{Role: "user", Content: "?"}, {Role: "assistant", Content: mark}, {Role: "user", Content: text}})
	if err != nil {
		return nil, fmt.Errorf("rendering an environment turn: %w", err)
	}
	i := strings.LastIndex(s, mark)
	if i < 0 {
		return nil, fmt.Errorf("model %s: its chat template drops an assistant message's text, so an environment turn cannot be placed", r.l.Name)
	}
	return r.Encode(s[i+len(mark):]), nil
}

// Encode implements method.Renderer (no BOS: environment text continues a
// sequence).
func (r *renderer) Encode(text string) []int32 { return r.l.Tokenizer.Encode(text) }

// Decode implements method.Renderer.
func (r *renderer) Decode(ids []int32) string { return r.l.Decode(ids) }
