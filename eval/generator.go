package eval

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	api "rlvr/api/openai"
	client "rlvr/client/openai"

	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/sample"
)

// Generator produces n completions (text) per prompt. Local models and
// OpenAI-compatible endpoints both satisfy it.
//
// A generator that refuses some prompts of a batch for reasons of their
// own, and answers the others, returns the answers, none for the refused
// prompts, and a *RefusedError naming them. Any other error fails the
// whole batch; an error about one prompt is then a *PromptError.
type Generator interface {
	Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error)
}

// PromptFitter is a Generator that knows its model's context. Run asks it
// about every prompt before generating, and skips the examples whose
// prompts do not fit.
type PromptFitter interface {
	// Fits reports whether prompt leaves room in the context for
	// maxTokens generated tokens.
	Fits(prompt string, maxTokens int) bool
}

// A Streamer is a Generator that can bound the sequences it decodes at
// once by itself, starting a prompt's samples as earlier ones end
// (continuous batching). Run then gives it a whole pass in one call, so
// that no batch of prompts waits on its slowest sample.
type Streamer interface {
	// Streaming returns the generator with at most n sequences in flight,
	// and false if it cannot bound them itself.
	Streaming(n int) (Generator, bool)
}

// PromptError is a generator's error about one prompt of a batch.
type PromptError struct {
	Index int // the prompt's position in the batch
	Err   error
}

// Error names the prompt by its position.
func (e *PromptError) Error() string { return fmt.Sprintf("prompt %d: %v", e.Index, e.Err) }

// Unwrap returns e.Err.
func (e *PromptError) Unwrap() error { return e.Err }

// RefusedError says which prompts of a batch a generator refused, such as
// prompts an endpoint found too long for its model, while it answered the
// others.
type RefusedError struct {
	Prompts []*PromptError // in batch order
}

// Error lists the refused prompts.
func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "eval: %d prompts refused", len(e.Prompts))
	for i, p := range e.Prompts {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Local generates with a model in this process, all prompts in one batch,
// or at most a given number of sequences at a time (Streaming).
type Local struct {
	Model   *checkpoint.Loaded // its tokenizer side encodes and decodes
	sampler Sampler
	streams int // sequences in flight at most; 0 for all
}

// Sampler generates token continuations: rlvr's sampler, or a training
// backend's.
type Sampler interface {
	Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error)
}

// A StreamingSampler is a Sampler that can keep at most streams sequences
// in flight, starting a request's samples as earlier ones end.
type StreamingSampler interface {
	SampleStreaming(ctx context.Context, reqs []sample.Request, streams int) ([][]sample.Completion, error)
}

// Streaming implements Streamer when the generator's sampler streams.
func (g *Local) Streaming(n int) (Generator, bool) {
	if _, ok := g.sampler.(StreamingSampler); !ok || n <= 0 {
		return g, false
	}
	bounded := *g
	bounded.streams = n
	return &bounded, true
}

// Fits implements PromptFitter: the prompt's tokens and maxTokens must fit
// in the model's MaxSeq. A Local without a model lets every prompt through.
func (g *Local) Fits(prompt string, maxTokens int) bool {
	if g.Model == nil || g.Model.Model == nil {
		return true
	}
	return len(g.Model.Encode(prompt))+max(maxTokens, 0) <= g.Model.Model.Config.MaxSeq
}

// NewLocal returns a generator over a loaded model that this process only
// samples from: it freezes l.Model in its precision (model.Model.Freeze),
// releasing the float32 matrices its packed copy replaces, so the model
// can no longer be trained or saved. A training run evaluates through its
// own sampler (NewSampled).
func NewLocal(l *checkpoint.Loaded) *Local {
	return &Local{Model: l, sampler: local.NewFrozenSampler(l.Model, l.Tokenizer)}
}

// NewSampled returns a generator over any sampler of the model whose
// tokenizer side l holds: a training run evaluates through its backend's
// sampler this way.
func NewSampled(s Sampler, l *checkpoint.Loaded) *Local { return &Local{Model: l, sampler: s} }

// Generate implements Generator. Sampling stops at the model's stop tokens
// as well as p's.
func (g *Local) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	p.StopTokens = append(append([]int32(nil), p.StopTokens...), g.Model.StopTokens...)
	reqs := make([]sample.Request, len(prompts))
	for i, text := range prompts {
		reqs[i] = sample.Request{Prompt: g.Model.Encode(text), Params: p}
		reqs[i].Params.Seed = sample.PromptSeed(p.Seed, i)
	}
	var out [][]sample.Completion
	var err error
	if g.streams > 0 { // set by Streaming, for a streaming sampler only
		out, err = g.sampler.(StreamingSampler).SampleStreaming(ctx, reqs, g.streams)
	} else {
		out, err = g.sampler.Sample(ctx, reqs)
	}
	if err != nil {
		return nil, err
	}
	texts := make([][]string, len(out))
	for i, cs := range out {
		for _, c := range cs {
			text := c.Text
			if c.StopString == "" {
				text = g.Model.Decode(c.Tokens)
			}
			// A stop string's text is cut before it; its first tokens
			// may still be among c.Tokens.
			texts[i] = append(texts[i], text)
		}
	}
	return texts, nil
}

// Remote generates with an OpenAI-compatible endpoint's /v1/completions,
// or its /v1/chat/completions when Chat is set, one request per prompt, as
// many in flight as the client allows. Prompts are not checked against the
// model's context beforehand: the endpoint refuses those that do not fit.
type Remote struct {
	Client *client.Client
	// Chat sends each prompt as the user's message of a chat, which the
	// endpoint renders through its model's chat template. False completes
	// prompts as text.
	Chat bool
	// System is the system message before each chat's user message; ""
	// sends none. Only chats use it.
	System string
}

// Generate implements Generator. A prompt the endpoint refuses as a bad
// request (400, 413 or 422: too long for the model, say) is reported in a
// *RefusedError with the other prompts' completions; any other failure,
// such as a network error, a refused key or an unknown model, fails the
// batch with a *PromptError.
func (g *Remote) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	texts := make([][]string, len(prompts))
	errs := make(chan *PromptError, len(prompts))
	for i, text := range prompts {
		go func() {
			n, temp, maxTok := max(p.N, 1), float64(p.Temperature), p.MaxTokens
			seed := int64(sample.PromptSeed(p.Seed, i))
			req := &api.CompletionRequest{Prompt: api.Prompt{Texts: []string{text}}, N: &n, Temperature: &temp, Seed: &seed, Stop: p.Stop}
			if maxTok > 0 {
				req.MaxTokens = &maxTok
			}
			if p.TopP > 0 && p.TopP < 1 {
				tp := float64(p.TopP)
				req.TopP = &tp
			}
			var err error
			if g.Chat {
				texts[i], err = g.chat(ctx, text, req)
			} else {
				var res *api.CompletionResponse
				if res, err = g.Client.Complete(ctx, req); err == nil {
					for _, c := range res.Choices {
						texts[i] = append(texts[i], c.Text)
					}
				}
			}
			if err != nil {
				errs <- &PromptError{Index: i, Err: err}
				return
			}
			errs <- nil
		}()
	}
	var fatal *PromptError
	refused := &RefusedError{}
	for range prompts {
		switch err := <-errs; {
		case err == nil:
		case refusal(err.Err):
			refused.Prompts = append(refused.Prompts, err)
		case fatal == nil || err.Index < fatal.Index:
			fatal = err
		}
	}
	if fatal != nil {
		return texts, fatal
	}
	if len(refused.Prompts) > 0 {
		slices.SortFunc(refused.Prompts, func(a, b *PromptError) int { return a.Index - b.Index })
		return texts, refused
	}
	return texts, nil
}

// chat asks for the completion req describes as a chat: System, then
// prompt as the user's message.
func (g *Remote) chat(ctx context.Context, prompt string, req *api.CompletionRequest) ([]string, error) {
	var msgs []api.Message
	if g.System != "" {
		msgs = append(msgs, api.Message{Role: "system", Content: g.System})
	}
	msgs = append(msgs, api.Message{Role: "user", Content: prompt})
	res, err := g.Client.Chat(ctx, &api.ChatCompletionRequest{Messages: msgs, N: req.N, Temperature: req.Temperature,
		TopP: req.TopP, MaxTokens: req.MaxTokens, Stop: req.Stop, Seed: req.Seed})
	if err != nil {
		return nil, err
	}
	var texts []string
	for _, c := range res.Choices {
		texts = append(texts, c.Message.Content)
	}
	return texts, nil
}

// refusal reports whether err is an endpoint's refusal of one request for
// what it asks, which other requests need not share.
func refusal(err error) bool {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}
