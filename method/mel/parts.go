package mel

import (
	"strings"

	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
)

// PartMetaExperience is MEL's part, as a config's parts: lists it.
const PartMetaExperience = "meta_experience"

func init() {
	part.Register(part.Part{Name: PartMetaExperience, Order: 70, Rollouts: true, New: func() part.Section { return &MetaExperienceConfig{} },
		Acted: func(m method.Metrics) bool { return m[MetricMELPairs] > 0 },
		Columns: []rundir.Column{{Header: "meta-experiences: pairs → parsed → validated", Kind: rundir.Funnel,
			Metrics: []string{MetricMELPairs, MetricMELParsed, MetricMELValidated}}}})
}

// MetaExperienceConfig is MEL's meta-experience learning: from each group
// with right and wrong answers, the policy contrasts pairs of them and
// writes meta-experiences (bifurcation step, critique, heuristic); those
// whose replay (the question again, the meta-experience before it) verifies
// are trained by NLL given the pair, beside the base objective.
type MetaExperienceConfig struct {
	// Pairs is the number of contrastive pairs drawn per group (without
	// replacement); 0 means 4. Each pair costs one reflection and, when it
	// parses, one replay: at G = 8 a mixed group has 7 to 16 pairs.
	Pairs int `yaml:"pairs,omitempty"`
	// AllPairs takes every pair of every group (the paper's reading),
	// |Y+|·|Y−| of them: up to 16 reflections per group at G = 8.
	AllPairs bool    `yaml:"all_pairs,omitempty"`
	Weight   float32 `yaml:"weight,omitempty"` // λ of the NLL term; 0 means 1
	// Aggregation is how the kept meta-experiences' NLLs make the term:
	// PromptMean (the default, eq. 10's R_MEL inside the expectation over
	// questions) averages each question's, then the step's questions, one
	// without a kept meta-experience counting 0; Pooled averages every
	// kept meta-experience of the step alike, so that the term weighs as
	// much when one question in the step yields them as when all do.
	Aggregation string `yaml:"aggregation,omitempty"`
	// Temperature and MaxTokens are the reflection pass's sampling; 0
	// takes temperature and max_tokens. Replays sample as rollouts do.
	Temperature float32 `yaml:"temperature,omitempty"`
	MaxTokens   int     `yaml:"max_tokens,omitempty"`
	// Instruction is a chat model's instruction I, with {question},
	// {correct_ans} and {error_ans}; Validation its replay prompt, with
	// {experience} and {question} (without {question}, the question
	// follows the prompt). Empty takes the paper's
	// (PaperInstruction, PaperValidation). A model without a chat
	// template uses the world's reflection format.
	Instruction string `yaml:"instruction,omitempty"`
	Validation  string `yaml:"validation,omitempty"`
	// ReferencePositive pairs the answers of a group with no right one
	// against the example's reference solution as y+ (an extension for a
	// policy that cannot answer right; the paper's y+ is the policy's own).
	// The training data needs worked solutions.
	ReferencePositive bool `yaml:"reference_positive,omitempty"`
}

// Resolve implements part.Section.
func (m *MetaExperienceConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if m.Pairs == 0 && !m.AllPairs {
		m.Pairs = 4
	}
	if m.AllPairs && m.Pairs != 0 {
		add("meta_experience: pairs = %d and all_pairs are both set", m.Pairs)
	}
	if m.Pairs < 0 || m.Pairs > 1<<16 {
		add("meta_experience.pairs = %d must be in [1, %d]", m.Pairs, 1<<16)
	}
	if m.Weight == 0 {
		m.Weight = 1
	}
	part.OneOf(add, "meta_experience.aggregation", &m.Aggregation, PromptMean, Pooled)
	if m.MaxTokens == 0 {
		m.MaxTokens = run.MaxTokens
	}
	if m.MaxTokens < 0 || m.MaxTokens > 1<<20 {
		add("meta_experience.max_tokens = %d must be in [1, %d]", m.MaxTokens, 1<<20)
	}
	if m.Temperature == 0 {
		m.Temperature = run.Temperature
	}
	if m.Instruction != "" && (!strings.Contains(m.Instruction, "{correct_ans}") || !strings.Contains(m.Instruction, "{error_ans}")) {
		add("meta_experience.instruction must hold {correct_ans} and {error_ans}: the pair it asks about")
	}
	if m.Validation != "" && !strings.Contains(m.Validation, "{experience}") {
		add("meta_experience.validation must hold {experience}: the meta-experience it replays")
	}
	part.Real(add, "meta_experience.weight", float64(m.Weight), false)
	part.Real(add, "meta_experience.temperature", float64(m.Temperature), false)
}

// SolutionsField names the setting that reads the training examples'
// reference solutions, when it is on: the training run refuses it before
// any step where they have none.
func (m *MetaExperienceConfig) SolutionsField() string {
	if m.ReferencePositive {
		return "meta_experience.reference_positive"
	}
	return ""
}

// Join implements part.Section: the extra term, in the chat format for a
// chat model and the world's line format otherwise.
func (m *MetaExperienceConfig) Join(b *part.Build) error {
	var format Format = World{}
	if b.Chat {
		format = Chat{Instruction: m.Instruction, Validation: m.Validation}
	}
	me := &MetaExperience{Format: format, Pairs: m.Pairs, Weight: m.Weight,
		Pooled: m.Aggregation == Pooled, Temperature: m.Temperature, MaxTokens: m.MaxTokens,
		ReferencePositive: m.ReferencePositive}
	b.Extras = append(b.Extras, me)
	if b.Chat {
		b.ColdStarts = append(b.ColdStarts, me.ColdStart())
	}
	return nil
}
