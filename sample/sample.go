// Package sample is the contract of generation that every sampler of rlvr
// honours, the local one and a remote one alike: a request's parameters
// (greedy or temperature sampling with top-k and top-p, stop tokens and
// stop strings, several samples per prompt, a seed), a completion with the
// sampler's logprob of every token and why it ended, the stop rules that
// end it (Completion.Add, Replay) and the seeding of batched prompts. The
// OpenAI server and clients, rollouts and evaluation speak it without
// depending on the engine; backend/local runs it on engine/sampler.
package sample

import (
	"fmt"
	"strings"
)

// Params control one request's generation. The zero value of each field
// means what its comment says.
type Params struct {
	MaxTokens int // new tokens at most; 0 means 256
	// Temperature scales the logits; 0 means greedy (argmax), and so does
	// a positive temperature too small to divide the logits by (their
	// largest, divided by it, overflows float32: below about 1e-38 for
	// logits of order 1).
	Temperature float32
	TopP        float32 // nucleus mass to keep; 0 or 1 keeps all
	TopK        int     // keep the k most likely tokens; 0 keeps all
	// StopTokens end a sample when generated (the token is kept, as an
	// end-of-sequence token is).
	StopTokens []int32
	// Stop strings end a sample when the decoded text contains one; the
	// text is cut before it and the tokens that completed it are dropped,
	// unless IncludeStop is set.
	Stop []string
	// IncludeStop keeps a stop string: the text is cut after it and the
	// token that completed it is kept with its logprob (multi-turn
	// rollouts need every token the policy sampled).
	IncludeStop bool
	N           int    // samples per prompt; 0 means 1
	Seed        uint64 // sampling seed; the same seed gives the same samples
}

// PromptSeed is the sampling seed of the prompt at index i of a batch
// sampled with seed: distinct per prompt, fixed per run. A caller that
// splits prompts into several batches seeds the batch whose first prompt
// is the first-th of all with PromptSeed(seed, first), so that a prompt's
// samples depend on its index among all prompts, not on the split.
func PromptSeed(seed uint64, i int) uint64 { return seed + uint64(i)*1_000_003 }

// Validate reports every out-of-range field at once.
func (p *Params) Validate() error {
	var errs []string
	if p.MaxTokens < 0 {
		errs = append(errs, fmt.Sprintf("max_tokens %d is negative", p.MaxTokens))
	}
	if p.Temperature < 0 || p.Temperature != p.Temperature {
		errs = append(errs, fmt.Sprintf("temperature %v is negative or NaN", p.Temperature))
	}
	if p.TopP < 0 || p.TopP > 1 || p.TopP != p.TopP {
		errs = append(errs, fmt.Sprintf("top_p %v is outside [0, 1]", p.TopP))
	}
	if p.TopK < 0 {
		errs = append(errs, fmt.Sprintf("top_k %d is negative", p.TopK))
	}
	if p.N < 0 {
		errs = append(errs, fmt.Sprintf("n %d is negative", p.N))
	}
	for i, s := range p.Stop {
		if s == "" {
			errs = append(errs, fmt.Sprintf("stop[%d] is empty", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sample: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Request is one prompt and how to continue it.
type Request struct {
	Prompt []int32
	Params Params
	// OnToken, if set, is called for every token as it is accepted, from
	// the sampling goroutine, before Sample returns: sample is the index
	// among the request's N samples. Streaming servers use it. Tokens
	// dropped by a stop string are never reported; text already streamed
	// is not taken back, so a streaming client should hold back text that
	// could begin a stop string (see HoldBack).
	OnToken func(sample int, token int32, logprob float32)
}

// Finish says why a sample ended.
type Finish string

const (
	FinishStop   Finish = "stop"   // a stop token or stop string
	FinishLength Finish = "length" // MaxTokens reached, or the model's context
)

// Completion is one sample: the new tokens (the prompt excluded), the
// sampler's logprob of each, the decoded text, and why it ended.
type Completion struct {
	Tokens   []int32
	Logprobs []float32
	Text     string
	Finish   Finish
	// StopString is the stop string that ended the sample, if one did.
	StopString string
}

// Decoder turns tokens into text, for stop strings and Completion.Text.
type Decoder interface {
	Decode(ids []int32) string
}

// HoldBack returns how many trailing bytes of text could be the start of
// one of the stop strings, so a streaming writer can hold them back until
// the next token decides.
func HoldBack(text string, stop []string) int {
	hold := 0
	for _, s := range stop {
		for k := min(len(s)-1, len(text)); k > hold; k-- {
			if strings.HasSuffix(text, s[:k]) {
				hold = k
				break
			}
		}
	}
	return hold
}
