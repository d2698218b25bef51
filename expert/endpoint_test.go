package expert

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	client "rlvr/client/openai"
)

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
