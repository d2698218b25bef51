package expert

import (
	"context"
	"errors"
	"fmt"

	"rlvr/eval"
	"rlvr/format/tokenizer"
	"rlvr/sample"
)

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
