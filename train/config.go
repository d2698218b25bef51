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
	"rlvr/backend/remote"
	"rlvr/engine/optim"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/task"
	"rlvr/task/world"
)

// RLConfig is every knob of a training run, grouped by what it controls.
// The core knobs are flat, as in TRL's GRPOConfig; each guidance part has a
// section of its own and runs only when Parts names it. DefaultRL gives
// every default; a preset (see PresetNames) names a paper's recipe.
type RLConfig struct {
	// What is trained and on what.

	// Algorithm is the objective: grpo, dr-grpo, dapo, reinforce++, rft
	// (RL), or sft (NLL on reference solutions, no rollouts).
	Algorithm method.Algorithm `yaml:"algorithm"`
	// Preset names a recipe applied over the defaults before the config
	// file and flags (see PresetNames); "" applies none.
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
	// GradientCheckpointing keeps one block's activations instead of
	// every block's, and recomputes each block's forward in the backward
	// (engine/model.Model.Recompute; TRL's gradient_checkpointing). Long
	// sequences need it: a block saves H·T² attention probabilities per
	// sequence. Gradients are bit-identical either way; the local engine
	// only.
	GradientCheckpointing bool `yaml:"gradient_checkpointing,omitempty"`
	// SampleBatch bounds the sequences rlvr's sampler draws at once, in
	// rollouts, a part's sampling passes and evaluation (vLLM's
	// max_num_seqs): a prompt's samples start as others end. Each
	// completion depends only on its seed, so it changes speed and memory,
	// never what is sampled. A small model samples fastest with a batch
	// whose KV cache stays in the CPU's cache. 0: a step's requests all at
	// once, and 64 at a time in evaluation.
	SampleBatch int `yaml:"sample_batch,omitempty"`
	// Precision is the learner's arithmetic (engine/model.Precision):
	// "fp32" (the default) computes everything in float32; "bf16" gives
	// the matrix products bf16 inputs with float32 accumulation, and keeps
	// the float32 master weights, AdamW, norms, softmax, RoPE, the loss
	// and the logprobs in float32 (PyTorch's autocast split). It is the
	// sampler's too unless SamplerPrecision says otherwise. The local
	// engine only. A resumed run may change it: the checkpoint holds the
	// float32 weights either way, and the steps after follow the new
	// precision's arithmetic.
	Precision string `yaml:"precision,omitempty"`
	// SamplerPrecision is the sampler's arithmetic, in rollouts, a part's
	// sampling passes and evaluation: "fp32" or "bf16"; unset, Precision.
	// A sampler in another precision than the learner draws from a
	// slightly different distribution; the loop logs the gap each step
	// (logprob_gap/mean, logprob_gap/max), and SamplerCorrection corrects
	// for it.
	SamplerPrecision string `yaml:"sampler_precision,omitempty"`
	// SamplerCorrection, when set, weighs each sampled token's policy
	// gradient by the truncated importance weight min(π_old/μ, cap)
	// between the learner before the step's update (π_old) and the
	// sampler (μ), and takes the policy ratio against π_old (verl's
	// rollout importance sampling; TRL's
	// vllm_importance_sampling_correction with vllm_importance_sampling_cap).
	// It costs a forward pass over the batch each step. nil (the default)
	// leaves the sampler's logprobs as the ratio's denominator.
	SamplerCorrection *SamplerCorrectionConfig `yaml:"sampler_correction,omitempty"`
	// Async, when set, samples the next steps' batches while the learner
	// trains the current one, from weights at most max_staleness steps
	// old (AsyncConfig; docs/scale-out.md, "Async RL"). nil (the default)
	// samples each step's batch from the weights that train it.
	Async *AsyncConfig `yaml:"async,omitempty"`
	// NoSignal is what a step whose batch gives no gradient does (every
	// group all right or all wrong, say): NoSignalSkip takes no optimizer
	// step, so the weights and Adam's state stay as they were;
	// NoSignalStep takes its optimizer steps on a zero gradient, as TRL,
	// verl and OpenRLHF do, so Adam's momentum moves the weights on.
	NoSignal string `yaml:"no_signal"`

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
	// MaskTruncated leaves the answers the token budget cut off out of the
	// loss, their rewards still in their groups' statistics (DAPO's
	// overlong filtering; TRL's mask_truncated_completions).
	MaskTruncated bool `yaml:"mask_truncated,omitempty"`
	// AdvantageNorm is what each group's r − mean(r) is divided by:
	// "group_std" (the std of the group's rewards; grpo's and dapo's
	// default), "none" (dr-grpo's and reinforce++'s, and MEML-GRPO's eq. 5),
	// "correctness_std" (the std of the group's verdicts, nothing when
	// they agree, so that reward shaping keeps its size relative to a right
	// answer) or "batch_std" (the std of every reward of the step, TRL's
	// scale_rewards="batch"). Unset takes the algorithm's default as the listed parts
	// change it (consultation divides by the verdicts' std where the
	// algorithm would divide by the group's: part.Part.AdvantageNorm); rft
	// and sft have no advantages to divide.
	AdvantageNorm method.AdvantageNorm `yaml:"advantage_norm,omitempty"`

	// Guidance parts.

	// Parts lists the guidance parts that run (see package part; a part's
	// package registers it), each configured by its section, a top-level
	// key of the part's name (a section of a part not listed is an error).
	// Unset, an algorithm takes the parts registered as its defaults: dapo
	// takes dynamic_sampling and overlong_penalty, every other algorithm
	// none.
	Parts []string `yaml:"parts"`
	// Sections are the parts' sections by part name; part.Get reads one.
	// They are written after parts, in registry order.
	Sections part.Sections `yaml:"-"`

	// ColdStart, when set, is an SFT stage before the first step that
	// teaches the listed parts' protocols to a model that does not follow
	// them from the prompt (EAPO's consult action, MEL's reflection), on
	// demonstrations written from training examples; see ColdStartConfig.
	ColdStart *ColdStartConfig `yaml:"cold_start,omitempty"`

	// Evaluation and checkpoints.

	EvalEvery    int `yaml:"eval_every"`    // steps between held-out evaluations; 0: only at the end
	EvalProblems int `yaml:"eval_problems"` // held-out validation problems (per level on the world); 0 takes the whole test file, or validation file (data.validation)
	// TestProblems are further held-out problems (per level on the world),
	// scored once at the end: with expert prompts, the expert best on the
	// final validation evaluation is reported on them, beside the majority
	// vote (MEML-GRPO's inference). 0: no test split; with data.validation
	// set, the whole of data.test.
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
	// KeepOptimizer is which of the kept checkpoints hold the optimizer
	// state beside the model: "all" (the zero value "" means it), or
	// "last", the one just written, which is where a resume starts; the
	// others then hold only what is read again to evaluate or export them,
	// the model: a third of the disk when every parameter trains (AdamW's
	// two moments are twice the float32 weights). It is TRL's save_only_model=True for
	// every checkpoint but the newest, so that a run can still resume. A
	// resume never starts from a checkpoint without the optimizer state:
	// with "last", a damaged newest checkpoint ends a resume rather than
	// restarting the optimizer from an older one.
	KeepOptimizer string `yaml:"keep_optimizer,omitempty"`
	// ShowAnswers is how many answers of the latest step's first group,
	// with their rewards, the run's samples.jsonl keeps at each
	// evaluation for reading (TRL's log_completions); 0 keeps none.
	ShowAnswers int `yaml:"show_answers,omitempty"`
}

// SamplerCorrectionConfig is the truncated importance-sampling correction
// between the sampler and the learner (backend.SamplerCorrection).
type SamplerCorrectionConfig struct {
	// Cap truncates the weight; at least 1 (verl's rollout_is_threshold
	// defaults to 2). It bounds the variance a token the sampler
	// under-rated can add, at the price of a bias on those tokens.
	Cap float64 `yaml:"cap"`
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
	// Validation is where a dataset's validation problems come from: the
	// problems scored during training, on which every choice a run makes
	// (the expert best on the final validation, reported on test) is made.
	// "" takes them from Test, as it takes the test_problems test problems
	// (the first EvalProblems of Test's seeded shuffle, the next
	// TestProblems; without Test, both are held out of Train). Set, Test is
	// the test split alone: all of it when TestProblems is 0, else the
	// first TestProblems of its seeded shuffle, and no choice is made on
	// it. ValidationTrain ("train") holds EvalProblems examples of Train out
	// (a seeded shuffle of its usable examples: the same ones for runs of
	// the same seed, file, model and prompt, such as MEML-GRPO's warm-up
	// run and its RL run), never trained on, on either side of the warm-up
	// split; with Order "file" it is refused, as holding examples out of
	// Train would change the questions each step draws. Any other value is
	// a validation file, of which the first EvalProblems of a seeded
	// shuffle are scored (0: all of it).
	Validation string `yaml:"validation,omitempty"`
	// Order is how a dataset's training examples are drawn: "shuffle" (the
	// default, "": each epoch a fresh order seeded by the run's seed) or
	// "file" (the file's own order, every epoch), so that another trainer
	// given the same file draws the same questions at every step. With
	// "file", the held-out examples come from data.test or a validation
	// file: holding them out of the training file would reorder it.
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
	// answers. When the method asks under prompt variants (the
	// expert_prompts part), expert i's answers are trained behind the
	// variant E<i> alone, for the variants there are (MEF; one of them:
	// ExpertX-SFT); without variants, behind the plain prompt (see
	// DMEExperts).
	DME string `yaml:"dme,omitempty"`
	// DMEExperts, without prompt variants, are the experts whose answers
	// are trained behind the plain prompt: SFT distillation of expert
	// answers (EAPO's baseline); default every expert but the reference.
	DMEExperts []int `yaml:"dme_experts,omitempty"`
	// DMEAnswers is "correct" (the default: only answers the verifier
	// accepted) or "all".
	DMEAnswers string `yaml:"dme_answers,omitempty"`
}

// Which checkpoints keep the optimizer state (RLConfig.KeepOptimizer).
const (
	KeepOptimizerAll  = "all"
	KeepOptimizerLast = "last"
)

// What a step without a gradient does (RLConfig.NoSignal).
const (
	NoSignalSkip = "skip"
	NoSignalStep = "step"
)

// ValidationTrain is DataConfig.Validation holding the validation problems
// out of the training file.
const ValidationTrain = "train"

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

// DefaultRL is GRPO on the world's hardest level from the built-in world
// model: 16 questions × 8 samples per step.
func DefaultRL() RLConfig {
	return RLConfig{Algorithm: method.GRPO, Data: DataConfig{Name: "world"}, Chat: ChatConfig{Template: "auto"},
		Seed: 1, Steps: 100, PromptsPerStep: 16, GroupSize: 8, MaxTokens: 256, Temperature: 1, LR: 5e-5, Warmup: 5,
		AdamW: optim.DefaultAdamW(), GradClip: 1, Epochs: 1, MiniBatches: 1, NoSignal: NoSignalSkip, KLEstimator: backend.K3,
		EvalEvery: 25, EvalProblems: 200, CheckpointEvery: 25, KeepLast: 2}
}

func init() {
	// SFT on reference solutions (a baseline of every paper).
	part.RegisterPreset("sft", `
algorithm: sft
lr: 0.0001
warmup: 10
`)
}

// PresetNames lists the presets: the papers' recipes their packages
// register (part.RegisterPreset) and sft.
func PresetNames() []string { return part.PresetNames() }

// ApplyPreset decodes a preset's YAML over the config; "" applies nothing.
func (c *RLConfig) ApplyPreset(name string) error {
	if name == "" {
		return nil
	}
	y, ok := part.Preset(name)
	if !ok {
		return fmt.Errorf("train config: preset %q is not one of %v", name, PresetNames())
	}
	dec := yaml.NewDecoder(strings.NewReader(y))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("train config: preset %s: %w", name, err)
	}
	c.Preset = name
	return nil
}

// IsWorld says the run trains on the built-in world.
func (d *DataConfig) IsWorld() bool { return d.Name == "" || d.Name == "world" }

// Resolve checks the config and resolves it into the recipe of its
// method: the parts that run and their resolved sections, and the
// objective, the algorithm's defaults under the config's settings. It
// reports every inconsistent setting at once, the sections' included.
// What the method and its parts resolve is the recipe's alone, never
// written back into the config (the run's config.yaml shows it); the
// defaults of train's own knobs (data levels, eval temperature, the
// backend's) are filled into the config.
func (c *RLConfig) Resolve() (*part.Recipe, error) {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !slices.Contains(method.Algorithms, c.Algorithm) {
		add("algorithm %q is not one of %v", c.Algorithm, method.Algorithms)
	}
	parts := c.Parts
	if parts == nil {
		if len(part.Names()) == 0 {
			// Nothing would say which parts the algorithm takes.
			add("parts: unset, and no guidance part is registered: a program that trains imports rlvr/method/part/all")
		}
		parts = part.Defaults(c.Algorithm)
	}
	r := &part.Recipe{Run: c.partRun(parts), ShowAnswers: c.ShowAnswers}
	r.Sections = part.Resolve(r.Run, c.Sections, add)
	r.Family, r.RewardKL = c.objective(parts, add)
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
	}{{"warmup", c.Warmup}, {"micro_batch_tokens", c.MicroBatchTokens}, {"sample_batch", c.SampleBatch}, {"eval_every", c.EvalEvery}, {"eval_problems", c.EvalProblems}, {"test_problems", c.TestProblems}, {"checkpoint_every", c.CheckpointEvery}, {"keep_last", c.KeepLast}} {
		if f.v < 0 {
			add("%s = %d must not be negative", f.name, f.v)
		}
	}
	part.OneOf(add, "no_signal", &c.NoSignal, NoSignalSkip, NoSignalStep)
	if k := c.KeepOptimizer; k != "" && k != KeepOptimizerAll && k != KeepOptimizerLast {
		add("keep_optimizer %q is not %s or %s", k, KeepOptimizerAll, KeepOptimizerLast)
	}
	if c.EvalTemperature == 0 {
		c.EvalTemperature = c.Temperature
	}
	if c.ShowAnswers < 0 || c.ShowAnswers > 1024 {
		add("show_answers = %d must be in [0, 1024]", c.ShowAnswers)
	}
	if c.EvalSamples < 0 || c.EvalSamples > 4096 {
		add("eval_samples = %d must be in [0, 4096]", c.EvalSamples)
	}
	if c.GroupSize == 1 && c.Algorithm != method.RFT && c.Algorithm != method.SFT {
		add("group_size 1 leaves group-relative advantages always zero")
	}
	c.resolveData(add)
	part.OneOf(add, "policy_loss", &c.PolicyLoss, "clipped", "reinforce_positive")
	part.OneOf(add, "chat.template", &c.Chat.Template, "auto", "on", "off")
	c.resolveBackend(add)
	if c.KL != 0 && !slices.Contains([]backend.KLEstimator{backend.K1, backend.K2, backend.K3}, c.KLEstimator) {
		add("kl_estimator %q is not k1, k2 or k3", c.KLEstimator)
	}
	for _, f := range []struct {
		name   string
		v      float64
		zeroOK bool
	}{{"lr", c.LR, false}, {"temperature", float64(c.Temperature), false}, {"eval_temperature", float64(c.EvalTemperature), false}, {"kl", float64(c.KL), true},
		{"entropy", float64(c.Entropy), true}, {"grad_clip", float64(c.GradClip), true}, {"clip_low", float64(c.ClipLow), true}, {"clip_high", float64(c.ClipHigh), true}} {
		part.Real(add, f.name, f.v, f.zeroOK)
	}
	c.ColdStart.resolve(c, add)
	c.resolveAsync(add)
	c.resolvePrecision(add)
	if len(errs) > 0 {
		return nil, fmt.Errorf("train config: %s", strings.Join(errs, "; "))
	}
	return r, nil
}

// partRun is what the parts' sections resolve against, with the parts
// that run.
func (c *RLConfig) partRun(parts []string) *part.Run {
	r := &part.Run{Algorithm: c.Algorithm, Steps: c.Steps, GroupSize: c.GroupSize, MaxTokens: c.MaxTokens, Temperature: c.Temperature,
		Seed: c.Seed, World: c.Data.IsWorld(), Remote: c.Backend.remote(), Parts: parts}
	if r.Remote {
		r.CheckLoss = remote.CheckLoss
	}
	if c.Data.DME != "" {
		r.DMEExperts = c.Data.DMEExperts
	}
	return r
}

// objective is the RL objective the config describes: the algorithm's
// published defaults, with the clip range, advantage normalization,
// entropy, policy loss and truncation the config sets over them. An unset
// advantage_norm takes the algorithm's as the listed parts change it
// (consultation divides by the verdicts' std, docs/eapo.md). It is also
// where the KL to the starting model is placed, for the whole run: in the
// loss (the family's RefKL) or, with kl_in_reward, in the reward (the
// shaper returned). sft has neither.
func (c *RLConfig) objective(parts []string, add func(string, ...any)) (*method.Family, *method.RewardKL) {
	if c.Algorithm == method.RFT || c.Algorithm == method.SFT {
		if c.AdvantageNorm != "" {
			add("advantage_norm %q: %s trains without advantages", c.AdvantageNorm, c.Algorithm)
		}
	} else if c.AdvantageNorm != "" && !slices.Contains(method.AdvantageNorms, c.AdvantageNorm) {
		add("advantage_norm %q is not one of %v", c.AdvantageNorm, method.AdvantageNorms)
	}
	if c.Algorithm == method.SFT {
		return nil, nil
	}
	f, err := method.NewFamily(c.Algorithm, c.MaxTokens)
	if err != nil {
		return nil, nil // the algorithm's own error is reported
	}
	if c.ClipLow != 0 {
		f.ClipLow = c.ClipLow
	}
	if c.ClipHigh != 0 {
		f.ClipHigh = c.ClipHigh
	}
	f.RefKLEstimator, f.Entropy = c.KLEstimator, c.Entropy
	f.PositiveReinforce = c.PolicyLoss == "reinforce_positive"
	f.MaskTruncated = c.MaskTruncated
	switch {
	case c.Algorithm == method.RFT: // no advantages to divide
	case c.AdvantageNorm != "":
		f.Norm = c.AdvantageNorm
	default:
		f.Norm = part.DefaultAdvantageNorm(parts, f.Norm)
	}
	switch {
	case c.KL == 0:
		return f, nil
	case c.KLInReward:
		return f, &method.RewardKL{Beta: c.KL, Estimator: c.KLEstimator}
	}
	f.RefKL = c.KL
	return f, nil
}

// recorded is the config as the run directory records it (config.yaml):
// what the recipe r resolved, read from r, in the config's form — the
// parts that run, their sections, the objective's clip range and advantage
// normalization — so that the file shows what runs and a resume compares
// it. c itself keeps what was written.
func (c RLConfig) recorded(r *part.Recipe) RLConfig {
	c.Parts, c.Sections = r.Run.Parts, r.Sections
	if f := r.Family; f != nil {
		c.ClipLow, c.ClipHigh = f.ClipLow, f.ClipHigh
		if !f.Rejection {
			c.AdvantageNorm = f.Norm
		}
	}
	return c
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
	part.OneOf(add, "data.order", &d.Order, OrderShuffle, OrderFile)
	if d.Order == OrderFile && !d.IsWorld() && d.Test == "" {
		add("data.order file needs data.test: holding the held-out examples out of data.train would reorder it")
	}
	if d.IsWorld() {
		d.Name = "world"
		if d.Train != "" || d.Test != "" || d.Validation != "" || d.Fields != nil {
			add("data: the world generates its problems; train, test, validation and fields are for datasets")
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
	c.resolveValidation(add)
	if f := d.Fields; f != nil && f.Kind != "" && !slices.Contains([]task.AnswerKind{task.Math, task.MultipleChoice, task.YesNo}, f.Kind) {
		add("data.fields.kind %q is not math, multiple-choice or yes-no", f.Kind)
	}
}

// resolveValidation checks data.validation of a dataset run.
func (c *RLConfig) resolveValidation(add func(string, ...any)) {
	d := &c.Data
	switch {
	case d.Validation == "":
		return
	case d.Test == "":
		add("data.validation %q: the test split is then data.test, which is unset", d.Validation)
	case d.Validation == ValidationTrain && c.EvalProblems == 0:
		add("data.validation train holds eval_problems examples out of data.train: eval_problems must be positive")
	case d.Validation == ValidationTrain && d.Order == OrderFile:
		add("data.validation train with data.order file: holding examples out of data.train would change the questions each step draws; name a validation file instead")
	case d.Validation == d.Test:
		add("data.validation %q is data.test: a choice made on validation would be made on the test problems", d.Validation)
	case d.Validation == d.Train:
		add("data.validation %q is data.train: validation train holds examples out of it instead", d.Validation)
	}
}

// ValidationFile is the validation file a dataset run reads, "" when
// the validation problems come from data.train or data.test.
func (d *DataConfig) ValidationFile() string {
	if d.Validation == ValidationTrain {
		return ""
	}
	return d.Validation
}

// LoadRLConfig reads a YAML config: the defaults, then the preset (the
// file's, or preset when not empty), then the file with each of sets
// applied (SetKeys). Unknown keys are errors naming them and their line.
// An empty path reads an empty file.
func LoadRLConfig(path, preset string, sets ...string) (RLConfig, error) {
	cfg := DefaultRL()
	var b []byte
	name := "the config"
	if path != "" {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return cfg, fmt.Errorf("train config: %w", err)
		}
		name = path
	}
	if len(sets) > 0 {
		var err error
		if b, err = SetKeys(b, sets); err != nil {
			return cfg, fmt.Errorf("train config: %s: %w", name, err)
		}
		// Lines then count in the file as the overrides left it.
		name += " after --set " + strings.Join(sets, " --set ")
	}
	if preset == "" {
		var head struct {
			Preset string `yaml:"preset"`
		}
		if err := yaml.Unmarshal(b, &head); err != nil {
			return cfg, fmt.Errorf("train config: %s: %w", name, err)
		}
		preset = head.Preset
	}
	if err := cfg.ApplyPreset(preset); err != nil {
		return cfg, fmt.Errorf("%w (in %s)", err, name)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("train config: %s: %w", name, err)
	}
	if preset != "" {
		cfg.Preset = preset
	}
	return cfg, nil
}
