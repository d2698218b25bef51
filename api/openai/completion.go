package openai

import (
	"bytes"
	"encoding/json"
)

// CompletionRequest is the body of POST /v1/completions, the legacy text
// completion endpoint. With several prompts, choice i*n+k is the k-th
// sample of prompt i.
type CompletionRequest struct {
	Model  string `json:"model"`
	Prompt Prompt `json:"prompt"`

	N           *int     `json:"n,omitempty"`           // choices per prompt; unset means 1
	Temperature *float64 `json:"temperature,omitempty"` // in [0, 2]; unset means 1, 0 means greedy
	TopP        *float64 `json:"top_p,omitempty"`       // in (0, 1]; unset means 1
	TopK        *int     `json:"top_k,omitempty"`       // extension: unset, 0 or -1 keeps all
	// MaxTokens bounds each choice's generated tokens. Unset means
	// OpenAI's default of 16.
	MaxTokens *int   `json:"max_tokens,omitempty"`
	Stop      Stop   `json:"stop,omitempty"`
	Seed      *int64 `json:"seed,omitempty"` // unset means a random seed
	// Logprobs asks for the logprobs of the generated tokens and of the
	// Logprobs most likely alternatives at each position; rlvr's server
	// computes no alternatives and accepts only 0.
	Logprobs      *int           `json:"logprobs,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	User          string         `json:"user,omitempty"` // accepted and ignored

	// Parsed only to be rejected by Validate when they ask for something
	// rlvr's server does not do.
	Echo             bool               `json:"echo,omitempty"`
	Suffix           string             `json:"suffix,omitempty"`
	BestOf           *int               `json:"best_of,omitempty"`
	PresencePenalty  *float64           `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64           `json:"frequency_penalty,omitempty"`
	LogitBias        map[string]float64 `json:"logit_bias,omitempty"`
}

// DefaultCompletionMaxTokens is OpenAI's max_tokens for a legacy
// completion that sets none.
const DefaultCompletionMaxTokens = 16

// Prompt is the prompt of a CompletionRequest: a string, an array of
// strings, an array of token ids, or an array of arrays of token ids. At
// most one of Texts and Tokens is set.
type Prompt struct {
	Texts  []string
	Tokens [][]int32
}

// Len returns the number of prompts.
func (p Prompt) Len() int { return len(p.Texts) + len(p.Tokens) }

var errPromptForm = &FieldError{Param: "prompt", Message: "must be a string, an array of strings, an array of token ids or an array of arrays of token ids"}

// UnmarshalJSON reads any of the four forms of a prompt.
func (p *Prompt) UnmarshalJSON(data []byte) error {
	*p = Prompt{}
	data = bytes.TrimSpace(data)
	if isNull(data) {
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		p.Texts = []string{s}
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return errPromptForm
	}
	if len(items) == 0 {
		return nil
	}
	switch items[0] = bytes.TrimSpace(items[0]); {
	case len(items[0]) > 0 && items[0][0] == '"':
		if err := json.Unmarshal(data, &p.Texts); err != nil {
			return errPromptForm
		}
	case len(items[0]) > 0 && items[0][0] == '[':
		if err := json.Unmarshal(data, &p.Tokens); err != nil {
			return errPromptForm
		}
	default:
		var ids []int32
		if err := json.Unmarshal(data, &ids); err != nil {
			return errPromptForm
		}
		p.Tokens = [][]int32{ids}
	}
	return nil
}

// MarshalJSON writes a single prompt unwrapped, several as an array.
func (p Prompt) MarshalJSON() ([]byte, error) {
	switch {
	case len(p.Tokens) == 1 && len(p.Texts) == 0:
		return json.Marshal(p.Tokens[0])
	case len(p.Tokens) > 0:
		return json.Marshal(p.Tokens)
	case len(p.Texts) == 1:
		return json.Marshal(p.Texts[0])
	case len(p.Texts) > 1:
		return json.Marshal(p.Texts)
	}
	return []byte("null"), nil
}

// CompletionResponse is the body of a legacy completion; a streaming one
// sends it as chunks of the same shape.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "text_completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one generated continuation, or in a stream the part
// of it a chunk carries.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"` // null unless requested
	FinishReason FinishReason        `json:"finish_reason"`
}

// CompletionLogprobs are the legacy logprobs of a choice's tokens: the
// parallel arrays of each token's text, logprob, the most likely
// alternatives (null from rlvr's server) and byte offset in the choice's
// text.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}
