package train

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"rlvr/backend"
	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/task"
	"rlvr/task/world"
)

// RLConfig is every knob of a training run, grouped by what it controls.
// The core knobs are flat, as in TRL's GRPOConfig; each guidance part has a
// section of its own and runs only when Parts names it. DefaultRL gives
// every default; a preset (see Presets) names a paper's recipe.
type RLConfig struct {
	// What is trained and on what.

	// Algorithm is the objective: grpo, dr-grpo, dapo, reinforce++, rft
	// (RL), or sft (NLL on reference solutions, no rollouts).
	Algorithm method.Algorithm `yaml:"algorithm"`
	// Preset names a recipe applied over the defaults before the config
	// file and flags (see Presets); "" applies none.
	Preset string `yaml:"preset,omitempty"`
	// Model is the starting checkpoint, a Hugging Face directory; "" is the
	// built-in world's model.
	Model string     `yaml:"model"`
	Data  DataConfig `yaml:"data"`
	Chat  ChatConfig `yaml:"chat"`
	Seed  uint64     `yaml:"seed"` // data order, sampling and every random draw
	// Backend is where the run trains and samples; nil is the local
	// engine.
	Backend *BackendConfig `yaml:"backend,omitempty"`

	// Rollouts.

	Steps          int     `yaml:"steps"`            // training steps
	PromptsPerStep int     `yaml:"prompts_per_step"` // questions per step
	GroupSize      int     `yaml:"group_size"`       // samples per question and prompt variant (G)
	MaxTokens      int     `yaml:"max_tokens"`       // response budget (also Dr.GRPO's normalizer)
	Temperature    float32 `yaml:"temperature"`      // sampling temperature of rollouts

	// Optimization.

	LR          float64           `yaml:"lr"`     // peak learning rate of the shared update
	Warmup      int               `yaml:"warmup"` // warmup optimizer steps of the constant schedule
	AdamW       optim.AdamWConfig `yaml:"adamw"`
	GradClip    float32           `yaml:"grad_clip"`    // global norm; 0 disables
	Epochs      int               `yaml:"epochs"`       // passes over each step's batch (PPO epochs)
	MiniBatches int               `yaml:"mini_batches"` // optimizer steps per epoch
	// MicroBatchTokens bounds the tokens of one forward/backward pass; a
	// larger mini-batch accumulates gradients over several. 0 means one
	// pass per mini-batch.
	MicroBatchTokens int `yaml:"micro_batch_tokens"`

	// Loss. Clip bounds of 0 take the algorithm's (0.2/0.2; DAPO 0.2/0.28).

	ClipLow     float32             `yaml:"clip_low"`
	ClipHigh    float32             `yaml:"clip_high"`
	KL          float32             `yaml:"kl"`           // β of the KL to the starting model; 0 disables
	KLEstimator backend.KLEstimator `yaml:"kl_estimator"` // k1, k2 or k3
	// KLInReward subtracts β·KL from each answer's reward (the sum of
	// the estimator over its tokens, from the sampler's logprobs) instead
	// of adding the KL term to the loss.
	KLInReward bool    `yaml:"kl_in_reward"`
	Entropy    float32 `yaml:"entropy"` // entropy bonus
	// PolicyLoss is "clipped" (PPO's surrogate, the default) or
	// "reinforce_positive" (REINFORCE on max(A, 0), MEML-GRPO's eq. 6).
	PolicyLoss string `yaml:"policy_loss"`
	// AdvantageNorm is what each group's r − mean(r) is divided by:
	// "group_std" (the std of the group's rewards; grpo's and dapo's
	// default), "none" (dr-grpo's and reinforce++'s, and MEML-GRPO's eq. 5)
	// or "correctness_std" (the std of the group's verdicts, nothing when
	// they agree, so that reward shaping keeps its size relative to a right
	// answer; the default when consultation is in parts and the algorithm
	// would divide by the group's std). Unset takes these defaults; rft
	// and sft have no advantages to divide.
	AdvantageNorm method.AdvantageNorm `yaml:"advantage_norm,omitempty"`

	// Guidance parts.

	// Parts lists the guidance parts that run, each configured by its
	// section below (a section of a part not listed is an error). Unset,
	// the dapo algorithm takes dynamic_sampling and overlong_penalty, and
	// every other algorithm none.
	Parts           []string               `yaml:"parts"`
	ExpertPrompts   *ExpertPromptsConfig   `yaml:"expert_prompts,omitempty"`
	DynamicSampling *DynamicSamplingConfig `yaml:"dynamic_sampling,omitempty"`
	OverlongPenalty *OverlongPenaltyConfig `yaml:"overlong_penalty,omitempty"`
	MutualLearning  *MutualLearningConfig  `yaml:"mutual_learning,omitempty"`
	HardBuffer      *HardBufferConfig      `yaml:"hard_buffer,omitempty"`
	Consultation    *ConsultationConfig    `yaml:"consultation,omitempty"`
	MetaExperience  *MetaExperienceConfig  `yaml:"meta_experience,omitempty"`

	// Evaluation and checkpoints.

	EvalEvery    int `yaml:"eval_every"`    // steps between held-out evaluations; 0: only at the end
	EvalProblems int `yaml:"eval_problems"` // held-out validation problems (per level on the world); 0 takes the whole test file
	// TestProblems are further held-out problems (per level on the world),
	// scored once at the end: with expert prompts, the expert best on the
	// final validation evaluation is reported on them, beside the majority
	// vote (MEML-GRPO's inference). 0: no test split.
	TestProblems int `yaml:"test_problems"`
	// EvalSamples is n, the answers sampled per problem at the end of the
	// run (on the test split, or the validation one without it) at
	// EvalTemperature, for their mean accuracy, pass@n and per-problem
	// variance (EAPO's Pass@32 mean and Var) beside greedy accuracy; 0
	// samples none.
	EvalSamples     int     `yaml:"eval_samples,omitempty"`
	EvalTemperature float32 `yaml:"eval_temperature,omitempty"` // 0 means temperature
	CheckpointEvery int     `yaml:"checkpoint_every"`           // steps between checkpoints; 0: only at the end
	KeepLast        int     `yaml:"keep_last"`                  // checkpoints kept
}

// DataConfig says what a run trains and evaluates on.
type DataConfig struct {
	// Name is "world" (the default: the built-in arithmetic world), one of
	// task.Names() (gsm8k, math500, mathqa, strategyqa, deepscaler, …), or
	// any label for a JSONL/JSON/Parquet file read through Fields.
	Name string `yaml:"name"`
	// Train is the training file of a dataset.
	Train string `yaml:"train,omitempty"`
	// Test is the held-out file; "" holds out EvalProblems examples of
	// Train, which training then never draws.
	Test string `yaml:"test,omitempty"`
	// Order is how a dataset's training examples are drawn: "shuffle" (the
	// default, "": each epoch a fresh order seeded by the run's seed) or
	// "file" (the file's own order, every epoch), so that another trainer
	// given the same file draws the same questions at every step. With
	// "file", the held-out examples come from data.test: holding them out
	// of the training file would reorder it.
	Order string `yaml:"order,omitempty"`
	// Levels are the world's difficulty levels (0 to 6); default the
	// hardest, 6.
	Levels []int `yaml:"levels,omitempty"`
	// World is the world version (1, the default, or 2: see
	// world.Version2), whose pretrained model a run without a model
	// starts from. The questions are the same in every version.
	World int `yaml:"world,omitempty"`
	// Fields name the question/answer/solution fields of a file that is not
	// one of the named datasets; set, they override a named dataset's
	// reader.
	Fields *FieldsConfig `yaml:"fields,omitempty"`
	// WarmupFraction reserves that fraction of the training questions,
	// chosen by their text (task.Fraction), for the warm-up SFT that
	// precedes RL: MEML-GRPO trains MEF on 20% and RL on the other 80%.
	// 0 uses every question; set, Part says which side the run trains on.
	WarmupFraction float64 `yaml:"warmup_fraction,omitempty"`
	// Part is "warmup" or "rl" when WarmupFraction is set.
	Part string `yaml:"part,omitempty"`
	// DME is a multi-expert dataset as rlvr experts collect writes it
	// (MEML-GRPO's D_ME). An sft run with it trains on the experts'
	// answers, each behind its own expert's prompt (MEF) when expert_prompts
	// is in parts; the experts trained are expert_prompts.experts (one of
	// them: ExpertX-SFT). Without expert_prompts, they are trained behind
	// the plain prompt (see DMEExperts).
	DME string `yaml:"dme,omitempty"`
	// DMEExperts, without expert_prompts in parts, are the experts whose
	// answers are trained behind the plain prompt: SFT distillation of
	// expert answers (EAPO's baseline); default every expert but the
	// reference.
	DMEExperts []int `yaml:"dme_experts,omitempty"`
	// DMEAnswers is "correct" (the default: only answers the verifier
	// accepted) or "all".
	DMEAnswers string `yaml:"dme_answers,omitempty"`
}

// The orders a dataset's training examples are drawn in (DataConfig.Order).
const (
	OrderShuffle = "shuffle"
	OrderFile    = "file"
)

// FieldsConfig names the fields of a generic dataset (JSON keys or Parquet
// columns; dotted paths reach into objects). Empty fields take the
// defaults of task.Columns.
type FieldsConfig struct {
	ID       string          `yaml:"id,omitempty"`
	Question string          `yaml:"question,omitempty"`
	Messages string          `yaml:"messages,omitempty"`
	Answer   string          `yaml:"answer,omitempty"`
	Solution string          `yaml:"solution,omitempty"`
	Choices  string          `yaml:"choices,omitempty"`
	Kind     task.AnswerKind `yaml:"kind,omitempty"` // math, multiple-choice or yes-no: the verifier used
}

// ChatConfig says how prompts reach a chat model.
type ChatConfig struct {
	// Template is "auto" (the model's chat template when it has one),
	// "on" (required: a model without one is an error) or "off" (plain
	// text prompts).
	Template string `yaml:"template"`
	// System is the system prompt of every chat prompt ("" sends none,
	// or the example's own); an expert's persona follows it in the same
	// system message, never replacing it (eval.SystemPrompt).
	System string `yaml:"system,omitempty"`
}

// ExpertPromptsConfig asks every question under several expert prompts,
// with advantages inside each expert's group (MEML-GRPO's P_i).
type ExpertPromptsConfig struct {
	// Experts are the expert indices i asked (default 1, 2, 3; 0 is the
	// dataset's own reference style).
	Experts []int `yaml:"experts"`
	// System is a chat model's expert persona, with {i} standing for the
	// index and {name} for E<i> (expert.RenderPrompt; default: the
	// paper's wording), written after chat.system in the system message.
	System string `yaml:"system"`
	// Suffix follows a plain-text prompt, with {i} and {name} as in
	// System (default the world's "@E{i}\n").
	Suffix string `yaml:"suffix"`
}

// DynamicSamplingConfig is DAPO's filter: groups all right or all wrong are
// dropped and more questions drawn.
type DynamicSamplingConfig struct {
	MaxRounds int `yaml:"max_rounds"` // extra sampling rounds per step
}

// OverlongPenaltyConfig is DAPO's soft overlong penalty over the last
// Buffer tokens of the budget.
type OverlongPenaltyConfig struct {
	Buffer int `yaml:"buffer"` // tokens; 0 means max_tokens/4
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
	Acceptance *eapo.Schedule `yaml:"acceptance,omitempty"`
	// Turns is the turn budget T(t), rounded; default linear from 3 to 1,
	// the evaluation's single turn.
	Turns *eapo.Schedule `yaml:"turns,omitempty"`
	// MaxTokens bounds an episode's whole response, expert replies
	// included; 0 means max_tokens.
	MaxTokens int `yaml:"max_tokens,omitempty"`
	// System, for a chat model, is added to the training prompt's system
	// message to grant the consult action, with {k} and {experts} filled
	// in (default eapo.ChatTrainingPrompt); evaluation prompts go
	// without it.
	System string `yaml:"system,omitempty"`
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
	// Temperature and MaxTokens are the reflection pass's sampling; 0
	// takes temperature and max_tokens. Replays sample as rollouts do.
	Temperature float32 `yaml:"temperature,omitempty"`
	MaxTokens   int     `yaml:"max_tokens,omitempty"`
	// Instruction is a chat model's instruction I, with {question},
	// {correct_ans} and {error_ans}; Validation its replay preamble, with
	// {experience}, which the question follows. Empty takes the paper's
	// (mel.PaperInstruction, mel.PaperValidation). A model
	// without a chat template uses the world's reflection format.
	Instruction string `yaml:"instruction,omitempty"`
	Validation  string `yaml:"validation,omitempty"`
}

// The guidance parts a run may list.
const (
	PartExpertPrompts   = "expert_prompts"
	PartDynamicSampling = "dynamic_sampling"
	PartOverlongPenalty = "overlong_penalty"
	PartMutualLearning  = "mutual_learning"
	PartHardBuffer      = "hard_buffer"
	PartConsultation    = "consultation"
	PartMetaExperience  = "meta_experience"
)

// Parts lists every guidance part.
var Parts = []string{PartExpertPrompts, PartDynamicSampling, PartOverlongPenalty, PartMutualLearning, PartHardBuffer, PartConsultation, PartMetaExperience}

// PaperExpertSystem is MEML-GRPO's expert prompt P_i, the one its
// experts' answers are collected under.
const PaperExpertSystem = expert.DefaultPrompt

// DefaultRL is GRPO on the world's hardest level from the built-in world
// model: 16 questions × 8 samples per step.
func DefaultRL() RLConfig {
	return RLConfig{Algorithm: method.GRPO, Data: DataConfig{Name: "world"}, Chat: ChatConfig{Template: "auto"},
		Seed: 1, Steps: 100, PromptsPerStep: 16, GroupSize: 8, MaxTokens: 256, Temperature: 1, LR: 5e-5, Warmup: 5,
		AdamW: optim.DefaultAdamW(), GradClip: 1, Epochs: 1, MiniBatches: 1, KLEstimator: backend.K3,
		EvalEvery: 25, EvalProblems: 200, CheckpointEvery: 25, KeepLast: 2}
}

// Presets are named recipes: each sets its knobs over the defaults, and a
// config file and flags then override them.
var Presets = map[string]func(*RLConfig){
	// DAPO (Yu et al. 2025): clip-higher, token-mean, dynamic sampling and
	// the soft overlong penalty.
	"dapo": func(c *RLConfig) {
		c.Algorithm = method.DAPO
		c.Parts = []string{PartDynamicSampling, PartOverlongPenalty}
		c.DynamicSampling = &DynamicSamplingConfig{MaxRounds: 3}
		c.OverlongPenalty = &OverlongPenaltyConfig{}
	},
	// MEML-GRPO (RIEL): three expert prompts with G samples each,
	// advantages per expert as eq. 5 has them (r − the expert's group
	// mean, undivided), REINFORCE on max(A, 0), mutual learning from
	// the best expert to the worst, and the hard-example SFT buffer (K 6 of
	// G 8, B 64) in the step's one gradient (eq. 11). The paper trains RL
	// at 1e-6 on 1-1.5B models; the tiny world model takes the run's lr.
	"meml-grpo": func(c *RLConfig) {
		c.Algorithm, c.PolicyLoss, c.AdvantageNorm = method.GRPO, "reinforce_positive", method.NormNone
		c.Parts = []string{PartExpertPrompts, PartMutualLearning, PartHardBuffer}
		c.ExpertPrompts = &ExpertPromptsConfig{Experts: []int{1, 2, 3}}
		c.MutualLearning, c.HardBuffer = &MutualLearningConfig{}, &HardBufferConfig{}
	},
	// SFT on reference solutions (a baseline of every paper).
	"sft": func(c *RLConfig) { c.Algorithm, c.LR, c.Warmup = method.SFT, 1e-4, 10 },
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var out []string
	for k := range Presets {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ApplyPreset sets a preset's knobs; "" applies nothing.
func (c *RLConfig) ApplyPreset(name string) error {
	if name == "" {
		return nil
	}
	p, ok := Presets[name]
	if !ok {
		return fmt.Errorf("train config: preset %q is not one of %v", name, PresetNames())
	}
	p(c)
	c.Preset = name
	return nil
}

// IsWorld says the run trains on the built-in world.
func (d *DataConfig) IsWorld() bool { return d.Name == "" || d.Name == "world" }

// Resolve fills the defaults that depend on other knobs and reports every
// inconsistent setting at once.
func (c *RLConfig) Resolve() error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !slices.Contains(method.Algorithms, c.Algorithm) {
		add("algorithm %q is not one of %v", c.Algorithm, method.Algorithms)
	}
	if c.Parts == nil && c.Algorithm == method.DAPO {
		c.Parts = []string{PartDynamicSampling, PartOverlongPenalty}
	}
	for _, p := range c.Parts {
		if !slices.Contains(Parts, p) {
			add("parts: %q is not one of %v", p, Parts)
		}
	}
	enabled := func(p string) bool { return slices.Contains(c.Parts, p) }
	for _, s := range []struct {
		part string
		set  bool
	}{{PartExpertPrompts, c.ExpertPrompts != nil}, {PartDynamicSampling, c.DynamicSampling != nil}, {PartOverlongPenalty, c.OverlongPenalty != nil},
		{PartMutualLearning, c.MutualLearning != nil}, {PartHardBuffer, c.HardBuffer != nil}, {PartConsultation, c.Consultation != nil}, {PartMetaExperience, c.MetaExperience != nil}} {
		if s.set && !enabled(s.part) {
			add("section %s is set but %s is not in parts %v", s.part, s.part, c.Parts)
		}
	}
	if enabled(PartExpertPrompts) {
		if c.ExpertPrompts == nil {
			c.ExpertPrompts = &ExpertPromptsConfig{}
		}
		e := c.ExpertPrompts
		if len(e.Experts) == 0 {
			e.Experts = []int{1, 2, 3}
		}
		if e.System == "" {
			e.System = PaperExpertSystem
		}
		if e.Suffix == "" {
			e.Suffix = expert.WorldPrompt
		}
		for _, i := range e.Experts {
			if i < 0 {
				add("expert_prompts.experts: %d is negative", i)
			}
		}
	}
	if enabled(PartDynamicSampling) {
		if c.DynamicSampling == nil {
			c.DynamicSampling = &DynamicSamplingConfig{MaxRounds: 3}
		}
		if c.DynamicSampling.MaxRounds < 0 {
			add("dynamic_sampling.max_rounds = %d is negative", c.DynamicSampling.MaxRounds)
		}
	}
	if enabled(PartOverlongPenalty) {
		if c.OverlongPenalty == nil {
			c.OverlongPenalty = &OverlongPenaltyConfig{}
		}
		if c.OverlongPenalty.Buffer == 0 {
			c.OverlongPenalty.Buffer = c.MaxTokens / 4
		}
		if b := c.OverlongPenalty.Buffer; b < 0 || b >= c.MaxTokens {
			add("overlong_penalty.buffer = %d must be in [0, max_tokens)", b)
		}
	}
	if enabled(PartMutualLearning) {
		if c.MutualLearning == nil {
			c.MutualLearning = &MutualLearningConfig{}
		}
		m := c.MutualLearning
		if m.Weight == 0 {
			m.Weight = 1
		}
		if m.Estimator == "" {
			m.Estimator = "sequence"
		}
		if m.Estimator != "sequence" && m.Estimator != "exact" {
			add("mutual_learning.estimator %q is not sequence or exact", m.Estimator)
		}
		if !enabled(PartExpertPrompts) {
			add("mutual_learning needs expert_prompts in parts: it compares experts")
		}
	}
	if enabled(PartHardBuffer) {
		if c.HardBuffer == nil {
			c.HardBuffer = &HardBufferConfig{}
		}
		h := c.HardBuffer
		if h.K == 0 {
			h.K = 6
		}
		if h.Capacity == 0 {
			h.Capacity = 64
		}
		oneOf(add, "hard_buffer.update", &h.Update, BufferJoint, BufferSeparate)
		switch {
		case h.Update == BufferJoint && h.LR != 0:
			add("hard_buffer.lr = %v is the separate update's; the joint update trains at the run's lr", h.LR)
		case h.Update == BufferSeparate && h.LR == 0:
			h.LR = 1e-5
		}
		if h.Update == BufferSeparate && c.Backend.remote() {
			add("hard_buffer.update separate needs an optimizer state of its own, which a remote backend does not keep; use joint")
		}
		if h.Weight == 0 {
			h.Weight = 1
		}
		if h.K < 0 || h.K >= c.GroupSize && c.GroupSize > 0 {
			add("hard_buffer.k = %d must be in [0, group_size)", h.K)
		}
		if h.Capacity < 0 {
			add("hard_buffer.capacity = %d must be positive", h.Capacity)
		}
	}
	if enabled(PartMetaExperience) {
		if c.MetaExperience == nil {
			c.MetaExperience = &MetaExperienceConfig{}
		}
		m := c.MetaExperience
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
		if m.MaxTokens == 0 {
			m.MaxTokens = c.MaxTokens
		}
		if m.MaxTokens < 0 || m.MaxTokens > 1<<20 {
			add("meta_experience.max_tokens = %d must be in [1, %d]", m.MaxTokens, 1<<20)
		}
		if m.Temperature == 0 {
			m.Temperature = c.Temperature
		}
		if m.Instruction != "" && !strings.Contains(m.Instruction, "{correct_ans}") || m.Instruction != "" && !strings.Contains(m.Instruction, "{error_ans}") {
			add("meta_experience.instruction must hold {correct_ans} and {error_ans}: the pair it asks about")
		}
		if m.Validation != "" && !strings.Contains(m.Validation, "{experience}") {
			add("meta_experience.validation must hold {experience}: the meta-experience it replays")
		}
	}
	if c.Algorithm == method.SFT {
		for _, p := range []string{PartDynamicSampling, PartOverlongPenalty, PartMutualLearning, PartHardBuffer, PartMetaExperience} {
			if enabled(p) {
				add("part %s needs rollouts, which sft does not sample", p)
			}
		}
	}
	// The algorithm's own clip range unless the config sets one, written
	// back so the saved config shows what runs.
	if fam, err := method.NewFamily(c.Algorithm, c.MaxTokens); err == nil {
		if c.ClipLow == 0 {
			c.ClipLow = fam.ClipLow
		}
		if c.ClipHigh == 0 {
			c.ClipHigh = fam.ClipHigh
		}
	}
	c.resolveAdvantageNorm(add)
	// Upper bounds far beyond any real run, so that a typo fails here
	// rather than as an allocation of terabytes.
	for _, f := range []struct {
		name   string
		v, max int
	}{{"steps", c.Steps, 100_000_000}, {"prompts_per_step", c.PromptsPerStep, 1 << 16}, {"group_size", c.GroupSize, 4096},
		{"max_tokens", c.MaxTokens, 1 << 20}, {"epochs", c.Epochs, 1000}, {"mini_batches", c.MiniBatches, 1 << 16}} {
		if f.v <= 0 || f.v > f.max {
			add("%s = %d must be in [1, %d]", f.name, f.v, f.max)
		}
	}
	if c.LR > 1 {
		add("lr = %v is more than 1", c.LR)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"warmup", c.Warmup}, {"micro_batch_tokens", c.MicroBatchTokens}, {"eval_every", c.EvalEvery}, {"eval_problems", c.EvalProblems}, {"test_problems", c.TestProblems}, {"checkpoint_every", c.CheckpointEvery}, {"keep_last", c.KeepLast}} {
		if f.v < 0 {
			add("%s = %d must not be negative", f.name, f.v)
		}
	}
	if c.EvalTemperature == 0 {
		c.EvalTemperature = c.Temperature
	}
	if c.EvalSamples < 0 || c.EvalSamples > 4096 {
		add("eval_samples = %d must be in [0, 4096]", c.EvalSamples)
	}
	if c.GroupSize == 1 && c.Algorithm != method.RFT && c.Algorithm != method.SFT {
		add("group_size 1 leaves group-relative advantages always zero")
	}
	c.resolveData(add)
	if enabled(PartConsultation) {
		c.resolveConsultation(add)
	}
	oneOf(add, "policy_loss", &c.PolicyLoss, "clipped", "reinforce_positive")
	oneOf(add, "chat.template", &c.Chat.Template, "auto", "on", "off")
	c.resolveBackend(add)
	if c.KL != 0 && !slices.Contains([]backend.KLEstimator{backend.K1, backend.K2, backend.K3}, c.KLEstimator) {
		add("kl_estimator %q is not k1, k2 or k3", c.KLEstimator)
	}
	type real struct {
		name string
		v    float64
		zero bool // zero allowed
	}
	reals := []real{{"lr", c.LR, false}, {"temperature", float64(c.Temperature), false}, {"eval_temperature", float64(c.EvalTemperature), false}, {"kl", float64(c.KL), true},
		{"entropy", float64(c.Entropy), true}, {"grad_clip", float64(c.GradClip), true}, {"clip_low", float64(c.ClipLow), true}, {"clip_high", float64(c.ClipHigh), true}}
	if m := c.MutualLearning; m != nil {
		reals = append(reals, real{"mutual_learning.weight", float64(m.Weight), false})
	}
	if h := c.HardBuffer; h != nil {
		reals = append(reals, real{"hard_buffer.lr", h.LR, h.Update != BufferSeparate}, real{"hard_buffer.weight", float64(h.Weight), false})
	}
	if m := c.MetaExperience; m != nil {
		reals = append(reals, real{"meta_experience.weight", float64(m.Weight), false}, real{"meta_experience.temperature", float64(m.Temperature), false})
	}
	for _, f := range reals {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v == 0 && !f.zero {
			if f.zero {
				add("%s = %v must be finite and not negative", f.name, f.v)
			} else {
				add("%s = %v must be finite and positive", f.name, f.v)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("train config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// resolveAdvantageNorm fills the algorithm's advantage normalization
// unless the config sets one. With consultation, a division by the
// group's std would make the consult penalty alone decide the sign and
// size of every advantage in the groups whose answers are all right or
// all wrong (most of them on a sparse task), so the verdicts' std divides
// instead (docs/eapo.md).
func (c *RLConfig) resolveAdvantageNorm(add func(string, ...any)) {
	if c.Algorithm == method.RFT || c.Algorithm == method.SFT {
		if c.AdvantageNorm != "" {
			add("advantage_norm %q: %s trains without advantages", c.AdvantageNorm, c.Algorithm)
		}
		return
	}
	if c.AdvantageNorm != "" {
		if !slices.Contains(method.AdvantageNorms, c.AdvantageNorm) {
			add("advantage_norm %q is not one of %v", c.AdvantageNorm, method.AdvantageNorms)
		}
		return
	}
	fam, err := method.NewFamily(c.Algorithm, c.MaxTokens)
	if err != nil {
		return // the algorithm's own error is reported
	}
	c.AdvantageNorm = fam.Norm
	if c.AdvantageNorm == method.NormGroupStd && slices.Contains(c.Parts, PartConsultation) {
		c.AdvantageNorm = method.NormCorrectnessStd
	}
}

func (c *RLConfig) resolveConsultation(add func(string, ...any)) {
	if c.Consultation == nil {
		c.Consultation = &ConsultationConfig{}
	}
	k := c.Consultation
	if c.Algorithm == method.SFT {
		add("consultation: sft trains on reference solutions, without rollouts to consult in")
	}
	if len(k.Experts) == 0 {
		if !c.Data.IsWorld() {
			add("consultation.experts: give the pool (url, model, world or reply for each expert)")
		}
		k.Experts = expert.WorldPool()
	}
	// On a dataset (chat-schema questions), experts are asked through the
	// chat API unless the config says otherwise; on the world ("Q:…"
	// lines), through completions.
	if err := expert.CheckAll("consultation.experts", k.Experts, !c.Data.IsWorld()); err != nil {
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
	if p := *k.Penalty; math.IsNaN(p) || math.IsInf(p, 0) || p < 0 {
		add("consultation.penalty = %v must be finite and not negative", p)
	}
	if k.Acceptance == nil {
		k.Acceptance = &eapo.Schedule{Kind: eapo.Cosine, Start: 1, End: 0}
	}
	if k.Turns == nil {
		k.Turns = &eapo.Schedule{Kind: eapo.Linear, Start: 3, End: 1}
	}
	for name, s := range map[string]*eapo.Schedule{"consultation.acceptance": k.Acceptance, "consultation.turns": k.Turns} {
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
		k.MaxTokens = c.MaxTokens
	}
	if k.MaxTokens < 0 || k.MaxTokens > 1<<20 {
		add("consultation.max_tokens = %d must be in [1, %d]", k.MaxTokens, 1<<20)
	}
	if k.System == "" && !c.Data.IsWorld() {
		k.System = eapo.ChatTrainingPrompt
	}
}

// oneOf resolves the setting field, *v, that takes one of options: unset,
// it takes the first (the default); another value is an error naming them.
func oneOf(add func(string, ...any), field string, v *string, options ...string) {
	if *v == "" {
		*v = options[0]
		return
	}
	if slices.Contains(options, *v) {
		return
	}
	list := options[len(options)-1]
	if len(options) > 1 {
		list = strings.Join(options[:len(options)-1], ", ") + " or " + list
	}
	add("%s %q is not %s", field, *v, list)
}

func (c *RLConfig) resolveData(add func(string, ...any)) {
	d := &c.Data
	if f := d.WarmupFraction; math.IsNaN(f) || f < 0 || f >= 1 {
		add("data.warmup_fraction = %v must be in [0, 1)", f)
	}
	switch {
	case d.WarmupFraction > 0 && d.Part != "warmup" && d.Part != "rl":
		add("data.part %q: with data.warmup_fraction set, say which side the run trains on: warmup or rl", d.Part)
	case d.WarmupFraction == 0 && d.Part != "":
		add("data.part %q needs data.warmup_fraction, the size of the warm-up side", d.Part)
	}
	if d.DME != "" {
		if c.Algorithm != method.SFT {
			add("data.dme: the experts' answers are trained by sft (MEF), not %s", c.Algorithm)
		}
		if slices.Contains(c.Parts, PartExpertPrompts) && len(d.DMEExperts) > 0 {
			add("data.dme_experts is for training answers behind the plain prompt; with expert_prompts, expert_prompts.experts chooses them")
		}
		for _, i := range d.DMEExperts {
			if i < 0 {
				add("data.dme_experts: %d is negative", i)
			}
		}
	}
	switch d.DMEAnswers {
	case "":
		if d.DME != "" {
			d.DMEAnswers = "correct"
		}
	case "correct", "all":
		if d.DME == "" {
			add("data.dme_answers is set but data.dme is not")
		}
	default:
		add("data.dme_answers %q is not correct or all", d.DMEAnswers)
	}
	oneOf(add, "data.order", &d.Order, OrderShuffle, OrderFile)
	if d.Order == OrderFile && !d.IsWorld() && d.Test == "" {
		add("data.order file needs data.test: holding the held-out examples out of data.train would reorder it")
	}
	if d.IsWorld() {
		d.Name = "world"
		if d.Train != "" || d.Test != "" || d.Fields != nil {
			add("data: the world generates its problems; train, test and fields are for datasets")
		}
		if d.Order == OrderFile {
			add("data.order file is for a dataset's file; the world generates its problems in a seeded order")
		}
		if len(d.Levels) == 0 {
			d.Levels = []int{6}
		}
		if d.World == 0 {
			d.World = 1
		}
		if !slices.Contains(world.Versions, d.World) {
			add("data.world: no world version %d (%v)", d.World, world.Versions)
		}
		if c.Model != "" && d.World != 1 {
			add("data.world %d names the model a run starts from, but model is %q", d.World, c.Model)
		}
		if c.EvalProblems == 0 {
			add("eval_problems = 0: the world's held-out evaluation needs problems")
		}
		for _, lv := range d.Levels {
			if lv < 0 || lv >= len(world.Levels) {
				add("data.levels: no world level %d (0 to %d)", lv, len(world.Levels)-1)
			}
		}
		return
	}
	if len(d.Levels) > 0 || d.World != 0 {
		add("data.levels and data.world are the world's, but data.name is %q", d.Name)
	}
	if d.Fields == nil && !slices.Contains(task.Names(), d.Name) {
		add("data.name %q is not world or one of %v (or give data.fields to read any file)", d.Name, task.Names())
	}
	if d.Train == "" {
		add("data.train: a dataset needs its training file")
	}
	if f := d.Fields; f != nil && f.Kind != "" && !slices.Contains([]task.AnswerKind{task.Math, task.MultipleChoice, task.YesNo}, f.Kind) {
		add("data.fields.kind %q is not math, multiple-choice or yes-no", f.Kind)
	}
}

// LoadRLConfig reads a YAML config: the defaults, then the preset (the
// file's, or preset when not empty), then the file. Unknown keys are
// errors naming them and their line.
func LoadRLConfig(path, preset string) (RLConfig, error) {
	cfg := DefaultRL()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("train config: %w", err)
	}
	if preset == "" {
		var head struct {
			Preset string `yaml:"preset"`
		}
		if err := yaml.Unmarshal(b, &head); err != nil {
			return cfg, fmt.Errorf("train config: %s: %w", path, err)
		}
		preset = head.Preset
	}
	if err := cfg.ApplyPreset(preset); err != nil {
		return cfg, fmt.Errorf("%w (in %s)", err, path)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("train config: %s: %w", path, err)
	}
	if preset != "" {
		cfg.Preset = preset
	}
	return cfg, nil
}
