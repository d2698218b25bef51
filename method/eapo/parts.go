package eapo

import (
	"fmt"
	"math"
	"strings"

	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
)

// PartConsultation is EAPO's part, as a config's parts: lists it.
const PartConsultation = "consultation"

func init() {
	part.Register(part.Part{Name: PartConsultation, Order: 60, Rollouts: true, New: func() part.Section { return &ConsultationConfig{} },
		Acted:         func(m method.Metrics) bool { return m[MetricCallRate] > 0 },
		AdvantageNorm: advantageNorm,
		Columns:       []rundir.Column{{Header: "call rate", Kind: rundir.Ends, Metrics: []string{MetricCallRate}}}})
}

// advantageNorm is the advantage normalization of a run with consultation,
// given the algorithm's. A division by the group's std would make the
// consult penalty alone decide the sign and size of every advantage in
// the groups whose answers are all right or all wrong (most of them on a
// sparse task), so the verdicts' std divides instead (docs/eapo.md).
func advantageNorm(norm method.AdvantageNorm) method.AdvantageNorm {
	if norm == method.NormGroupStd {
		return method.NormCorrectnessStd
	}
	return norm
}

// ConsultationConfig is EAPO's expert consultation: rollouts become
// multi-turn episodes in which the policy may consult a pool of expert
// models; replies are written into the history with probability p(t),
// annealed over training with the turn budget, and every consult action
// costs reward. Evaluation stays single-turn, with the run's own prompt:
// the policy answers alone.
type ConsultationConfig struct {
	// Experts are the pool; default the world's scripted experts E1-E3.
	Experts []expert.Config `yaml:"experts,omitempty"`
	// MaxQueries is k, the queries of one action that are considered
	// (the rest are unavailable); 0 means 3.
	MaxQueries int `yaml:"max_queries,omitempty"`
	// Penalty is subtracted from the reward per consult action; unset
	// means 0.05.
	Penalty *float64 `yaml:"penalty,omitempty"`
	// Acceptance is p(t); default cosine from 1 to 0 over the run.
	Acceptance *Schedule `yaml:"acceptance,omitempty"`
	// Turns is the turn budget T(t), rounded; default linear from 3 to 1,
	// the evaluation's single turn.
	Turns *Schedule `yaml:"turns,omitempty"`
	// BudgetMatched holds both constant, at the same consultation budget
	// as the schedules above (EAPO App. H's fixed rate): see
	// BudgetMatched.
	BudgetMatched bool `yaml:"budget_matched,omitempty"`
	// MaxTokens bounds an episode's whole response, expert replies
	// included; 0 means max_tokens.
	MaxTokens int `yaml:"max_tokens,omitempty"`
	// System, for a chat model, is added to the training prompt's system
	// message to grant the consult action, with {k} and {experts} filled
	// in (default ChatTrainingPrompt); evaluation prompts go without it.
	System string `yaml:"system,omitempty"`
}

// Resolve implements part.Section.
func (k *ConsultationConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if len(k.Experts) == 0 {
		if !run.World {
			add("consultation.experts: give the pool (url, model, world or reply for each expert)")
		}
		k.Experts = expert.WorldPool()
	}
	// On a dataset (chat-schema questions), experts are asked through the
	// chat API unless the config says otherwise; on the world ("Q:…"
	// lines), through completions.
	if err := expert.CheckAll("consultation.experts", k.Experts, !run.World); err != nil {
		add("%v", err)
	}
	if k.MaxQueries == 0 {
		k.MaxQueries = 3
	}
	if k.MaxQueries < 0 || k.MaxQueries > 64 {
		add("consultation.max_queries = %d must be in [1, 64]", k.MaxQueries)
	}
	if k.Penalty == nil {
		p := 0.05
		k.Penalty = &p
	}
	part.Real(add, "consultation.penalty", *k.Penalty, true)
	if k.Acceptance == nil {
		k.Acceptance = &Schedule{Kind: optim.Cosine, Start: 1, End: 0}
	}
	if k.Turns == nil {
		k.Turns = &Schedule{Kind: optim.Linear, Start: 3, End: 1}
	}
	for name, s := range map[string]*Schedule{"consultation.acceptance": k.Acceptance, "consultation.turns": k.Turns} {
		if err := s.Check(name); err != nil {
			add("%v", err)
		}
	}
	if a := k.Acceptance; a.Start < 0 || a.Start > 1 || a.End < 0 || a.End > 1 {
		add("consultation.acceptance: start %g and end %g are probabilities, in [0, 1]", a.Start, a.End)
	}
	if t := k.Turns; t.Start < 1 || t.End < 1 || t.Start > 64 || t.End > 64 {
		add("consultation.turns: start %g and end %g must be in [1, 64]", t.Start, t.End)
	}
	if k.MaxTokens == 0 {
		k.MaxTokens = run.MaxTokens
	}
	if k.MaxTokens < 0 || k.MaxTokens > 1<<20 {
		add("consultation.max_tokens = %d must be in [1, %d]", k.MaxTokens, 1<<20)
	}
	if k.System == "" && !run.World {
		k.System = ChatTrainingPrompt
	}
}

// Join implements part.Section: it opens the pool (closed with the
// build), makes the rollout multi-turn episodes whose consult actions the
// pool answers, shapes rewards by the penalty, and grants a chat policy
// the consult action.
func (k *ConsultationConfig) Join(b *part.Build) error {
	if k.MaxTokens >= b.MaxLen {
		return fmt.Errorf("train config: consultation.max_tokens = %d leaves no room for a prompt in the model's context of %d", k.MaxTokens, b.MaxLen)
	}
	if b.Rollout != nil {
		return fmt.Errorf("consultation: another part already makes the rollouts")
	}
	pool, err := expert.Open(k.Experts, expert.Options{Policy: b.Policy, Seed: b.Run.Seed, Warn: func(msg string) { b.Log("consultation: %s", msg) }})
	if err != nil {
		return err
	}
	b.OnClose(func() error { pool.Close(); return nil })
	c := k.Consultation(b.Run.Steps, b.Chat, pool)
	b.Rollout = c
	b.Shapers = append(b.Shapers, c)
	b.Grant = k.Grant()
	if b.Chat {
		b.ColdStarts = append(b.ColdStarts, c.ColdStart())
	}
	return nil
}

// Consultation is the part of a resolved section for a run of runSteps
// steps, asking pool in the chat schema for a chat model and in the
// world's line format otherwise.
func (k *ConsultationConfig) Consultation(runSteps int, chat bool, pool *expert.Pool) *Consultation {
	var format Format = World{}
	if chat {
		format = Chat{}
	}
	accept, turns := *k.Acceptance, *k.Turns
	if k.BudgetMatched {
		accept, turns = BudgetMatched(accept, turns, runSteps)
	}
	return &Consultation{Format: format, Pool: pool, Accept: accept, Turns: turns, RunSteps: runSteps,
		MaxQueries: k.MaxQueries, Penalty: *k.Penalty, MaxTokens: k.MaxTokens}
}

// BudgetMatched returns constant schedules with the consultation budget of
// the acceptance and turn schedules over a run of runSteps steps. A
// consultation is possible on every turn of an episode but its last, and
// is answered with probability p, so the budget is Σ_t p(t)·(T(t) − 1)
// answered consultations per episode that consults whenever it may. The
// turn budget becomes its mean, rounded, and at least 2 (one turn to
// consult, one to answer); the acceptance the p that spends the same
// budget at that turn budget, at most 1.
func BudgetMatched(accept, turns Schedule, runSteps int) (Schedule, Schedule) {
	c := Consultation{Accept: accept, Turns: turns, RunSteps: runSteps}
	n := max(runSteps, 1)
	var budget float64
	for t := range n {
		budget += c.Acceptance(t) * float64(c.TurnBudget(t)-1)
	}
	fixedTurns := max(2, math.Round(turns.Mean(runSteps)))
	p := min(1, budget/(float64(n)*(fixedTurns-1)))
	return Schedule{Kind: optim.Constant, Start: p, End: p}, Schedule{Kind: optim.Constant, Start: fixedTurns, End: fixedTurns}
}

// Grant is the system prompt text granting a chat policy the consult
// action: System, or for a chat model on the world, whose config sets no
// default (the world's own policy needs none), ChatTrainingPrompt as on a
// dataset.
func (k *ConsultationConfig) Grant() string {
	var names []string
	for _, e := range k.Experts {
		names = append(names, e.Name)
	}
	system := k.System
	if system == "" {
		system = ChatTrainingPrompt
	}
	return strings.NewReplacer("{k}", fmt.Sprint(k.MaxQueries), "{experts}", strings.Join(names, ", ")).Replace(system)
}
