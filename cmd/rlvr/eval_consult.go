package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"rlvr/checkpoint"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
	"rlvr/train"
)

// consultGenerator runs EAPO's consultation loop at test time, without
// training: the expert-assisted workflow (a pool of other models) and
// self-collaboration (copies of the policy). Each prompt becomes episodes
// in which the policy may consult the pool and every reply is accepted;
// with open, every episode opens with each expert asked the whole
// question, and the policy answers after their replies. It implements
// eval.Generator for a local model.
type consultGenerator struct {
	c       *eapo.Consultation
	l       *checkpoint.Loaded
	render  method.Renderer
	sampler rollout.Sampler
	open    bool
	// questions maps a prompt as eval sends it to its question, which an
	// opening consultation asks.
	questions map[string]string

	mu                                sync.Mutex
	episodes, consulted, asked, fails int
}

// newConsultGenerator reads the consultation part of the training config
// at path and opens its pool for the model l (at modelPath: a policy
// expert is a copy of it). The caller closes the pool.
func newConsultGenerator(path, modelPath string, l *checkpoint.Loaded, open bool, examples []task.Example, prompted []task.Example) (*consultGenerator, func(), error) {
	cfg, err := train.LoadRLConfig(path, "")
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.Resolve(); err != nil {
		return nil, nil, fmt.Errorf("--consult %s: %w", path, err)
	}
	if cfg.Consultation == nil || !slices.Contains(cfg.Parts, train.PartConsultation) {
		return nil, nil, fmt.Errorf("--consult %s: the config has no consultation part", path)
	}
	render, err := train.NewRenderer(l, train.ChatConfig{Template: "auto"}, l.Model.Config.MaxSeq)
	if err != nil {
		return nil, nil, err
	}
	pool, err := expert.Open(cfg.Consultation.Experts, expert.Options{Policy: modelPath, Seed: cfg.Seed})
	if err != nil {
		return nil, nil, err
	}
	// The config's consultation as at its first step, every reply
	// accepted.
	c := train.NewConsultation(&cfg, l.Chat != nil, pool)
	c.Accept = eapo.Schedule{Kind: eapo.Constant, Start: 1}
	c.Turns = eapo.Schedule{Kind: eapo.Constant, Start: float64(c.TurnBudget(0))}
	g := &consultGenerator{c: c, l: l, render: render, sampler: sample.NewFixed(l.Model, l.Tokenizer), open: open, questions: map[string]string{}}
	if open { // the questions the opening consultation asks
		for i, e := range examples {
			g.questions[prompted[i].Prompt] = world.QuestionText(e.Prompt)
		}
	}
	return g, pool.Close, nil
}

// Generate implements eval.Generator.
func (g *consultGenerator) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	p.StopTokens = append(append([]int32(nil), p.StopTokens...), g.l.StopTokens...)
	toks := make([][]int32, len(prompts))
	for i, text := range prompts {
		toks[i] = g.l.Encode(text)
	}
	if g.open {
		queries := make([][]eapo.Query, len(prompts))
		for i, text := range prompts {
			q, ok := g.questions[text]
			if !ok {
				return nil, fmt.Errorf("eval: prompt %d is not one of the examples'", i)
			}
			for _, name := range g.c.Pool.Names() {
				queries[i] = append(queries[i], eapo.Query{Expert: name, Question: q})
			}
		}
		opening, err := g.c.Opening(ctx, g.render, queries, p.Seed)
		if err != nil {
			return nil, err
		}
		for i := range toks {
			toks[i] = append(toks[i], opening[i]...)
		}

	}
	groups, _, err := g.c.Episodes(ctx, g.sampler, g.render, toks, max(p.N, 1), p, 0)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(groups))

	g.mu.Lock()
	defer g.mu.Unlock()
	for i, gr := range groups {
		for _, t := range gr.Trajectories {
			out[i] = append(out[i], t.PolicyText)
			g.episodes++
			if t.Env[eapo.EnvCalls] > 0 || g.open {
				g.consulted++
			}
			g.asked += int(t.Env[eapo.EnvAsked])
			for k, v := range t.Env {
				if strings.HasPrefix(k, eapo.EnvFail) {
					g.fails += int(v)
				}
			}
		}
	}
	return out, nil
}

// summary says how much the episodes consulted.
func (g *consultGenerator) summary(w io.Writer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	how := "the policy consulting as it chose"
	if g.open {
		how = fmt.Sprintf("every episode opening with %s asked the whole question", strings.Join(g.c.Pool.Names(), ", "))
	}
	fmt.Fprintf(w, "consultation (%s): %d episodes, %d consulted, %d further queries asked, %d failed\n", how, g.episodes, g.consulted, g.asked, g.fails)
}
