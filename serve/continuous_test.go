package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	api "rlvr/api/openai"
	"rlvr/checkpoint"
	"rlvr/internal/shareddata"
	"rlvr/serve"
)

func storiesCheckpoint(t *testing.T) *checkpoint.Loaded {
	t.Helper()
	l, err := checkpoint.Open(shareddata.Path(t, "stories260K/stories260K.bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestDecodingLoopIsTheSame serves stories260K from its checkpoint, as
// `rlvr serve` does, so requests join one running decoding loop, and
// sends concurrent completions (streamed and not, n of 1 and 3, greedy and
// sampled, short and long) into it, more samples than it has slots: each
// answer equals the same request's answer from a server that samples in
// whole batches, one request at a time.
func TestDecodingLoopIsTheSame(t *testing.T) {
	l := storiesCheckpoint(t)
	_, loopURL := start(t, serve.Config{MaxBatch: 6}, serve.Checkpoint("stories", l))
	_, wholeURL := start(t, serve.Config{WholeBatches: true}, serve.Checkpoint("stories", l))

	prompts := []string{"Once upon a time", "The dog", "Lily and Tom", "One day", "The sun", "A little bird", "Sam had", "Mom said"}
	reqs := make([]api.CompletionRequest, len(prompts))
	for i, p := range prompts {
		temp := float64(i % 2) // greedy and temperature 1
		reqs[i] = api.CompletionRequest{Model: "stories", Prompt: api.Prompt{Texts: []string{p}}, Temperature: &temp,
			MaxTokens: ptr(10 + 25*(i%3)), Seed: ptr(int64(i)), N: ptr(1 + 2*(i%2)), Stream: i%4 >= 2}
	}
	texts := func(url string, req api.CompletionRequest) []string {
		out := make([]string, *req.N)
		if req.Stream {
			for _, ev := range stream(t, context.Background(), url+"/v1/completions", req) {
				for _, c := range decode[api.CompletionResponse](t, []byte(ev)).Choices {
					out[c.Index] += c.Text
				}
			}
			return out
		}
		resp, data := do(t, "POST", url+"/v1/completions", "", req)
		if resp.StatusCode != 200 {
			t.Errorf("%d %s", resp.StatusCode, data)
			return out
		}
		for _, c := range decode[api.CompletionResponse](t, data).Choices {
			out[c.Index] = c.Text
		}
		return out
	}
	got := make([][]string, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { got[i] = texts(loopURL, reqs[i]) })
	}
	wg.Wait()
	for i := range reqs {
		want := texts(wholeURL, reqs[i])
		if fmt.Sprint(got[i]) != fmt.Sprint(want) {
			t.Errorf("request %d (%q, stream %v): decoding loop %q, whole batch alone %q", i, prompts[i], reqs[i].Stream, got[i], want)
		}
	}
}

// TestDecodingLoopFreesSlotsOfDeparted checks, with a loop of one slot,
// that a streaming client that leaves frees its slot: the request waiting
// for it then runs, and the server answers as before.
func TestDecodingLoopFreesSlotsOfDeparted(t *testing.T) {
	l := storiesCheckpoint(t)
	_, url := start(t, serve.Config{MaxBatch: 1}, serve.Checkpoint("stories", l))
	long := api.CompletionRequest{Model: "stories", Prompt: api.Prompt{Texts: []string{"Once upon a time"}}, Temperature: ptr(1.0),
		Seed: ptr(int64(3)), MaxTokens: ptr(200), Stream: true}
	ctx, cancel := context.WithCancel(context.Background())
	data, _ := json.Marshal(long)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && !strings.Contains(sc.Text(), `"text"`); {
	} // sampling has started
	cancel()
	resp.Body.Close()
	short := long
	short.Stream, short.MaxTokens = false, ptr(5)
	r, body := do(t, "POST", url+"/v1/completions", "", short)
	if r.StatusCode != 200 {
		t.Fatalf("after a departed stream: %d %s", r.StatusCode, body)
	}
	if res := decode[api.CompletionResponse](t, body); res.Usage.CompletionTokens != 5 {
		t.Errorf("after a departed stream: %d completion tokens, want 5", res.Usage.CompletionTokens)
	}
}

// TestDecodingLoopBoundsTheContext checks that a KV-cache budget below
// MaxBatch full contexts shortens the context served (max_model_len), and
// that a request beyond it gets the context-length error, not a wait.
func TestDecodingLoopBoundsTheContext(t *testing.T) {
	l := storiesCheckpoint(t)
	cf := l.Model.Config
	perToken := int64(cf.Layers*cf.KVHeads*cf.HeadDim) * 2 * 4
	_, url := start(t, serve.Config{MaxBatch: 4, KVCacheBytes: 4 * 100 * perToken}, serve.Checkpoint("stories", l))
	resp, data := do(t, "GET", url+"/v1/models/stories", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	if m := decode[api.Model](t, data); m.MaxModelLen != 100 {
		t.Errorf("max_model_len %d, want the 100 tokens the budget holds per sample", m.MaxModelLen)
	}
	req := api.CompletionRequest{Model: "stories", Prompt: api.Prompt{Texts: []string{"Once upon a time"}}, MaxTokens: ptr(150)}
	resp, data = do(t, "POST", url+"/v1/completions", "", req)
	wantError(t, resp, data, http.StatusBadRequest, "max_tokens", api.CodeContextLengthExceeded)
	if _, err := serve.New(serve.Config{MaxBatch: 4, KVCacheBytes: perToken}, serve.Checkpoint("stories", l)); err == nil {
		t.Error("a KV cache of one token was accepted")
	}
}
