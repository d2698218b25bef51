package eapo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"rlvr/expert"
	"rlvr/method"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
)

// Consultation is EAPO's expert consultation, a part of the RL method in
// two roles.
//
// As the Rollout it runs multi-turn episodes of at most T(t) policy turns.
// A turn may end in a consult action of queries (Format); the first
// MaxQueries are considered, each is accepted with probability p(t) —
// u ~ U(0,1) is drawn per query and u < p(t) asks the expert, so a
// declined reply costs no call — and the accepted ones go to the pool all
// at once, every episode's together. Replies enter the history as
// environment tokens (weight 0 in the loss); a declined, failed or
// unreadable reply is written as unavailable and the policy goes on.
//
// As a Shaper it subtracts Penalty from an episode's reward per consult
// action — answered or left unanswered by the turn budget — and records
// the step's consultation metrics (consult/…).
//
// Its running totals are state: a resumed run continues them, and the
// schedules are functions of the step, so a resumed run consults as the
// first would have.
type Consultation struct {
	Format Format
	Pool   *expert.Pool
	// Accept is p(t), the probability that an expert's reply is written
	// into the history; Turns is the turn budget T(t), rounded, at least 1.
	Accept, Turns Schedule
	// RunSteps is the run's length, which the schedules' default horizon
	// and the budget-matched rate read.
	RunSteps   int
	MaxQueries int     // k: queries beyond it in one action are unavailable
	Penalty    float64 // subtracted from the reward per consult action
	// MaxTokens bounds an episode's response, expert tokens included;
	// each policy turn is bounded by the run's sampling budget.
	MaxTokens int

	totals consultTotals
}

// consultTotals are a run's consultations so far, counted by Shape.
type consultTotals struct {
	Calls    int64 `json:"calls"`    // consult actions
	Accepted int64 `json:"accepted"` // replies written into histories
}

// The names of a trajectory's consultation counts (rollout.Trajectory.Counts).
const (
	EnvCalls     = "calls"      // consult actions
	EnvQueries   = "queries"    // queries in them
	EnvAsked     = "asked"      // queries put to an expert
	EnvAccepted  = "accepted"   // replies written into the history
	envDeclined  = "declined"   // not asked: the draw was at least p(t)
	envOverLimit = "over_limit" // beyond MaxQueries
	EnvMalformed = "malformed"  // actions that did not parse
	envLatency   = "latency_s"  // summed over asked queries
	// Consult actions the turn or token budget left unanswered, counted
	// by the rollout: actions all the same (they cost the penalty).
	envUnanswered = rollout.EnvUnanswered
	EnvFail       = "fail/" // + a kind: asked, but no usable reply
)

// FailUnreadable is a reply that came but holds no usable answer.
const FailUnreadable = "unreadable"

// FailUnknownExpert is a query naming an expert the pool does not have.
const FailUnknownExpert = "unknown_expert"

// FailureKinds lists the kinds of consultation failure, in the
// order metrics name them.
var FailureKinds = append(slices.Clone(expert.FailureKinds), FailUnreadable, FailUnknownExpert)

// consultActions counts an episode's consult actions: those answered and
// the one the budget left unanswered.
func consultActions(t *rollout.Trajectory) float64 {
	return t.Counts[EnvCalls] + t.Counts[envUnanswered]
}

// TurnBudget is T(t) at a step.
func (c *Consultation) TurnBudget(step int) int {
	return max(1, int(math.Round(c.Turns.At(step, c.RunSteps))))
}

// Acceptance is p(t) at a step, clamped to [0, 1].
func (c *Consultation) Acceptance(step int) float64 {
	return min(1, max(0, c.Accept.At(step, c.RunSteps)))
}

// Rollout implements Rollout.
func (c *Consultation) Rollout(ctx context.Context, sc *method.StepContext, prompts [][]int32, examples []task.Example, g int, seed uint64) ([]rollout.Group, error) {
	p := sc.Sampling
	p.Seed = seed
	groups, wait, err := c.Episodes(ctx, sc.Policy, sc.Render, prompts, examples, g, p, sc.Step)
	if err != nil {
		return nil, err
	}
	sc.Metrics[MetricWait] += wait.Seconds()
	return groups, nil
}

// Episodes runs consultation episodes from prompts, g per prompt, under
// the schedules at step; p bounds each policy turn and seeds the draws. It
// returns them with the time spent waiting on the experts. examples, nil
// or one per prompt, are the examples the prompts come from: each query
// an episode asks carries its example to the pool, for a reference expert
// to answer from (without examples it answers none). Training runs it
// through Rollout; rlvr eval runs it for the test-time workflows.
func (c *Consultation) Episodes(ctx context.Context, policy rollout.Sampler, render method.Renderer, prompts [][]int32, examples []task.Example, g int, p sample.Params, step int) ([]rollout.Group, time.Duration, error) {
	if examples != nil && len(examples) != len(prompts) {
		return nil, 0, fmt.Errorf("eapo: %d examples for %d prompts", len(examples), len(prompts))
	}
	e := &consultEnv{c: c, render: render, p: c.Acceptance(step), seed: p.Seed, examples: examples, g: g}
	maxTokens := c.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.MaxTokens
	}
	groups, err := rollout.Episodes(ctx, policy, render, e, prompts, g, p, c.Format.Stops(), c.TurnBudget(step), maxTokens)
	return groups, e.wait, err
}

// Opening is a consultation written before the policy's first turn: for
// each prompt, its queries as a consult action and the experts' replies,
// under p(t) at step 0, as tokens to follow the prompt. examples, nil or
// one per prompt, are what the queries are about (see Episodes). The
// test-time workflows open this way (every expert asked the whole
// question).
func (c *Consultation) Opening(ctx context.Context, render method.Renderer, queries [][]Query, examples []task.Example, seed uint64) ([][]int32, error) {
	if examples != nil && len(examples) != len(queries) {
		return nil, fmt.Errorf("eapo: %d examples for %d prompts", len(examples), len(queries))
	}
	e := &consultEnv{c: c, render: render, p: c.Acceptance(0), seed: seed, examples: examples, g: 1}
	calls := make([]rollout.Call, len(queries))
	for i, qs := range queries {
		calls[i] = rollout.Call{Episode: i, Text: c.Format.Action(qs)}
	}
	resps, err := e.Respond(ctx, calls)
	if err != nil {
		return nil, err
	}
	out := make([][]int32, len(queries))
	for i, r := range resps {
		if r.Done {
			return nil, fmt.Errorf("method: the opening consultation %q does not parse", calls[i].Text)
		}
		out[i] = append(render.Encode(calls[i].Text), r.Tokens...)
	}
	return out, nil
}

// consultEnv answers one step's consult actions.
type consultEnv struct {
	c      *Consultation
	render method.Renderer
	p      float64 // p(t)
	seed   uint64
	wait   time.Duration // spent waiting on the pool
	// examples are the prompts' examples (nil for none), g the episodes
	// per prompt: episode n works on examples[n/g].
	examples []task.Example
	g        int
}

// example is the example episode n works on, or nil.
func (e *consultEnv) example(n int) *task.Example {
	if e.g <= 0 || n < 0 || n/e.g >= len(e.examples) {
		return nil
	}
	return &e.examples[n/e.g]
}

// Respond implements rollout.Environment.
func (e *consultEnv) Respond(ctx context.Context, calls []rollout.Call) ([]rollout.Response, error) {
	c := e.c
	out := make([]rollout.Response, len(calls))
	replies := make([][]Reply, len(calls))
	// slot locates an asked query's reply.
	type slot struct{ call, query int }
	var asks []expert.Ask
	var slots []slot
	for i, call := range calls {
		counts := map[string]float64{EnvCalls: 1}
		out[i].Counts = counts
		qs, err := c.Format.Parse(call.Text)
		if err != nil {
			counts[EnvMalformed]++
			out[i].Done = true
			continue
		}
		counts[EnvQueries] = float64(len(qs))
		// One stream of draws per call: the same step, episode and turn
		// draw the same acceptances, whatever else the step holds.
		rng := rand.New(rand.NewPCG(e.seed^0x636f6e73756c74, uint64(call.Episode)<<16|uint64(call.Turn)))
		// and of seeds for sampled replies, so that a question asked again
		// in another episode, turn or step is answered afresh.
		replySeeds := rand.New(rand.NewPCG(e.seed^0x7265706c79, uint64(call.Episode)<<16|uint64(call.Turn)))
		replies[i] = make([]Reply, len(qs))
		for j, q := range qs {
			replies[i][j] = Reply{Expert: q.Expert}
			if j >= c.MaxQueries {
				counts[envOverLimit]++
				continue
			}
			if u := rng.Float64(); u >= e.p {
				counts[envDeclined]++
				continue
			}
			m, err := c.Pool.Resolve(q.Expert, len(asks))
			if err != nil {
				counts[EnvFail+FailUnknownExpert]++
				continue
			}
			replies[i][j].Expert = c.Pool.Members[m].Name
			asks = append(asks, expert.Ask{Member: m, Question: c.Format.Question(q), Seed: replySeeds.Uint64(), Example: e.example(call.Episode)})
			slots = append(slots, slot{i, j})
		}
	}
	if len(asks) > 0 {
		start := time.Now()
		answers := c.Pool.Answers(ctx, asks)
		e.wait += time.Since(start)
		if err := ctx.Err(); err != nil {
			return nil, err // the run is stopping: not the experts' failure
		}
		for k, a := range answers {
			s := slots[k]
			counts := out[s.call].Counts
			counts[EnvAsked]++
			counts[envLatency] += a.Latency.Seconds()
			if a.Failure != "" {
				counts[EnvFail+a.Failure]++
				continue
			}
			ans, ok := c.Format.Answer(a.Text)
			if !ok {
				counts[EnvFail+FailUnreadable]++
				continue
			}
			replies[s.call][s.query].Answer, replies[s.call][s.query].OK = ans, true
			counts[EnvAccepted]++
		}
	}
	for i := range calls {
		if out[i].Done {
			continue
		}
		toks, err := e.render.EnvTurn(c.Format.Replies(replies[i]))
		if err != nil {
			return nil, fmt.Errorf("method: rendering expert replies: %w", err)
		}
		out[i].Tokens = toks
	}
	return out, nil
}

// The consultation's metrics, per step unless said otherwise.
const (
	MetricCallRate          = "consult/call_rate"           // share of episodes that consulted
	MetricAcceptance        = "consult/p"                   // p(t), the acceptance probability
	MetricTurnBudget        = "consult/turn_budget"         // turns an episode may take
	MetricCallsPerEpisode   = "consult/calls_per_episode"   // consult actions
	MetricQueriesPerEpisode = "consult/queries_per_episode" // queries in them
	MetricTurns             = "consult/turns"               // turns per episode
	MetricAcceptanceRate    = "consult/acceptance_rate"     // replies written into the history, per query
	MetricLatency           = "consult/latency_s"           // per query put to an expert
	MetricWait              = "consult/wait_s"              // the rollout's wait on the pool, summed
	MetricDeclined          = "consult/declined"            // queries not asked: the draw was at least p(t)
	MetricOverLimit         = "consult/over_limit"          // queries beyond the most per action
	MetricMalformed         = "consult/malformed"           // actions that did not parse
	MetricUnanswered        = "consult/unanswered"          // calls the turn or token budget left unanswered
	MetricFail              = "consult/fail/"               // + a failure kind: asked, but no usable reply
	MetricAccuracyWith      = "consult/accuracy_with"       // of the episodes that consulted
	MetricAccuracyWithout   = "consult/accuracy_without"    // of those that did not
	MetricTotalCalls        = "consult/total_calls"         // since the run began
	MetricTotalAccepted     = "consult/total_accepted"      // since the run began
)

// Shape implements Shaper: the per-consultation penalty, and the step's
// consultation metrics.
func (c *Consultation) Shape(_ context.Context, sc *method.StepContext, groups []method.Scored) error {
	m := sc.Metrics
	var episodes, consulted, calls, queries, asked, accepted, turns, latency float64
	var right, n [2]float64 // by whether the episode consulted
	sums := map[string]float64{}
	for gi := range groups {
		g := &groups[gi]
		for i := range g.Trajectories {
			t := &g.Trajectories[i]
			actions := consultActions(t)
			g.Rewards[i] -= c.Penalty * actions
			episodes++
			calls += actions
			queries += t.Counts[EnvQueries]
			asked += t.Counts[EnvAsked]
			accepted += t.Counts[EnvAccepted]
			latency += t.Counts[envLatency]
			turns += float64(t.Turns)
			did := 0
			if actions > 0 {
				did = 1
				consulted++
			}
			n[did]++
			if g.Correct[i] {
				right[did]++
			}
			for k, v := range t.Counts {
				if strings.HasPrefix(k, EnvFail) || k == envDeclined || k == envOverLimit || k == EnvMalformed || k == envUnanswered {
					sums[k] += v
				}
			}
		}
	}
	c.totals.Calls += int64(calls)
	c.totals.Accepted += int64(accepted)
	m.Set(MetricAcceptance, c.Acceptance(sc.Step))
	m.Set(MetricTurnBudget, float64(c.TurnBudget(sc.Step)))
	if episodes == 0 {
		return nil
	}
	m.Set(MetricCallRate, consulted/episodes)
	m.Set(MetricCallsPerEpisode, calls/episodes)
	m.Set(MetricQueriesPerEpisode, queries/episodes)
	m.Set(MetricTurns, turns/episodes)
	m.Set(MetricAcceptanceRate, accepted/math.Max(queries, 1))
	if asked > 0 {
		m.Set(MetricLatency, latency/asked)
	}
	m.Set(MetricDeclined, sums[envDeclined])
	m.Set(MetricOverLimit, sums[envOverLimit])
	m.Set(MetricMalformed, sums[EnvMalformed])
	m.Set(MetricUnanswered, sums[envUnanswered])
	for _, k := range FailureKinds {
		m.Set(MetricFail+k, sums[EnvFail+k])
	}
	if n[1] > 0 {
		m.Set(MetricAccuracyWith, right[1]/n[1])
	}
	if n[0] > 0 {
		m.Set(MetricAccuracyWithout, right[0]/n[0])
	}
	m.Set(MetricTotalCalls, float64(c.totals.Calls))
	m.Set(MetricTotalAccepted, float64(c.totals.Accepted))
	return nil
}

// StateName implements method.StateNamer: the name its state has had in
// checkpoints since it was written.
func (c *Consultation) StateName() string { return "*method.Consultation" }

// State implements method.Stateful.
func (c *Consultation) State() (json.RawMessage, error) { return json.Marshal(c.totals) }

// Restore implements method.Stateful.
func (c *Consultation) Restore(b json.RawMessage) error { return json.Unmarshal(b, &c.totals) }
