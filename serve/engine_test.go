package serve_test

import (
	"context"
	"sync"
	"testing"

	api "rlvr/api/openai"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	client "rlvr/client/openai"
	"rlvr/internal/shareddata"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/serve/servetest"
)

// countingSampler records the largest batch the server handed the real
// sampler.
type countingSampler struct {
	*local.Sampler
	mu      sync.Mutex
	largest int
}

func (c *countingSampler) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	c.mu.Lock()
	c.largest = max(c.largest, len(reqs))
	c.mu.Unlock()
	return c.Sampler.Sample(ctx, reqs)
}

// TestServeRealModel serves llama2.c's stories260K through the engine's
// sampler and calls it with the client package over loopback: concurrent
// greedy requests are batched together and each answer equals what the
// sampler gives that prompt alone.
func TestServeRealModel(t *testing.T) {
	l, err := checkpoint.Open(shareddata.Path(t, "stories260K/stories260K.bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	gen := &countingSampler{Sampler: local.NewSampler(l.Model, l.Tokenizer)}
	base := servetest.Start(t, serve.Config{}, serve.Model{Name: "stories", Generator: gen, Tokenizer: l.Tokenizer,
		Encode: l.Encode, StopTokens: l.StopTokens, ContextLength: l.Model.Config.MaxSeq})
	c := client.New(client.Config{BaseURL: base, Model: "stories"})

	prompts := []string{"Once upon a time", "The dog", "Lily and Tom", "One day", "The sun", "A little bird", "Sam had", "Mom said"}
	want := make([]string, len(prompts))
	direct := local.NewSampler(l.Model, l.Tokenizer)
	for i, p := range prompts {
		out, err := direct.Sample(context.Background(), []sample.Request{{Prompt: l.Encode(p), Params: sample.Params{MaxTokens: 30, StopTokens: l.StopTokens}}})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = l.Decode(out[0][0].Tokens)
	}
	var wg sync.WaitGroup
	got := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			zero, max := 0.0, 30
			res, err := c.Complete(context.Background(), &api.CompletionRequest{Prompt: api.Prompt{Texts: []string{p}}, Temperature: &zero, MaxTokens: &max})
			if err != nil {
				errs[i] = err
				return
			}
			got[i] = res.Choices[0].Text
		}()
	}
	wg.Wait()
	for i := range prompts {
		if errs[i] != nil {
			t.Fatalf("prompt %q: %v", prompts[i], errs[i])
		}
		if got[i] != want[i] {
			t.Errorf("prompt %q: served %q, sampled alone %q", prompts[i], got[i], want[i])
		}
	}
	if gen.largest < 2 {
		t.Errorf("largest batch %d: concurrent requests were not batched", gen.largest)
	}
	t.Logf("largest batch: %d requests", gen.largest)
}

// TestServeTinyTemperatureIsGreedy asks the real sampler over loopback for
// completions at temperatures too small to divide the logits by: each is
// the greedy completion.
func TestServeTinyTemperatureIsGreedy(t *testing.T) {
	l, err := checkpoint.Open(shareddata.Path(t, "stories260K/stories260K.bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	base := servetest.Start(t, serve.Config{Logger: quiet}, serve.Model{Name: "stories", Generator: local.NewSampler(l.Model, l.Tokenizer), Tokenizer: l.Tokenizer,
		Encode: l.Encode, StopTokens: l.StopTokens, ContextLength: l.Model.Config.MaxSeq})
	c := client.New(client.Config{BaseURL: base, Model: "stories"})
	complete := func(temp float64) string {
		t.Helper()
		n, seed := 30, int64(5)
		res, err := c.Complete(context.Background(), &api.CompletionRequest{Prompt: api.Prompt{Texts: []string{"Once upon a time"}}, Temperature: &temp, MaxTokens: &n, Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		return res.Choices[0].Text
	}
	want := complete(0)
	for _, temp := range []float64{1e-38, 1e-40, 1e-45, 1e-300} {
		if got := complete(temp); got != want {
			t.Errorf("temperature %g: %q, want the greedy %q", temp, got, want)
		}
	}
}
