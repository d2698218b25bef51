package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	api "rlvr/api/openai"
	"rlvr/internal/httpretry"
)

// maxChoices bounds the choice indices a stream may use, against garbage.
const maxChoices = 4096

// ChatStream sends a streaming chat completion request, calls onDelta (if
// not nil) with each piece of text as it arrives, tagged with its choice
// index, and returns the whole response accumulated from the chunks:
// every choice's message, finish reason and logprobs, and the usage,
// which it asks for with stream_options unless req sets them. onDelta is
// called from the calling goroutine. req is not modified; a request
// without a model gets Config.Model.
//
// A stream is retried like any call as long as no text has reached
// onDelta; after that a failure ends the call, since the text cannot be
// taken back. A stream that ends without "data: [DONE]", or with an error
// event, is an error.
func (c *Client) ChatStream(ctx context.Context, req *api.ChatCompletionRequest, onDelta func(choice int, text string)) (*api.ChatCompletionResponse, error) {
	c.requests.Add(1)
	r := *req
	r.Stream = true
	if r.StreamOptions == nil {
		r.StreamOptions = &api.StreamOptions{IncludeUsage: true}
	}
	if r.Model == "" {
		r.Model = c.cfg.Model
	}
	url := c.base + "/chat/completions"
	payload, err := json.Marshal(&r)
	if err != nil {
		c.failures.Add(1)
		return nil, fmt.Errorf("openai: encoding the request: %w", err)
	}
	var out *api.ChatCompletionResponse
	delivered := false
	err = c.retry(ctx, func(ctx context.Context) attempt {
		resp, a := c.send(ctx, http.MethodPost, url, payload, "text/event-stream")
		if resp == nil {
			return a
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			return errorAttempt(resp, url, data)
		}
		acc := &accumulator{}
		a = c.readStream(ctx, resp, url, acc, func(choice int, text string) {
			delivered = true
			if onDelta != nil {
				onDelta(choice, text)
			}
		})
		if a.err != nil {
			a.retryable = a.retryable && !delivered
			return a
		}
		out = acc.response()
		return attempt{}
	})
	if err != nil {
		c.failures.Add(1)
		return nil, err
	}
	c.count(out.Usage)
	return out, nil
}

// readStream reads server-sent events into acc until "data: [DONE]".
func (c *Client) readStream(ctx context.Context, resp *http.Response, url string, acc *accumulator, onDelta func(int, string)) attempt {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var data []byte // the data lines of the current event
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 0 {
			if field, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, bytes.TrimPrefix(field, []byte(" "))...)
			} // comments (":") and other fields are ignored
			continue
		}
		if len(data) == 0 {
			continue
		}
		event := data
		data = nil
		if string(event) == "[DONE]" {
			return attempt{}
		}
		if a := acc.add(event, resp.StatusCode, url, onDelta); a.err != nil {
			return a
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return attempt{err: fmt.Errorf("%w from POST %s: a stream event exceeds 16 MiB", ErrMalformedResponse, url)}
		}
		return c.transportError(ctx, http.MethodPost, url, err)
	}
	return attempt{err: fmt.Errorf("openai: POST %s: the stream ended without data: [DONE]: %w", url, io.ErrUnexpectedEOF), retryable: true}
}

// accumulator builds a ChatCompletionResponse from chunks.
type accumulator struct {
	resp    api.ChatCompletionResponse
	choices []*api.ChatChoice // by index; nil where none came
}

// add takes in one event: a chunk or an error envelope.
func (a *accumulator) add(event []byte, status int, url string, onDelta func(int, string)) attempt {
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(event, &probe) == nil && len(probe.Error) > 0 && string(probe.Error) != "null" {
		return attempt{err: parseError(status, url, event)}
	}
	var chunk api.ChatCompletionChunk
	if err := json.Unmarshal(event, &chunk); err != nil {
		return attempt{err: fmt.Errorf("%w from POST %s: a stream event: %v; it starts %q", ErrMalformedResponse, url, err, httpretry.Excerpt(event))}
	}
	if a.resp.ID == "" {
		a.resp.ID, a.resp.Created, a.resp.Model = chunk.ID, chunk.Created, chunk.Model
	}
	if chunk.Usage != nil {
		u := *chunk.Usage
		a.resp.Usage = &u
	}
	for _, ch := range chunk.Choices {
		if ch.Index < 0 || ch.Index >= maxChoices {
			return attempt{err: fmt.Errorf("%w from POST %s: choice index %d", ErrMalformedResponse, url, ch.Index)}
		}
		for len(a.choices) <= ch.Index {
			a.choices = append(a.choices, nil)
		}
		c := a.choices[ch.Index]
		if c == nil {
			c = &api.ChatChoice{Index: ch.Index, Message: api.Message{Role: "assistant"}}
			a.choices[ch.Index] = c
		}
		if ch.Delta.Role != "" {
			c.Message.Role = ch.Delta.Role
		}
		if ch.Delta.Content != "" {
			c.Message.Content += ch.Delta.Content
			onDelta(ch.Index, ch.Delta.Content)
		}
		if ch.Logprobs != nil {
			if c.Logprobs == nil {
				c.Logprobs = &api.ChatLogprobs{Content: []api.TokenLogprob{}}
			}
			c.Logprobs.Content = append(c.Logprobs.Content, ch.Logprobs.Content...)
		}
		if ch.FinishReason != "" {
			c.FinishReason = ch.FinishReason
		}
	}
	return attempt{}
}

func (a *accumulator) response() *api.ChatCompletionResponse {
	r := a.resp
	r.Object = api.ObjectChatCompletion
	for _, c := range a.choices {
		if c != nil {
			r.Choices = append(r.Choices, *c)
		}
	}
	return &r
}
