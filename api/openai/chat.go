package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Message is one turn of a chat conversation. Content is read from a
// string, null, or an array of {"type": "text", "text": ...} parts (joined
// with newlines); other part types are kept out of Content and reported by
// Validate. It is always written as a string.
type Message struct {
	Role    string `json:"role"` // "system", "developer", "user" or "assistant"
	Content string `json:"content"`
	Name    string `json:"name,omitempty"` // accepted and ignored

	contentErr string // why Content could not be read, for Validate
}

// UnmarshalJSON reads a message whose content is a string or text parts.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Name    string          `json:"name"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role, Name: raw.Name}
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || isNull(c):
	case c[0] == '"':
		return json.Unmarshal(c, &m.Content)
	case c[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			m.contentErr = "must be a string or an array of text parts"
			return nil
		}
		texts := make([]string, 0, len(parts))
		for i, p := range parts {
			if p.Type != "text" || p.Text == nil {
				m.contentErr = fmt.Sprintf("part %d has type %q; only text parts are supported", i, p.Type)
				return nil
			}
			texts = append(texts, *p.Text)
		}
		m.Content = strings.Join(texts, "\n")
	default:
		m.contentErr = "must be a string or an array of text parts"
	}
	return nil
}

// ChatCompletionRequest is the body of POST /v1/chat/completions.
type ChatCompletionRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`

	N           *int     `json:"n,omitempty"`           // choices to generate; unset means 1
	Temperature *float64 `json:"temperature,omitempty"` // in [0, 2]; unset means 1, 0 means greedy
	TopP        *float64 `json:"top_p,omitempty"`       // in (0, 1]; unset means 1
	// TopK keeps the k most likely tokens; unset, 0 or -1 keeps all. It is
	// an extension of vLLM, SGLang and llama.cpp, not of OpenAI.
	TopK *int `json:"top_k,omitempty"`
	// MaxTokens and MaxCompletionTokens bound the generated tokens of each
	// choice; MaxCompletionTokens, OpenAI's newer name, wins when both are
	// set. Unset means up to the server's limit and the context length.
	MaxTokens           *int           `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	Stop                Stop           `json:"stop,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`     // unset means a random seed
	Logprobs            *bool          `json:"logprobs,omitempty"` // return each token's logprob
	TopLogprobs         *int           `json:"top_logprobs,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
	User                string         `json:"user,omitempty"` // accepted and ignored

	// Parsed only to be rejected by Validate when they ask for something
	// rlvr's server does not do.
	PresencePenalty  *float64           `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64           `json:"frequency_penalty,omitempty"`
	LogitBias        map[string]float64 `json:"logit_bias,omitempty"`
	Tools            json.RawMessage    `json:"tools,omitempty"`
	ResponseFormat   *ResponseFormat    `json:"response_format,omitempty"`
}

// ResponseFormat is a request's response_format; rlvr's server supports
// only {"type": "text"}.
type ResponseFormat struct {
	Type string `json:"type"`
}

// ChatCompletionResponse is the body of a non-streaming chat completion.
type ChatCompletionResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ChatChoice is one generated reply.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      Message       `json:"message"`
	Logprobs     *ChatLogprobs `json:"logprobs"` // null unless requested
	FinishReason FinishReason  `json:"finish_reason"`
}

// ChatLogprobs are the logprobs of a choice's tokens, in order.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

// TokenLogprob is one generated token: its text, the sampler's logprob of
// it, its raw bytes (a token may hold part of a UTF-8 character, which
// Token then shows as U+FFFD), and the most likely alternatives, which
// rlvr's server leaves empty.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative token at a position.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatCompletionChunk is one server-sent event of a streaming chat
// completion. Every chunk of a stream has the same ID and Created. The
// optional usage chunk that ends a stream has no choices.
type ChatCompletionChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"` // "chat.completion.chunk"
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage,omitempty"`
}

// ChatChunkChoice is the part of one choice a chunk carries: the role in
// the first, text in the middle ones, the finish reason in the last.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        Delta         `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs,omitempty"` // the logprobs of the tokens behind Delta
	FinishReason FinishReason  `json:"finish_reason"`
}

// Delta is what a chunk adds to a choice's message.
type Delta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

// BytesOf returns b as the JSON "bytes" field wants it: one int per byte.
func BytesOf(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
