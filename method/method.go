package method

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
)

// Method is one training step's data side: it turns the step's examples
// into a batch of loss terms. How examples become trajectories (prompt
// variants, single- or multi-turn episodes, extra generation passes over
// the current policy), how they are scored and shaped and which terms train
// is the method's business; the loop only runs what Step returns. The data
// still flows one way: Step calls down to the sampler and the verifier in
// sc, never back into the loop.
type Method interface {
	Step(ctx context.Context, sc *StepContext, examples []task.Example) (*Batch, error)
}

// Stateful is a method, or a part of one, that keeps something across steps
// (a buffer, a schedule, a counter). The loop writes State with every
// checkpoint and hands it back to Restore on resume, so a resumed run
// continues exactly. Random draws should derive from StepContext.Seed rather than
// live in the state.
type Stateful interface {
	State() (json.RawMessage, error)
	Restore(json.RawMessage) error
}

// Exhibitor is a method, or a part of one, with examples of its latest
// work to show beside each evaluation (MEL's latest validated
// meta-experience); the loop writes them to the run's samples.jsonl, which
// rlvr report shows.
type Exhibitor interface {
	Exhibits() []Exhibit
}

// Exhibit is one text a part shows, under a title naming its kind.
type Exhibit struct {
	Title, Text string
}

// Variant is one way to ask a question: MEML-GRPO's expert prompt P_i, or
// the plain prompt (the zero Variant).
type Variant struct {
	Name string // label in metrics, e.g. "E1"; "" for the plain prompt
	// System follows the run's system prompt in a chat model's (an
	// expert's persona; "" adds nothing); Suffix follows a plain-text
	// prompt (the world's "@E1\n").
	System, Suffix string
	// SingleTurn marks a prompt whose answer is never an episode, such as
	// MEL's reflection and replay: it goes without the grant of the
	// consult action, which no one would answer.
	SingleTurn bool
}

// VariantKey is the task.Example.Meta key naming the one variant an
// example's solution belongs to: an expert's answer from MEML-GRPO's
// D_ME is trained behind that expert's prompt only.
const VariantKey = "variant"

// Renderer turns examples and text into the policy's tokens and back.
type Renderer interface {
	// Prompt renders an example under a variant: through the chat template
	// (with the run's system prompt, then the variant's) when the model
	// has one, as plain text with the variant's suffix otherwise. It fails with
	// an error wrapping ErrPromptTooLong when no room is left to answer.
	Prompt(e task.Example, v Variant) ([]int32, error)
	// Response is a reference answer as the policy should write it: the
	// text's tokens and the end-of-turn (or end-of-sequence) token.
	Response(text string) []int32
	// EnvTurn renders an environment's turn inside a response (experts'
	// replies to a consultation): for a chat model, the end of the
	// policy's turn, a user message holding text, and the start of the
	// policy's next turn, all through the chat template; the text's tokens
	// otherwise.
	EnvTurn(text string) ([]int32, error)
	Encode(text string) []int32
	Decode(ids []int32) string
}

// ErrPromptTooLong marks a prompt that leaves no room in the context.
var ErrPromptTooLong = fmt.Errorf("prompt too long for the context")

// StepContext is what a method may use during one step. The loop builds a fresh
// StepContext per step.
type StepContext struct {
	Policy rollout.Sampler // samples from the current weights
	Render Renderer
	// Reward verifies a response: 1 when its answer is the gold one. ok is
	// false when the example's gold answer cannot be read.
	Reward func(e task.Example, response string) (reward float64, ok bool)
	// Sampling holds the rollouts' budget, temperature and stop tokens.
	Sampling sample.Params
	Step     int    // 0-based step
	Seed     uint64 // this step's seed: every random draw of the step derives from it
	// More draws n further training examples (DAPO's dynamic sampling).
	More func(n int) ([]task.Example, error)
	// Reference scores sequences under the frozen starting model; nil when
	// no KL to it is configured.
	Reference backend.Logprober
	// Metrics collects the step's metrics; a method adds its own names
	// ("loss/…", "expert/E1/…") beside the loop's.
	Metrics Metrics
}

// Prompt renders an example under a variant; a prompt too long for the
// context is skipped (nil, nil) and counted in data/skipped_long_prompts.
func (sc *StepContext) Prompt(e task.Example, v Variant) ([]int32, error) {
	p, err := sc.Render.Prompt(e, v)
	if errors.Is(err, ErrPromptTooLong) {
		sc.Metrics["data/skipped_long_prompts"]++
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("method: example %s: %w", e.ID, err)
	}
	return p, nil
}

// Metrics are one step's named values, one line of metrics.jsonl.
type Metrics map[string]float64

// Set records a value.
func (m Metrics) Set(name string, v float64) { m[name] = v }

// Flag records a boolean as 0 or 1.
func (m Metrics) Flag(name string, b bool) {
	m[name] = 0
	if b {
		m[name] = 1
	}
}

// Batch is what a step trains: loss terms whose gradients sum into one
// optimizer step per mini-batch (L = L_GRPO + λ1·L_KL + λ2·L_SFT is one
// objective), except terms that declare a learning rate of their own.
type Batch struct {
	Terms []Term
}

// Term is one loss over some datums: the loop splits Data into
// mini-batches, folds Aggregation into their weights, and sums Loss over
// them; the coefficients inside Loss are the term's λ.
type Term struct {
	Name        string // metrics label: loss/<name>
	Data        []backend.Datum
	Loss        backend.Loss
	Aggregation backend.Aggregation
	Norm        float32 // Dr.GRPO's constant, for seq-mean-token-sum-norm
	// LR, when positive, trains this term in an optimizer step of its own
	// at this learning rate, after the step's shared updates, with AdamW
	// moments and a step count of its own (backend.OptimParams.State, named
	// after the term), so the two objectives do not mix their moments. 0
	// joins the shared gradient.
	LR float64
}

// Scored is a group of trajectories for one example under one variant,
// with their rewards.
type Scored struct {
	Example task.Example
	Variant Variant
	rollout.Group
	Rewards []float64 // shaped rewards (penalties, KL) the method trains on
	Correct []bool    // whether each answer verified, before shaping
}

// PolicyDatum makes the datum of a trajectory: the prompt is context, and
// the policy's tokens carry weight 1 (environment tokens 0), the given
// per-token advantage, and the sampler's logprobs.
func PolicyDatum(t *rollout.Trajectory, adv float32) backend.Datum {
	full := append(append([]int32(nil), t.Prompt...), t.Tokens...)
	n := len(full) - 1
	d := backend.Datum{Tokens: full[:n], Targets: full[1:], Weights: make([]float32, n),
		Advantages: make([]float32, n), SamplerLogprobs: make([]float32, n)}
	off := len(t.Prompt) - 1 // position predicting the first response token
	for i := range t.Tokens {
		if t.Policy[i] {
			d.Weights[off+i] = 1
			d.Advantages[off+i] = adv
			d.SamplerLogprobs[off+i] = t.Logprobs[i]
		}
	}
	return d
}

// EpisodeDatum trains NLL on the policy's part of a written episode:
// each of t.Tokens where t.Policy is true carries weight 1, the prompt and
// the environment's tokens 0. A demonstration (a cold start's) is such an
// episode.
func EpisodeDatum(t *rollout.Trajectory) backend.Datum {
	d := ResponseDatum(t.Prompt, t.Tokens)
	off := len(t.Prompt) - 1
	for i, p := range t.Policy {
		if !p {
			d.Weights[off+i] = 0
		}
	}
	return d
}

// ResponseDatum trains NLL on a response after a prompt: the response's
// positions carry weight 1, the prompt's 0.
func ResponseDatum(prompt, response []int32) backend.Datum {
	seq := append(append([]int32(nil), prompt...), response...)
	n := len(seq) - 1
	w := make([]float32, n)
	for i := len(prompt) - 1; i < n; i++ {
		w[i] = 1
	}
	return backend.Datum{Tokens: seq[:n], Targets: seq[1:], Weights: w}
}
