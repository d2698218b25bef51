package method

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"rlvr/backend"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// RL is the GRPO core with the guidance parts a run enabled: each question
// is asked under every prompt variant, G trajectories per variant come from
// the rollout, the verifier scores what the policy wrote, shapers adjust the
// rewards, an optional filter resamples groups without signal, the
// objective makes the batch of the groups kept and the extra terms add
// theirs from every group sampled. Every part is optional
// except the objective; parts compose in one run.
type RL struct {
	Objective Objective
	GroupSize int // G: trajectories per question and variant
	// Variants are the prompts each question is asked under (MEML-GRPO's
	// expert prompts); empty asks the plain prompt once.
	Variants []Variant
	// Rollout makes the groups; nil samples single-turn answers.
	Rollout Rollout
	// Shapers adjust the verified rewards in order (overlong penalty, KL in
	// the reward, consultation penalty).
	Shapers []Shaper
	// Filter, when set, keeps some groups out of the objective's batch
	// and has more questions drawn in their place (DAPO's dynamic
	// sampling).
	Filter Filter
	// Extras add loss terms from the scored groups (mutual learning, a
	// hard-example buffer, meta-experience).
	Extras []Extra
	// ShowAnswers, when positive, keeps that many answers of each step's
	// first group, with their rewards, for reading (Exhibits): TRL's
	// log_completions.
	ShowAnswers int
	// shown is the latest step's first group and its step, formatted only
	// when Exhibits asks (at evaluations, not every step).
	shown     *Scored
	shownStep int
}

// Rollout turns prompts into groups of g trajectories each. examples[i]
// is the example prompts[i] was rendered from (the two have the same
// length): what an environment that reads the example, such as a
// reference-solution expert, answers from.
type Rollout interface {
	Rollout(ctx context.Context, sc *StepContext, prompts [][]int32, examples []task.Example, g int, seed uint64) ([]rollout.Group, error)
}

// Shaper adjusts the rewards of scored groups in place.
type Shaper interface {
	Shape(ctx context.Context, sc *StepContext, groups []Scored) error
}

// Extra adds loss terms built from the step's scored groups: every group
// the step sampled, those DAPO's filter kept out of the policy-gradient
// batch included. An all-wrong group is what the hard-example buffer is
// for, and mutual learning pairs a question's experts whatever their
// variance; a part that wants only mixed groups (MEL's contrastive pairs)
// picks them itself.
type Extra interface {
	Terms(ctx context.Context, sc *StepContext, groups []Scored) ([]Term, error)
}

// Filter chooses the groups the objective trains on. A step samples its
// questions, keeps the groups Keep accepts, and while fewer than it asked
// for are kept draws more questions (StepContext.More), up to Rounds extra rounds.
// Every group sampled still reaches the Extras.
type Filter interface {
	Keep(g *Scored) bool
	Rounds() int
}

// SingleTurn samples G single-turn answers per prompt in one batch.
type SingleTurn struct{}

// Rollout implements Rollout.
func (SingleTurn) Rollout(ctx context.Context, sc *StepContext, prompts [][]int32, _ []task.Example, g int, seed uint64) ([]rollout.Group, error) {
	p := sc.Sampling
	p.Seed = seed
	return rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, g, p)
}

// Step implements Method.
func (r *RL) Step(ctx context.Context, sc *StepContext, examples []task.Example) (*Batch, error) {
	variants := r.Variants
	if len(variants) == 0 {
		variants = []Variant{{}}
	}
	target := len(examples) * len(variants)
	var all, kept []Scored
	batch := examples
	for round := 0; ; round++ {
		groups, err := r.sample(ctx, sc, batch, variants, sc.Seed+uint64(round))
		if err != nil {
			return nil, err
		}
		for _, s := range r.Shapers {
			if err := s.Shape(ctx, sc, groups); err != nil {
				return nil, err
			}
		}
		all = append(all, groups...)
		if r.Filter == nil {
			kept = groups
			break
		}
		for i := range groups {
			if r.Filter.Keep(&groups[i]) {
				kept = append(kept, groups[i])
			}
		}
		if len(kept) >= target || round >= r.Filter.Rounds() {
			break
		}
		need := (target - len(kept) + len(variants) - 1) / len(variants)
		if batch, err = sc.More(need); err != nil {
			return nil, err
		}
		sc.Metrics[MetricResampled] += float64(need)
	}
	scoreMetrics(sc.Metrics, all, len(variants) > 1 || variants[0].Name != "")
	if r.ShowAnswers > 0 && len(all) > 0 {
		r.shown, r.shownStep = &all[0], sc.Step
	}
	terms, st, err := r.Objective.Terms(kept)
	if err != nil {
		return nil, err
	}
	sc.Metrics.Set("trained_frac", float64(st.Trained)/math.Max(1, float64(countTrajectories(kept))))
	for _, x := range r.Extras {
		more, err := x.Terms(ctx, sc, all)
		if err != nil {
			return nil, err
		}
		terms = append(terms, more...)
	}
	return &Batch{Terms: terms}, nil
}

// sample renders every example under every variant, rolls the prompts out
// and verifies what the policy wrote. A prompt too long for the context is
// skipped and counted.
func (r *RL) sample(ctx context.Context, sc *StepContext, examples []task.Example, variants []Variant, seed uint64) ([]Scored, error) {
	var prompts [][]int32
	var scored []Scored
	for _, e := range examples {
		for _, v := range variants {
			p, err := sc.Prompt(e, v)
			if err != nil {
				return nil, err
			} else if p == nil {
				continue
			}
			prompts = append(prompts, p)
			scored = append(scored, Scored{Example: e, Variant: v})
		}
	}
	if len(prompts) == 0 {
		return nil, nil
	}
	ro := r.Rollout
	if ro == nil {
		ro = SingleTurn{}
	}
	from := make([]task.Example, len(scored)) // prompts[i]'s example
	for i := range scored {
		from[i] = scored[i].Example
	}
	groups, err := ro.Rollout(ctx, sc, prompts, from, r.GroupSize, seed)
	if err != nil {
		return nil, err
	}
	if len(groups) != len(prompts) {
		return nil, fmt.Errorf("method: the rollout returned %d groups for %d prompts", len(groups), len(prompts))
	}
	for i := range scored {
		s := &scored[i]
		s.Group = groups[i]
		for _, t := range s.Trajectories {
			// The verifier reads only what the policy wrote: an expert's
			// reply in the history never earns the policy a reward.
			rw, _ := sc.Reward(s.Example, t.PolicyText)
			s.Correct = append(s.Correct, rw > 0)
			s.Rewards = append(s.Rewards, rw)
		}
	}
	return scored, nil
}

// MetricResampled counts the further questions a filter's rounds drew in
// a step.
const MetricResampled = "resampled"

// VariantPrefix begins the names of the metrics over the groups sampled
// under one variant: variant/E1/accuracy.
func VariantPrefix(variant string) string { return VariantMetrics + variant + "/" }

// VariantMetrics begins the names of every per-variant metric.
const VariantMetrics = "variant/"

// scoreMetrics summarizes every sampled group of the step, and each
// variant's groups when there are several.
func scoreMetrics(m Metrics, groups []Scored, perVariant bool) {
	summarize := func(prefix string, keep func(*Scored) bool) {
		var rewards []float64
		var lens, truncated, correct, zero, n, ng float64
		for i := range groups {
			g := &groups[i]
			if !keep(g) {
				continue
			}
			ng++
			rewards = append(rewards, g.Rewards...)
			if ZeroVariance(g.Correct) {
				zero++
			}
			for i, t := range g.Trajectories {
				lens += float64(t.PolicyTokens())
				if t.Finish == sample.FinishLength {
					truncated++
				}
				if g.Correct[i] {
					correct++
				}
				n++
			}
		}
		if n == 0 {
			return
		}
		if prefix == "" {
			m.Set(rundir.MetricRewardMean, Mean(rewards))
			m.Set(rundir.MetricRewardStd, StdDev(rewards))
			m.Set(rundir.MetricResponseLenMean, lens/n)
			m.Set(rundir.MetricTruncatedFrac, truncated/n)
		}
		m.Set(prefix+rundir.MetricAccuracy, correct/n)
		m.Set(prefix+rundir.MetricZeroVarianceFrac, zero/ng)
	}
	summarize("", func(*Scored) bool { return true })
	if !perVariant {
		return
	}
	seen := map[string]bool{}
	for _, g := range groups {
		name := g.Variant.Name
		if seen[name] {
			continue
		}
		seen[name] = true
		summarize(VariantPrefix(name), func(s *Scored) bool { return s.Variant.Name == name })
	}
}

func countTrajectories(groups []Scored) int {
	n := 0
	for _, g := range groups {
		n += len(g.Trajectories)
	}
	return n
}

// parts lists the RL method's parts, for their state.
func (r *RL) parts() []any {
	ps := []any{r.Objective, r.Rollout}
	for _, s := range r.Shapers {
		ps = append(ps, s)
	}
	for _, x := range r.Extras {
		ps = append(ps, x)
	}
	return ps
}

// Exhibits implements Exhibitor: the latest step's answers when
// ShowAnswers is set, then every part's exhibits, in order.
func (r *RL) Exhibits() []Exhibit {
	var out []Exhibit
	if r.shown != nil {
		out = append(out, answersExhibit(r.shownStep, r.shown, r.ShowAnswers))
	}
	for _, p := range r.parts() {
		if x, ok := p.(Exhibitor); ok {
			out = append(out, x.Exhibits()...)
		}
	}
	return out
}

// answersExhibit shows the first n answers of group g at a step: the
// question as the policy was asked it, then each answer with its shaped
// reward and verdict.
func answersExhibit(step int, g *Scored, n int) Exhibit {
	var b strings.Builder
	chat := g.Example.Chat()
	fmt.Fprintf(&b, "step %d", step)
	if g.Variant.Name != "" {
		fmt.Fprintf(&b, ", under %s", g.Variant.Name)
	}
	fmt.Fprintf(&b, "\nquestion:\n%s\n", strings.TrimSpace(chat[len(chat)-1].Content))
	for i := range min(n, len(g.Trajectories)) {
		verdict := "wrong"
		if g.Correct[i] {
			verdict = "right"
		}
		fmt.Fprintf(&b, "\nanswer %d, reward %.3g (%s):\n%s\n", i+1, g.Rewards[i], verdict, strings.TrimSpace(g.Trajectories[i].Text))
	}
	return Exhibit{Title: "answers", Text: b.String()}
}

// State implements Stateful: the state of every stateful part, under its
// StateName.
func (r *RL) State() (json.RawMessage, error) { return partsState(r.parts()) }

// Restore implements Stateful.
func (r *RL) Restore(b json.RawMessage) error { return restoreParts(r.parts(), b) }

func partsState(parts []any) (json.RawMessage, error) {
	st := map[string]json.RawMessage{}
	for _, p := range parts {
		if s, ok := p.(Stateful); ok {
			b, err := s.State()
			if err != nil {
				return nil, fmt.Errorf("method: state of %s: %w", partName(p), err)
			}
			st[partName(p)] = b
		}
	}
	if len(st) == 0 {
		return nil, nil
	}
	return json.Marshal(st)
}

func restoreParts(parts []any, b json.RawMessage) error {
	st := map[string]json.RawMessage{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("method: state: %w", err)
		}
	}
	for _, p := range parts {
		if s, ok := p.(Stateful); ok {
			raw, found := st[partName(p)]
			if !found {
				return fmt.Errorf("method: the checkpoint has no state for %s", partName(p))
			}
			if err := s.Restore(raw); err != nil {
				return fmt.Errorf("method: restoring %s: %w", partName(p), err)
			}
		}
	}
	return nil
}

// StateNamer is a stateful part that names its state in checkpoints. A
// part without a name is known by its Go type ("*pkg.Type"), which moving
// or renaming the type would change, so that checkpoints written before
// would no longer restore: a part that has been published names its state
// once and keeps the name.
type StateNamer interface {
	StateName() string
}

func partName(p any) string {
	if n, ok := p.(StateNamer); ok {
		return n.StateName()
	}
	return reflect.TypeOf(p).String()
}

// RewardKL subtracts β·Σ_t k(q_t, ref_t) from each answer's reward, with q
// the sampler's logprobs of the policy's tokens and ref the frozen starting
// model's, and records the mean per-token estimate as "kl".
type RewardKL struct {
	Beta      float32
	Estimator backend.KLEstimator
}

// Shape implements Shaper.
func (k RewardKL) Shape(ctx context.Context, sc *StepContext, groups []Scored) error {
	if sc.Reference == nil {
		return fmt.Errorf("method: a KL in the reward needs a reference model")
	}
	var data []backend.Datum
	for _, g := range groups {
		for i := range g.Trajectories {
			data = append(data, PolicyDatum(&g.Trajectories[i], 0))
		}
	}
	if len(data) == 0 {
		return nil
	}
	lps, err := sc.Reference.Logprobs(ctx, data)
	if err != nil {
		return err
	}
	var total float64
	var tokens int
	n := 0
	for gi := range groups {
		g := &groups[gi]
		for i := range g.Trajectories {
			var sum float64
			for j, w := range data[n].Weights {
				if w == 0 {
					continue
				}
				est, _ := k.Estimator.Estimate(float64(data[n].SamplerLogprobs[j] - lps[n][j]))
				sum += est
				tokens++
			}
			g.Rewards[i] -= float64(k.Beta) * sum
			total += sum
			n++
		}
	}
	sc.Metrics.Set(rundir.MetricKL, total/math.Max(float64(tokens), 1))
	return nil
}
