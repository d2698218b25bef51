package expert

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	api "rlvr/api/openai"
	client "rlvr/client/openai"
	"rlvr/sample"
)

// Endpoint answers through an OpenAI-compatible endpoint, one HTTP request
// per question: /v1/chat/completions for a chat request, /v1/completions
// for a completion. The client's retries, backoff, attempt timeout and
// concurrency limit apply: experts that share a client share its limit
// (Open gives each expert its own).
type Endpoint struct {
	Client *client.Client
	// Model is the model asked for; "" leaves it to the client's Config.
	Model string
	// Params are the sampling parameters: MaxTokens (0 leaves the
	// server's default), Temperature (0 is greedy), TopP, Stop and Seed.
	// Each question gets its own seed, Seed plus a hash of its prompt, so
	// that a resumed collection samples as the first run would have.
	Params sample.Params
	// Concurrency is how many questions are in flight at once; 0 means
	// 16. The client's limit applies on top.
	Concurrency int
	// Deadline bounds each answer, retries and backoff included; 0 means
	// none beyond the client's per-attempt timeout and retry count.
	Deadline time.Duration
}

// Answer implements Answerer.
func (e *Endpoint) Answer(ctx context.Context, reqs []Request, done func(int, string, error)) {
	workers := e.Concurrency
	if workers <= 0 {
		workers = 16
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(reqs)) {
		wg.Go(func() {
			for i := range next {
				text, err := e.ask(ctx, reqs[i])
				done(i, text, err)
			}
		})
	}
	i := 0
feed:
	for ; i < len(reqs); i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for ; i < len(reqs); i++ {
		done(i, "", ctx.Err())
	}
}

// ask sends one request.
func (e *Endpoint) ask(ctx context.Context, r Request) (string, error) {
	if e.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, e.Deadline, fmt.Errorf("no answer within %v (the deadline of an answer): %w", e.Deadline, context.DeadlineExceeded))
		defer cancel()
	}
	p := e.Params
	temp := float64(p.Temperature)
	seed := int64((p.Seed + r.hash() + r.Seed) & math.MaxInt64) // servers want it non-negative
	var maxTokens *int
	if p.MaxTokens > 0 {
		maxTokens = &p.MaxTokens
	}
	var topP *float64
	if p.TopP > 0 && p.TopP < 1 {
		tp := float64(p.TopP)
		topP = &tp
	}
	var (
		text string
		err  error
	)
	if r.Messages != nil {
		msgs := make([]api.Message, len(r.Messages))
		for k, m := range r.Messages {
			msgs[k] = api.Message{Role: m.Role, Content: m.Content}
		}
		var res *api.ChatCompletionResponse
		res, err = e.Client.Chat(ctx, &api.ChatCompletionRequest{Model: e.Model, Messages: msgs, Temperature: &temp, TopP: topP,
			MaxTokens: maxTokens, Stop: p.Stop, Seed: &seed})
		if err == nil {
			text = res.Choices[0].Message.Content
		}
	} else {
		var res *api.CompletionResponse
		res, err = e.Client.Complete(ctx, &api.CompletionRequest{Model: e.Model, Prompt: api.Prompt{Texts: []string{r.Prompt}},
			Temperature: &temp, TopP: topP, MaxTokens: maxTokens, Stop: p.Stop, Seed: &seed})
		if err == nil {
			text = res.Choices[0].Text
		}
	}
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(err, cause) {
			// The deadline ended the call: say so beside what it saw.
			err = fmt.Errorf("%w; last error: %w", cause, err)
		}
	}
	return text, err
}
