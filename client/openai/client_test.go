package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	api "rlvr/api/openai"
	"rlvr/format/tokenizer"
	"rlvr/serve"
	"rlvr/serve/servetest"
)

func ptr[T any](v T) *T { return &v }

// startServe runs rlvr's server with the fake generator on loopback.
func startServe(t *testing.T, cfg serve.Config) string {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	byteTok := tokenizer.NewByteTokenizer()
	gen := &servetest.Generator{Decoder: byteTok, EOS: tokenizer.ByteEOS}
	srv, err := serve.New(cfg,
		serve.Model{Name: "toy", Generator: gen, Tokenizer: byteTok, Chat: serve.ChatFunc(tokenizer.ChatML())})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String() + "/v1"
}

// sleeps records backoff sleeps instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// fast returns a client whose backoff sleeps return at once.
func fast(cfg Config) (*Client, *sleeps) {
	c := New(cfg)
	s := &sleeps{}
	c.sleep = s.sleep
	return c, s
}

func chatReq(text string) *api.ChatCompletionRequest {
	return &api.ChatCompletionRequest{Messages: []api.Message{{Role: "user", Content: text}}, MaxTokens: ptr(30)}
}

func TestAgainstServer(t *testing.T) {
	base := startServe(t, serve.Config{Token: "tok"})
	c := New(Config{BaseURL: base, APIKey: "tok", Model: "toy"})
	ctx := context.Background()

	models, err := c.Models(ctx)
	if err != nil || len(models) != 1 || models[0].ID != "toy" {
		t.Fatalf("Models = %+v, %v", models, err)
	}

	req := chatReq("hello")
	req.N, req.Seed, req.Logprobs = ptr(2), ptr(int64(9)), ptr(true)
	whole, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if req.Model != "" || req.Stream {
		t.Errorf("Chat modified the request: %+v", req)
	}
	if len(whole.Choices) != 2 || whole.Model != "toy" || whole.Usage == nil {
		t.Fatalf("Chat = %+v", whole)
	}

	var mu sync.Mutex
	deltas := map[int]string{}
	calls := 0
	streamed, err := c.ChatStream(ctx, req, func(choice int, text string) {
		mu.Lock()
		defer mu.Unlock()
		deltas[choice] += text
		calls++
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 {
		t.Errorf("onDelta called %d times", calls)
	}
	for k := range 2 {
		w, s := whole.Choices[k], streamed.Choices[k]
		if s.Index != k || s.Message != w.Message || s.FinishReason != w.FinishReason || deltas[k] != w.Message.Content {
			t.Errorf("choice %d: streamed %+v (deltas %q), whole %+v", k, s, deltas[k], w)
		}
		if s.Logprobs == nil || len(s.Logprobs.Content) != len(w.Logprobs.Content) {
			t.Errorf("choice %d: streamed logprobs %v, whole %d", k, s.Logprobs, len(w.Logprobs.Content))
		}
	}
	if streamed.Usage == nil || *streamed.Usage != *whole.Usage || streamed.Object != "chat.completion" || streamed.ID == "" {
		t.Errorf("streamed response %+v, usage %+v; whole usage %+v", streamed, streamed.Usage, whole.Usage)
	}

	comp, err := c.Complete(ctx, &api.CompletionRequest{Prompt: api.Prompt{Texts: []string{"a", "b"}}, MaxTokens: ptr(5)})
	if err != nil || len(comp.Choices) != 2 {
		t.Fatalf("Complete = %+v, %v", comp, err)
	}

	// Errors from the server are *APIErrors, never retried.
	_, err = c.Chat(ctx, &api.ChatCompletionRequest{Model: "nope", Messages: req.Messages})
	apiErr, ok := errors.AsType[*APIError](err)
	if !ok || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" || apiErr.Attempts != 1 {
		t.Errorf("unknown model: %v", err)
	}
	_, err = c.Chat(ctx, &api.ChatCompletionRequest{Messages: req.Messages, MaxTokens: ptr(100000)})
	if apiErr, ok := errors.AsType[*APIError](err); !ok || apiErr.StatusCode != 400 || apiErr.Param != "max_tokens" {
		t.Errorf("max_tokens over the limit: %v", err)
	}
	_, err = New(Config{BaseURL: base}).Models(ctx)
	if apiErr, ok := errors.AsType[*APIError](err); !ok || apiErr.StatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Errorf("no key: %v", err)
	}

	u := c.Usage()
	wantPrompt := whole.Usage.PromptTokens*2 + comp.Usage.PromptTokens
	wantCompletion := whole.Usage.CompletionTokens*2 + comp.Usage.CompletionTokens
	if u != (Usage{Requests: 6, Retries: 0, Failures: 2, PromptTokens: int64(wantPrompt), CompletionTokens: int64(wantCompletion)}) {
		t.Errorf("usage %+v, want 6 requests, 2 failures, %d prompt and %d completion tokens", u, wantPrompt, wantCompletion)
	}
}

// okChat is a valid chat completion body.
const okChat = `{"id":"x","object":"chat.completion","created":1,"model":"m",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

// flaky serves fail for the first n calls, then okChat, counting calls.
func flaky(t *testing.T, n int32, fail http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			fail(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okChat)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select { // hang until the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, _ := fast(Config{BaseURL: srv.URL, Timeout: 100 * time.Millisecond, MaxRetries: 1})
	start := time.Now()
	_, err := c.Chat(context.Background(), chatReq("x"))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Config.Timeout") || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("two 100 ms attempts took %v", d)
	}
	if calls.Load() != 2 {
		t.Errorf("server saw %d attempts, want 2", calls.Load())
	}
	if u := c.Usage(); u.Requests != 1 || u.Retries != 1 || u.Failures != 1 {
		t.Errorf("usage %+v", u)
	}
}

func TestConnectionResetIsRetried(t *testing.T) {
	srv, calls := flaky(t, 1, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	})
	c, sl := fast(Config{BaseURL: srv.URL})
	resp, err := c.Chat(context.Background(), chatReq("x"))
	if err != nil || resp.Choices[0].Message.Content != "hi" {
		t.Fatalf("Chat = %+v, %v", resp, err)
	}
	if calls.Load() != 2 || len(sl.all()) != 1 {
		t.Errorf("%d attempts, sleeps %v", calls.Load(), sl.all())
	}
	if u := c.Usage(); u != (Usage{Requests: 1, Retries: 1, PromptTokens: 3, CompletionTokens: 1}) {
		t.Errorf("usage %+v", u)
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, sl := fast(Config{BaseURL: "http://" + addr + "/v1", MaxRetries: 3})
	_, err = c.Models(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "4 attempts") || len(sl.all()) != 3 {
		t.Errorf("err = %v, sleeps %v", err, sl.all())
	}
}

func TestServerErrorsAreRetried(t *testing.T) {
	srv, calls := flaky(t, 2, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"busy","type":"server_error","param":null,"code":null}}`, 500)
	})
	c, sl := fast(Config{BaseURL: srv.URL, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	c.jitter = func() float64 { return 0.5 }
	if _, err := c.Chat(context.Background(), chatReq("x")); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Errorf("%d attempts, want 3", calls.Load())
	}
	// Full jitter below a doubling cap: half of 100 ms, then of 200 ms.
	if got := sl.all(); len(got) != 2 || got[0] != 50*time.Millisecond || got[1] != 100*time.Millisecond {
		t.Errorf("sleeps %v", got)
	}

	// Out of retries: the last error, with the attempts.
	always, calls := flaky(t, 100, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"busy","type":"server_error","param":null,"code":null}}`, 503)
	})
	c, _ = fast(Config{BaseURL: always.URL, MaxRetries: 2})
	_, err := c.Chat(context.Background(), chatReq("x"))
	apiErr, ok := errors.AsType[*APIError](err)
	if !ok || apiErr.StatusCode != 503 || apiErr.Attempts != 3 || apiErr.Message != "busy" || calls.Load() != 3 {
		t.Errorf("err = %v (%d calls)", err, calls.Load())
	}
	if !strings.Contains(err.Error(), "after 3 attempts") || !strings.HasPrefix(err.Error(), "openai: ") {
		t.Errorf("message %q", err)
	}
	if u := c.Usage(); u != (Usage{Requests: 1, Retries: 2, Failures: 1}) {
		t.Errorf("usage %+v", u)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		header     string
		backoffMax time.Duration
		want       time.Duration
	}{
		{"1", 5 * time.Second, time.Second},
		{"1", 100 * time.Millisecond, 100 * time.Millisecond},
		{"0.25", time.Second, 250 * time.Millisecond},
		{time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), 2 * time.Second, 2 * time.Second},
	} {
		srv, calls := flaky(t, 1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", tc.header)
			http.Error(w, `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`, 429)
		})
		c, sl := fast(Config{BaseURL: srv.URL, BackoffMax: tc.backoffMax})
		if _, err := c.Chat(context.Background(), chatReq("x")); err != nil {
			t.Fatal(err)
		}
		if got := sl.all(); calls.Load() != 2 || len(got) != 1 || got[0] != tc.want {
			t.Errorf("Retry-After %q, BackoffMax %v: sleeps %v, want [%v]", tc.header, tc.backoffMax, got, tc.want)
		}
	}
}

func TestMalformedJSONIsNotRetried(t *testing.T) {
	srv, calls := flaky(t, 100, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>gateway says hi</html>")
	})
	c, _ := fast(Config{BaseURL: srv.URL})
	_, err := c.Chat(context.Background(), chatReq("x"))
	if !errors.Is(err, ErrMalformedResponse) || calls.Load() != 1 {
		t.Fatalf("err = %v after %d calls", err, calls.Load())
	}
	for _, want := range []string{"malformed", srv.URL + "/chat/completions", "<html>gateway says hi"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// Valid JSON that is not an answer is malformed too.
	empty, _ := flaky(t, 100, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{}`) })
	c, _ = fast(Config{BaseURL: empty.URL})
	if _, err := c.Chat(context.Background(), chatReq("x")); !errors.Is(err, ErrMalformedResponse) {
		t.Errorf("{}: %v", err)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   APIError
	}{
		{400, `{"error":{"message":"max_tokens: 5000 is above this server's limit","type":"invalid_request_error","param":"max_tokens","code":null}}`,
			APIError{StatusCode: 400, Type: "invalid_request_error", Param: "max_tokens", Message: "max_tokens: 5000 is above this server's limit"}},
		{400, `{"object":"error","message":"bad n","type":"BadRequestError","param":"n","code":400}`,
			APIError{StatusCode: 400, Type: "BadRequestError", Param: "n", Code: "400", Message: "bad n"}},
		{404, `{"error":"model 'x' not found"}`, APIError{StatusCode: 404, Type: "error", Message: "model 'x' not found"}},
		{403, `forbidden by proxy`, APIError{StatusCode: 403, Message: "forbidden by proxy"}},
	} {
		srv, calls := flaky(t, 100, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		})
		c, _ := fast(Config{BaseURL: srv.URL})
		_, err := c.Chat(context.Background(), chatReq("x"))
		apiErr, ok := errors.AsType[*APIError](err)
		if !ok || calls.Load() != 1 {
			t.Errorf("%s: %v after %d calls", tc.body, err, calls.Load())
			continue
		}
		want := tc.want
		want.URL, want.Attempts = srv.URL+"/chat/completions", 1
		if *apiErr != want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.body, *apiErr, want)
		}
	}
}

func TestDeadlineDuringBackoff(t *testing.T) {
	srv, _ := flaky(t, 100, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 502) })
	c := New(Config{BaseURL: srv.URL, BackoffBase: 10 * time.Second, BackoffMax: 10 * time.Second})
	c.jitter = func() float64 { return 0.999 }
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Chat(ctx, chatReq("x"))
	if d := time.Since(start); d > time.Second {
		t.Errorf("Chat took %v past a 300 ms deadline", d)
	}
	if _, ok := errors.AsType[*APIError](err); !ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the deadline and the last APIError", err)
	}

	// A sleep the deadline interrupts.
	c = New(Config{BaseURL: srv.URL, BackoffBase: time.Second})
	c.jitter = func() float64 { return 0.5 } // 500 ms, within the deadline but not the cancel
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = c.Chat(ctx, chatReq("x"))
	if d := time.Since(start); d > 400*time.Millisecond || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during backoff: %v after %v", err, d)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	var inFlight, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		io.WriteString(w, okChat)
	}))
	defer srv.Close()
	c := New(Config{BaseURL: srv.URL, MaxConcurrent: 4})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := c.Chat(context.Background(), chatReq("x")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 4 || p < 2 {
		t.Errorf("peak in flight %d, want 2 to 4", p)
	}
	if u := c.Usage(); u != (Usage{Requests: 20, PromptTokens: 60, CompletionTokens: 20}) {
		t.Errorf("usage %+v", u)
	}
}

func TestStreamFailures(t *testing.T) {
	chunk := func(content string) string {
		return fmt.Sprintf(`data: {"id":"s","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", content)
	}
	// Reset before any text: retried.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": keep-alive\n\n"+chunk("hel")+chunk("lo")+
			`data: {"id":"s","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"id":"s","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer srv.Close()
	c, _ := fast(Config{BaseURL: srv.URL})
	var text string
	resp, err := c.ChatStream(context.Background(), chatReq("x"), func(_ int, s string) { text += s })
	if err != nil || text != "hello" || resp.Choices[0].Message.Content != "hello" || resp.Choices[0].FinishReason != "stop" || calls.Load() != 2 {
		t.Fatalf("ChatStream = %+v, %v; text %q after %d calls", resp, err, text, calls.Load())
	}
	if u := c.Usage(); u != (Usage{Requests: 1, Retries: 1, PromptTokens: 2, CompletionTokens: 2}) {
		t.Errorf("usage %+v", u)
	}

	for _, tc := range []struct {
		name, body, mention string
	}{
		{"cut after text", chunk("partial"), "[DONE]"},
		{"error event", chunk("partial") + `data: {"error":{"message":"sampling failed: boom","type":"server_error","param":null,"code":null}}` + "\n\n", "boom"},
		{"garbage event", `data: {"choices": [{"index": "zero"}]}` + "\n\n", "malformed"},
	} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, tc.body)
		}))
		c, _ := fast(Config{BaseURL: srv.URL})
		_, err := c.ChatStream(context.Background(), chatReq("x"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.mention) || calls.Load() != 1 {
			t.Errorf("%s: %v after %d calls", tc.name, err, calls.Load())
		}
		srv.Close()
	}
}

func TestRequestChecks(t *testing.T) {
	c := New(Config{BaseURL: "http://127.0.0.1:1/v1"})
	r := chatReq("x")
	r.Stream = true
	if _, err := c.Chat(context.Background(), r); err == nil || !strings.Contains(err.Error(), "ChatStream") {
		t.Errorf("Chat with stream: %v", err)
	}
	if _, err := c.Complete(context.Background(), &api.CompletionRequest{Stream: true}); err == nil {
		t.Error("Complete with stream: no error")
	}
	if u := c.Usage(); u.Requests != 2 || u.Failures != 2 {
		t.Errorf("usage %+v", u)
	}
}
