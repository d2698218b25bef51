package openai

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"rlvr/format/chat"
	"rlvr/sample"
)

// Limits Validate enforces whatever the server's own configuration says;
// a server may enforce tighter ones.
const (
	MaxN    = 128 // choices per prompt, as OpenAI allows
	MaxStop = 16  // stop strings per request
)

// FieldError is one invalid or unsupported field of a request. The
// UnmarshalJSON methods of this package return one, as a *FieldError, for
// a field of the wrong form.
type FieldError struct {
	Param       string // the field, as the error envelope's param: "n", "messages[2].role"
	Message     string
	Unsupported bool // valid OpenAI, but not something rlvr's server does
}

// Error returns "openai: param: message".
func (e FieldError) Error() string { return "openai: " + e.Param + ": " + e.Message }

// ValidationError lists every bad field of a request, in field order.
type ValidationError struct {
	Fields []FieldError
}

// Error joins the fields' messages.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Param + ": " + f.Message
	}
	return "openai: invalid request: " + strings.Join(parts, "; ")
}

// Param returns the first bad field, for the error envelope.
func (e *ValidationError) Param() string {
	if len(e.Fields) == 0 {
		return ""
	}
	return e.Fields[0].Param
}

// Code returns CodeUnsupported if the first bad field is unsupported
// rather than invalid, and "" otherwise.
func (e *ValidationError) Code() string {
	if len(e.Fields) > 0 && e.Fields[0].Unsupported {
		return CodeUnsupported
	}
	return ""
}

// fields collects FieldErrors; err returns nil or a *ValidationError.
type fields []FieldError

func (f *fields) bad(param, format string, args ...any) {
	*f = append(*f, FieldError{Param: param, Message: fmt.Sprintf(format, args...)})
}

func (f *fields) unsupported(param, format string, args ...any) {
	*f = append(*f, FieldError{Param: param, Message: fmt.Sprintf(format, args...), Unsupported: true})
}

func (f fields) err() error {
	if len(f) == 0 {
		return nil
	}
	return &ValidationError{Fields: f}
}

// Validate reports every field rlvr's server would reject, as a
// *ValidationError: n outside [1, MaxN], temperature outside [0, 2], top_p
// outside (0, 1], top_k below -1, max_tokens or max_completion_tokens
// below 1, bad stop strings, no messages, an unknown role or unreadable
// content, and any request for what the server does not do (top_logprobs
// above 0, penalties, logit_bias, tools, a response_format other than
// text). An empty model is not an error: a server with one model serves it.
func (r *ChatCompletionRequest) Validate() error {
	var f fields
	if len(r.Messages) == 0 {
		f.bad("messages", "must contain at least one message")
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "":
			f.bad(fmt.Sprintf("messages[%d].role", i), "is missing")
		case "tool", "function":
			f.unsupported(fmt.Sprintf("messages[%d].role", i), "role %q is not supported (no tool calls)", m.Role)
		default:
			f.bad(fmt.Sprintf("messages[%d].role", i), "unknown role %q; want system, developer, user or assistant", m.Role)
		}
		if m.contentErr != "" {
			f.bad(fmt.Sprintf("messages[%d].content", i), "%s", m.contentErr)
		}
	}
	checkSampling(&f, r.N, r.Temperature, r.TopP, r.TopK, r.Stop)
	checkMaxTokens(&f, "max_tokens", r.MaxTokens)
	checkMaxTokens(&f, "max_completion_tokens", r.MaxCompletionTokens)
	if t := r.TopLogprobs; t != nil {
		switch {
		case *t < 0 || *t > 20:
			f.bad("top_logprobs", "%d is outside [0, 20]", *t)
		case *t > 0:
			f.unsupported("top_logprobs", "only 0 is supported: the server returns the sampled tokens' logprobs, not alternatives")
		}
	}
	checkPenalties(&f, r.PresencePenalty, r.FrequencyPenalty, r.LogitBias)
	if t := bytes.TrimSpace(r.Tools); len(t) > 0 && !isNull(t) && string(t) != "[]" {
		f.unsupported("tools", "tools and tool calls are not supported")
	}
	if r.ResponseFormat != nil && r.ResponseFormat.Type != "" && r.ResponseFormat.Type != "text" {
		f.unsupported("response_format", "type %q is not supported; only text", r.ResponseFormat.Type)
	}
	return f.err()
}

// Validate reports every field rlvr's server would reject, as a
// *ValidationError: a missing or empty prompt, n, temperature, top_p,
// top_k, max_tokens and stop as for chat, logprobs outside [0, 5], and any
// request for what the server does not do (logprobs above 0, echo, suffix,
// best_of, penalties, logit_bias).
func (r *CompletionRequest) Validate() error {
	var f fields
	if r.Prompt.Len() == 0 {
		f.bad("prompt", "is missing or empty")
	}
	for i, t := range r.Prompt.Texts {
		if t == "" {
			f.bad(promptParam(i, r.Prompt.Len()), "is empty")
		}
	}
	for i, ids := range r.Prompt.Tokens {
		if len(ids) == 0 {
			f.bad(promptParam(i, r.Prompt.Len()), "has no tokens")
		}
		for _, id := range ids {
			if id < 0 {
				f.bad(promptParam(i, r.Prompt.Len()), "token id %d is negative", id)
				break
			}
		}
	}
	checkSampling(&f, r.N, r.Temperature, r.TopP, r.TopK, r.Stop)
	checkMaxTokens(&f, "max_tokens", r.MaxTokens)
	if l := r.Logprobs; l != nil {
		switch {
		case *l < 0 || *l > 5:
			f.bad("logprobs", "%d is outside [0, 5]", *l)
		case *l > 0:
			f.unsupported("logprobs", "only 0 is supported: the server returns the sampled tokens' logprobs, not alternatives")
		}
	}
	if r.Echo {
		f.unsupported("echo", "echoing the prompt is not supported")
	}
	if r.Suffix != "" {
		f.unsupported("suffix", "suffix (insertion) is not supported")
	}
	if r.BestOf != nil && *r.BestOf != 1 {
		f.unsupported("best_of", "only 1 is supported")
	}
	checkPenalties(&f, r.PresencePenalty, r.FrequencyPenalty, r.LogitBias)
	return f.err()
}

func promptParam(i, n int) string {
	if n == 1 {
		return "prompt"
	}
	return fmt.Sprintf("prompt[%d]", i)
}

func checkSampling(f *fields, n *int, temperature, topP *float64, topK *int, stop Stop) {
	if n != nil && (*n < 1 || *n > MaxN) {
		f.bad("n", "%d is outside [1, %d]", *n, MaxN)
	}
	if t := temperature; t != nil && !(*t >= 0 && *t <= 2) {
		f.bad("temperature", "%v is outside [0, 2]", *t)
	}
	if p := topP; p != nil && !(*p > 0 && *p <= 1) {
		f.bad("top_p", "%v is outside (0, 1]", *p)
	}
	if k := topK; k != nil && *k < -1 {
		f.bad("top_k", "%d is below -1 (-1 or 0 keep all tokens)", *k)
	}
	if len(stop) > MaxStop {
		f.bad("stop", "%d stop strings; at most %d", len(stop), MaxStop)
	}
	for i, s := range stop {
		if s == "" {
			f.bad(fmt.Sprintf("stop[%d]", i), "is empty")
		}
	}
}

func checkMaxTokens(f *fields, param string, n *int) {
	if n != nil && *n < 1 {
		f.bad(param, "%d is below 1", *n)
	}
}

func checkPenalties(f *fields, presence, frequency *float64, bias map[string]float64) {
	if presence != nil && *presence != 0 {
		f.unsupported("presence_penalty", "only 0 is supported")
	}
	if frequency != nil && *frequency != 0 {
		f.unsupported("frequency_penalty", "only 0 is supported")
	}
	if len(bias) > 0 {
		f.unsupported("logit_bias", "logit_bias is not supported")
	}
}

// MaxNewTokens returns the request's bound on generated tokens per choice
// and the field it came from: max_completion_tokens if set, else
// max_tokens; 0 and "" when neither is set.
func (r *ChatCompletionRequest) MaxNewTokens() (n int, param string) {
	switch {
	case r.MaxCompletionTokens != nil:
		return *r.MaxCompletionTokens, "max_completion_tokens"
	case r.MaxTokens != nil:
		return *r.MaxTokens, "max_tokens"
	}
	return 0, ""
}

// SampleParams converts the request's sampling fields, applying OpenAI's
// defaults for unset ones (n 1, temperature 1, top_p 1). MaxTokens is 0
// (the sampler's default) when the request sets no bound, and Seed is 0
// when it sets no seed: a server fills both in. StopTokens are the
// model's business and left empty.
func (r *ChatCompletionRequest) SampleParams() sample.Params {
	p := sampleParams(r.N, r.Temperature, r.TopP, r.TopK, r.Stop, r.Seed)
	p.MaxTokens, _ = r.MaxNewTokens()
	return p
}

// SampleParams converts the request's sampling fields for each prompt, as
// the chat version does; an unset max_tokens gives
// DefaultCompletionMaxTokens.
func (r *CompletionRequest) SampleParams() sample.Params {
	p := sampleParams(r.N, r.Temperature, r.TopP, r.TopK, r.Stop, r.Seed)
	p.MaxTokens = DefaultCompletionMaxTokens
	if r.MaxTokens != nil {
		p.MaxTokens = *r.MaxTokens
	}
	return p
}

func sampleParams(n *int, temperature, topP *float64, topK *int, stop Stop, seed *int64) sample.Params {
	p := sample.Params{N: 1, Temperature: 1, Stop: slices.Clone([]string(stop))}
	if n != nil {
		p.N = *n
	}
	if temperature != nil {
		p.Temperature = float32(*temperature)
	}
	if topP != nil && *topP < 1 {
		p.TopP = float32(*topP)
	}
	if topK != nil && *topK > 0 {
		p.TopK = *topK
	}
	if seed != nil {
		p.Seed = uint64(*seed)
	}
	return p
}

// ChatMessages converts the conversation for a chat template
// (tokenizer.Message is chat.Message); the developer role, OpenAI's newer
// name for system, becomes system.
func (r *ChatCompletionRequest) ChatMessages() []chat.Message {
	msgs := make([]chat.Message, len(r.Messages))
	for i, m := range r.Messages {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		msgs[i] = chat.Message{Role: role, Content: m.Content}
	}
	return msgs
}

// FinishReasonOf converts the sampler's reason.
func FinishReasonOf(f sample.Finish) FinishReason {
	if f == sample.FinishLength {
		return FinishLength
	}
	return FinishStop
}
