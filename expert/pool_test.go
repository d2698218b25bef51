package expert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rlvr/checkpoint/modeltest"
	"rlvr/task/world"
)

// answerer answers every request with text, or with err.
type answerer struct {
	text string
	err  error
}

func (a answerer) Answer(ctx context.Context, reqs []Request, done func(int, string, error)) {
	for i := range reqs {
		done(i, a.text, a.err)
	}
}

func TestPoolResolve(t *testing.T) {
	p := &Pool{Members: []Member{{Name: "E1"}, {Name: "E2"}, {Name: "gpt"}}}
	if got := p.Names(); !reflect.DeepEqual(got, []string{"E1", "E2", "gpt"}) {
		t.Fatalf("Names() = %v", got)
	}
	for _, tt := range []struct {
		expert string
		n      int
		want   int
	}{
		{"E1", 0, 0}, {"E1", 5, 0}, {"E2", 0, 1}, {"gpt", 7, 2},
		{"", 0, 0}, {"", 1, 1}, {"", 2, 2}, {"", 3, 0}, {"", 4, 1}, {"", 11, 2},
	} {
		got, err := p.Resolve(tt.expert, tt.n)
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q, %d) = %d, %v; want %d", tt.expert, tt.n, got, err, tt.want)
		}
	}
	// Routing to the pool is the same every time.
	for n := range 20 {
		a, _ := p.Resolve("", n)
		b, _ := p.Resolve("", n)
		if a != b || a != n%3 {
			t.Fatalf("Resolve(\"\", %d) = %d then %d", n, a, b)
		}
	}
	for _, name := range []string{"E3", "e1", "E1 ", "E0"} {
		_, err := p.Resolve(name, 0)
		if err == nil {
			t.Errorf("Resolve(%q): no error", name)
			continue
		}
		for _, want := range []string{strconv.Quote(name), "[E1 E2 gpt]"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Resolve(%q) = %q, want it to name %s", name, err, want)
			}
		}
	}
	if _, err := (&Pool{}).Resolve("", 0); err == nil {
		t.Error("an empty pool resolved a query to the pool")
	}
}

// open checks experts as a run's config would and opens their pool for
// the rest of the test.
func open(t *testing.T, experts ...Config) *Pool {
	t.Helper()
	for i := range experts {
		if err := experts[i].Check("consult.experts", i, false); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Open(experts, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestPoolWorldExperts(t *testing.T) {
	style := func(s int) *int { return &s }
	p := open(t,
		Config{World: style(1)},
		Config{World: style(2)},
		Config{World: style(3)},
		Config{Name: "blank", Reply: "I cannot help."},
		Config{Name: "chat3", World: style(3), API: "chat"},
		Config{Name: "wrong2", World: style(2), Wrong: true},
	)
	if got, want := p.Names(), []string{"E1", "E2", "E3", "blank", "chat3", "wrong2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	if p.Members[0].API != APICompletion || p.Members[4].API != APIChat {
		t.Fatalf("APIs: %v, %v", p.Members[0].API, p.Members[4].API)
	}
	problems := world.Mix(7, 12, []int{0, 1, 2, 3, 4})
	// Interleave the members so that each one's answers must be put back
	// in the order of the asks.
	var asks []Ask
	for _, pr := range problems {
		for m := range p.Members {
			asks = append(asks, Ask{Member: m, Question: "Q:" + pr.Question + "\n"})
		}
	}
	for i, j := 0, len(asks)-1; i < j; i, j = i+2, j-2 { // not grouped by member either
		asks[i], asks[j] = asks[j], asks[i]
	}
	out := p.Answers(context.Background(), asks)
	if len(out) != len(asks) {
		t.Fatalf("%d answers to %d asks", len(out), len(asks))
	}
	styles := []int{1, 2, 3, -1, 3, 2}
	for i, a := range out {
		if a.Failure != "" || a.Err != nil {
			t.Fatalf("ask %d (%+v): %s: %v", i, asks[i], a.Failure, a.Err)
		}
		if a.Latency <= 0 {
			t.Errorf("ask %d: latency %v", i, a.Latency)
		}
		pr, err := world.ParseQuestion(asks[i].Question)
		if err != nil {
			t.Fatal(err)
		}
		s := styles[asks[i].Member]
		if s < 0 {
			if a.Text != "I cannot help." {
				t.Errorf("ask %d: the fixed expert answered %q", i, a.Text)
			}
			continue
		}
		want, _ := world.Solve(pr, s)
		if p.Members[asks[i].Member].Name == "wrong2" {
			want, _ = world.SolveWrong(pr, s)
		}
		if a.Text != want {
			t.Errorf("ask %d: %s on %q answered %q, want style %d's %q", i, p.Members[asks[i].Member].Name, pr.Question, a.Text, s, want)
		}
	}
	// Nothing asked, nothing answered.
	if out := p.Answers(context.Background(), nil); len(out) != 0 {
		t.Errorf("Answers(nil) = %v", out)
	}
}

func TestPoolBadMember(t *testing.T) {
	p := &Pool{Members: []Member{{Name: "E1", Answerer: answerer{text: "####5\n"}}}}
	out := p.Answers(context.Background(), []Ask{{Member: 0, Question: "a"}, {Member: 1, Question: "b"}, {Member: -1, Question: "c"}, {Member: 0, Question: "d"}})
	if len(out) != 4 {
		t.Fatalf("%d answers", len(out))
	}
	for _, i := range []int{0, 3} {
		if out[i].Failure != "" || out[i].Text != "####5\n" {
			t.Errorf("answer %d: %+v", i, out[i])
		}
	}
	for _, i := range []int{1, 2} {
		if out[i].Failure != FailOther || out[i].Err == nil || out[i].Text != "" {
			t.Errorf("answer %d to a member out of range: %+v", i, out[i])
		}
	}
	// An empty pool fails every ask.
	out = (&Pool{}).Answers(context.Background(), []Ask{{Member: 0, Question: "a"}})
	if len(out) != 1 || out[0].Failure != FailOther {
		t.Errorf("an empty pool answered %+v", out)
	}
}

func TestPoolAnswerFailures(t *testing.T) {
	p := &Pool{Members: []Member{
		{Name: "ok", Answerer: answerer{text: "57"}},
		{Name: "empty", Answerer: answerer{}},
		{Name: "late", Answerer: answerer{err: context.DeadlineExceeded}},
		{Name: "refused", Answerer: answerer{err: fmt.Errorf("too long: %w", ErrRefused)}},
	}}
	out := p.Answers(context.Background(), []Ask{{Member: 0, Question: "q"}, {Member: 1, Question: "q"}, {Member: 2, Question: "q"}, {Member: 3, Question: "q"}})
	want := []string{"", FailEmpty, FailTimeout, FailRefused}
	for i, a := range out {
		if a.Failure != want[i] {
			t.Errorf("%s: failure %q, want %q (%v)", p.Members[i].Name, a.Failure, want[i], a.Err)
		}
	}
}

const completion = `{"object":"text_completion","model":"m","choices":[{"index":0,"text":"####5\n","finish_reason":"stop"}]}`

// barrier serves completions only once n requests are in flight at once;
// a request that waits ~5 s for them gets a 500.
type barrier struct {
	n        int
	mu       sync.Mutex
	inFlight int
	peak     int
	all      chan struct{}
	once     sync.Once
}

func (b *barrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/completions" {
		http.NotFound(w, r)
		return
	}
	io.Copy(io.Discard, r.Body)
	b.mu.Lock()
	b.inFlight++
	b.peak = max(b.peak, b.inFlight)
	if b.inFlight >= b.n {
		b.once.Do(func() { close(b.all) })
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-b.all:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion)
	case <-timer.C:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"the barrier was never reached","type":"server_error"}}`)
	case <-r.Context().Done():
	}
}

func TestPoolConcurrentDispatch(t *testing.T) {
	const n = 6
	b := &barrier{n: n, all: make(chan struct{})}
	srv := httptest.NewServer(b)
	defer srv.Close()
	p := open(t,
		Config{Name: "A", URL: srv.URL + "/v1", Concurrency: n, Retries: -1},
		Config{Name: "B", URL: srv.URL + "/v1", Concurrency: n, Retries: -1},
	)
	asks := make([]Ask, n)
	for i := range asks {
		asks[i] = Ask{Member: i % 2, Question: fmt.Sprintf("Q:%d+1\n", i)}
	}
	out := p.Answers(context.Background(), asks)
	if len(out) != n {
		t.Fatalf("%d answers to %d asks", len(out), n)
	}
	for i, a := range out {
		if a.Failure != "" || a.Text != "####5\n" {
			t.Errorf("ask %d: %q, %s: %v", i, a.Text, a.Failure, a.Err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peak < n {
		t.Errorf("at most %d requests in flight at once, want %d", b.peak, n)
	}
}

func TestPoolEndpointFailures(t *testing.T) {
	jsonReply := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	// hang answers nothing until the client gives up (with the body read,
	// the server notices the connection close) or the test ends.
	hang := func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc // nil hangs
		cfg     Config
		want    string
	}{
		{"server error", jsonReply(500, `{"error":{"message":"boom","type":"server_error"}}`),
			Config{Retries: -1}, FailServer},
		{"server error after retries", jsonReply(503, `{"error":{"message":"busy","type":"server_error"}}`),
			Config{Retries: 1}, FailServer},
		{"bad request", jsonReply(400, `{"error":{"message":"no","type":"invalid_request_error"}}`),
			Config{}, FailRefused},
		{"rate limited", jsonReply(429, `{"error":{"message":"slow down","type":"rate_limit_error"}}`),
			Config{Retries: -1}, FailRateLimited},
		{"malformed", jsonReply(200, `this is not JSON`),
			Config{Retries: -1}, FailMalformed},
		{"empty text", jsonReply(200, strings.Replace(completion, `####5\n`, ``, 1)),
			Config{}, FailEmpty},
		{"attempt timeout", nil, Config{Retries: -1, Timeout: 50 * time.Millisecond}, FailTimeout},
		{"answer deadline", nil, Config{Deadline: 50 * time.Millisecond}, FailTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			h := tt.handler
			if h == nil {
				h = hang(release)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			defer close(release)
			cfg := tt.cfg
			cfg.URL = srv.URL + "/v1"
			p := open(t, cfg)
			out := p.Answers(context.Background(), []Ask{{Member: 0, Question: "Q:1+1\n"}, {Member: 0, Question: "Q:2+2\n"}, {Member: 3, Question: "Q:3+3\n"}})
			if len(out) != 3 {
				t.Fatalf("%d answers to 3 asks", len(out))
			}
			for i, a := range out[:2] {
				if a.Failure != tt.want || a.Text != "" {
					t.Errorf("ask %d: %q, failure %q (%v), want %q", i, a.Text, a.Failure, a.Err, tt.want)
				}
				if (a.Err == nil) != (tt.want == FailEmpty) {
					t.Errorf("ask %d: failure %q with error %v", i, a.Failure, a.Err)
				}
			}
			if out[2].Failure != FailOther || out[2].Err == nil {
				t.Errorf("ask to member 3 of 1: %+v", out[2])
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		p := open(t, Config{URL: "http://" + addr + "/v1", Retries: -1})
		out := p.Answers(context.Background(), []Ask{{Member: 0, Question: "Q:1+1\n"}})
		if len(out) != 1 || out[0].Failure != FailConnection {
			t.Errorf("answers %+v", out)
		}
	})
}

func TestPoolCancelled(t *testing.T) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-hold:
		}
	}))
	defer srv.Close()
	defer close(hold)
	p := open(t, Config{URL: srv.URL + "/v1", Concurrency: 1, Retries: -1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := p.Answers(ctx, []Ask{{Member: 0, Question: "a"}, {Member: 0, Question: "b"}, {Member: 0, Question: "c"}})
	if len(out) != 3 {
		t.Fatalf("%d answers", len(out))
	}
	for i, a := range out {
		if a.Failure == "" || a.Err == nil {
			t.Errorf("ask %d after cancellation: %+v", i, a)
		}
	}
}

// TestOpenURLExperts: a URL expert asks its remote model (its name when
// none is given), with the key given or read from the environment, and
// records what it asked for.
func TestOpenURLExperts(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]string{} // model → Authorization
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		mu.Lock()
		asked[req.Model] = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion)
	}))
	defer srv.Close()
	t.Setenv("EXPERT_TEST_KEY", "from-env")
	p := open(t,
		Config{Name: "qwen", URL: srv.URL + "/v1"},
		Config{Name: "r1", URL: srv.URL + "/v1", RemoteModel: "deepseek-r1", APIKeyEnv: "EXPERT_TEST_KEY"},
		Config{Name: "gpt", URL: srv.URL + "/v1", APIKey: "given", APIKeyEnv: "EXPERT_TEST_KEY"},
	)
	for i, want := range []string{"qwen", "deepseek-r1", "gpt"} {
		if m := p.Members[i]; m.Model != want || m.API != APICompletion {
			t.Errorf("member %d: %+v, want model %s", i, m, want)
		}
	}
	for _, a := range p.Answers(context.Background(), []Ask{{Member: 0, Question: "q"}, {Member: 1, Question: "q"}, {Member: 2, Question: "q"}}) {
		if a.Failure != "" {
			t.Fatalf("%s: %v", a.Failure, a.Err)
		}
	}
	want := map[string]string{"qwen": "", "deepseek-r1": "Bearer from-env", "gpt": "Bearer given"}
	for model, auth := range want {
		if got, ok := asked[model]; !ok || got != auth {
			t.Errorf("model %s asked %v with Authorization %q, want %q", model, ok, got, auth)
		}
	}
}

// TestOpenCheckpoint opens a checkpoint without a chat template as an
// expert whose API defaults to chat: it is asked by completion, says so,
// and answers, served on loopback or, with Options.Batch, in this process.
func TestOpenCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	modeltest.Byte(t, dir, 128)
	for _, batch := range []int{0, 4} {
		experts := []Config{{Name: "tiny", Model: dir, MaxTokens: 4}, {Name: "copy", Policy: true, MaxTokens: 4}}
		for i := range experts {
			if err := experts[i].Check("experts", i, true); err != nil {
				t.Fatal(err)
			}
		}
		var warnings []string
		p, err := Open(experts, Options{Policy: dir, Seed: 1, Batch: batch, Warn: func(msg string) { warnings = append(warnings, msg) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(warnings) != 2 || !strings.Contains(warnings[0], "expert tiny: "+dir+" has no chat template") {
			t.Errorf("batch %d: warnings %q", batch, warnings)
		}
		for _, m := range p.Members {
			if m.API != APICompletion || m.Model != dir {
				t.Errorf("batch %d: member %+v", batch, m)
			}
			if _, ok := m.Answerer.(*Batched); ok != (batch > 0) {
				t.Errorf("batch %d: %s answers through %T", batch, m.Name, m.Answerer)
			}
		}
		for _, a := range p.Answers(context.Background(), []Ask{{Member: 0, Question: "Q:1+1\n"}, {Member: 1, Question: "Q:2+2\n"}}) {
			if a.Failure != "" && a.Failure != FailEmpty {
				t.Errorf("batch %d: %s: %v", batch, a.Failure, a.Err)
			}
		}
		p.Close()
	}
}

// TestOpenSeedsEachMemberAndAsk reads the seed of every request on the
// wire: two members serving one model (self-collaboration's copies) are
// sent different seeds for one question, and one member different seeds
// for one question under two Ask seeds, the same seed under the same.
func TestOpenSeedsEachMemberAndAsk(t *testing.T) {
	var mu sync.Mutex
	seeds := map[string][]int64{} // prompt → seeds, in arrival order per prompt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt string `json:"prompt"`
			Seed   int64  `json:"seed"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		mu.Lock()
		seeds[req.Prompt] = append(seeds[req.Prompt], req.Seed)
		mu.Unlock()
		io.WriteString(w, completion)
	}))
	defer srv.Close()
	p := open(t, Config{Name: "a", URL: srv.URL + "/v1", RemoteModel: "same", Temperature: 1},
		Config{Name: "b", URL: srv.URL + "/v1", RemoteModel: "same", Temperature: 1})
	for _, asks := range [][]Ask{
		{{Member: 0, Question: "members"}}, {{Member: 1, Question: "members"}},
		{{Member: 0, Question: "asks", Seed: 1}}, {{Member: 0, Question: "asks", Seed: 2}}, {{Member: 0, Question: "asks", Seed: 1}},
	} {
		for _, a := range p.Answers(context.Background(), asks) {
			if a.Failure != "" {
				t.Fatalf("%s: %v", a.Failure, a.Err)
			}
		}
	}
	if s := seeds["members"]; len(s) != 2 || s[0] == s[1] {
		t.Errorf("two members asked one question with seeds %v", s)
	}
	if s := seeds["asks"]; len(s) != 3 || s[0] == s[1] || s[0] != s[2] {
		t.Errorf("one member asked under Ask seeds 1, 2, 1 with seeds %v", s)
	}
}
