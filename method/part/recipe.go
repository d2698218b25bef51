package part

import "rlvr/method"

// Recipe is a run's method as its config resolves, once (the trainer's
// train.RLConfig.Resolve): the objective, the run the parts read and
// their resolved sections. Assemble builds the method from it. What it
// holds is read from it, never written back into the config.
type Recipe struct {
	Run *Run
	// Family is the RL objective: the algorithm's published defaults
	// with the config's settings over them, and RefKL set when the KL to
	// the starting model goes in the loss. nil for sft, which trains NLL
	// on reference solutions.
	Family *method.Family
	// RewardKL, when set, takes the KL to the starting model out of each
	// answer's reward instead (kl_in_reward); it shapes the rewards
	// before the parts' shapers.
	RewardKL *method.RewardKL
	// Sections are the listed parts' resolved sections, by part name.
	Sections Sections
	// ShowAnswers is method.RL.ShowAnswers.
	ShowAnswers int
}

// UsesReference reports whether the method scores the frozen starting
// model: a KL to it in the loss or in the reward.
func (r *Recipe) UsesReference() bool {
	return r.RewardKL != nil || r.Family != nil && r.Family.RefKL != 0
}

// Setup is what a method needs beyond its recipe: the model's context,
// whether it is prompted through a chat template, the starting model's
// directory (an expert pool may copy the policy) and where notices go
// (nil discards them).
type Setup struct {
	MaxLen int
	Chat   bool
	Policy string
	Log    func(format string, args ...any)
}

// Assemble builds the recipe's method: the objective (or SFT) and every
// listed part joined in registry order. It is the one place where a
// recipe becomes a method; the loop only calls the result's Step. The
// build holds what the parts add around the method (evaluators, the grant
// of a chat prompt) and what they opened: the caller closes it.
func (r *Recipe) Assemble(s Setup) (method.Method, *Build, error) {
	b := &Build{Run: r.Run, MaxLen: s.MaxLen, Chat: s.Chat, Policy: s.Policy, Log: s.Log}
	if b.Log == nil {
		b.Log = func(string, ...any) {}
	}
	if r.RewardKL != nil {
		b.Shapers = append(b.Shapers, *r.RewardKL)
	}
	if err := Join(b, r.Sections); err != nil {
		return nil, nil, err
	}
	if r.Family == nil {
		return &method.Supervised{Variants: b.Variants, MaxLen: s.MaxLen}, b, nil
	}
	return &method.RL{Objective: r.Family, GroupSize: r.Run.GroupSize, Variants: b.Variants, Rollout: b.Rollout,
		Shapers: b.Shapers, Filter: b.Filter, Extras: b.Extras, ShowAnswers: r.ShowAnswers}, b, nil
}
