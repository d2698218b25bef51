package expert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/format/tokenizer"
	"rlvr/sample"
	"rlvr/task"
)

// fakeGen answers each prompt with "A:" and the prompt; it refuses prompts
// containing "refuse" and fails a batch with a prompt containing "boom".
// Prompts of 20 bytes or more do not fit its context.
type fakeGen struct {
	batches []int
}

func (g *fakeGen) Fits(prompt string, maxTokens int) bool {
	return len(prompt)+maxTokens < 20+maxTokens
}

func (g *fakeGen) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	g.batches = append(g.batches, len(prompts))
	out := make([][]string, len(prompts))
	refused := &eval.RefusedError{}
	for i, s := range prompts {
		switch {
		case strings.Contains(s, "boom"):
			return nil, errors.New("the model blew up")
		case strings.Contains(s, "refuse"):
			refused.Prompts = append(refused.Prompts, &eval.PromptError{Index: i, Err: errors.New("no")})
		default:
			out[i] = []string{"A:" + s}
		}
	}
	if len(refused.Prompts) > 0 {
		return out, refused
	}
	return out, nil
}

// TestBatched answers through a generator in batches, rendering chats,
// refusing what does not fit or cannot be rendered, and failing a whole
// batch with its generator's error.
func TestBatched(t *testing.T) {
	chat := func(msgs []tokenizer.Message) (string, error) {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(m.Role[:1] + ":" + m.Content + ";")
		}
		return b.String(), nil
	}
	reqs := []Request{
		{Prompt: "q1"}, {Prompt: "q2"}, {Prompt: "refuse"}, // batch 1
		{Prompt: "a prompt far too long"}, // refused before
		{Messages: []task.Message{{Role: "system", Content: "P"}, {Role: "user", Content: "q"}}}, // batch 2
		{Prompt: "q4"}, {Prompt: "boom"}, // batch 2
		{Prompt: "q5"}, // batch 3
	}
	for _, tc := range []struct {
		name    string
		chat    func([]tokenizer.Message) (string, error)
		want    []string // text, or "error: …"
		batches []int
	}{
		{"with a chat template", chat,
			[]string{"A:q1", "A:q2", "error: refused: no", "error: refused: the prompt does not fit", "error: the model blew up",
				"error: the model blew up", "error: the model blew up", "A:q5"}, []int{3, 3, 1}},
		{"without", nil,
			[]string{"A:q1", "A:q2", "error: refused: no", "error: refused: the prompt does not fit", "error: refused: the model has no chat template",
				"error: the model blew up", "error: the model blew up", "error: the model blew up"}, []int{3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGen{}
			b := &Batched{Gen: g, Chat: tc.chat, Batch: 3, Params: sample.Params{MaxTokens: 5}}
			got := make([]string, len(reqs))
			calls := 0
			b.Answer(context.Background(), reqs, func(i int, text string, err error) {
				calls++
				got[i] = text
				if err != nil {
					got[i] = "error: " + err.Error()
				}
			})
			if calls != len(reqs) {
				t.Errorf("%d calls of done for %d requests", calls, len(reqs))
			}
			for i := range reqs {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("request %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
			if fmt.Sprint(g.batches) != fmt.Sprint(tc.batches) {
				t.Errorf("batches %v, want %v", g.batches, tc.batches)
			}
		})
	}
}

// TestEndpointCancelled: once ctx ends, every request gets an answer or
// ctx's error, exactly once.
func TestEndpointCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := &Endpoint{Client: client.New(client.Config{BaseURL: "http://127.0.0.1:1/v1"}), Concurrency: 2}
	var mu sync.Mutex
	seen := map[int]int{}
	e.Answer(ctx, make([]Request, 10), func(i int, text string, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen[i]++
		if err == nil {
			t.Errorf("request %d answered %q", i, text)
		}
	})
	for i := range 10 {
		if seen[i] != 1 {
			t.Errorf("request %d: done called %d times", i, seen[i])
		}
	}
}

// TestClassify names the kind of failure of each error an Answerer
// returns.
func TestClassify(t *testing.T) {
	apiErr := func(status int) error { return fmt.Errorf("wrapped: %w", &client.APIError{StatusCode: status}) }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apiErr(429), FailRateLimited},
		{apiErr(500), FailServer},
		{apiErr(503), FailServer},
		{apiErr(408), FailTimeout},
		{apiErr(504), FailTimeout},
		{apiErr(400), FailRefused},
		{apiErr(404), FailRefused},
		{apiErr(200), FailOther},
		{fmt.Errorf("%w from POST x: unexpected end", client.ErrMalformedResponse), FailMalformed},
		{fmt.Errorf("openai: POST x: %w", context.DeadlineExceeded), FailTimeout},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), FailConnection},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), FailConnection},
		{fmt.Errorf("openai: POST x: %w", io.EOF), FailConnection},
		{&net.OpError{Op: "read", Err: errors.New("broken")}, FailConnection},
		{fmt.Errorf("%w: too long", ErrRefused), FailRefused},
		{errors.New("the model blew up"), FailOther},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestEndpointDeadline: an endpoint that never answers costs an answer its
// deadline, not the client's longer attempt timeout, and is a timeout.
func TestEndpointDeadline(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server sees the client go
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer ts.Close()
	cl := client.New(client.Config{BaseURL: ts.URL + "/v1", Timeout: time.Minute})
	e := &Endpoint{Client: cl, Deadline: 200 * time.Millisecond}
	start := time.Now()
	var got error
	e.Answer(context.Background(), []Request{{Prompt: "Q:1+1\n"}}, func(i int, text string, err error) { got = err })
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v", el)
	}
	if Classify(got) != FailTimeout || !strings.Contains(got.Error(), "deadline of an answer") {
		t.Errorf("error %v (%s)", got, Classify(got))
	}
}
