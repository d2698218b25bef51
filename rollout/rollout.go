// Package rollout produces trajectories: a policy's samples for a prompt,
// in groups, and multi-turn episodes where an environment (experts, tools)
// answers between the policy's turns. Everything stays in tokens: an
// episode's history is the concatenation of the tokens each side produced,
// never re-tokenized from text, and a per-token mask says which tokens the
// policy produced (trained on) and which came from the environment (not).
package rollout

import (
	"context"
	"fmt"
	"slices"

	"rlvr/sample"
)

// Sampler is what rollouts need from a policy: rlvr's local sampler, or a
// client of a remote inference server that returns tokens and logprobs.
type Sampler interface {
	Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error)
}

// Decoder turns tokens into text, to show responses to verifiers and
// environments.
type Decoder interface {
	Decode(ids []int32) string
}

// Trajectory is one episode after its prompt: every token, whether the
// policy produced it, and the sampler's logprob of each policy token.
type Trajectory struct {
	Prompt   []int32
	Tokens   []int32   // the response: policy and environment tokens in order
	Policy   []bool    // per token of Tokens: produced by the policy
	Logprobs []float32 // per token of Tokens: the sampler's logprob (0 for environment tokens)
	Text     string    // Tokens decoded
	// PolicyText is the policy's tokens alone, decoded: what a verifier
	// reads, so an expert's reply in the history never counts as the
	// policy's answer.
	PolicyText string
	Finish     sample.Finish
	Turns      int // policy turns taken
	// Counts are what the environment did in this episode (consultations,
	// replies, failures…), by name.
	Counts map[string]float64
}

// PolicyTokens counts the tokens the policy produced.
func (t *Trajectory) PolicyTokens() int {
	n := 0
	for _, p := range t.Policy {
		if p {
			n++
		}
	}
	return n
}

// Group is G trajectories sampled for one prompt.
type Group struct {
	Prompt       []int32
	Trajectories []Trajectory
}

// SampleGroups samples g trajectories for each prompt in one batch
// (single-turn). Each prompt's samples share its seed.
func SampleGroups(ctx context.Context, s Sampler, dec Decoder, prompts [][]int32, g int, p sample.Params) ([]Group, error) {
	reqs := make([]sample.Request, len(prompts))
	for i, pr := range prompts {
		reqs[i] = sample.Request{Prompt: pr, Params: p}
		reqs[i].Params.N = g
		reqs[i].Params.Seed = sample.PromptSeed(p.Seed, i)
	}
	out, err := s.Sample(ctx, reqs)
	if err != nil {
		return nil, err
	}
	groups := make([]Group, len(prompts))
	for i, cs := range out {
		groups[i].Prompt = prompts[i]
		for _, c := range cs {
			groups[i].Trajectories = append(groups[i].Trajectories, single(prompts[i], c, dec))
		}
	}
	return groups, nil
}

func single(prompt []int32, c sample.Completion, dec Decoder) Trajectory {
	t := Trajectory{Prompt: prompt, Tokens: c.Tokens, Logprobs: c.Logprobs, Finish: c.Finish, Turns: 1, Policy: make([]bool, len(c.Tokens))}
	for i := range t.Policy {
		t.Policy[i] = true
	}
	t.Text = c.Text
	if t.Text == "" && dec != nil {
		t.Text = dec.Decode(c.Tokens)
	}
	t.PolicyText = t.Text
	return t
}

// Call is a policy turn that ended on one of the turn stops: the
// environment's cue to answer.
type Call struct {
	Episode int // group-major index: prompt i's k-th sample is i·g+k
	Turn    int // the 0-based policy turn that made the call
	// Text is the episode so far, prompt excluded: what the policy and the
	// environment wrote, in order.
	Text string
}

// Response is the environment's answer to a Call.
type Response struct {
	// Tokens are appended to the history, read by the policy and not
	// trained on: the environment renders its own turn (a chat model's
	// template tokens included), so nothing is re-tokenized.
	Tokens []int32
	// Done ends the episode without appending anything.
	Done bool
	// Counts are added to the trajectory's Counts (queries, replies,
	// failures by kind, seconds waited…).
	Counts map[string]float64
}

// EnvUnanswered counts, in a Trajectory's Counts, the calls to the
// environment that the turn or token budget left unanswered: the episode
// ended on them.
const EnvUnanswered = "unanswered"

// Environment answers a policy between turns of a multi-turn episode.
type Environment interface {
	// Respond answers every call of one turn, all live episodes at once,
	// so that it can dispatch them concurrently. It returns one Response
	// per call, in order. An error ends the rollout: a failure the
	// episode should survive (an expert that timed out) is a Response.
	Respond(ctx context.Context, calls []Call) ([]Response, error)
}

// Episodes runs multi-turn episodes: each prompt's g samples take turns
// with env until the policy ends without calling it, maxTurns policy turns
// are used, or the context is full. A turn stops on any of turnStops
// (e.g. the end of a consultation line), which the environment then
// answers. All live episodes advance together: one batched Sample call and
// one Respond call per turn. p.MaxTokens bounds each turn; maxTokens
// bounds a whole response.
func Episodes(ctx context.Context, s Sampler, dec Decoder, env Environment, prompts [][]int32, g int, p sample.Params, turnStops []string, maxTurns, maxTokens int) ([]Group, error) {
	if maxTurns < 1 {
		return nil, fmt.Errorf("rollout: maxTurns %d < 1", maxTurns)
	}
	// episode is a live trajectory with its id (group-major index, what the
	// environment sees) and sampling seed.
	type episode struct {
		t    *Trajectory
		id   int
		seed uint64
	}
	groups := make([]Group, len(prompts))
	var live []episode
	for i, pr := range prompts {
		groups[i].Prompt = pr
		groups[i].Trajectories = make([]Trajectory, g)
		for k := range groups[i].Trajectories {
			t := &groups[i].Trajectories[k]
			t.Prompt, t.Counts = pr, map[string]float64{}
			live = append(live, episode{t: t, id: len(live), seed: sample.PromptSeed(p.Seed, i) + uint64(k)*7919})
		}
	}
	for turn := 0; turn < maxTurns && len(live) > 0; turn++ {
		reqs := make([]sample.Request, len(live))
		for i, e := range live {
			t := e.t
			q := p
			q.N = 1
			q.Seed = e.seed + uint64(turn)*104_729
			q.Stop = append(append([]string(nil), p.Stop...), turnStops...)
			q.IncludeStop = true
			if left := maxTokens - len(t.Tokens); left < q.MaxTokens || q.MaxTokens == 0 {
				q.MaxTokens = left
			}
			reqs[i] = sample.Request{Prompt: append(append([]int32(nil), t.Prompt...), t.Tokens...), Params: q}
		}
		out, err := s.Sample(ctx, reqs)
		if err != nil {
			return nil, err
		}
		var calling []episode
		var calls []Call
		for i, e := range live {
			t := e.t
			c := out[i][0]
			t.Turns++
			// The turn's stop string stays in the history (IncludeStop):
			// it is the policy's call to the environment, sampled with
			// real logprobs.
			t.appendPolicy(c.Tokens, c.Logprobs)
			t.Finish = c.Finish
			called := c.StopString != "" && slices.Contains(turnStops, c.StopString)
			if !called {
				continue
			}
			if len(t.Tokens) >= maxTokens || turn == maxTurns-1 {
				// A call the budget leaves unanswered still ends the
				// episode on the policy's call.
				t.Counts[EnvUnanswered]++
				continue
			}
			calling = append(calling, e)
			calls = append(calls, Call{Episode: e.id, Turn: turn, Text: dec.Decode(t.Tokens)})
		}
		if len(calls) == 0 {
			break
		}
		resps, err := env.Respond(ctx, calls)
		if err != nil {
			return nil, err
		}
		if len(resps) != len(calls) {
			return nil, fmt.Errorf("rollout: the environment answered %d of %d calls", len(resps), len(calls))
		}
		var next []episode
		for i, e := range calling {
			t, r := e.t, resps[i]
			for k, v := range r.Counts {
				t.Counts[k] += v
			}
			if r.Done {
				continue
			}
			t.Tokens = append(t.Tokens, r.Tokens...)
			t.Policy = append(t.Policy, make([]bool, len(r.Tokens))...)
			t.Logprobs = append(t.Logprobs, make([]float32, len(r.Tokens))...)
			if len(t.Tokens) < maxTokens {
				next = append(next, e)
			}
		}
		live = next
	}
	// Texts once, at the end: the calls decoded what the environment read.
	for i := range groups {
		for k := range groups[i].Trajectories {
			t := &groups[i].Trajectories[k]
			t.Text = dec.Decode(t.Tokens)
			t.PolicyText = dec.Decode(t.policyTokens())
		}
	}
	return groups, nil
}

// policyTokens are the tokens the policy produced, in order.
func (t *Trajectory) policyTokens() []int32 {
	out := make([]int32, 0, len(t.Tokens))
	for i, id := range t.Tokens {
		if t.Policy[i] {
			out = append(out, id)
		}
	}
	return out
}

func (t *Trajectory) appendPolicy(toks []int32, lps []float32) {
	t.Tokens = append(t.Tokens, toks...)
	t.Logprobs = append(t.Logprobs, lps...)
	for range toks {
		t.Policy = append(t.Policy, true)
	}
}
