package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	api "rlvr/api/openai"
	"rlvr/checkpoint"
	"rlvr/serve"
)

// ServeLoad is a bounded concurrent load of the OpenAI API: Clients
// clients on loopback, each sending its next streamed completion when its
// last one ends, Requests in all. Request i continues Prompts[i mod
// len] at temperature 1 with seed i, and asks for a max_tokens drawn
// between MinTokens and MaxTokens from Seed, so that short and long
// requests mix, as they do in rollouts; stop tokens still end them.
type ServeLoad struct {
	Clients, Requests    int
	MinTokens, MaxTokens int
	Prompts              []string
	Seed                 uint64
}

// ServeResult is one server's latency and throughput under a ServeLoad.
type ServeResult struct {
	Mode string // "decoding loop" or "whole batches"
	// Time to the first text and to the end of the stream: median and
	// 95th percentile over the requests.
	FirstP50, FirstP95, DoneP50, DoneP95 time.Duration
	Requests, Tokens                     int
	Seconds                              float64
	TokensPerSec                         float64 // completion tokens over the wall time
}

// MeasureServe serves l on loopback under cfg and runs load against it.
func MeasureServe(ctx context.Context, l *checkpoint.Loaded, cfg serve.Config, load ServeLoad) (ServeResult, error) {
	mode := "decoding loop"
	if cfg.WholeBatches {
		mode = "whole batches"
	}
	res := ServeResult{Mode: mode, Requests: load.Requests}
	if load.Clients < 1 || load.Requests < 1 || len(load.Prompts) == 0 || load.MinTokens < 1 || load.MaxTokens < load.MinTokens {
		return res, fmt.Errorf("bench: a serving load needs clients, requests, prompts and 1 ≤ min tokens ≤ max tokens")
	}
	base, stop, err := serve.Loopback(cfg, serve.Checkpoint("bench", l))
	if err != nil {
		return res, err
	}
	defer stop()
	rng := rand.New(rand.NewPCG(load.Seed, 0))
	budgets := make([]int, load.Requests)
	for i := range budgets {
		budgets[i] = load.MinTokens + rng.IntN(load.MaxTokens-load.MinTokens+1)
	}
	first := make([]time.Duration, load.Requests)
	done := make([]time.Duration, load.Requests)
	tokens := make([]int, load.Requests)
	errs := make([]error, load.Requests)
	next := make(chan int, load.Requests)
	for i := range load.Requests {
		next <- i
	}
	close(next)
	start := time.Now()
	var wg sync.WaitGroup
	for range load.Clients {
		wg.Go(func() {
			for i := range next {
				first[i], done[i], tokens[i], errs[i] = streamOne(ctx, base, load.Prompts[i%len(load.Prompts)], budgets[i], int64(i))
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	for i, err := range errs {
		if err != nil {
			return res, fmt.Errorf("bench: request %d: %w", i, err)
		}
		res.Tokens += tokens[i]
	}
	res.TokensPerSec = float64(res.Tokens) / res.Seconds
	res.FirstP50, res.FirstP95 = percentile(first, 0.5), percentile(first, 0.95)
	res.DoneP50, res.DoneP95 = percentile(done, 0.5), percentile(done, 0.95)
	return res, nil
}

// percentile is the q-quantile of ds by the nearest rank.
func percentile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// streamOne sends one streamed completion and times its first text and
// its end.
func streamOne(ctx context.Context, base, prompt string, maxTokens int, seed int64) (first, done time.Duration, tokens int, err error) {
	temp := 1.0
	body, _ := json.Marshal(api.CompletionRequest{Model: "bench", Prompt: api.Prompt{Texts: []string{prompt}}, MaxTokens: &maxTokens,
		Temperature: &temp, Seed: &seed, Stream: true, StreamOptions: &api.StreamOptions{IncludeUsage: true}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = time.Since(start)
			if first == 0 { // no text at all: the end is the first answer
				first = done
			}
			return first, done, tokens, nil
		}
		var chunk api.CompletionResponse
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return 0, 0, 0, fmt.Errorf("chunk %q: %w", data, err)
		}
		if first == 0 && len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
			first = time.Since(start)
		}
		if chunk.Usage != nil {
			tokens = chunk.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, 0, err
	}
	return 0, 0, 0, fmt.Errorf("the stream ended without [DONE]")
}
