package eapo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
)

// Workflow runs EAPO's consultation loop at test time, without training:
// the expert-assisted workflow (a pool of other models) and
// self-collaboration (copies of the policy). Each prompt becomes episodes
// in which the policy may consult the pool; with Questions, every episode
// opens with each expert asked the whole question, and the policy answers
// after their replies. It implements eval.Generator, and is safe for
// concurrent use.
type Workflow struct {
	Consultation *Consultation
	Policy       rollout.Sampler
	Render       method.Renderer
	// Encode turns a prompt as the evaluation sends it into the policy's
	// tokens; Stop are the tokens that end the policy's turn.
	Encode func(text string) []int32
	Stop   []int32
	// Questions, when set, opens every episode: it maps a prompt as the
	// evaluation sends it to the question each expert is asked.
	Questions map[string]string
	// Examples, when set, maps a prompt as the evaluation sends it to its
	// example, which a reference expert answers from; without it, such an
	// expert has nothing to answer from (expert.FailNoSolution).
	Examples map[string]task.Example

	mu                                sync.Mutex
	episodes, consulted, asked, fails int
}

// TestTime is the consultation of a resolved section as at the first step
// of its run of runSteps, with every reply accepted: the pool's answers
// always reach the policy, within the first step's turn budget.
func (k *ConsultationConfig) TestTime(runSteps int, chat bool, pool *expert.Pool) *Consultation {
	c := k.Consultation(runSteps, chat, pool)
	c.Accept = Schedule{Kind: optim.Constant, Start: 1}
	c.Turns = Schedule{Kind: optim.Constant, Start: float64(c.TurnBudget(0))}
	return c
}

// Generate implements eval.Generator.
func (w *Workflow) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	c := w.Consultation
	p.StopTokens = append(append([]int32(nil), p.StopTokens...), w.Stop...)
	toks := make([][]int32, len(prompts))
	for i, text := range prompts {
		toks[i] = w.Encode(text)
	}
	var examples []task.Example
	if w.Examples != nil {
		examples = make([]task.Example, len(prompts))
		for i, text := range prompts {
			examples[i] = w.Examples[text]
		}
	}
	if w.Questions != nil {
		queries := make([][]Query, len(prompts))
		for i, text := range prompts {
			q, ok := w.Questions[text]
			if !ok {
				return nil, fmt.Errorf("eapo: prompt %d is not one of the examples'", i)
			}
			for _, name := range c.Pool.Names() {
				queries[i] = append(queries[i], Query{Expert: name, Question: q})
			}
		}
		opening, err := c.Opening(ctx, w.Render, queries, examples, p.Seed)
		if err != nil {
			return nil, err
		}
		for i := range toks {
			toks[i] = append(toks[i], opening[i]...)
		}
	}
	groups, _, err := c.Episodes(ctx, w.Policy, w.Render, toks, examples, max(p.N, 1), p, 0)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(groups))
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, g := range groups {
		for _, t := range g.Trajectories {
			out[i] = append(out[i], t.PolicyText)
			w.episodes++
			if t.Counts[EnvCalls] > 0 || w.Questions != nil {
				w.consulted++
			}
			w.asked += int(t.Counts[EnvAsked])
			for k, v := range t.Counts {
				if strings.HasPrefix(k, EnvFail) {
					w.fails += int(v)
				}
			}
		}
	}
	return out, nil
}

// Summary writes how much the episodes so far consulted.
func (w *Workflow) Summary(out io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	how := "the policy consulting as it chose"
	if w.Questions != nil {
		how = fmt.Sprintf("every episode opening with %s asked the whole question", strings.Join(w.Consultation.Pool.Names(), ", "))
	}
	fmt.Fprintf(out, "consultation (%s): %d episodes, %d consulted, %d further queries asked, %d failed\n", how, w.episodes, w.consulted, w.asked, w.fails)
}
