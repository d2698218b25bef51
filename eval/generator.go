package eval

import (
	"context"
	"fmt"

	api "rlvr/api/openai"
	"rlvr/checkpoint"
	client "rlvr/client/openai"
	"rlvr/sample"
)

// Generator produces n completions (text) per prompt. Local models and
// OpenAI-compatible endpoints both satisfy it.
type Generator interface {
	Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error)
}

// Local generates with a model in this process, all prompts in one batch.
type Local struct {
	Model   *checkpoint.Loaded // its tokenizer side encodes and decodes
	sampler Sampler
}

// Sampler generates token continuations: rlvr's sampler, or a training
// backend's.
type Sampler interface {
	Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error)
}

// NewLocal returns a generator over a loaded model.
func NewLocal(l *checkpoint.Loaded) *Local {
	return &Local{Model: l, sampler: sample.New(l.Model, l.Tokenizer)}
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
		reqs[i].Params.Seed = p.Seed + uint64(i)*1_000_003 // distinct per prompt, fixed per run
	}
	out, err := g.sampler.Sample(ctx, reqs)
	if err != nil {
		return nil, err
	}
	texts := make([][]string, len(out))
	for i, cs := range out {
		for _, c := range cs {
			texts[i] = append(texts[i], g.Model.Decode(c.Tokens))
		}
	}
	return texts, nil
}

// Remote generates with an OpenAI-compatible endpoint's /v1/completions,
// one request per prompt, as many in flight as the client allows.
type Remote struct {
	Client *client.Client
}

// Generate implements Generator.
func (g *Remote) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	texts := make([][]string, len(prompts))
	errs := make(chan error, len(prompts))
	for i, text := range prompts {
		go func() {
			n, temp, maxTok := max(p.N, 1), float64(p.Temperature), p.MaxTokens
			seed := int64(p.Seed) + int64(i)*1_000_003
			req := &api.CompletionRequest{Prompt: api.Prompt{Texts: []string{text}}, N: &n, Temperature: &temp, Seed: &seed, Stop: p.Stop}
			if maxTok > 0 {
				req.MaxTokens = &maxTok
			}
			if p.TopP > 0 && p.TopP < 1 {
				tp := float64(p.TopP)
				req.TopP = &tp
			}
			res, err := g.Client.Complete(ctx, req)
			if err != nil {
				errs <- fmt.Errorf("prompt %d: %w", i, err)
				return
			}
			for _, c := range res.Choices {
				texts[i] = append(texts[i], c.Text)
			}
			errs <- nil
		}()
	}
	var first error
	for range prompts {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return texts, first
}
