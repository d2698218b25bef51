package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	api "rlvr/api/openai"
	"rlvr/format/tokenizer"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/serve/servetest"
)

var (
	byteTok = tokenizer.NewByteTokenizer()
	chatML  = tokenizer.ChatML()
	quiet   = slog.New(slog.DiscardHandler)
)

// start serves models on a loopback listener and returns the base URL.
func start(t *testing.T, cfg serve.Config, models ...serve.Model) (*serve.Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	srv, err := serve.New(cfg, models...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // generous: a loaded machine drains streams slowly
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return srv, "http://" + ln.Addr().String()
}

func toyGen() *servetest.Generator {
	return &servetest.Generator{Decoder: byteTok, EOS: tokenizer.ByteEOS}
}

// toyModels are a chat model and a completions-only one sharing gen.
func toyModels(gen serve.Generator) []serve.Model {
	return []serve.Model{
		{Name: "toy", Generator: gen, Tokenizer: byteTok, Chat: serve.ChatFunc(chatML), ContextLength: 512},
		{Name: "plain", Generator: gen, Tokenizer: byteTok},
	}
}

func do(t *testing.T, method, url, token string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: do runs in goroutines too
		return &http.Response{Header: http.Header{}}, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return resp, data
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Errorf("decoding %s: %v", data, err)
	}
	return v
}

// wantError checks an error response's status and envelope.
func wantError(t *testing.T, resp *http.Response, data []byte, status int, param, code string) api.Error {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	e := decode[api.ErrorResponse](t, data).Error
	if e.Message == "" || e.Type == "" {
		t.Errorf("envelope lacks message or type: %s", data)
	}
	if got := deref(e.Param); got != param {
		t.Errorf("param %q, want %q: %s", got, param, data)
	}
	if got := deref(e.Code); code != "" && got != code {
		t.Errorf("code %q, want %q: %s", got, code, data)
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptr[T any](v T) *T { return &v }

func user(text string) []api.Message { return []api.Message{{Role: "user", Content: text}} }

// direct returns what the generator gives for a chat prompt alone.
func direct(t *testing.T, msgs []api.Message, p sample.Params) []sample.Completion {
	t.Helper()
	req := api.ChatCompletionRequest{Messages: msgs}
	text, err := serve.ChatFunc(chatML)(req.ChatMessages())
	if err != nil {
		t.Fatal(err)
	}
	prompt := byteTok.Encode(text)
	p.StopTokens = []int32{tokenizer.ByteEOS}
	out, err := toyGen().Sample(context.Background(), []sample.Request{{Prompt: prompt, Params: p}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// visible is a completion's text as the server shows it.
func visible(c sample.Completion) string { return strings.TrimSuffix(c.Text, "</s>") }

func TestModels(t *testing.T) {
	_, url := start(t, serve.Config{}, toyModels(toyGen())...)
	resp, data := do(t, "GET", url+"/v1/models", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	list := decode[api.ModelList](t, data)
	if list.Object != "list" || len(list.Data) != 2 || list.Data[0].ID != "toy" || list.Data[1].ID != "plain" ||
		list.Data[0].Object != "model" || list.Data[0].MaxModelLen != 512 {
		t.Errorf("models = %s", data)
	}
	resp, data = do(t, "GET", url+"/v1/models/plain", "", nil)
	if m := decode[api.Model](t, data); resp.StatusCode != 200 || m.ID != "plain" {
		t.Errorf("GET /v1/models/plain: %d %s", resp.StatusCode, data)
	}
	resp, data = do(t, "GET", url+"/v1/models/nope", "", nil)
	wantError(t, resp, data, 404, "model", api.CodeModelNotFound)
	resp, data = do(t, "GET", url+"/health", "", nil)
	if resp.StatusCode != 200 || string(data) != "ok\n" {
		t.Errorf("/health: %d %q", resp.StatusCode, data)
	}
}

func TestChat(t *testing.T) {
	_, url := start(t, serve.Config{}, toyModels(toyGen())...)
	req := api.ChatCompletionRequest{Model: "toy", Messages: user("tell me a story"), N: ptr(2),
		Temperature: ptr(0.8), MaxTokens: ptr(40), Seed: ptr(int64(7)), Logprobs: ptr(true)}
	resp, data := do(t, "POST", url+"/v1/chat/completions", "", req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	got := decode[api.ChatCompletionResponse](t, data)
	if got.Object != "chat.completion" || !strings.HasPrefix(got.ID, "chatcmpl-") || got.Model != "toy" || got.Created == 0 {
		t.Errorf("header fields: %s", data)
	}
	want := direct(t, req.Messages, sample.Params{N: 2, Temperature: 0.8, MaxTokens: 40, Seed: 7})
	if len(got.Choices) != 2 {
		t.Fatalf("%d choices, want 2", len(got.Choices))
	}
	completion := 0
	for k, c := range got.Choices {
		if c.Index != k || c.Message.Role != "assistant" {
			t.Errorf("choice %d: index %d role %q", k, c.Index, c.Message.Role)
		}
		if c.Message.Content != visible(want[k]) || c.FinishReason != api.FinishReasonOf(want[k].Finish) {
			t.Errorf("choice %d = %q (%s), want %q (%s)", k, c.Message.Content, c.FinishReason, visible(want[k]), want[k].Finish)
		}
		checkLogprobs(t, c.Logprobs, want[k])
		completion += len(want[k].Tokens)
	}
	if got.Choices[0].Message.Content == got.Choices[1].Message.Content {
		t.Errorf("two samples at temperature 0.8 are equal: %q", got.Choices[0].Message.Content)
	}
	prompt, _ := serve.ChatFunc(chatML)(req.ChatMessages())
	if u := got.Usage; u == nil || u.PromptTokens != len(prompt) || u.CompletionTokens != completion || u.TotalTokens != len(prompt)+completion {
		t.Errorf("usage = %+v, want prompt %d completion %d", got.Usage, len(prompt), completion)
	}

	// The same seed gives the same answer; greedy ignores it.
	_, again := do(t, "POST", url+"/v1/chat/completions", "", req)
	if g2 := decode[api.ChatCompletionResponse](t, again); g2.Choices[0].Message != got.Choices[0].Message {
		t.Errorf("same seed, different answers: %q vs %q", g2.Choices[0].Message.Content, got.Choices[0].Message.Content)
	}
	greedy := api.ChatCompletionRequest{Messages: []api.Message{{Role: "developer", Content: "be brief"}, {Role: "user", Content: "hi"}},
		N: ptr(2), Temperature: ptr(0.0), MaxCompletionTokens: ptr(10)}
	resp, data = do(t, "POST", url+"/v1/chat/completions", "", greedy) // no model: not allowed with two models
	wantError(t, resp, data, 400, "model", "")
	greedy.Model = "toy"
	_, data = do(t, "POST", url+"/v1/chat/completions", "", greedy)
	g := decode[api.ChatCompletionResponse](t, data)
	if len(g.Choices) != 2 || g.Choices[0].Message.Content != g.Choices[1].Message.Content || g.Choices[0].Logprobs != nil {
		t.Errorf("greedy n=2: %s", data)
	}
	if n := g.Usage.CompletionTokens; n > 20 {
		t.Errorf("max_completion_tokens 10 gave %d tokens in 2 choices", n)
	}
}

// checkLogprobs checks a choice's logprobs against the generator's.
func checkLogprobs(t *testing.T, lp *api.ChatLogprobs, want sample.Completion) {
	t.Helper()
	if lp == nil || len(lp.Content) != len(want.Tokens) {
		t.Fatalf("logprobs %+v, want %d tokens", lp, len(want.Tokens))
	}
	var text []byte
	for i, c := range lp.Content {
		if float32(c.Logprob) != want.Logprobs[i] || c.Logprob >= 0 || c.TopLogprobs == nil {
			t.Errorf("token %d: logprob %v top %v, want %v", i, c.Logprob, c.TopLogprobs, want.Logprobs[i])
		}
		for _, b := range c.Bytes {
			text = append(text, byte(b))
		}
	}
	if got := strings.TrimSuffix(string(text), "</s>"); got != visible(want) {
		t.Errorf("logprob bytes spell %q, text is %q", got, visible(want))
	}
}

func TestCompletions(t *testing.T) {
	gen := toyGen()
	_, url := start(t, serve.Config{}, toyModels(gen)...)
	req := api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Texts: []string{"once upon", "a time"}}, N: ptr(2),
		Seed: ptr(int64(3)), Logprobs: ptr(0), MaxTokens: ptr(30)}
	resp, data := do(t, "POST", url+"/v1/completions", "", req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if !bytes.Contains(data, []byte(`"top_logprobs":null`)) {
		t.Errorf("legacy logprobs lack top_logprobs null: %s", data)
	}
	got := decode[api.CompletionResponse](t, data)
	if got.Object != "text_completion" || !strings.HasPrefix(got.ID, "cmpl-") || len(got.Choices) != 4 {
		t.Fatalf("response: %s", data)
	}
	if b := gen.Batches(); b[len(b)-1] != 2 {
		t.Errorf("two prompts sampled as %d requests", b[len(b)-1])
	}
	completion := 0
	for i, c := range got.Choices {
		if c.Index != i {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
		lp := c.Logprobs
		if lp == nil || len(lp.Tokens) != len(lp.TokenLogprobs) || len(lp.Tokens) != len(lp.TextOffset) || lp.TopLogprobs != nil {
			t.Fatalf("choice %d logprobs: %+v", i, lp)
		}
		completion += len(lp.Tokens)
		for k := 1; k < len(lp.TextOffset); k++ {
			if lp.TextOffset[k] < lp.TextOffset[k-1] || lp.TextOffset[k] > len(c.Text)+1 {
				t.Errorf("choice %d text_offset %v for %q", i, lp.TextOffset, c.Text)
				break
			}
		}
	}
	if got.Choices[0].Text == got.Choices[2].Text {
		t.Errorf("two prompts gave the same text %q", got.Choices[0].Text)
	}
	if got.Usage.PromptTokens != len("once upon")+len("a time") || got.Usage.CompletionTokens != completion {
		t.Errorf("usage %+v", got.Usage)
	}

	// Token-id prompts are the same as their text, and max_tokens defaults to 16.
	ids := []int32{}
	for _, b := range []byte("once upon") {
		ids = append(ids, int32(b))
	}
	one := api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Tokens: [][]int32{ids}}, Seed: ptr(int64(3)), Temperature: ptr(0.0)}
	_, a := do(t, "POST", url+"/v1/completions", "", one)
	one.Prompt = api.Prompt{Texts: []string{"once upon"}}
	_, b := do(t, "POST", url+"/v1/completions", "", one)
	ra, rb := decode[api.CompletionResponse](t, a), decode[api.CompletionResponse](t, b)
	if ra.Choices[0].Text != rb.Choices[0].Text || ra.Usage.CompletionTokens > api.DefaultCompletionMaxTokens {
		t.Errorf("token prompt %s\ntext prompt %s", a, b)
	}
}

// stream posts body and returns the data of its events, checking that
// the stream ends with [DONE] and nothing after.
func stream(t *testing.T, ctx context.Context, url string, body any) []string {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err) // not Fatal: stream runs in goroutines too
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
		return nil
	}
	events, done := readSSE(t, resp.Body)
	if !done {
		t.Errorf("stream ended without [DONE]; events: %q", events)
	}
	return events
}

func readSSE(t *testing.T, r io.Reader) (events []string, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Errorf("not a data line: %q", line)
			continue
		}
		if done {
			t.Errorf("event after [DONE]: %q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		events = append(events, data)
	}
	return events, done
}

func TestStreamChat(t *testing.T) {
	_, url := start(t, serve.Config{}, toyModels(toyGen())...)
	req := api.ChatCompletionRequest{Model: "toy", Messages: user("stream please"), N: ptr(2), MaxTokens: ptr(50),
		Seed: ptr(int64(11)), Logprobs: ptr(true), Stream: true, StreamOptions: &api.StreamOptions{IncludeUsage: true}}
	events := stream(t, context.Background(), url+"/v1/chat/completions", req)
	want := direct(t, req.Messages, sample.Params{N: 2, Temperature: 1, MaxTokens: 50, Seed: 11})

	texts := make([]string, 2)
	logprobs := make([]int, 2)
	roles := make([]bool, 2)
	finished := make([]api.FinishReason, 2)
	var id string
	var usage *api.Usage
	for n, ev := range events {
		c := decode[api.ChatCompletionChunk](t, []byte(ev))
		if c.Object != "chat.completion.chunk" || c.Model != "toy" {
			t.Fatalf("chunk %d: %s", n, ev)
		}
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Errorf("chunk %d has id %q, first had %q", n, c.ID, id)
		}
		if usage != nil {
			t.Errorf("chunk after the usage chunk: %s", ev)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 {
				t.Errorf("usage chunk with choices: %s", ev)
			}
			usage = c.Usage
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk %d has %d choices", n, len(c.Choices))
		}
		ch := c.Choices[0]
		i := ch.Index
		switch {
		case i < 0 || i > 1:
			t.Fatalf("choice index %d", i)
		case finished[i] != "":
			t.Errorf("chunk for choice %d after its finish: %s", i, ev)
		case ch.Delta.Role == "assistant":
			if roles[i] || texts[i] != "" {
				t.Errorf("role chunk out of place: %s", ev)
			}
			roles[i] = true
		case !roles[i]:
			t.Errorf("content before the role chunk: %s", ev)
		}
		texts[i] += ch.Delta.Content
		if ch.Logprobs != nil {
			logprobs[i] += len(ch.Logprobs.Content)
		}
		finished[i] = ch.FinishReason
	}
	completion := 0
	for k := range 2 {
		if texts[k] != visible(want[k]) || finished[k] != api.FinishReasonOf(want[k].Finish) || logprobs[k] != len(want[k].Tokens) {
			t.Errorf("choice %d: %q (%s, %d logprobs), want %q (%s, %d)", k, texts[k], finished[k], logprobs[k],
				visible(want[k]), want[k].Finish, len(want[k].Tokens))
		}
		if !utf8.ValidString(texts[k]) {
			t.Errorf("choice %d streamed invalid UTF-8 %q", k, texts[k])
		}
		completion += len(want[k].Tokens)
	}
	if usage == nil || usage.CompletionTokens != completion || usage.TotalTokens != usage.PromptTokens+completion {
		t.Errorf("usage %+v, want %d completion tokens", usage, completion)
	}
}

func TestStreamCompletion(t *testing.T) {
	_, url := start(t, serve.Config{}, toyModels(toyGen())...)
	req := api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Texts: []string{"x", "y"}}, MaxTokens: ptr(20), Seed: ptr(int64(5)), Logprobs: ptr(0)}
	_, data := do(t, "POST", url+"/v1/completions", "", req)
	whole := decode[api.CompletionResponse](t, data)
	req.Stream = true
	texts := map[int]string{}
	finish := map[int]api.FinishReason{}
	offsets := map[int][]int{}
	for _, ev := range stream(t, context.Background(), url+"/v1/completions", req) {
		c := decode[api.CompletionResponse](t, []byte(ev))
		if c.Object != "text_completion" || len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %s", ev)
		}
		ch := c.Choices[0]
		texts[ch.Index] += ch.Text
		finish[ch.Index] = ch.FinishReason
		if ch.Logprobs != nil {
			offsets[ch.Index] = append(offsets[ch.Index], ch.Logprobs.TextOffset...)
		}
	}
	for i, c := range whole.Choices {
		if texts[i] != c.Text || finish[i] != c.FinishReason || !slices.Equal(offsets[i], c.Logprobs.TextOffset) {
			t.Errorf("choice %d streamed %q %s %v, whole %q %s %v", i, texts[i], finish[i], offsets[i], c.Text, c.FinishReason, c.Logprobs.TextOffset)
		}
	}
}

func TestStopStrings(t *testing.T) {
	_, url := start(t, serve.Config{}, toyModels(toyGen())...)
	// Find a greedy answer long enough to cut in the middle.
	var msgs []api.Message
	var full string
	for i := 0; len(full) < 30; i++ {
		if i == 100 {
			t.Fatal("no long greedy answer")
		}
		msgs = user(fmt.Sprint("question ", i))
		full = visible(direct(t, msgs, sample.Params{Temperature: 0, MaxTokens: 80})[0])
	}
	var stop string
	for i := 10; i+3 <= len(full); i++ {
		if s := full[i : i+3]; s == strings.Map(func(r rune) rune { return r & 0x7f }, s) {
			stop = s
			break
		}
	}
	want := full[:strings.Index(full, stop)]
	req := api.ChatCompletionRequest{Model: "toy", Messages: msgs, Temperature: ptr(0.0), MaxTokens: ptr(80), Stop: api.Stop{"never seen", stop}}
	_, data := do(t, "POST", url+"/v1/chat/completions", "", req)
	got := decode[api.ChatCompletionResponse](t, data)
	if c := got.Choices[0]; c.Message.Content != want || c.FinishReason != api.FinishStop {
		t.Errorf("stop %q: %q (%s), want %q", stop, c.Message.Content, c.FinishReason, want)
	}
	// Streamed, no part of the stop string leaks before the cut.
	req.Stream = true
	text := ""
	for _, ev := range stream(t, context.Background(), url+"/v1/chat/completions", req) {
		c := decode[api.ChatCompletionChunk](t, []byte(ev))
		text += c.Choices[0].Delta.Content
	}
	if text != want {
		t.Errorf("streamed %q, want %q", text, want)
	}
}

func TestConcurrentRequestsAreBatched(t *testing.T) {
	gen := toyGen()
	gen.Delay = time.Millisecond
	_, url := start(t, serve.Config{BatchWindow: 5 * time.Millisecond}, toyModels(gen)...)
	const n = 16
	reqs := make([]api.ChatCompletionRequest, n)
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		reqs[i] = api.ChatCompletionRequest{Model: "toy", Messages: user(fmt.Sprint("request ", i)), Seed: ptr(int64(i)), MaxTokens: ptr(12), Stream: i%2 == 1}
		wg.Go(func() {
			if reqs[i].Stream {
				for _, ev := range stream(t, context.Background(), url+"/v1/chat/completions", reqs[i]) {
					got[i] += decode[api.ChatCompletionChunk](t, []byte(ev)).Choices[0].Delta.Content
				}
				return
			}
			resp, data := do(t, "POST", url+"/v1/chat/completions", "", reqs[i])
			if resp.StatusCode != 200 {
				t.Errorf("request %d: %d %s", i, resp.StatusCode, data)
				return
			}
			got[i] = decode[api.ChatCompletionResponse](t, data).Choices[0].Message.Content
		})
	}
	wg.Wait()
	batches := gen.Batches()
	if slices.Max(batches) < 2 {
		t.Errorf("batches %v: no batch held more than one request", batches)
	}
	total := 0
	for _, b := range batches {
		total += b
	}
	if total != n {
		t.Errorf("batches %v hold %d requests, want %d", batches, total, n)
	}
	for i := range n {
		reqs[i].Stream = false
		_, data := do(t, "POST", url+"/v1/chat/completions", "", reqs[i])
		alone := decode[api.ChatCompletionResponse](t, data).Choices[0].Message.Content
		if got[i] != alone {
			t.Errorf("request %d: batched %q, alone %q", i, got[i], alone)
		}
	}
	if b := gen.Batches(); !slices.Equal(b[len(batches):], slices.Repeat([]int{1}, n)) {
		t.Errorf("requests sent one at a time were batched as %v", b[len(batches):])
	}
}

func TestAuth(t *testing.T) {
	_, url := start(t, serve.Config{Token: "s3cret"}, toyModels(toyGen())...)
	resp, data := do(t, "GET", url+"/v1/models", "", nil)
	e := wantError(t, resp, data, 401, "", api.CodeInvalidAPIKey)
	if !strings.Contains(e.Message, "missing") || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("missing token: %s, WWW-Authenticate %q", data, resp.Header.Get("WWW-Authenticate"))
	}
	resp, data = do(t, "POST", url+"/v1/chat/completions", "wrong", api.ChatCompletionRequest{Model: "toy", Messages: user("x")})
	wantError(t, resp, data, 401, "", api.CodeInvalidAPIKey)
	resp, data = do(t, "POST", url+"/v1/chat/completions", "s3cret", api.ChatCompletionRequest{Model: "toy", Messages: user("x"), MaxTokens: ptr(3)})
	if resp.StatusCode != 200 {
		t.Errorf("right token: %d %s", resp.StatusCode, data)
	}
	if resp, _ := do(t, "GET", url+"/health", "", nil); resp.StatusCode != 200 {
		t.Errorf("/health needs no token, got %d", resp.StatusCode)
	}
}

func TestBadRequests(t *testing.T) {
	cfg := serve.Config{MaxBodyBytes: 4 << 10, MaxTokens: 100, MaxN: 4, MaxBatch: 8}
	_, url := start(t, cfg, toyModels(toyGen())...)
	chat, comp := url+"/v1/chat/completions", url+"/v1/completions"
	for _, tc := range []struct {
		name        string
		method, url string
		body        any
		status      int
		param, code string
		mention     string
	}{
		{"malformed JSON", "POST", chat, `{"model": "toy", "messages": [`, 400, "", "", "malformed JSON"},
		{"not an object", "POST", chat, `[1, 2]`, 400, "", "", "JSON object"},
		{"empty body", "POST", chat, ``, 400, "", "", "empty"},
		{"wrong type", "POST", chat, `{"model": "toy", "messages": [], "n": "two"}`, 400, "n", "", "n"},
		{"stop of the wrong form", "POST", chat, `{"model": "toy", "messages": [], "stop": 3}`, 400, "stop", "", "stop"},
		{"prompt of the wrong form", "POST", comp, `{"model": "plain", "prompt": {"a": 1}}`, 400, "prompt", "", "prompt"},
		{"oversized body", "POST", chat, `{"model": "toy", "messages": [{"role": "user", "content": "` + strings.Repeat("x", 8<<10) + `"}]}`, 413, "", "request_too_large", "4096 bytes"},
		{"max_tokens over the limit", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user("x"), MaxTokens: ptr(101)}, 400, "max_tokens", "", "limit of 100"},
		{"max_completion_tokens over the limit", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user("x"), MaxCompletionTokens: ptr(500)}, 400, "max_completion_tokens", "", "100"},
		{"legacy max_tokens over the limit", "POST", comp, api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Texts: []string{"x"}}, MaxTokens: ptr(101)}, 400, "max_tokens", "", "100"},
		{"n over the limit", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user("x"), N: ptr(5)}, 400, "n", "", "limit of 4"},
		{"n over OpenAI's bound", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user("x"), N: ptr(200)}, 400, "n", "", "200 is above this server's limit of 4"},
		{"n below 1", "POST", comp, api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Texts: []string{"x"}}, N: ptr(0)}, 400, "n", "", "0 is outside [1, 4]"},
		{"too many sequences", "POST", comp, api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Texts: []string{"a", "b", "c"}}, N: ptr(3)}, 400, "prompt", "", "9 sequences"},
		{"several bad fields", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user("x"), Temperature: ptr(3.0), TopP: ptr(0.0)}, 400, "temperature", "", "top_p"},
		{"unknown role", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: []api.Message{{Role: "wizard", Content: "x"}}}, 400, "messages[0].role", "", "wizard"},
		{"top_logprobs", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user("x"), Logprobs: ptr(true), TopLogprobs: ptr(2)}, 400, "top_logprobs", api.CodeUnsupported, "not"},
		{"echo", "POST", comp, api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Texts: []string{"x"}}, Echo: true}, 400, "echo", api.CodeUnsupported, "echo"},
		{"unknown model", "POST", chat, api.ChatCompletionRequest{Model: "gpt-9", Messages: user("x")}, 404, "model", api.CodeModelNotFound, "gpt-9"},
		{"chat without a template", "POST", chat, api.ChatCompletionRequest{Model: "plain", Messages: user("x")}, 400, "model", api.CodeUnsupported, "/v1/completions"},
		{"prompt beyond the context", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user(strings.Repeat("x", 600))}, 400, "messages", api.CodeContextLengthExceeded, "512"},
		{"prompt plus max_tokens beyond the context", "POST", chat, api.ChatCompletionRequest{Model: "toy", Messages: user(strings.Repeat("x", 450)), MaxTokens: ptr(100)}, 400, "max_tokens", api.CodeContextLengthExceeded, "512"},
		{"token outside the vocabulary", "POST", comp, api.CompletionRequest{Model: "plain", Prompt: api.Prompt{Tokens: [][]int32{{1, 300}}}}, 400, "prompt", "", "300"},
		{"GET a POST endpoint", "GET", chat, nil, 405, "", "method_not_allowed", "POST"},
		{"DELETE models", "DELETE", url + "/v1/models", nil, 405, "", "method_not_allowed", "GET"},
		{"unknown path", "POST", url + "/v1/embeddings", `{}`, 404, "", "not_found", "/v1/embeddings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := do(t, tc.method, tc.url, "", tc.body)
			e := wantError(t, resp, data, tc.status, tc.param, tc.code)
			if !strings.Contains(e.Message, tc.mention) {
				t.Errorf("message %q does not mention %q", e.Message, tc.mention)
			}
			if tc.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestClientDisconnect(t *testing.T) {
	gen := &servetest.Generator{Decoder: byteTok, EOS: -1, Delay: 2 * time.Millisecond}
	_, url := start(t, serve.Config{BatchWindow: 50 * time.Millisecond}, toyModels(gen)...)
	chat := url + "/v1/chat/completions"
	long := func(q string) api.ChatCompletionRequest {
		return api.ChatCompletionRequest{Model: "toy", Messages: user(q), MaxTokens: ptr(120), Seed: ptr(int64(1)), Stream: true}
	}

	// A leaves mid-stream; B, in the same batch, is unaffected.
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	leftA := make(chan error, 1)
	go func() {
		data, _ := json.Marshal(long("A"))
		req, _ := http.NewRequestWithContext(ctxA, "POST", chat, bytes.NewReader(data))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			leftA <- err
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"content"`) {
				cancelA() // the first text arrived: leave
				break
			}
		}
		leftA <- nil
	}()
	var textB string
	for _, ev := range stream(t, context.Background(), chat, long("B")) {
		textB += decode[api.ChatCompletionChunk](t, []byte(ev)).Choices[0].Delta.Content
	}
	if err := <-leftA; err != nil {
		t.Fatal(err)
	}
	if b := gen.Batches(); b[0] != 2 {
		t.Errorf("A and B were sampled in batches %v, want one of 2", b)
	}
	reqB := long("B")
	reqB.Stream = false
	_, data := do(t, "POST", chat, "", reqB)
	if alone := decode[api.ChatCompletionResponse](t, data).Choices[0].Message.Content; textB != alone || len(textB) < 100 {
		t.Errorf("B streamed %q, alone %q", textB, alone)
	}

	// A client alone in its batch that leaves cancels the batch.
	ctx, cancel := context.WithCancel(context.Background())
	data, _ = json.Marshal(long("C"))
	req, _ := http.NewRequestWithContext(ctx, "POST", chat, bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && !strings.Contains(sc.Text(), `"content"`); {
	} // sampling has started
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(3 * time.Second)
	for gen.Cancelled() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if gen.Cancelled() == 0 {
		t.Error("the batch of a lone departed client was not cancelled")
	}
	reqB.MaxTokens = ptr(5)
	if resp, data := do(t, "POST", chat, "", reqB); resp.StatusCode != 200 {
		t.Errorf("after the disconnects: %d %s", resp.StatusCode, data)
	}
}

func TestGracefulShutdown(t *testing.T) {
	started := make(chan int, 4)
	gen := &servetest.Generator{Decoder: byteTok, EOS: -1, Delay: 3 * time.Millisecond,
		OnBatch: func(reqs []sample.Request) { started <- len(reqs) }}
	srv, err := serve.New(serve.Config{Logger: quiet}, toyModels(gen)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"

	type reply struct {
		status int
		tokens int
		done   time.Time
	}
	replies := make(chan reply, 2)
	go func() {
		resp, data := do(t, "POST", url, "", api.ChatCompletionRequest{Model: "toy", Messages: user("x"), MaxTokens: ptr(60)})
		var tokens int
		if resp.StatusCode == 200 {
			tokens = decode[api.ChatCompletionResponse](t, data).Usage.CompletionTokens
		}
		replies <- reply{resp.StatusCode, tokens, time.Now()}
	}()
	go func() {
		var tokens int
		req := api.ChatCompletionRequest{Model: "toy", Messages: user("y"), MaxTokens: ptr(60), Stream: true,
			StreamOptions: &api.StreamOptions{IncludeUsage: true}}
		for _, ev := range stream(t, context.Background(), url, req) {
			if u := decode[api.ChatCompletionChunk](t, []byte(ev)).Usage; u != nil {
				tokens = u.CompletionTokens
			}
		}
		replies <- reply{200, tokens, time.Now()}
	}()
	for n := 0; n < 2; { // both requests are sampling
		select {
		case k := <-started:
			n += k
		case <-time.After(5 * time.Second):
			t.Fatal("the requests never reached the generator")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	stopped := time.Now()
	for range 2 {
		r := <-replies
		if r.status != 200 || r.tokens != 60 {
			t.Errorf("in-flight request: status %d, %d tokens, want 60", r.status, r.tokens)
		}
		if r.done.After(stopped) {
			t.Error("Shutdown returned before an in-flight request finished")
		}
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
	if _, err := http.Post(url, "application/json", strings.NewReader(`{}`)); err == nil {
		t.Error("the server still accepts connections after Shutdown")
	}
}

func waitFor(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("the generator was never called")
	}
}

func TestShutdownDeadline(t *testing.T) {
	gen := &servetest.Generator{Decoder: byteTok, EOS: -1, Delay: 5 * time.Millisecond}
	started := make(chan struct{}, 1)
	gen.OnBatch = func([]sample.Request) { started <- struct{}{} }
	srv, err := serve.New(serve.Config{Logger: quiet}, toyModels(gen)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := `{"model": "toy", "messages": [{"role": "user", "content": "x"}], "max_tokens": 400}`
		if resp, err := http.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(body)); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, started)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want a deadline error", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight request outlived Shutdown's deadline")
	}
	deadline := time.Now().Add(2 * time.Second)
	for gen.Cancelled() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if gen.Cancelled() == 0 {
		t.Error("the running batch was not cancelled")
	}
}

// failing is a Generator that breaks in the ways a real one might.
type failing struct{ mode string }

func (f *failing) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	switch f.mode {
	case "error":
		return nil, errors.New("out of memory")
	case "panic":
		panic("index out of range")
	}
	return make([][]sample.Completion, len(reqs)+1), nil
}

func TestGeneratorFailures(t *testing.T) {
	var models []serve.Model
	for _, mode := range []string{"error", "panic", "shape"} {
		models = append(models, serve.Model{Name: mode, Generator: &failing{mode}, Tokenizer: byteTok, Chat: serve.ChatFunc(chatML)})
	}
	_, url := start(t, serve.Config{}, models...)
	for _, tc := range []struct{ model, mention string }{{"error", "out of memory"}, {"panic", "panicked"}, {"shape", "2 results for 1 requests"}} {
		for _, streaming := range []bool{false, true} {
			req := api.ChatCompletionRequest{Model: tc.model, Messages: user("x"), Stream: streaming}
			resp, data := do(t, "POST", url+"/v1/chat/completions", "", req)
			if !streaming {
				e := wantError(t, resp, data, 500, "", "")
				if e.Type != api.ErrorTypeServer || !strings.Contains(e.Message, tc.mention) {
					t.Errorf("%s: %+v", tc.model, e)
				}
				continue
			}
			events, done := readSSE(t, bytes.NewReader(data))
			if done || len(events) != 2 || !strings.Contains(events[1], tc.mention) {
				t.Errorf("%s stream: done %v, events %q", tc.model, done, events)
			}
		}
	}
}

func TestNew(t *testing.T) {
	gen := toyGen()
	for _, tc := range []struct {
		models  []serve.Model
		mention string
	}{
		{nil, "no models"},
		{[]serve.Model{{Generator: gen, Tokenizer: byteTok}}, "no name"},
		{[]serve.Model{{Name: "a", Tokenizer: byteTok}}, "Generator"},
		{[]serve.Model{{Name: "a", Generator: gen}}, "Tokenizer"},
		{[]serve.Model{{Name: "a", Generator: gen, Tokenizer: byteTok}, {Name: "a", Generator: gen, Tokenizer: byteTok}}, "twice"},
		{[]serve.Model{{Name: "a", Generator: gen, Tokenizer: byteTok, StopTokens: []int32{2, 300}}}, `model "a": StopTokens[1] is 300, outside its vocabulary [0, 259)`},
	} {
		_, err := serve.New(serve.Config{}, tc.models...)
		if err == nil || !strings.HasPrefix(err.Error(), "serve: ") || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("New(%d models) = %v, want an error mentioning %q", len(tc.models), err, tc.mention)
		}
	}
}

// TestNewRefusesMaxNBeyondOpenAI: n's bound cannot exceed the one the
// request validation states.
func TestNewRefusesMaxNBeyondOpenAI(t *testing.T) {
	_, err := serve.New(serve.Config{MaxN: api.MaxN + 1}, toyModels(toyGen())...)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("MaxN %d is above %d", api.MaxN+1, api.MaxN)) {
		t.Errorf("error %v", err)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8000": true, "127.1.2.3:80": true, "[::1]:8000": true, "localhost:8000": true, "LOCALHOST:1": true,
		":8000": false, "0.0.0.0:8000": false, "[::]:8000": false, "192.168.1.5:8000": false, "example.com:80": false,
		"127.0.0.1": false, "": false,
	} {
		if got := serve.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestListenAndServeRefusesOpenAddr: an Addr beyond loopback without a
// token is refused before anything listens.
func TestListenAndServeRefusesOpenAddr(t *testing.T) {
	srv, err := serve.New(serve.Config{Addr: "0.0.0.0:0", Logger: quiet}, toyModels(toyGen())...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if err := srv.ListenAndServe(); err == nil || !strings.Contains(err.Error(), "0.0.0.0:0 listens beyond this machine without a token") {
		t.Errorf("ListenAndServe = %v", err)
	}
}

func FuzzHandler(f *testing.F) {
	srv, err := serve.New(serve.Config{Logger: quiet, MaxTokens: 64, BatchWindow: -1}, toyModels(toyGen())...)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Shutdown(context.Background()) })
	h := srv.Handler()
	f.Add("/v1/chat/completions", `{"model":"toy","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stop":["a"]}`)
	f.Add("/v1/chat/completions", `{"model":"toy","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"n":2,"logprobs":true}`)
	f.Add("/v1/completions", `{"model":"plain","prompt":[[1,2,3]],"max_tokens":3,"logprobs":0,"stream":true}`)
	f.Add("/v1/completions", `{"model":"plain","prompt":["a","b"],"n":2,"stop":"b"}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		if path != "/v1/chat/completions" && path != "/v1/completions" {
			path = "/v1/completions"
		}
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			if !json.Valid(rec.Body.Bytes()) && !strings.HasPrefix(rec.Body.String(), "data: ") {
				t.Errorf("200 with a body that is neither JSON nor a stream: %q", rec.Body)
			}
		case 400, 404, 413:
			var e api.ErrorResponse
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Message == "" {
				t.Errorf("%d without an error envelope: %q", rec.Code, rec.Body)
			}
		default:
			t.Errorf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
