package meml

import (
	"strings"

	"rlvr/backend"
	"rlvr/expert/prompt"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
)

// The parts of MEML-GRPO, as a config's parts: lists them.
const (
	PartExpertPrompts  = "expert_prompts"
	PartMutualLearning = "mutual_learning"
	PartHardBuffer     = "hard_buffer"
)

func init() {
	part.Register(part.Part{Name: PartExpertPrompts, Order: 10, New: func() part.Section { return &ExpertPromptsConfig{} },
		Acted: func(m method.Metrics) bool {
			for k := range m {
				if strings.HasPrefix(k, method.VariantMetrics) {
					return true
				}
			}
			return false
		},
		Records: []rundir.EvalRecord{expertRecord},
		// Table 6: each expert alone, their majority vote (MV), its
		// difference from the expert best on validation, and which
		// expert that was in each run.
		Columns: []rundir.Column{
			{Header: "experts", Kind: rundir.Variants},
			{Header: "MV", Kind: rundir.FinalMean, Metrics: []string{ValueMajority}},
			{Header: "MV − best", Kind: rundir.FinalGap, Metrics: []string{ValueMajority}},
			{Header: "best expert", Kind: rundir.Chosen},
		}})
	part.Register(part.Part{Name: PartMutualLearning, Order: 40, New: func() part.Section { return &MutualLearningConfig{} }, Rollouts: true,
		Acted: func(m method.Metrics) bool { return m[MetricMutualAnswers] > 0 }})
	part.Register(part.Part{Name: PartHardBuffer, Order: 50, New: func() part.Section { return &HardBufferConfig{} }, Rollouts: true,
		Acted: func(m method.Metrics) bool { return m[MetricBufferAdded] > 0 }})
	// RIEL: three expert prompts with G samples each, advantages per
	// expert as eq. 5 has them (r − the expert's group mean, undivided),
	// REINFORCE on max(A, 0) (eq. 6), mutual learning from the best
	// expert to the worst (eq. 9), and the hard-example SFT buffer (K 6 of
	// G 8, B 64) in the step's one gradient (eq. 11). The paper trains RL
	// at 1e-6 on 1-1.5B models; the tiny world model takes the run's lr.
	part.RegisterPreset("meml-grpo", `
algorithm: grpo
policy_loss: reinforce_positive
advantage_norm: none
parts: [expert_prompts, mutual_learning, hard_buffer]
expert_prompts: {experts: [1, 2, 3]}
mutual_learning: {}
hard_buffer: {}
`)
}

// ExpertPromptsConfig asks every question under several expert prompts,
// with advantages inside each expert's group (MEML-GRPO's P_i).
type ExpertPromptsConfig struct {
	// Experts are the expert indices i asked (default 1, 2, 3; 0 is the
	// dataset's own reference style).
	Experts []int `yaml:"experts"`
	// System is a chat model's expert persona, with {i} standing for the
	// index and {name} for E<i> (prompt.Render; default: the
	// paper's wording), written after chat.system in the system message.
	System string `yaml:"system"`
	// Suffix follows a plain-text prompt, with {i} and {name} as in
	// System (default the world's "@E{i}\n").
	Suffix string `yaml:"suffix"`
}

// Resolve implements part.Section.
func (e *ExpertPromptsConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if len(e.Experts) == 0 {
		e.Experts = []int{1, 2, 3}
	}
	if e.System == "" {
		e.System = prompt.Default.System
	}
	if e.Suffix == "" {
		e.Suffix = prompt.Default.Suffix
	}
	for _, i := range e.Experts {
		if i < 0 {
			add("expert_prompts.experts: %d is negative", i)
		}
	}
	if len(run.DMEExperts) > 0 {
		add("data.dme_experts is for training answers behind the plain prompt; with expert_prompts, expert_prompts.experts chooses them")
	}
}

// Variants are the expert prompts, named E<i>: the name a D_ME answer of
// expert i is trained behind (MEF).
func (e *ExpertPromptsConfig) Variants() []method.Variant {
	var out []method.Variant
	for _, i := range e.Experts {
		p := prompt.Templates{System: e.System, Suffix: e.Suffix}.Of(i)
		out = append(out, method.Variant{Name: p.Name, System: p.System, Suffix: p.Suffix})
	}
	return out
}

// Join implements part.Section: every question is asked under each
// expert prompt, and every evaluation scores each expert and their vote.
func (e *ExpertPromptsConfig) Join(b *part.Build) error {
	v := e.Variants()
	b.Variants = append(b.Variants, v...)
	b.Evaluators = append(b.Evaluators, &ExpertEvaluator{Variants: v})
	return nil
}

// MutualLearningConfig is MEML-GRPO's inter-expert mutual learning: per
// question, the expert prompt with the best mean reward teaches the worst
// along its correct answers (needs expert_prompts).
type MutualLearningConfig struct {
	Weight float32 `yaml:"weight"` // λ1; 0 means 1
	// Estimator is "sequence" (the Monte-Carlo log p(O+|P+) − log p(O+|P−),
	// default) or "exact" (the per-position full-vocabulary KL).
	Estimator string `yaml:"estimator"`
}

// Resolve implements part.Section.
func (m *MutualLearningConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if m.Weight == 0 {
		m.Weight = 1
	}
	part.Real(add, "mutual_learning.weight", float64(m.Weight), false)
	part.OneOf(add, "mutual_learning.estimator", &m.Estimator, "sequence", "exact")
	if !run.Has(PartExpertPrompts) {
		add("mutual_learning needs expert_prompts in parts: it compares experts")
	}
	if m.Estimator == "exact" && run.CheckLoss != nil {
		if err := run.CheckLoss(backend.Loss{TeacherKL: 1}); err != nil {
			add("backend tinker: mutual_learning.estimator exact: %v (estimator: sequence)", err)
		}
	}
}

// Join implements part.Section.
func (m *MutualLearningConfig) Join(b *part.Build) error {
	b.Extras = append(b.Extras, &MutualLearning{Weight: m.Weight, Exact: m.Estimator == "exact"})
	return nil
}

// HardBufferConfig is MEML-GRPO's hard-example SFT buffer.
type HardBufferConfig struct {
	K        int `yaml:"k"`        // more than K wrong of G adds (Q, P_i) with probability K/G; 0 means 6
	Capacity int `yaml:"capacity"` // B; 0 means 64
	// Update is how a full buffer trains: "joint" (the default, eq. 11's
	// one objective: its NLL, times weight, joins the step's gradient and
	// optimizer step at the run's lr) or "separate" (an optimizer step of
	// its own at lr after the step's, with AdamW moments and a step count
	// of its own; the local backend only). docs/meml-grpo.md compares them.
	Update string  `yaml:"update"`
	LR     float64 `yaml:"lr"`     // the separate update's learning rate; 0 means 1e-5
	Weight float32 `yaml:"weight"` // λ2; 0 means 1
}

// The updates of the hard-example buffer (HardBufferConfig.Update).
const (
	BufferJoint    = "joint"
	BufferSeparate = "separate"
)

// Resolve implements part.Section.
func (h *HardBufferConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if h.K == 0 {
		h.K = 6
	}
	if h.Capacity == 0 {
		h.Capacity = 64
	}
	part.OneOf(add, "hard_buffer.update", &h.Update, BufferJoint, BufferSeparate)
	switch {
	case h.Update == BufferJoint && h.LR != 0:
		add("hard_buffer.lr = %v is the separate update's; the joint update trains at the run's lr", h.LR)
	case h.Update == BufferSeparate && h.LR == 0:
		h.LR = 1e-5
	}
	if h.Update == BufferSeparate && run.Remote {
		add("hard_buffer.update separate needs an optimizer state of its own, which a remote backend does not keep; use joint")
	}
	if h.Weight == 0 {
		h.Weight = 1
	}
	if h.K < 0 || h.K >= run.GroupSize && run.GroupSize > 0 {
		add("hard_buffer.k = %d must be in [0, group_size)", h.K)
	}
	if h.Capacity < 0 {
		add("hard_buffer.capacity = %d must be positive", h.Capacity)
	}
	part.Real(add, "hard_buffer.lr", h.LR, h.Update != BufferSeparate)
	part.Real(add, "hard_buffer.weight", float64(h.Weight), false)
}

// Join implements part.Section.
func (h *HardBufferConfig) Join(b *part.Build) error {
	b.Extras = append(b.Extras, &HardBuffer{K: h.K, Capacity: h.Capacity, LR: h.LR, Weight: h.Weight})
	return nil
}
