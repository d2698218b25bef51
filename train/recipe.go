package train

import (
	"fmt"
	"slices"
	"strings"

	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/dapo"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
)

// NewMethod assembles the method a config describes: the algorithm's
// objective (or SFT) and every guidance part the config lists. It is the
// one place where configuration becomes parts; the loop only calls the
// result's Step.
func NewMethod(c *RLConfig, setup Setup) (method.Method, error) {
	maxLen := setup.MaxLen
	variants := expertVariants(c)
	if c.Algorithm == method.SFT {
		return &method.Supervised{Variants: variants, MaxLen: maxLen}, nil
	}
	fam, err := method.NewFamily(c.Algorithm, c.MaxTokens)
	if err != nil {
		return nil, err
	}
	fam.ClipLow, fam.ClipHigh = c.ClipLow, c.ClipHigh
	fam.RefKLEstimator, fam.Entropy = c.KLEstimator, c.Entropy
	fam.PositiveReinforce = c.PolicyLoss == "reinforce_positive"
	if c.AdvantageNorm != "" {
		fam.Norm = c.AdvantageNorm
	}
	if !c.KLInReward {
		fam.RefKL = c.KL
	}
	rl := &method.RL{Objective: fam, GroupSize: c.GroupSize, Variants: variants}
	if slices.Contains(c.Parts, PartOverlongPenalty) {
		rl.Shapers = append(rl.Shapers, dapo.OverlongPenalty{MaxTokens: c.MaxTokens, Buffer: c.OverlongPenalty.Buffer})
	}
	if c.KL != 0 && c.KLInReward {
		rl.Shapers = append(rl.Shapers, method.RewardKL{Beta: c.KL, Estimator: c.KLEstimator})
	}
	if slices.Contains(c.Parts, PartDynamicSampling) {
		rl.Filter = dapo.DynamicSampling{MaxRounds: c.DynamicSampling.MaxRounds}
	}
	if slices.Contains(c.Parts, PartMutualLearning) {
		rl.Extras = append(rl.Extras, &meml.MutualLearning{Weight: c.MutualLearning.Weight, Exact: c.MutualLearning.Estimator == "exact"})
	}
	if h := c.HardBuffer; slices.Contains(c.Parts, PartHardBuffer) {
		rl.Extras = append(rl.Extras, &meml.HardBuffer{K: h.K, Capacity: h.Capacity, LR: h.LR, Weight: h.Weight})
	}
	if slices.Contains(c.Parts, PartConsultation) {
		if setup.Pool == nil {
			return nil, fmt.Errorf("train: consultation needs an expert pool")
		}
		cs := NewConsultation(c, setup.Chat, setup.Pool)
		rl.Rollout = cs
		rl.Shapers = append(rl.Shapers, cs)
	}
	if m := c.MetaExperience; slices.Contains(c.Parts, PartMetaExperience) {
		var format mel.Format = mel.World{}
		if setup.Chat {
			format = mel.Chat{Instruction: m.Instruction, Validation: m.Validation}
		}
		rl.Extras = append(rl.Extras, &mel.MetaExperience{Format: format, Pairs: m.Pairs, Weight: m.Weight,
			Temperature: m.Temperature, MaxTokens: m.MaxTokens})
	}
	return rl, nil
}

// NewConsultation is the consultation part of a resolved config, asking
// pool in the chat schema for a chat model and in the world's line format
// otherwise.
func NewConsultation(c *RLConfig, chat bool, pool *expert.Pool) *eapo.Consultation {
	k := c.Consultation
	var format eapo.Format = eapo.World{}
	if chat {
		format = eapo.Chat{}
	}
	return &eapo.Consultation{Format: format, Pool: pool, Accept: *k.Acceptance, Turns: *k.Turns, RunSteps: c.Steps,
		MaxQueries: k.MaxQueries, Penalty: *k.Penalty, MaxTokens: k.MaxTokens}
}

// Setup is what a method needs beyond its config: the model's context,
// whether it is prompted through a chat template, and the expert pool of
// the consultation part (opened by the caller, who closes it).
type Setup struct {
	MaxLen int
	Chat   bool
	Pool   *expert.Pool
}

// consultGrant is the system prompt text granting a chat policy the
// consult action: consultation.system, or for a chat model on the world,
// whose config sets no default (the world's own policy needs none),
// eapo.ChatTrainingPrompt as on a dataset.
func consultGrant(k *ConsultationConfig) string {
	var names []string
	for _, e := range k.Experts {
		names = append(names, e.Name)
	}
	system := k.System
	if system == "" {
		system = eapo.ChatTrainingPrompt
	}
	return strings.NewReplacer("{k}", fmt.Sprint(k.MaxQueries), "{experts}", strings.Join(names, ", ")).Replace(system)
}

// expertVariants are the expert prompts of the expert_prompts part, or nil.
func expertVariants(c *RLConfig) []method.Variant {
	if !slices.Contains(c.Parts, PartExpertPrompts) {
		return nil
	}
	var out []method.Variant
	for _, i := range c.ExpertPrompts.Experts {
		name := fmt.Sprintf("E%d", i)
		out = append(out, method.Variant{Name: name,
			System: expert.RenderPrompt(c.ExpertPrompts.System, i, name),
			Suffix: expert.RenderPrompt(c.ExpertPrompts.Suffix, i, name)})
	}
	return out
}
