// Package openai holds the wire types of the OpenAI HTTP API as rlvr speaks
// it — chat completions, legacy completions, models, streaming chunks,
// logprobs, usage and the error envelope — and pure converters between
// them and the sample package. It does no I/O: the server lives in
// rlvr/serve and the client in rlvr/client/openai.
//
// Optional request fields are pointers, so that "unset" differs from zero:
// an unset temperature means OpenAI's default of 1, an explicit 0 means
// greedy. The request types accept what OpenAI accepts in the forms rlvr
// meets in practice (stop as a string or an array, message content as a
// string or an array of text parts, a legacy prompt as text or token ids).
// Their Validate methods report what rlvr's server would reject, every bad
// field at once, each named as the error envelope's param.
//
// Values of these types are plain data: safe for concurrent reads, not for
// concurrent writes.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Object names, the "object" field of each response type.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectTextCompletion      = "text_completion"
	ObjectModel               = "model"
	ObjectList                = "list"
)

// Error types and codes used in the error envelope.
const (
	ErrorTypeInvalidRequest = "invalid_request_error"
	ErrorTypeServer         = "server_error"

	CodeModelNotFound         = "model_not_found"
	CodeInvalidAPIKey         = "invalid_api_key"
	CodeContextLengthExceeded = "context_length_exceeded"
	CodeUnsupported           = "unsupported_parameter"
	CodeOverloaded            = "overloaded"
)

// FinishReason says why a choice ended: FinishStop or FinishLength. The
// empty value means "not finished yet" and is written as JSON null, as in
// every streaming chunk but a choice's last.
type FinishReason string

// The finish reasons rlvr produces.
const (
	FinishStop   FinishReason = "stop"   // a stop token or stop string
	FinishLength FinishReason = "length" // max_tokens or the context length reached
)

// MarshalJSON writes the empty reason as null.
func (f FinishReason) MarshalJSON() ([]byte, error) {
	if f == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(f))
}

// UnmarshalJSON reads null as the empty reason.
func (f *FinishReason) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		*f = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("openai: finish_reason: %w", err)
	}
	*f = FinishReason(s)
	return nil
}

// Stop is the stop field of a request: JSON null, a string, or an array of
// strings. It is written as an array.
type Stop []string

// UnmarshalJSON accepts null, a string or an array of strings.
func (s *Stop) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case isNull(data):
		*s = nil
		return nil
	case len(data) > 0 && data[0] == '"':
		var one string
		if err := json.Unmarshal(data, &one); err != nil {
			return &FieldError{Param: "stop", Message: err.Error()}
		}
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return &FieldError{Param: "stop", Message: "must be a string or an array of strings"}
	}
	*s = many
	return nil
}

// StreamOptions are the stream_options of a streaming request.
type StreamOptions struct {
	// IncludeUsage asks for one more chunk before "data: [DONE]", with
	// empty choices and the usage of the whole request.
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// Usage counts the tokens of one request. The prompt is counted once per
// prompt however many choices (n) were asked for; the completion tokens of
// every choice are summed, stop tokens included.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Model is one entry of a ModelList.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the model's context length in tokens, as vLLM
	// reports it; 0 (omitted) when unknown or unbounded.
	MaxModelLen int `json:"max_model_len,omitempty"`
}

// ModelList is the response of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
}

// ErrorResponse is the error envelope every non-2xx response carries:
// {"error": {"message", "type", "param", "code"}}. A stream that fails after
// it started sends one as a data event.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error is the object inside an ErrorResponse.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"` // the offending request field, or null
	Code    *string `json:"code"`  // a machine-readable code, or null
}

// NewError returns an error envelope; an empty param or code is written as
// null.
func NewError(typ, code, param, message string) *ErrorResponse {
	e := &ErrorResponse{Error: Error{Message: message, Type: typ}}
	if param != "" {
		e.Error.Param = &param
	}
	if code != "" {
		e.Error.Code = &code
	}
	return e
}

func isNull(data []byte) bool { return string(bytes.TrimSpace(data)) == "null" }
