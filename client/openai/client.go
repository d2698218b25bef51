// Package openai is the client rlvr's experts and remote rollouts use to
// call OpenAI-compatible endpoints: rlvr's own server (rlvr/serve), vLLM,
// SGLang, llama.cpp, Ollama or OpenAI. Import it under another name, as
//
//	import (
//		api "rlvr/api/openai"
//		client "rlvr/client/openai"
//	)
//
// since the wire types it sends and returns live in rlvr/api/openai.
//
// Endpoints time out, fail and return garbage, so every call has a
// per-attempt deadline, is retried a bounded number of times with
// exponential backoff and full jitter on 408, 429, 5xx, refused or reset
// connections and timeouts (honouring Retry-After), and is never retried
// on other 4xx answers or malformed JSON. A Client bounds its in-flight
// requests, counts requests, retries, failures and tokens, and returns an
// *APIError for every error envelope.
//
// A Client is safe for concurrent use; share one per endpoint so that its
// concurrency limit and usage totals cover every caller.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"time"

	api "rlvr/api/openai"
	"rlvr/internal/httpretry"
)

// Config configures a Client. Every field's zero value means what its
// comment says, so the zero Config talks to `rlvr serve` on this machine.
type Config struct {
	// BaseURL is the API's root, with the version:
	// "http://127.0.0.1:8000/v1", "https://api.openai.com/v1". Empty
	// means "http://127.0.0.1:8000/v1", rlvr's own server.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>". Empty sends no
	// Authorization header.
	APIKey string
	// Model is used by requests that name no model. Empty leaves them
	// as they are (rlvr's server then uses its only model).
	Model string
	// Timeout bounds each attempt: connecting, sending, and reading the
	// whole response, a stream included. Waiting for a concurrency slot
	// and backoff sleeps are not counted; the caller's context bounds the
	// whole call. 0 means 2 minutes; negative means no limit.
	Timeout time.Duration
	// MaxRetries bounds the retries after a first failed attempt. 0 means
	// 2; negative means none.
	MaxRetries int
	// BackoffBase is the backoff cap before the first retry; it doubles
	// for each retry after, up to BackoffMax, and the actual sleep is
	// drawn uniformly below the cap ("full jitter"). 0 means 250 ms.
	BackoffBase time.Duration
	// BackoffMax bounds every backoff sleep, including one a Retry-After
	// header asks for. 0 means 10 s.
	BackoffMax time.Duration
	// MaxConcurrent bounds the requests this Client has in flight to the
	// endpoint at once; callers beyond it wait for a slot (or for their
	// context). 0 means 16; negative means no limit.
	MaxConcurrent int
	// HTTPClient sends the requests. Nil means a client of the Client's
	// own, keeping enough idle connections for MaxConcurrent. Its Timeout,
	// if any, applies on top of Config.Timeout.
	HTTPClient *http.Client
}

// Client calls one OpenAI-compatible endpoint. Build it with New.
type Client struct {
	cfg  Config
	base string
	http *http.Client
	sem  chan struct{} // nil for no limit
	// timeout is the cause of an attempt's context when Config.Timeout
	// ends it.
	timeout error

	// sleep and jitter are replaced in tests.
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func() float64 // uniform in [0, 1)

	requests, retries, failures    atomic.Int64
	promptTokens, completionTokens atomic.Int64
}

// Usage are a Client's running totals.
type Usage struct {
	Requests         int64 // calls made: Chat, ChatStream, Complete, Models
	Retries          int64 // attempts after the first; HTTP requests sent = Requests + Retries
	Failures         int64 // calls that returned an error
	PromptTokens     int64 // as the endpoint reported them
	CompletionTokens int64
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "http://127.0.0.1:8000/v1"
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = 2 * time.Minute
	case cfg.Timeout < 0:
		cfg.Timeout = 0
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = 2
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 250 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 10 * time.Second
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 16
	}
	c := &Client{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), http: cfg.HTTPClient, sleep: sleep, jitter: rand.Float64,
		timeout: fmt.Errorf("no complete response within %v (Config.Timeout): %w", cfg.Timeout, context.DeadlineExceeded)}
	if cfg.MaxConcurrent > 0 {
		c.sem = make(chan struct{}, cfg.MaxConcurrent)
	}
	if c.http == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = max(cfg.MaxConcurrent, 64)
		c.http = &http.Client{Transport: t}
	}
	return c
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Usage returns the Client's totals so far.
func (c *Client) Usage() Usage {
	return Usage{
		Requests:         c.requests.Load(),
		Retries:          c.retries.Load(),
		Failures:         c.failures.Load(),
		PromptTokens:     c.promptTokens.Load(),
		CompletionTokens: c.completionTokens.Load(),
	}
}

func (c *Client) count(u *api.Usage) {
	if u != nil {
		c.promptTokens.Add(int64(u.PromptTokens))
		c.completionTokens.Add(int64(u.CompletionTokens))
	}
}

// ErrMalformedResponse is wrapped by the errors for a 2xx response whose
// body is not the JSON expected. Such responses are not retried.
var ErrMalformedResponse = errors.New("openai: malformed response")

// APIError is an error answer from the endpoint: its status and error
// envelope. A body that is not an envelope leaves Type, Code and Param
// empty and puts the start of the body in Message.
type APIError struct {
	StatusCode int    // the HTTP status; 200 for an error sent inside a stream
	Type       string // "invalid_request_error", "server_error", ...
	Code       string // "model_not_found", "invalid_api_key", ...; may be empty
	Param      string // the request field at fault; may be empty
	Message    string
	URL        string // the URL called
	Attempts   int    // attempts made, retries included
}

// Error describes the error with its URL, status, envelope and attempts.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "openai: %s: %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Type != "" {
		b.WriteString(" (" + e.Type)
		if e.Code != "" {
			b.WriteString(", code " + e.Code)
		}
		if e.Param != "" {
			b.WriteString(", param " + e.Param)
		}
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Retryable reports whether the status is one a retry may cure: 408,
// 429 or 5xx.
func (e *APIError) Retryable() bool {
	return e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// attemptsError adds the number of attempts to a final error that is not
// an *APIError.
type attemptsError struct {
	err error
	n   int
}

// Error adds the attempts to the last error.
func (e *attemptsError) Error() string { return fmt.Sprintf("%v (after %d attempts)", e.err, e.n) }

// Unwrap returns the last error.
func (e *attemptsError) Unwrap() error { return e.err }

// Chat sends a non-streaming chat completion request. req is not
// modified; a request without a model gets Config.Model.
func (c *Client) Chat(ctx context.Context, req *api.ChatCompletionRequest) (*api.ChatCompletionResponse, error) {
	r := *req
	if r.Stream {
		c.requests.Add(1)
		c.failures.Add(1)
		return nil, errors.New("openai: Chat got a request with stream set; use ChatStream")
	}
	if r.Model == "" {
		r.Model = c.cfg.Model
	}
	var resp api.ChatCompletionResponse
	err := c.call(ctx, http.MethodPost, "/chat/completions", &r, &resp, func() bool { return len(resp.Choices) > 0 })
	if err != nil {
		return nil, err
	}
	c.count(resp.Usage)
	return &resp, nil
}

// Complete sends a non-streaming legacy completion request. req is not
// modified; a request without a model gets Config.Model.
func (c *Client) Complete(ctx context.Context, req *api.CompletionRequest) (*api.CompletionResponse, error) {
	r := *req
	if r.Stream {
		c.requests.Add(1)
		c.failures.Add(1)
		return nil, errors.New("openai: Complete does not stream; unset stream")
	}
	if r.Model == "" {
		r.Model = c.cfg.Model
	}
	var resp api.CompletionResponse
	err := c.call(ctx, http.MethodPost, "/completions", &r, &resp, func() bool { return len(resp.Choices) > 0 })
	if err != nil {
		return nil, err
	}
	c.count(resp.Usage)
	return &resp, nil
}

// Models lists the endpoint's models.
func (c *Client) Models(ctx context.Context) ([]api.Model, error) {
	var list api.ModelList
	if err := c.call(ctx, http.MethodGet, "/models", nil, &list, func() bool { return list.Data != nil }); err != nil {
		return nil, err
	}
	return list.Data, nil
}

// maxResponseBytes bounds a non-streaming response body.
const maxResponseBytes = 64 << 20

// call sends one request, with retries, and decodes the JSON answer into
// out; ok says whether out looks like an answer at all.
func (c *Client) call(ctx context.Context, method, path string, body, out any, ok func() bool) error {
	c.requests.Add(1)
	url := c.base + path
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			c.failures.Add(1)
			return fmt.Errorf("openai: encoding the request: %w", err)
		}
	}
	err := c.retry(ctx, func(ctx context.Context) attempt {
		resp, a := c.send(ctx, method, url, payload, "application/json")
		if resp == nil {
			return a
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
		if err != nil {
			return c.transportError(ctx, method, url, err)
		}
		if len(data) > maxResponseBytes {
			return attempt{err: fmt.Errorf("openai: %s %s: the response exceeds %d bytes", method, url, maxResponseBytes)}
		}
		if resp.StatusCode/100 != 2 {
			return errorAttempt(resp, url, data)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return attempt{err: fmt.Errorf("%w from %s %s: %v; the body starts %q", ErrMalformedResponse, method, url, err, httpretry.Excerpt(data))}
		}
		if !ok() {
			if e := parseError(resp.StatusCode, url, data); e.Type != "" {
				return attempt{err: e} // an error envelope sent with a 2xx status
			}
			return attempt{err: fmt.Errorf("%w from %s %s: no choices or data; the body starts %q", ErrMalformedResponse, method, url, httpretry.Excerpt(data))}
		}
		return attempt{}
	})
	if err != nil {
		c.failures.Add(1)
	}
	return err
}

// attempt is the outcome of one try.
type attempt struct {
	err        error
	retryable  bool
	retryAfter time.Duration // asked for by the server; 0 if not
}

// retry runs try until it succeeds, fails for good, runs out of retries
// or ctx ends, sleeping between tries. Each try gets its own deadline and
// holds a concurrency slot.
func (c *Client) retry(ctx context.Context, try func(ctx context.Context) attempt) error {
	for n := 1; ; n++ {
		a := c.once(ctx, try)
		if a.err == nil {
			return nil
		}
		final := func(err error) error {
			if e, ok := errors.AsType[*APIError](err); ok {
				e.Attempts = n
				return err
			}
			if n > 1 {
				return &attemptsError{err: err, n: n}
			}
			return err
		}
		if !a.retryable || n > c.cfg.MaxRetries || ctx.Err() != nil {
			return final(a.err)
		}
		d := c.backoff(n, a.retryAfter)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return final(fmt.Errorf("openai: %w before the next retry (backoff %v); last error: %w", context.DeadlineExceeded, d, a.err))
		}
		if err := c.sleep(ctx, d); err != nil {
			return final(fmt.Errorf("openai: %w while waiting to retry; last error: %w", err, a.err))
		}
		c.retries.Add(1)
	}
}

// once runs one try within a concurrency slot and the attempt deadline.
func (c *Client) once(ctx context.Context, try func(ctx context.Context) attempt) attempt {
	if c.sem != nil {
		select {
		case c.sem <- struct{}{}:
			defer func() { <-c.sem }()
		case <-ctx.Done():
			return attempt{err: fmt.Errorf("openai: waiting for a free connection slot: %w", ctx.Err())}
		}
	}
	if c.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.cfg.Timeout, c.timeout)
		defer cancel()
	}
	return try(ctx)
}

// backoff returns the sleep before retry n (1 for the first).
func (c *Client) backoff(n int, retryAfter time.Duration) time.Duration {
	return httpretry.Backoff(n, c.cfg.BackoffBase, c.cfg.BackoffMax, retryAfter, c.jitter())
}

// send starts a request. It returns the response, or nil and the failed
// attempt.
func (c *Client) send(ctx context.Context, method, url string, payload []byte, accept string) (*http.Response, attempt) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, attempt{err: fmt.Errorf("openai: %w", err)}
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "rlvr")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, method, url, err)
	}
	return resp, attempt{}
}

// transportError classifies a failure to send or to read a response.
// ctx is the attempt's context.
func (c *Client) transportError(ctx context.Context, method, url string, err error) attempt {
	if ue, ok := errors.AsType[*neturl.Error](err); ok {
		err = ue.Err // the URL is said once, below
	}
	if context.Cause(ctx) == c.timeout {
		return attempt{err: fmt.Errorf("openai: %s %s: %w", method, url, c.timeout), retryable: true}
	}
	return attempt{err: fmt.Errorf("openai: %s %s: %w", method, url, err), retryable: httpretry.Transient(err)}
}

// errorAttempt turns a non-2xx response into a failed attempt.
func errorAttempt(resp *http.Response, url string, data []byte) attempt {
	e := parseError(resp.StatusCode, url, data)
	return attempt{err: e, retryable: e.Retryable(), retryAfter: httpretry.RetryAfter(resp.Header.Get("Retry-After"))}
}

// parseError reads an error envelope in the forms servers send:
// {"error": {...}}, {"error": "message"}, or vLLM's older flat
// {"object": "error", "message": ..., "code": 400}.
func parseError(status int, url string, data []byte) *APIError {
	e := &APIError{StatusCode: status, URL: url}
	type fields struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    json.RawMessage `json:"code"`
	}
	var env struct {
		Error json.RawMessage `json:"error"`
		fields
	}
	if json.Unmarshal(data, &env) != nil {
		e.Message = httpretry.Excerpt(data)
		return e
	}
	f := env.fields
	var inner fields
	var text string
	switch {
	case json.Unmarshal(env.Error, &inner) == nil:
		f = inner
	case json.Unmarshal(env.Error, &text) == nil:
		f = fields{Message: text}
	}
	e.Message, e.Type, e.Param, e.Code = f.Message, f.Type, scalar(f.Param), scalar(f.Code)
	if e.Message == "" && e.Type == "" {
		e.Message = httpretry.Excerpt(data)
	}
	if e.Type == "" && (e.Code != "" || e.Message != "") && len(env.Error) > 0 {
		e.Type = "error"
	}
	return e
}

// scalar renders a JSON string or number as text; null as "".
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}
