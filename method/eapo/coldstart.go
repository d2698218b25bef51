package eapo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"rlvr/backend"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/task"
	"rlvr/verify"
)

// ColdStart is the consultation's cold start. Each demonstration is an
// episode as training samples them: the training prompt (the grant in its
// system message), one consult action asking one expert of the pool, in
// turn, the whole question, that expert's reply as the environment writes
// it, and a final turn stating the answer the reply gives ("#### X").
// Only the action and the final turn are trained. The demonstrations
// teach the action's form and that a reply is read back; whether an
// expert is right is its own, so a model expert's wrong answers are
// demonstrated as they come, and only the reference expert's replies are
// the dataset's solutions. A reply without an answer to close from, or
// no reply (the expert failed: a local model past its timeout on busy
// cores), leaves the action alone as the demonstration, so that a slow or
// weak expert is asked as often as the reference is.
func (c *Consultation) ColdStart() part.ColdStart {
	return part.ColdStart{Part: PartConsultation, Protocol: "consult", Demonstrations: c.demonstrations, Rate: c.protocolRate, Unaided: c.declined, Unasked: c.consults}
}

// Cold-start metrics: examples left without a demonstration, and examples
// whose demonstration is the action alone, by reason.
const (
	MetricColdStartSkipped = "cold_start/skipped/"
	MetricColdStartPartial = "cold_start/partial/"
	skipLongPrompt         = "long_prompt"
	partialNoAnswer        = "reply_without_answer"
	partialExpertFailed    = "expert_failed"
)

// demonstrations implements part.ColdStart.Demonstrations.
func (c *Consultation) demonstrations(ctx context.Context, sc *method.StepContext, examples []task.Example) ([]backend.Datum, error) {
	if c.Pool == nil || len(c.Pool.Members) == 0 {
		return nil, fmt.Errorf("consultation: the cold start needs an expert pool")
	}
	type demo struct {
		prompt []int32
		query  Query
	}
	var demos []demo
	var asks []expert.Ask
	rng := rand.New(rand.NewPCG(sc.Seed, 0x636f6c64)) // "cold"
	for i, e := range examples {
		p, q, err := c.demoAction(sc, i, e)
		if err != nil {
			return nil, err
		} else if p == nil {
			continue
		}
		m := i % len(c.Pool.Members)
		demos = append(demos, demo{prompt: p, query: q})
		asks = append(asks, expert.Ask{Member: m, Question: c.Format.Question(q), Seed: rng.Uint64(), Example: &examples[i]})
	}
	answers := c.Pool.Answers(ctx, asks)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []backend.Datum
	for k, a := range answers {
		d := demos[k]
		action := sc.Render.Encode(c.Format.Action([]Query{d.query}))
		reply, ok := c.Format.Answer(a.Text)
		final, rule := verify.ExtractWith(reply, verify.ExtractOptions{})
		if a.Failure != "" || !ok || rule == verify.RuleNone {
			// No reply, or one the policy could not close from (a weak
			// model expert's, often), still demonstrates the action: the
			// demonstration is the action alone, so that a pool of such
			// experts is asked as often as the reference is.
			why := partialNoAnswer
			if a.Failure != "" {
				why = partialExpertFailed
			}
			sc.Metrics[MetricColdStartPartial+why]++
			t := rollout.Trajectory{Prompt: d.prompt, Tokens: action, Policy: ones(len(action))}
			out = append(out, method.EpisodeDatum(&t))
			continue
		}
		envTurn, err := sc.Render.EnvTurn(c.Format.Replies([]Reply{{Expert: d.query.Expert, Answer: reply, OK: true}}))
		if err != nil {
			return nil, fmt.Errorf("consultation: rendering a demonstration's reply: %w", err)
		}
		closing := sc.Render.Response("#### " + final)
		t := rollout.Trajectory{Prompt: d.prompt}
		t.Tokens = slices.Concat(action, envTurn, closing)
		t.Policy = slices.Concat(ones(len(action)), make([]bool, len(envTurn)), ones(len(closing)))
		out = append(out, method.EpisodeDatum(&t))
	}
	return out, nil
}

// demoAction is the training prompt of the i-th demonstration's example
// e and the query its action asks: the pool's experts in turn, the whole
// question. A prompt too long for the context is nil, and counted.
func (c *Consultation) demoAction(sc *method.StepContext, i int, e task.Example) ([]int32, Query, error) {
	p, err := sc.Prompt(e, method.Variant{})
	if err != nil || p == nil {
		if err == nil {
			sc.Metrics[MetricColdStartSkipped+skipLongPrompt]++
		}
		return nil, Query{}, err
	}
	return p, Query{Expert: c.Pool.Members[i%len(c.Pool.Members)].Name, Question: strings.TrimSpace(e.Prompt)}, nil
}

// declined implements part.ColdStart.Unaided: the training prompt, a
// consult action asking the pool's experts in turn the whole question, the
// environment's reply declining it (as a step whose p(t) draw declines
// writes it), and the policy's own answer. As the grant is annealed away,
// a declined consultation must be answered by solving alone; a stage that
// demonstrates only accepted ones teaches the policy to consult again.
// The answer is the policy's, right or wrong: the demonstration teaches
// what follows a decline, not the task.
func (c *Consultation) declined(ctx context.Context, sc *method.StepContext, examples []task.Example, answers [][]int32) ([]backend.Datum, error) {
	if c.Pool == nil || len(c.Pool.Members) == 0 {
		return nil, fmt.Errorf("consultation: the cold start needs an expert pool")
	}
	if len(answers) != len(examples) {
		return nil, fmt.Errorf("consultation: %d answers to %d examples", len(answers), len(examples))
	}
	var out []backend.Datum
	for i, e := range examples {
		p, q, err := c.demoAction(sc, i, e)
		if err != nil {
			return nil, err
		} else if p == nil {
			continue
		}
		action := sc.Render.Encode(c.Format.Action([]Query{q}))
		envTurn, err := sc.Render.EnvTurn(c.Format.Replies([]Reply{{Expert: q.Expert}}))
		if err != nil {
			return nil, fmt.Errorf("consultation: rendering a declined reply: %w", err)
		}
		t := rollout.Trajectory{Prompt: p}
		t.Tokens = slices.Concat(action, envTurn, answers[i])
		t.Policy = slices.Concat(ones(len(action)), make([]bool, len(envTurn)), ones(len(answers[i])))
		out = append(out, method.EpisodeDatum(&t))
	}
	return out, nil
}

// protocolRate implements part.ColdStart.Rate: one answer per example to
// the training prompt, at the rollouts' temperature, stopped at the end of
// a consult action; well-formed are those that end in an action that
// parses.
func (c *Consultation) protocolRate(ctx context.Context, sc *method.StepContext, examples []task.Example) (int, int, error) {
	var prompts [][]int32
	for _, e := range examples {
		p, err := sc.Prompt(e, method.Variant{})
		if err != nil {
			return 0, 0, err
		} else if p != nil {
			prompts = append(prompts, p)
		}
	}
	p := sc.Sampling
	p.Stop = append(slices.Clone(p.Stop), c.Format.Stops()...)
	p.IncludeStop = true
	p.Seed = sc.Seed ^ 0x636f6e732d726174 // "cons-rat"
	groups, err := rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, 1, p)
	if err != nil {
		return 0, 0, err
	}
	ok := 0
	for _, g := range groups {
		if _, err := c.Format.Parse(g.Trajectories[0].Text); err == nil {
			ok++
		}
	}
	return ok, len(groups), nil
}

// consults implements part.ColdStart.Unasked: whether text, read up to
// the first end of an action as a policy turn stops there, ends in a
// consult action that parses.
func (c *Consultation) consults(text string) bool {
	end := -1
	for _, s := range c.Format.Stops() {
		if i := strings.Index(text, s); i >= 0 && (end < 0 || i+len(s) < end) {
			end = i + len(s)
		}
	}
	if end < 0 {
		return false
	}
	_, err := c.Format.Parse(text[:end])
	return err == nil
}

// ones is n true values.
func ones(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}
