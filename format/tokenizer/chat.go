package tokenizer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	jinjaparser "github.com/nikolalohinski/gonja/v2/parser"

	"rlvr/format/chat"
)

// Message is one turn of a conversation; it is chat.Message, so that the
// OpenAI wire layer converts to it without compiling this package.
type Message = chat.Message

// ChatTemplate is a parsed Jinja chat template, rendered as Hugging Face
// transformers' apply_chat_template(..., tokenize=False) renders it. The
// zero ChatTemplate has no template and renders nothing but an error. A
// ChatTemplate is safe for concurrent use.
type ChatTemplate struct {
	// Source is the Jinja source of the template.
	Source string
	// File names where Source came from in errors, such as
	// "tokenizer_config.json: chat_template".
	File string

	// BOSToken and EOSToken are the template's bos_token and eos_token
	// variables, from tokenizer_config.json; empty leaves them undefined,
	// as transformers does for a null token.
	BOSToken, EOSToken string

	// StopStrings are the texts that end an assistant turn: the template's
	// end-of-turn marker (such as <|im_end|>, <end_of_turn>, <|eot_id|>)
	// and EOSToken. Generation should stop on any of them; checkpoint
	// loaders map them to token ids and add generation_config.json's
	// eos_token_id.
	StopStrings []string

	// Now is the clock of strftime_now, which dated templates (Llama 3.2)
	// call; nil means time.Now. Tests pin it.
	Now func() time.Time
	// Limits bounds each render; the zero value means [DefaultChatLimits].
	Limits ChatLimits

	template *exec.Template
}

// ChatLimits bounds the work of one render, so that a template from an
// untrusted file cannot hang, overflow the stack or exhaust memory. A
// render that exceeds a limit fails with an error wrapping
// [ErrChatTemplateLimit]. (Parsing is bounded too: a template nests at most
// 256 levels of brackets, operators and blocks, and is at most 1 MiB.)
type ChatLimits struct {
	// MaxOutput is the largest render in bytes; 0 means 4 MiB.
	MaxOutput int
	// MaxRange is the total number of items all range() calls of one
	// render may produce (Jinja's sandbox allows 100000 per call); 0 means
	// 100000.
	MaxRange int
	// Timeout bounds the render's wall time; 0 means 10 seconds. The
	// render stops at its next evaluation step once it is past.
	Timeout time.Duration
	// MaxCallDepth bounds how deeply macro calls nest, however a macro is
	// reached (by name, as an argument, as caller()), and recursive loops;
	// 0 means 100 (Jinja2 stops near there, at Python's recursion limit).
	MaxCallDepth int
	// MaxValue is the largest string, list or dict a render may build, in
	// bytes of its text with 32 bytes for each element of a collection;
	// 0 means 16 MiB. It is checked before building.
	MaxValue int
	// MaxBuilt bounds the sum of all values a render builds and all it
	// writes, however short-lived; 0 means 64 MiB.
	MaxBuilt int
}

// DefaultChatLimits are the limits of a ChatTemplate whose Limits are zero.
var DefaultChatLimits = ChatLimits{MaxOutput: 4 << 20, MaxRange: 100000, Timeout: 10 * time.Second,
	MaxCallDepth: 100, MaxValue: 16 << 20, MaxBuilt: 64 << 20}

// ErrChatTemplateLimit is wrapped by the errors of renders stopped by a
// [ChatLimits] bound.
var ErrChatTemplateLimit = errors.New("chat template exceeded its limits")

// ParseChatTemplate parses a Jinja chat template, as found in
// tokenizer_config.json's chat_template. Errors name the template as
// "chat_template" and give the line; use [ParseChatTemplateFile] to name
// the file. The template has no bos_token or eos_token; set BOSToken and
// EOSToken, or use [Config.ChatTemplate].
func ParseChatTemplate(source string) (ChatTemplate, error) {
	return ParseChatTemplateFile("chat_template", source)
}

// ParseChatTemplateFile is [ParseChatTemplate] with file naming the
// template's origin in errors, such as "tokenizer_config.json:
// chat_template" or "model.gguf: tokenizer.chat_template".
func ParseChatTemplateFile(file, source string) (t ChatTemplate, err error) {
	t = ChatTemplate{Source: source, File: file}
	defer func() {
		// The parser of a third-party engine meets arbitrary input here:
		// a panic in it is a parse error of this file, not a crash.
		if r := recover(); r != nil {
			t, err = ChatTemplate{}, fmt.Errorf("tokenizer: %s: cannot parse the template: %v", file, r)
		}
	}()
	tpl, err := newJinjaTemplate(source)
	if err != nil {
		return ChatTemplate{}, parseError(file, source, err)
	}
	t.template = tpl
	t.StopStrings = templateStopStrings(source, "")
	return t, nil
}

// parseError names the file and the line of a Jinja syntax error.
func parseError(file, source string, err error) error {
	var se *jinjaparser.SyntaxError
	if errors.As(err, &se) && se.Line > 0 {
		return fmt.Errorf("tokenizer: %s: line %d: %s (near %q)", file, se.Line, se.Message, se.Raw)
	}
	// Errors without a position quote the whole source first; keep the
	// reason, which follows it.
	msg := err.Error()
	if i := strings.LastIndex(msg, "': "); strings.HasPrefix(msg, "failed to parse template '") && i >= 0 {
		msg = msg[i+3:]
	}
	return fmt.Errorf("tokenizer: %s: %s", file, msg)
}

// RenderChat renders msgs with template t, as transformers'
// apply_chat_template(msgs, tokenize=False, add_generation_prompt=...)
// would with the same template and special tokens. With
// addGenerationPrompt the prompt ends with the header of an assistant
// turn, ready for the model to continue.
func RenderChat(t ChatTemplate, msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.Render(msgs, addGenerationPrompt, nil)
}

// Render renders msgs with the context transformers gives a template:
// messages, add_generation_prompt, bos_token, eos_token, tools and
// documents (none), and kwargs, the extra keyword arguments of
// apply_chat_template such as {"enable_thinking": false} for Qwen3. kwargs
// values are JSON-like: strings, bools, numbers, nil, []any and
// map[string]any. A template that calls raise_exception gives an error
// naming the template's file and quoting the message.
func (t ChatTemplate) Render(msgs []Message, addGenerationPrompt bool, kwargs map[string]any) (string, error) {
	if t.template == nil {
		return "", errors.New("tokenizer: RenderChat: no chat template")
	}
	messages := make(pyList, len(msgs))
	for i, m := range msgs {
		messages[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	data := map[string]any{}
	maps.Copy(data, kwargs)
	data["messages"] = messages
	data["add_generation_prompt"] = addGenerationPrompt
	for name, v := range map[string]any{"tools": nil, "documents": nil} {
		if _, ok := data[name]; !ok {
			data[name] = v
		}
	}
	if t.BOSToken != "" {
		data["bos_token"] = t.BOSToken
	}
	if t.EOSToken != "" {
		data["eos_token"] = t.EOSToken
	}
	out, err := t.execute(data)
	if err != nil {
		return "", t.renderError(err)
	}
	return out, nil
}

// renderError turns an engine error into one that names the template's
// file and the line of the statement the render failed in and, for
// raise_exception, quotes the template's message.
func (t ChatTemplate) renderError(err error) error {
	where := t.File
	var re *exec.RenderError
	if errors.As(err, &re) {
		if re.Line > 0 {
			where = fmt.Sprintf("%s: line %d", t.File, re.Line)
		}
		err = re.Err
	}
	var raised *templateRaise
	if errors.As(err, &raised) {
		return fmt.Errorf("tokenizer: %s: the template raised an exception: %q", where, raised.message)
	}
	if errors.Is(err, ErrChatTemplateLimit) {
		return fmt.Errorf("tokenizer: %s: %w", where, err)
	}
	if errors.Is(err, exec.ErrLimit) {
		detail := strings.TrimPrefix(err.Error(), exec.ErrLimit.Error()+": ")
		return fmt.Errorf("tokenizer: %s: %w: %s", where, ErrChatTemplateLimit, detail)
	}
	// The engine wraps every level of the template it was in; the
	// innermost message says what went wrong, the outer ones where.
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg) > 300 {
		msg = "..." + msg[i:]
	}
	return fmt.Errorf("tokenizer: %s: rendering: %s", where, msg)
}

// Family names the template's family for logs, from its end-of-turn
// marker: "ChatML", "Llama-3", "Gemma", "DeepSeek", or "" when unknown.
func (t ChatTemplate) Family() string {
	for _, f := range turnMarkers {
		if strings.Contains(t.Source, f.marker) {
			return f.family
		}
	}
	return ""
}

// turnMarkers are the end-of-turn strings of the chat-template families in
// use, the ones a model writes to end its reply.
var turnMarkers = []struct{ marker, family string }{
	{"<|im_end|>", "ChatML"},
	{"<|eot_id|>", "Llama-3"},
	{"<end_of_turn>", "Gemma"},
	{"<｜end▁of▁sentence｜>", "DeepSeek"},
	{"<|end|>", "Phi-3"},
	{"<|endoftext|>", ""},
	{"</s>", ""},
}

// templateStopStrings returns the end-of-turn markers the template writes,
// then eos unless empty or already there.
func templateStopStrings(source, eos string) []string {
	var stops []string
	for _, f := range turnMarkers {
		if strings.Contains(source, f.marker) {
			stops = append(stops, f.marker)
		}
	}
	if eos != "" && !slices.Contains(stops, eos) {
		stops = append(stops, eos)
	}
	return stops
}

// chatMLSource is the plain ChatML template (Qwen2 without a default
// system message).
const chatMLSource = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// ChatML returns the plain ChatML template: every message as
// <|im_start|>role\ncontent<|im_end|>\n, for models and tests that have no
// template of their own.
func ChatML() ChatTemplate {
	t, err := ParseChatTemplateFile("ChatML", chatMLSource)
	if err != nil {
		return ChatTemplate{} // unreachable: the source is fixed and parses
	}
	return t
}
