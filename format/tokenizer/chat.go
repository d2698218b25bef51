package tokenizer

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user" or "assistant"
	Content string
}

// TemplateKind is a family of chat templates that RenderChat can render.
type TemplateKind int

// The supported chat template families.
const (
	// ChatML is the template of Qwen2 and Qwen2.5: every message as
	// <|im_start|>role\ncontent<|im_end|>\n, preceded by the template's
	// default system message when the conversation starts without one.
	ChatML TemplateKind = iota + 1
	// Qwen3 is the ChatML variant of the Qwen3 hybrid-thinking models: no
	// default system message; the reply to the last user message carries
	// a <think> block, and earlier replies lose theirs.
	Qwen3
	// Llama3 is the template of Llama-3 Instruct:
	// <|begin_of_text|> then <|start_header_id|>role<|end_header_id|>\n\n
	// content<|eot_id|> for each message, with the content trimmed.
	Llama3
)

// String returns the family's name.
func (k TemplateKind) String() string {
	switch k {
	case ChatML:
		return "ChatML"
	case Qwen3:
		return "Qwen3"
	case Llama3:
		return "Llama3"
	}
	return fmt.Sprintf("TemplateKind(%d)", int(k))
}

// ChatTemplate says how to render a conversation as a prompt.
type ChatTemplate struct {
	Kind TemplateKind

	// DefaultSystem is, for ChatML, the system message used when a
	// conversation does not start with one; empty for none.
	DefaultSystem string

	// BOS is, for Llama3, the text that starts the prompt; empty means
	// "<|begin_of_text|>".
	BOS string

	// DisableThinking makes the Qwen3 generation prompt close an empty
	// <think> block, as the template's enable_thinking=false does.
	DisableThinking bool
}

// ErrUnsupportedTemplate is returned, wrapped, by ParseChatTemplate for chat
// templates outside the supported families.
var ErrUnsupportedTemplate = errors.New("unsupported chat template")

// chatMLDefaultSystem finds a literal system message in a ChatML template:
// the one it writes when the conversation has none.
var chatMLDefaultSystem = []*regexp.Regexp{
	regexp.MustCompile(`'<\|im_start\|>system\\n((?:[^'\\]|\\.)*?)<\|im_end\|>\\n'`),
	regexp.MustCompile(`"<\|im_start\|>system\\n((?:[^"\\]|\\.)*?)<\|im_end\|>\\n"`),
}

// ParseChatTemplate recognises the family of a Jinja chat template, as found
// in tokenizer_config.json, and, for ChatML, its default system message.
// Templates of other families, and variants this package cannot render
// faithfully (Qwen3 thinking-only templates, Llama 3.1 and later with their
// dated system header), give an error wrapping ErrUnsupportedTemplate.
func ParseChatTemplate(source string) (ChatTemplate, error) {
	switch {
	case strings.Contains(source, "<|im_start|>"):
		if strings.Contains(source, "reasoning_content") || strings.Contains(source, "<think>") {
			if strings.Contains(source, "enable_thinking") && !strings.Contains(source, `'<|im_start|>assistant\n<think>\n'`) {
				return ChatTemplate{Kind: Qwen3}, nil
			}
			return ChatTemplate{}, fmt.Errorf("tokenizer: %w: a ChatML template with reasoning that is not Qwen3's hybrid template", ErrUnsupportedTemplate)
		}
		t := ChatTemplate{Kind: ChatML}
		for _, re := range chatMLDefaultSystem {
			if m := re.FindStringSubmatch(source); m != nil {
				t.DefaultSystem = unescapeJinja(m[1])
				break
			}
		}
		return t, nil
	case strings.Contains(source, "<|start_header_id|>"):
		if strings.Contains(source, "Cutting Knowledge Date") || strings.Contains(source, "date_string") {
			return ChatTemplate{}, fmt.Errorf("tokenizer: %w: Llama 3.1 or later (dated system header)", ErrUnsupportedTemplate)
		}
		return ChatTemplate{Kind: Llama3}, nil
	}
	return ChatTemplate{}, fmt.Errorf("tokenizer: %w: not ChatML, Qwen3 or Llama-3", ErrUnsupportedTemplate)
}

// unescapeJinja decodes the backslash escapes of a Jinja string literal.
func unescapeJinja(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// RenderChat renders msgs with template t, as the Hugging Face
// apply_chat_template would with the template t was parsed from. With
// addGenerationPrompt it ends with the header of an assistant turn, ready
// for the model to continue. Roles must be system, user or assistant, and
// msgs must not be empty; tools, tool calls and reasoning_content are not
// supported (Qwen3 reasoning written inline as <think>...</think> in an
// assistant message's content is handled as the template does).
func RenderChat(t ChatTemplate, msgs []Message, addGenerationPrompt bool) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("tokenizer: RenderChat: no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return "", fmt.Errorf("tokenizer: RenderChat: message %d: unsupported role %q", i, m.Role)
		}
	}
	var b strings.Builder
	switch t.Kind {
	case ChatML:
		renderChatML(&b, t, msgs, addGenerationPrompt)
	case Qwen3:
		renderQwen3(&b, t, msgs, addGenerationPrompt)
	case Llama3:
		renderLlama3(&b, t, msgs, addGenerationPrompt)
	default:
		return "", fmt.Errorf("tokenizer: RenderChat: unknown template kind %v", t.Kind)
	}
	return b.String(), nil
}

func writeChatML(b *strings.Builder, role, content string) {
	b.WriteString("<|im_start|>")
	b.WriteString(role)
	b.WriteString("\n")
	b.WriteString(content)
	b.WriteString("<|im_end|>\n")
}

func renderChatML(b *strings.Builder, t ChatTemplate, msgs []Message, gen bool) {
	if msgs[0].Role != "system" && t.DefaultSystem != "" {
		writeChatML(b, "system", t.DefaultSystem)
	}
	for _, m := range msgs {
		writeChatML(b, m.Role, m.Content)
	}
	if gen {
		b.WriteString("<|im_start|>assistant\n")
	}
}

func renderQwen3(b *strings.Builder, t ChatTemplate, msgs []Message, gen bool) {
	if msgs[0].Role == "system" {
		writeChatML(b, "system", msgs[0].Content)
	}
	// The last user message that is not a tool response wrapper: replies
	// after it keep their reasoning.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			writeChatML(b, m.Role, m.Content)
		case m.Role == "assistant":
			content, reasoning := m.Content, ""
			if k := strings.LastIndex(content, "</think>"); k >= 0 {
				before, _, _ := strings.Cut(content, "</think>")
				content = strings.TrimLeft(content[k+len("</think>"):], "\n")
				before = strings.TrimRight(before, "\n")
				if j := strings.LastIndex(before, "<think>"); j >= 0 {
					before = before[j+len("<think>"):]
				}
				reasoning = strings.TrimLeft(before, "\n")
			}
			b.WriteString("<|im_start|>assistant\n")
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				b.WriteString("<think>\n")
				b.WriteString(strings.Trim(reasoning, "\n"))
				b.WriteString("\n</think>\n\n")
				content = strings.TrimLeft(content, "\n")
			}
			b.WriteString(content)
			b.WriteString("<|im_end|>\n")
		}
	}
	if gen {
		b.WriteString("<|im_start|>assistant\n")
		if t.DisableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
}

func renderLlama3(b *strings.Builder, t ChatTemplate, msgs []Message, gen bool) {
	bos := t.BOS
	if bos == "" {
		bos = "<|begin_of_text|>"
	}
	b.WriteString(bos)
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>")
		b.WriteString(m.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(strings.TrimFunc(m.Content, isPythonSpace))
		b.WriteString("<|eot_id|>")
	}
	if gen {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
}

// isPythonSpace reports whether Python's str.strip, and so Jinja's trim
// filter, removes r: White_Space plus the four information separators.
func isPythonSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F) }
