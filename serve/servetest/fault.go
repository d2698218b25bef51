package servetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	api "rlvr/api/openai"
	"rlvr/serve"
)

// The faults a Faults handler injects. Where a fault ends in one of the
// failure kinds of rlvr/expert/collect, its constant has that kind's
// value.
const (
	// FaultTimeout holds the request without answering until the client
	// gives up (or until Faults.Hold passes or Close, when it answers
	// 504).
	FaultTimeout = "timeout"
	// FaultConnection resets the connection (an RST) once the request is
	// read, without a response.
	FaultConnection = "connection"
	// FaultServer answers 500 with an OpenAI error envelope.
	FaultServer = "server-error"
	// FaultRateLimited answers 429 with an error envelope and a
	// Retry-After header of Faults.RetryAfter.
	FaultRateLimited = "rate-limited"
	// FaultMalformed answers 200 with a JSON body cut short (in a stream,
	// a data event cut short).
	FaultMalformed = "malformed"
	// FaultEmpty answers 200 with a well-formed response of the
	// endpoint's shape whose every choice's text (completions) or message
	// content (chat) is "".
	FaultEmpty = "empty"
	// FaultEndless answers 200 and then streams filler bytes (inside the
	// JSON text of a first choice; in a stream, comment lines) at
	// about 400 KiB/s until the client goes away or Faults.Hold passes,
	// so a client gives up at its deadline (it ends as a timeout).
	FaultEndless = "endless"
	// FaultFlaky answers 502 with an error envelope on a request's first
	// attempt and passes later attempts through: a fault one retry cures.
	// It is drawn only when listed in Faults.Kinds.
	FaultFlaky = "flaky"
)

// FaultKinds are the faults drawn when Faults.Kinds is empty: every
// fault but FaultFlaky.
var FaultKinds = []string{FaultTimeout, FaultConnection, FaultServer, FaultRateLimited, FaultMalformed, FaultEmpty, FaultEndless}

// Faults is an http.Handler that serves an OpenAI-compatible endpoint
// badly: it passes requests through to Handler, except that a
// deterministic share Rate of the POSTs to a path ending in
// /completions or /chat/completions get one fault instead, drawn among
// Kinds. Other requests always pass through, uncounted.
//
// The fault of a request depends only on Seed, Rate, Kinds and the
// request, so a run is reproducible whatever the order or concurrency of
// its calls. By default it depends on the request's text (RequestText):
// a question fails the same way on every attempt, and a retry cures only
// FaultFlaky. With PerCall, it depends on the whole body and on how many
// times that body came before, so a retry draws again.
//
// Set the fields before the first request and do not change them after.
// A Faults counts calls, attempts and faults, and is safe for concurrent
// use; do not copy it after first use. Call Close when done with it (see
// StartFaults), to release held requests and wait for them.
type Faults struct {
	// Handler serves the requests that pass through: a serve.Server's
	// Handler, say. Nil answers them 404.
	Handler http.Handler
	// Rate is the share of requests (of request texts, without PerCall)
	// that get a fault, in [0, 1].
	Rate float64
	// Kinds are the faults drawn from, uniformly (list one twice to weigh
	// it double). Empty means FaultKinds.
	Kinds []string
	// PerCall draws a fault for each call from the body and its attempt
	// (see KindOfCall) instead of one per request text (see KindOf).
	PerCall bool
	// Seed changes which requests get which fault.
	Seed uint64
	// Hold bounds how long FaultTimeout and FaultEndless keep a request
	// whose client has not gone away. 0 means 10 s.
	Hold time.Duration
	// RetryAfter is the Retry-After header of FaultRateLimited, sent in
	// seconds with a fraction. 0 means 20 ms.
	RetryAfter time.Duration

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inFlight drops to 0
	release  chan struct{}
	closed   bool
	calls    int
	inFlight int
	attempts map[string]int // by request text
	bodies   map[uint64]int // attempts by body hash, for PerCall
	injected map[string]int
}

// KindOf returns the fault drawn for every attempt of a request whose
// text (RequestText) is text, when PerCall is unset: "" when it passes
// through. A FaultFlaky request fails only its first attempt.
func (f *Faults) KindOf(text string) string {
	return f.draw(hash([]byte(text)))
}

// KindOfCall returns the fault drawn, when PerCall is set, for the
// attempt-th call (1 for the first) with this exact body: "" when it
// passes through. FaultFlaky drawn for an attempt after the first passes
// through.
func (f *Faults) KindOfCall(body []byte, attempt int) string {
	return f.kindOfHash(hash(body), attempt)
}

// kindOfHash is KindOfCall for a body already hashed.
func (f *Faults) kindOfHash(h uint64, attempt int) string {
	return f.draw(mix(h) + uint64(attempt))
}

// draw picks the fault for a request key.
func (f *Faults) draw(key uint64) string {
	x := mix(key ^ mix(f.Seed))
	if float64(x>>11)/(1<<53) >= f.Rate {
		return ""
	}
	kinds := f.Kinds
	if len(kinds) == 0 {
		kinds = FaultKinds
	}
	return kinds[mix(x)%uint64(len(kinds))]
}

// hash is FNV-1a.
func hash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// Calls returns the number of requests subject to faults so far, faulted
// or passed through.
func (f *Faults) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Attempts returns the number of requests so far by request text
// (RequestText).
func (f *Faults) Attempts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.attempts)
}

// Injected returns the faults injected so far by kind. A FaultFlaky
// request that passed through is not counted.
func (f *Faults) Injected() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.injected)
}

// InFlight returns the number of requests the handler is serving now,
// held ones and ones passed through included.
func (f *Faults) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight
}

// Close ends the holds of FaultTimeout and FaultEndless at once, for
// requests in flight and for any that come later, and waits until no
// request is in flight. Calling it again only waits.
func (f *Faults) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	if !f.closed {
		f.closed = true
		close(f.release)
	}
	for f.inFlight > 0 {
		f.idle.Wait()
	}
}

// init makes the maps and channels; f.mu is held.
func (f *Faults) init() {
	if f.release == nil {
		f.release = make(chan struct{})
		f.idle = sync.NewCond(&f.mu)
		f.attempts = map[string]int{}
		f.bodies = map[uint64]int{}
		f.injected = map[string]int{}
	}
}

// maxFaultBody bounds the request bodies Faults reads.
const maxFaultBody = 64 << 20

// ServeHTTP implements http.Handler.
func (f *Faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inner := f.Handler
	if inner == nil {
		inner = http.NotFoundHandler()
	}
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	if r.Method != http.MethodPost || !chat && !strings.HasSuffix(r.URL.Path, "/completions") {
		inner.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.init()
	f.inFlight++
	release := f.release
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.inFlight--; f.inFlight == 0 {
			f.idle.Broadcast()
		}
		f.mu.Unlock()
	}()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFaultBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.ErrorTypeInvalidRequest, "servetest: reading the request: "+err.Error())
		return
	}
	req := parseRequest(body, chat)
	var bh uint64
	if f.PerCall {
		bh = hash(body) // outside the lock: a body may be large
	}

	f.mu.Lock()
	f.calls++
	f.attempts[req.text]++
	attempt := f.attempts[req.text]
	kind := ""
	if f.PerCall {
		f.bodies[bh]++
		attempt = f.bodies[bh]
		kind = f.kindOfHash(bh, attempt)
	} else {
		kind = f.KindOf(req.text)
	}
	if kind == FaultFlaky && attempt > 1 {
		kind = ""
	}
	if kind != "" {
		f.injected[kind]++
	}
	f.mu.Unlock()

	if kind == "" {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		inner.ServeHTTP(w, r)
		return
	}
	f.inject(w, r, kind, req, release)
}

// request is what Faults reads of a request body.
type request struct {
	text   string
	chat   bool
	model  string
	stream bool
	n      int // choices to answer with
}

// RequestText returns the text of a completion or chat request body, by
// which Faults counts attempts and draws faults (see KindOf). A
// completion's text is its prompt, several prompts joined by newlines,
// token prompts written as fmt.Sprint writes [][]int32; a chat's text is
// each message as "role: content\n". A body that is neither is its own
// text.
func RequestText(body []byte) string {
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	chat := json.Unmarshal(body, &probe) == nil && len(probe.Messages) > 0
	return parseRequest(body, chat).text
}

// parseRequest reads a request body; chat says which endpoint it went to.
func parseRequest(body []byte, chat bool) request {
	var in struct {
		Model    string        `json:"model"`
		Prompt   api.Prompt    `json:"prompt"`
		Messages []api.Message `json:"messages"`
		N        *int          `json:"n"`
		Stream   bool          `json:"stream"`
	}
	r := request{text: string(body), chat: chat, n: 1}
	if json.Unmarshal(body, &in) != nil {
		return r
	}
	r.model, r.stream = in.Model, in.Stream
	if in.N != nil && *in.N > 1 && *in.N <= api.MaxN {
		r.n = *in.N
	}
	switch {
	case chat:
		var b strings.Builder
		for _, m := range in.Messages {
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		r.text = b.String()
	case len(in.Prompt.Texts) > 0:
		r.text = strings.Join(in.Prompt.Texts, "\n")
		r.n *= len(in.Prompt.Texts)
	case len(in.Prompt.Tokens) > 0:
		r.text = fmt.Sprint(in.Prompt.Tokens)
		r.n *= len(in.Prompt.Tokens)
	}
	return r
}

// inject answers r with the fault kind.
func (f *Faults) inject(w http.ResponseWriter, r *http.Request, kind string, req request, release <-chan struct{}) {
	switch kind {
	case FaultTimeout:
		if f.hold(r.Context(), release) {
			writeError(w, http.StatusGatewayTimeout, api.ErrorTypeServer, "servetest: injected timeout: held for "+f.holdFor().String())
		}
	case FaultConnection:
		reset(w)
	case FaultServer:
		writeError(w, http.StatusInternalServerError, api.ErrorTypeServer, "servetest: injected server error")
	case FaultRateLimited:
		ra := f.RetryAfter
		if ra <= 0 {
			ra = 20 * time.Millisecond
		}
		w.Header().Set("Retry-After", strconv.FormatFloat(ra.Seconds(), 'f', -1, 64))
		writeError(w, http.StatusTooManyRequests, api.ErrorTypeServer, "servetest: injected rate limit")
	case FaultFlaky:
		writeError(w, http.StatusBadGateway, api.ErrorTypeServer, "servetest: injected flaky failure")
	case FaultMalformed:
		if req.stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+prefix(req)+"The answer is\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, prefix(req)+"The answer is")
	case FaultEmpty:
		empty(w, req)
	case FaultEndless:
		f.endless(w, r, req, release)
	default:
		writeError(w, http.StatusInternalServerError, api.ErrorTypeServer, fmt.Sprintf("servetest: unknown fault %q", kind))
	}
}

// holdFor is the cap on a hold.
func (f *Faults) holdFor() time.Duration {
	if f.Hold > 0 {
		return f.Hold
	}
	return 10 * time.Second
}

// hold waits until ctx ends, release is closed or the hold's cap passes;
// it reports whether the client is still there.
func (f *Faults) hold(ctx context.Context, release <-chan struct{}) bool {
	t := time.NewTimer(f.holdFor())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-release:
	case <-t.C:
	}
	return true
}

// reset closes the connection with an RST, or aborts the response where
// the connection cannot be taken over (HTTP/2).
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// writeError writes an OpenAI error envelope.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.NewError(typ, "", "", msg))
}

// prefix is the start of a response body, up to the text of its first
// choice: of a chunk for a stream.
func prefix(req request) string {
	switch {
	case req.chat && req.stream:
		return `{"id":"chatcmpl-fault","object":"chat.completion.chunk","created":0,"model":` + quote(req.model) + `,"choices":[{"index":0,"delta":{"content":"`
	case req.chat:
		return `{"id":"chatcmpl-fault","object":"chat.completion","created":0,"model":` + quote(req.model) + `,"choices":[{"index":0,"message":{"role":"assistant","content":"`
	}
	return `{"id":"cmpl-fault","object":"text_completion","created":0,"model":` + quote(req.model) + `,"choices":[{"index":0,"text":"`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// empty answers with a response, or a stream, whose choices have no text.
func empty(w http.ResponseWriter, req request) {
	created := time.Now().Unix()
	var v any
	switch {
	case req.chat && req.stream:
		c := api.ChatCompletionChunk{ID: "chatcmpl-fault", Object: api.ObjectChatCompletionChunk, Created: created, Model: req.model}
		for i := range req.n {
			c.Choices = append(c.Choices, api.ChatChunkChoice{Index: i, Delta: api.Delta{Role: "assistant"}, FinishReason: api.FinishStop})
		}
		v = c
	case req.chat:
		c := api.ChatCompletionResponse{ID: "chatcmpl-fault", Object: api.ObjectChatCompletion, Created: created, Model: req.model, Usage: &api.Usage{}}
		for i := range req.n {
			c.Choices = append(c.Choices, api.ChatChoice{Index: i, Message: api.Message{Role: "assistant", Content: ""}, FinishReason: api.FinishStop})
		}
		v = c
	default:
		c := api.CompletionResponse{ID: "cmpl-fault", Object: api.ObjectTextCompletion, Created: created, Model: req.model}
		if !req.stream {
			c.Usage = &api.Usage{}
		}
		for i := range req.n {
			c.Choices = append(c.Choices, api.CompletionChoice{Index: i, Text: "", FinishReason: api.FinishStop})
		}
		v = c
	}
	data, _ := json.Marshal(v)
	if req.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", data)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(data, '\n'))
}

// endless answers 200 and streams filler until the client goes away, the
// hold's cap passes or release is closed.
func (f *Faults) endless(w http.ResponseWriter, r *http.Request, req request, release <-chan struct{}) {
	const size, every = 4 << 10, 10 * time.Millisecond
	var chunk []byte
	if req.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk = append([]byte(":"), bytes.Repeat([]byte(" "), size-3)...)
		chunk = append(chunk, "\n\n"...)
	} else {
		w.Header().Set("Content-Type", "application/json")
		chunk = bytes.Repeat([]byte("a"), size)
		io.WriteString(w, prefix(req))
	}
	rc := http.NewResponseController(w)
	limit := time.NewTimer(f.holdFor())
	defer limit.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-release:
			return
		case <-limit.C:
			return
		case <-tick.C:
		}
	}
}

// StartFaults serves models with cfg behind f on a loopback port for the
// rest of the test, and returns the API's base URL
// ("http://127.0.0.1:PORT/v1"). f.Handler, if nil, is set to the models'
// server. At the end of the test it closes f, then the HTTP server, then
// the models' server. A nil cfg.Logger discards the server's logs.
func StartFaults(t testing.TB, f *Faults, cfg serve.Config, models ...serve.Model) string {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := serve.New(cfg, models...)
	if err != nil {
		t.Fatal(err)
	}
	if f.Handler == nil {
		f.Handler = srv.Handler()
	}
	ts := httptest.NewServer(f)
	t.Cleanup(func() {
		f.Close()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ts.URL + "/v1"
}
