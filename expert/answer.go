package expert

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	api "rlvr/api/openai"
	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/format/tokenizer"
	"rlvr/internal/httpretry"
	"rlvr/sample"
	"rlvr/task"
)

// How an expert is asked.
const (
	// APICompletion sends the question as a plain completion prompt
	// (POST /v1/completions, or a local model's continuation).
	APICompletion = "completion"
	// APIChat sends the question as a chat (POST /v1/chat/completions,
	// or a local model's chat template).
	APIChat = "chat"
)

// The kinds of failure: an expert gave no usable answer. Whoever asked
// records the failure and goes on.
const (
	FailTimeout     = "timeout"      // no answer in time: an attempt's timeout, the answer's deadline, a 408 or 504
	FailConnection  = "connection"   // connection refused, reset or closed early
	FailRateLimited = "rate-limited" // 429 after every retry
	FailServer      = "server-error" // 5xx after every retry
	FailRefused     = "refused"      // another 4xx, or a prompt too long for a local model
	FailMalformed   = "malformed"    // a response body that is not the API's JSON
	FailEmpty       = "empty"        // an answer with no text
	FailNoSolution  = "no-solution"  // D_ME's Expert0 on a question without a reference solution
	FailOther       = "error"        // anything else, such as a local model's error
)

// FailureKinds lists every kind of failure, in the order summaries and
// metrics name them.
var FailureKinds = []string{FailTimeout, FailConnection, FailRateLimited, FailServer, FailRefused, FailMalformed, FailEmpty, FailNoSolution, FailOther}

// Request is one question put to an expert, in the form of the expert's
// API: Prompt for a completion, Messages for a chat. Exactly one is set.
type Request struct {
	Prompt   string
	Messages []task.Message
}

// hash is an FNV-1a hash of the request's text.
func (r Request) hash() uint64 { return task.TextHash(r.Prompt, r.Messages) }

// An Answerer asks an expert for answers.
type Answerer interface {
	// Answer asks for every request and calls done exactly once per
	// request, with its index in reqs and the answer's text or the error
	// that prevented it, before it returns. done may be called from
	// several goroutines at once. Once ctx ends, the requests not yet
	// answered get ctx's error.
	Answer(ctx context.Context, reqs []Request, done func(i int, text string, err error))
}

// Endpoint answers through an OpenAI-compatible endpoint, one HTTP request
// per question: /v1/chat/completions for a chat request, /v1/completions
// for a completion. The client's retries, backoff, attempt timeout and
// concurrency limit apply; share one client among the experts of one
// endpoint, so that its limit covers them all.
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
	seed := int64((p.Seed + r.hash()) & math.MaxInt64) // servers want it non-negative
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

// Batched answers with an eval.Generator, such as a local model
// (eval.NewLocal), Batch prompts per call. A chat request is rendered
// with Chat into a prompt. Prompts a PromptFitter generator says do not
// fit its context fail as refused, without a call.
type Batched struct {
	Gen eval.Generator
	// Chat renders a chat as a prompt ending with the generation prompt
	// (checkpoint.Loaded.Chat); nil refuses chat requests.
	Chat func(msgs []tokenizer.Message) (string, error)
	// Params are the sampling parameters; N is ignored (one answer per
	// question).
	Params sample.Params
	// Batch is how many prompts go to Gen at once; 0 means 16.
	Batch int
}

// ErrRefused is wrapped by the errors of prompts an expert refuses
// without asking its model: too long for its context, or a chat for a
// model without a chat template.
var ErrRefused = errors.New("refused")

// Answer implements Answerer.
func (b *Batched) Answer(ctx context.Context, reqs []Request, done func(int, string, error)) {
	batch := b.Batch
	if batch <= 0 {
		batch = 16
	}
	p := b.Params
	p.N = 1
	maxTokens := p.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 256
	}
	fitter, _ := b.Gen.(eval.PromptFitter)
	var idx []int
	var prompts []string
	flush := func() {
		if len(prompts) == 0 {
			return
		}
		out, err := b.Gen.Generate(ctx, prompts, p)
		refused := map[int]error{}
		if re, ok := errors.AsType[*eval.RefusedError](err); ok {
			for _, pe := range re.Prompts {
				refused[pe.Index] = fmt.Errorf("%w: %w", ErrRefused, pe.Err)
			}
			err = nil
		}
		for k, i := range idx {
			switch {
			case err != nil:
				done(i, "", err)
			case refused[k] != nil:
				done(i, "", refused[k])
			case k >= len(out) || len(out[k]) == 0:
				done(i, "", fmt.Errorf("the generator returned no completion for prompt %d of %d", k, len(prompts)))
			default:
				done(i, out[k][0], nil)
			}
		}
		idx, prompts = idx[:0], prompts[:0]
	}
	for i, r := range reqs {
		if err := ctx.Err(); err != nil {
			done(i, "", err)
			continue
		}
		prompt := r.Prompt
		if r.Messages != nil {
			if b.Chat == nil {
				done(i, "", fmt.Errorf("%w: the model has no chat template", ErrRefused))
				continue
			}
			msgs := make([]tokenizer.Message, len(r.Messages))
			for k, m := range r.Messages {
				msgs[k] = tokenizer.Message{Role: m.Role, Content: m.Content}
			}
			var err error
			if prompt, err = b.Chat(msgs); err != nil {
				done(i, "", fmt.Errorf("%w: rendering the chat: %w", ErrRefused, err))
				continue
			}
		}
		if fitter != nil && !fitter.Fits(prompt, maxTokens) {
			done(i, "", fmt.Errorf("%w: the prompt does not fit the model's context with room for %d tokens", ErrRefused, maxTokens))
			continue
		}
		idx, prompts = append(idx, i), append(prompts, prompt)
		if len(prompts) == batch {
			flush()
		}
	}
	flush()
}

// Classify returns the kind of failure an Answerer's error is (one of
// FailureKinds).
func Classify(err error) string {
	if apiErr, ok := errors.AsType[*client.APIError](err); ok {
		switch s := apiErr.StatusCode; {
		case s == http.StatusTooManyRequests:
			return FailRateLimited
		case s == http.StatusRequestTimeout || s == http.StatusGatewayTimeout:
			return FailTimeout
		case s >= 500:
			return FailServer
		case s >= 400:
			return FailRefused
		}
		return FailOther // an error envelope in a 2xx answer
	}
	switch {
	case errors.Is(err, ErrRefused):
		return FailRefused
	case errors.Is(err, client.ErrMalformedResponse):
		return FailMalformed
	case errors.Is(err, context.DeadlineExceeded):
		return FailTimeout
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return FailTimeout
	}
	if httpretry.ConnectionLost(err) {
		return FailConnection
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return FailConnection
	}
	return FailOther
}
