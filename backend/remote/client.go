// Package remote is the backend that trains and samples on a
// Tinker-compatible service — a self-hosted SkyRL tx cluster, hosted
// Tinker, or `rlvr serve --tinker` — over the Tinker REST API in JSON
// (package api/tinker). It implements backend.Learner and
// rollout.Sampler, so method code runs on it unchanged; see plan.go for
// how each rlvr loss term becomes a Tinker loss_fn.
//
// Every training or sampling call returns a future, resolved by
// long-polling retrieve_future. Transport failures that may pass (a reset
// or refused connection, a timeout), 5xx and 429 answers are retried with
// jittered exponential backoff, or after the server's Retry-After, up to
// a bound; a 408 from retrieve_future polls again. A submission carries
// the model's next seq_id, so a server that records (model_id, seq_id)
// never runs a retried call twice; SkyRL tx 0.3.0 does not record it, and
// there a submission whose answer was lost after the server took it (a
// reset connection) runs twice when retried. Every error names the call.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"rlvr/api/tinker"
	"rlvr/internal/httpretry"
)

// Client speaks the Tinker API to one server. Its zero values take the
// defaults of each field; it is safe for concurrent use.
type Client struct {
	// BaseURL is the server's address without the /api/v1 prefix, e.g.
	// http://127.0.0.1:8000.
	BaseURL string
	// APIKey goes in X-API-Key; empty sends none (SkyRL checks none).
	APIKey string
	// HTTP sends the requests; nil is a client without a total timeout
	// (retrieve_future long-polls; Deadline bounds a call instead).
	HTTP *http.Client
	// Retries bounds the attempts after the first for one HTTP exchange
	// that failed in transport or with 429 or 5xx (0: 5).
	Retries int
	// Backoff caps the first retry's wait, doubled for each retry after
	// up to 30 s, the wait drawn uniformly below the cap; a Retry-After
	// from the server wins (0: 500 ms).
	Backoff time.Duration
	// Deadline bounds one call from submission to its result, polls
	// included (0: 30 min; a long generation on a busy cluster is slow).
	Deadline time.Duration
}

// CallError is a call that failed: which call, the HTTP status when
// there was one, the server's category ("user", "server") when it gave
// one, and its message.
type CallError struct {
	Call     string // the API call, e.g. "forward_backward"
	Status   int    // HTTP status; 0 when the failure came in a result or in transport
	Category string // the server's failure category, if any
	Message  string
	Attempts int   // HTTP exchanges tried
	Err      error // the underlying error, if any
}

func (e *CallError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tinker %s", e.Call)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Category != "" {
		fmt.Fprintf(&b, ": %s error", e.Category)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *CallError) Unwrap() error { return e.Err }

func (c *Client) retries() int {
	if c.Retries > 0 {
		return c.Retries
	}
	return 5
}

// backoff is the sleep before retry n (1 for the first): full jitter
// below Backoff doubled per retry, or the server's Retry-After, at most
// 30 s.
func (c *Client) backoff(n int, retryAfter time.Duration) time.Duration {
	base := c.Backoff
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	return httpretry.Backoff(n, base, 30*time.Second, retryAfter, rand.Float64())
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// exchange is one POST answered by any status: what the caller decides
// on.
type exchange struct {
	status     int
	body       []byte
	retryAfter time.Duration // the Retry-After header, if any
}

// maxResponse bounds a response body: a sample of many long sequences
// with logprobs is large, but not larger.
const maxResponse = 1 << 30

// send POSTs body to path, retrying transport failures that may
// pass, 429 and 5xx with backoff. Any other status is returned to the
// caller.
func (c *Client) send(ctx context.Context, call, path string, body []byte) (exchange, error) {
	for n := 1; ; n++ {
		x, err := c.once(ctx, path, body)
		var last *CallError
		switch {
		case err != nil:
			last = &CallError{Call: call, Attempts: n, Err: err}
			if ctx.Err() != nil || !httpretry.Transient(err) {
				return exchange{}, last
			}
		case x.status == http.StatusTooManyRequests || x.status >= 500:
			last = &CallError{Call: call, Status: x.status, Attempts: n, Message: detail(x.body)}
		default:
			return x, nil
		}
		if n > c.retries() {
			return exchange{}, last
		}
		select {
		case <-ctx.Done():
			last.Err = errors.Join(last.Err, ctx.Err())
			return exchange{}, last
		case <-time.After(c.backoff(n, x.retryAfter)):
		}
	}
}

func (c *Client) once(ctx context.Context, path string, body []byte) (exchange, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return exchange{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		r.Header.Set(tinker.HeaderAPIKey, c.APIKey)
	}
	resp, err := c.httpClient().Do(r)
	if err != nil {
		return exchange{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return exchange{}, fmt.Errorf("reading the response: %w", err)
	}
	if len(b) > maxResponse {
		return exchange{}, fmt.Errorf("response larger than %d bytes", maxResponse)
	}
	return exchange{status: resp.StatusCode, body: b, retryAfter: httpretry.RetryAfter(resp.Header.Get("Retry-After"))}, nil
}

// detail is an error body's message: FastAPI's {"detail": …}, or the body
// itself, shortened.
func detail(body []byte) string {
	var d struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &d) == nil && d.Detail != nil {
		var s string
		if json.Unmarshal(d.Detail, &s) == nil {
			return s
		}
		return string(d.Detail)
	}
	return httpretry.Excerpt(body)
}

// encode is a request's JSON body.
func encode(call string, req any) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, &CallError{Call: call, Message: "encoding the request", Err: err}
	}
	return b, nil
}

// Post makes a call answered at once (create_session, create_model,
// session_heartbeat) and decodes its 200 answer into out.
func (c *Client) Post(ctx context.Context, call, path string, req, out any) error {
	body, err := encode(call, req)
	if err != nil {
		return err
	}
	return c.post(ctx, call, path, body, out)
}

// post is Post of an encoded body.
func (c *Client) post(ctx context.Context, call, path string, body []byte, out any) error {
	x, err := c.send(ctx, call, path, body)
	if err != nil {
		return err
	}
	if x.status != http.StatusOK {
		return &CallError{Call: call, Status: x.status, Message: detail(x.body)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(x.body, out); err != nil {
		return &CallError{Call: call, Message: "malformed answer", Err: err}
	}
	return nil
}

// Call submits a training or sampling call, waits for its future and
// decodes the result into out (Submit, then Pending.Await).
func (c *Client) Call(ctx context.Context, call, path string, req, out any) error {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	p, err := c.Submit(ctx, call, path, req)
	if err != nil {
		return err
	}
	return p.Await(ctx, out)
}

// Pending is a submitted call whose result is awaited later, so that a
// caller can submit the next call first and the server runs them back to
// back, as the Tinker SDK pipelines.
type Pending struct {
	c          *Client
	call, path string
	body       []byte
	id         string
}

// Submit submits a training or sampling call and returns once the server
// has taken it, with its future.
func (c *Client) Submit(ctx context.Context, call, path string, req any) (*Pending, error) {
	body, err := encode(call, req)
	if err != nil {
		return nil, err
	}
	p := &Pending{c: c, call: call, path: path, body: body}
	return p, p.submit(ctx)
}

func (p *Pending) submit(ctx context.Context) error {
	var f tinker.Future
	if err := p.c.post(ctx, p.call, p.path, p.body, &f); err != nil {
		return err
	}
	if f.RequestID == "" {
		return &CallError{Call: p.call, Message: "the server answered without a request_id"}
	}
	p.id = f.RequestID
	return nil
}

// Await waits for the call's result and decodes it into out, within
// the client's Deadline. A future the server no longer knows (410) is
// submitted again, once: with the same seq_id a recording server answers
// with the call it already ran.
func (p *Pending) Await(ctx context.Context, out any) error {
	ctx, cancel := p.c.withDeadline(ctx)
	defer cancel()
	err := p.c.wait(ctx, p.call, p.id, out)
	var ce *CallError
	if errors.As(err, &ce) && ce.Status == http.StatusGone {
		if err := p.submit(ctx); err != nil {
			return err
		}
		return p.c.wait(ctx, p.call, p.id, out)
	}
	return err
}

// withDeadline bounds one call by Deadline.
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := c.Deadline
	if deadline <= 0 {
		deadline = 30 * time.Minute
	}
	return context.WithTimeout(ctx, deadline)
}

// Await waits for the future id of a call answered at once (Post) and
// decodes its result into out, within Deadline: SkyRL answers
// create_model with a model_id and a request_id whose future fails when
// the model cannot be made.
func (c *Client) Await(ctx context.Context, call, id string, out any) error {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	return c.wait(ctx, call, id, out)
}

// wait polls retrieve_future until the result, a failure, or the
// deadline.
func (c *Client) wait(ctx context.Context, call, id string, out any) error {
	poll, err := encode(call, tinker.RetrieveFutureRequest{RequestID: id})
	if err != nil {
		return err
	}
	for polls := 0; ; polls++ {
		if err := ctx.Err(); err != nil {
			return &CallError{Call: call, Message: fmt.Sprintf("future %s unresolved after %d polls", id, polls), Err: err}
		}
		x, err := c.send(ctx, call, tinker.PathRetrieveFuture, poll)
		if err != nil {
			return err
		}
		switch x.status {
		case http.StatusOK:
			ready, err := tinker.Result(x.body, out)
			var failed *tinker.RequestFailed
			switch {
			case errors.As(err, &failed):
				return &CallError{Call: call, Category: failed.Category, Message: failed.Message}
			case err != nil:
				return &CallError{Call: call, Message: "malformed result", Err: err}
			case ready:
				return nil
			}
			// Not ready yet: a short pause before the next long-poll.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		case http.StatusRequestTimeout:
			// The long-poll ended without a result: poll again.
		default:
			return &CallError{Call: call, Status: x.status, Message: detail(x.body)}
		}
	}
}
