package part_test

import (
	"context"
	"fmt"

	"gopkg.in/yaml.v3"

	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/train"
)

// brevity is a guidance part of one's own: each answer's reward loses cost
// times its share of the response budget, so that of two right answers
// the shorter earns more. docs/methods.md walks through it.

// MetricBrevityPenalty is the mean penalty of a step's answers.
const MetricBrevityPenalty = "brevity/penalty"

func init() {
	part.Register(part.Part{Name: "brevity", Order: 35, Rollouts: true, New: func() part.Section { return &BrevityConfig{} }})
}

// BrevityConfig is the brevity: section of a run's config.
type BrevityConfig struct {
	Cost float64 `yaml:"cost"` // the penalty of an answer as long as the budget; 0 means 0.1
}

// Resolve implements part.Section.
func (c *BrevityConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if c.Cost == 0 {
		c.Cost = 0.1
	}
	part.Real(add, "brevity.cost", c.Cost, false)
}

// Join implements part.Section: a reward shaper.
func (c *BrevityConfig) Join(b *part.Build) error {
	b.Shapers = append(b.Shapers, brevity{cost: c.Cost, budget: b.Run.MaxTokens})
	return nil
}

type brevity struct {
	cost   float64
	budget int
}

// Shape implements method.Shaper.
func (s brevity) Shape(_ context.Context, sc *method.StepContext, groups []method.Scored) error {
	var sum, n float64
	for gi := range groups {
		g := &groups[gi]
		for i := range g.Trajectories {
			p := s.cost * float64(g.Trajectories[i].PolicyTokens()) / float64(s.budget)
			g.Rewards[i] -= p
			sum, n = sum+p, n+1
		}
	}
	if n > 0 {
		sc.Metrics.Set(MetricBrevityPenalty, sum/n)
	}
	return nil
}

// answer is a trajectory of n tokens, all the policy's.
func answer(n int) rollout.Trajectory {
	t := rollout.Trajectory{Tokens: make([]int32, n), Policy: make([]bool, n)}
	for i := range t.Policy {
		t.Policy[i] = true
	}
	return t
}

// A run lists the part in parts: and configures it in its section; the
// method it builds shapes every step's rewards with it and logs its
// metric.
func Example() {
	cfg := train.DefaultRL() // max_tokens: 256
	if err := yaml.Unmarshal([]byte("parts: [brevity]\nbrevity:\n  cost: 0.2\n"), &cfg); err != nil {
		panic(err)
	}
	recipe, err := cfg.Resolve()
	if err != nil {
		panic(err)
	}
	m, b, err := recipe.Assemble(part.Setup{MaxLen: 512})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	// Two right answers of 32 and 64 tokens, as a step scored them.
	groups := []method.Scored{{Group: rollout.Group{Trajectories: []rollout.Trajectory{answer(32), answer(64)}},
		Rewards: []float64{1, 1}, Correct: []bool{true, true}}}
	sc := &method.StepContext{Metrics: method.Metrics{}}
	for _, s := range m.(*method.RL).Shapers {
		if err := s.Shape(context.Background(), sc, groups); err != nil {
			panic(err)
		}
	}
	fmt.Printf("rewards %.3f, %s %.4f\n", groups[0].Rewards, MetricBrevityPenalty, sc.Metrics[MetricBrevityPenalty])
	// Output: rewards [0.975 0.950], brevity/penalty 0.0375
}
