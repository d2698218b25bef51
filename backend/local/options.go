package local

import (
	"context"
	"fmt"
	"io"
	"strings"

	"rlvr/checkpoint"
	"rlvr/format/tokenizer"
	"rlvr/internal/flagcheck"
	"rlvr/sample"
)

// GenerateOptions are rlvr generate's settings, a field for each of its
// flags (the command binds them and prints the samples): a prompt
// continued by a local model. Validate reports every problem with them
// at once, naming the flags; Run validates, opens the model and samples.
// The options are read, never written.
type GenerateOptions struct {
	Model, Tokenizer string // --model, --tokenizer (default: beside the model)
	Prompt           string // --prompt: the text continued
	Chat             bool   // --chat: Prompt is a user message, rendered with the chat template
	// Params are --max-tokens, --temperature, --top-p, --top-k, --n,
	// --seed and --stop; the model's stop tokens are added to them.
	Params sample.Params

	// Models opens the model, and installs it first when it is one of
	// the world's.
	Models checkpoint.Models
}

// Generated is one sample of a generation.
type Generated struct {
	Finish sample.Finish
	Tokens int    // generated
	Text   string // the generated tokens' text
}

// Streams says Run writes the sample's text as it comes: there is one
// sample, and no stop string that could take text back.
func (o *GenerateOptions) Streams() bool { return max(o.Params.N, 1) == 1 && len(o.Params.Stop) == 0 }

// Validate reports every problem with the options at once, each naming
// its flag.
func (o *GenerateOptions) Validate() error {
	var c flagcheck.Check
	c.Error("model", o.Models.Check(o.Model))
	if o.Tokenizer != "" {
		c.File("tokenizer", o.Tokenizer)
	}
	p := o.Params
	c.Sampling(p.Temperature, p.TopP, p.TopK, p.Stop, "")
	c.IntIn("max-tokens", p.MaxTokens, 1, flagcheck.MaxNewTokens)
	c.IntIn("n", p.N, 1, flagcheck.MaxSamples)
	return c.Err()
}

// Run validates the options, opens the model and samples the prompt's
// continuations. When the options stream (Streams), the prompt and then
// each token's text as it comes are written to w.
func (o *GenerateOptions) Run(ctx context.Context, w io.Writer) ([]Generated, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	l, err := o.Models.Open(o.Model, o.Tokenizer)
	if err != nil {
		return nil, err
	}
	text := o.Prompt
	if o.Chat {
		if l.Chat == nil {
			return nil, fmt.Errorf("%s has no chat template", l.Name)
		}
		if text, err = l.Chat([]tokenizer.Message{{Role: "user", Content: o.Prompt}}); err != nil {
			return nil, err
		}
	}
	p := o.Params
	p.StopTokens = l.StopTokens
	req := sample.Request{Prompt: l.Encode(text), Params: p}
	switch n := len(req.Prompt); {
	case n == 0:
		return nil, fmt.Errorf("--prompt is empty, and %s does not start prompts with a BOS token: give a prompt", l.Name)
	case n >= l.Model.Config.MaxSeq:
		return nil, fmt.Errorf("--prompt is %d tokens, leaving no room in the context of %d", n, l.Model.Config.MaxSeq)
	}
	if o.Streams() {
		// Write each token's text as it comes: decode everything so far
		// and write what is new.
		var toks []int32
		printed := 0
		fmt.Fprint(w, o.Prompt)
		req.OnToken = func(_ int, tok int32, _ float32) {
			toks = append(toks, tok)
			s := l.Decode(toks)
			if len(s) > printed && !strings.HasSuffix(s, "\uFFFD") {
				fmt.Fprint(w, s[printed:])
				printed = len(s)
			}
		}
	}
	res, err := NewSampler(l.Model, l.Tokenizer).Sample(ctx, []sample.Request{req})
	if err != nil {
		return nil, err
	}
	out := make([]Generated, len(res[0]))
	for i, c := range res[0] {
		out[i] = Generated{Finish: c.Finish, Tokens: len(c.Tokens), Text: l.Decode(c.Tokens)}
	}
	return out, nil
}
