package train

import (
	"rlvr/method"
	"rlvr/method/part"
)

// NewMethod assembles the method a resolved config describes: the
// algorithm's objective (or SFT) and every guidance part the config lists,
// joined in registry order. It is the one place where configuration
// becomes a method; the loop only calls the result's Step. The build holds
// what the parts add around the method (evaluators, the grant of a chat
// prompt) and what they opened: the caller closes it.
func NewMethod(c *RLConfig, setup Setup) (method.Method, *part.Build, error) {
	b := &part.Build{Run: c.partRun(), MaxLen: setup.MaxLen, Chat: setup.Chat, Policy: setup.Policy, Log: setup.Log}
	if b.Log == nil {
		b.Log = func(string, ...any) {}
	}
	var fam *method.Family
	if c.Algorithm != method.SFT {
		var err error
		if fam, err = method.NewFamily(c.Algorithm, c.MaxTokens); err != nil {
			return nil, nil, err
		}
		fam.ClipLow, fam.ClipHigh = c.ClipLow, c.ClipHigh
		fam.RefKLEstimator, fam.Entropy = c.KLEstimator, c.Entropy
		fam.PositiveReinforce = c.PolicyLoss == "reinforce_positive"
		fam.MaskTruncated = c.MaskTruncated
		if c.AdvantageNorm != "" {
			fam.Norm = c.AdvantageNorm
		}
		if !c.KLInReward {
			fam.RefKL = c.KL
		}
		if c.KL != 0 && c.KLInReward {
			b.Shapers = append(b.Shapers, method.RewardKL{Beta: c.KL, Estimator: c.KLEstimator})
		}
	}
	if err := part.Join(b, c.Sections); err != nil {
		return nil, nil, err
	}
	if fam == nil {
		return &method.Supervised{Variants: b.Variants, MaxLen: setup.MaxLen}, b, nil
	}
	return &method.RL{Objective: fam, GroupSize: c.GroupSize, Variants: b.Variants, Rollout: b.Rollout,
		Shapers: b.Shapers, Filter: b.Filter, Extras: b.Extras, ShowAnswers: c.ShowAnswers}, b, nil
}

// Setup is what a method needs beyond its config: the model's context,
// whether it is prompted through a chat template, the starting model's
// directory (an expert pool may copy the policy) and where notices go
// (nil discards them).
type Setup struct {
	MaxLen int
	Chat   bool
	Policy string
	Log    func(format string, args ...any)
}
