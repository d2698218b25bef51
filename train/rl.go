package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/optim"
	"rlvr/eval"
	"rlvr/internal/atomicfile"
	"rlvr/method"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"

	"gopkg.in/yaml.v3"
)

// RLConfig is every knob of an RL run, grouped by what it controls. Zero
// values mean the defaults DefaultRL gives.
type RLConfig struct {
	// What is trained and on what.
	Algorithm method.Algorithm `yaml:"algorithm"` // grpo, dr-grpo, dapo, reinforce++, rft, sft
	Model     string           `yaml:"model"`     // starting checkpoint; "" is the cached world model
	Levels    []int            `yaml:"levels"`    // world levels of the training problems
	Seed      uint64           `yaml:"seed"`      // problems, sampling and everything else

	// Rollouts.
	Steps          int     `yaml:"steps"`            // optimizer steps × epochs are run per step
	PromptsPerStep int     `yaml:"prompts_per_step"` // questions per step
	GroupSize      int     `yaml:"group_size"`       // samples per question (G)
	MaxTokens      int     `yaml:"max_tokens"`       // response budget (also Dr.GRPO's normalizer)
	Temperature    float32 `yaml:"temperature"`

	// Optimization.
	LR          float64           `yaml:"lr"`
	Warmup      int               `yaml:"warmup"` // warmup steps of the constant schedule
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

	// DAPO's extras (on by default for dapo only).
	DynamicSampling bool `yaml:"dynamic_sampling"` // drop zero-variance groups, sample more questions
	MaxResample     int  `yaml:"max_resample"`     // extra sampling rounds per step
	OverlongBuffer  int  `yaml:"overlong_buffer"`  // soft penalty over the last tokens of the budget; 0 disables

	// Evaluation and checkpoints.
	EvalEvery       int `yaml:"eval_every"`       // steps between held-out evaluations; 0: only at the end
	EvalProblems    int `yaml:"eval_problems"`    // held-out problems per level
	CheckpointEvery int `yaml:"checkpoint_every"` // steps between checkpoints; 0: only at the end
	KeepLast        int `yaml:"keep_last"`        // checkpoints kept
}

// DefaultRL is GRPO on the world's hardest level from the cached model:
// 16 questions × 8 samples per step.
func DefaultRL() RLConfig {
	return RLConfig{Algorithm: method.GRPO, Levels: []int{6}, Seed: 1, Steps: 100, PromptsPerStep: 16, GroupSize: 8,
		MaxTokens: 256, Temperature: 1, LR: 5e-5, Warmup: 5, AdamW: optim.DefaultAdamW(), GradClip: 1, Epochs: 1,
		MiniBatches: 1, KLEstimator: backend.K3, MaxResample: 3, EvalEvery: 25, EvalProblems: 200, CheckpointEvery: 25, KeepLast: 2}
}

// Resolve fills algorithm-dependent defaults and reports every
// inconsistent setting at once.
func (c *RLConfig) Resolve() error {
	var errs []string
	if !slices.Contains(method.Algorithms, c.Algorithm) {
		errs = append(errs, fmt.Sprintf("algorithm %q is not one of %v", c.Algorithm, method.Algorithms))
	}
	if c.Algorithm == method.DAPO {
		c.DynamicSampling = true
		if c.OverlongBuffer == 0 {
			c.OverlongBuffer = c.MaxTokens / 4
		}
	}
	// The algorithm's own clip range unless the config sets one, written
	// back so the saved config shows what ran.
	if fam, err := method.NewFamily(c.Algorithm, c.MaxTokens); err == nil {
		if c.ClipLow == 0 {
			c.ClipLow = fam.ClipLow
		}
		if c.ClipHigh == 0 {
			c.ClipHigh = fam.ClipHigh
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"steps", c.Steps}, {"prompts_per_step", c.PromptsPerStep}, {"group_size", c.GroupSize}, {"max_tokens", c.MaxTokens}, {"epochs", c.Epochs}, {"mini_batches", c.MiniBatches}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Sprintf("%s = %d must be positive", f.name, f.v))
		}
	}
	if c.GroupSize == 1 && c.Algorithm != method.RFT {
		errs = append(errs, "group_size 1 leaves group-relative advantages always zero")
	}
	for _, lv := range c.Levels {
		if lv < 0 || lv >= len(world.Levels) {
			errs = append(errs, fmt.Sprintf("levels: no world level %d", lv))
		}
	}
	if len(c.Levels) == 0 {
		errs = append(errs, "levels is empty")
	}
	if c.KL != 0 && !slices.Contains([]backend.KLEstimator{backend.K1, backend.K2, backend.K3}, c.KLEstimator) {
		errs = append(errs, fmt.Sprintf("kl_estimator %q is not k1, k2 or k3", c.KLEstimator))
	}
	if c.LR <= 0 || c.Temperature <= 0 {
		errs = append(errs, fmt.Sprintf("lr = %v and temperature = %v must be positive", c.LR, c.Temperature))
	}
	if c.OverlongBuffer < 0 || c.OverlongBuffer >= c.MaxTokens && c.OverlongBuffer > 0 {
		errs = append(errs, fmt.Sprintf("overlong_buffer = %d must be in [0, max_tokens)", c.OverlongBuffer))
	}
	if len(errs) > 0 {
		return fmt.Errorf("train config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// StepMetrics are one step's line of metrics.jsonl.
type StepMetrics struct {
	Step             int     `json:"step"`
	RewardMean       float64 `json:"reward_mean"`
	RewardStd        float64 `json:"reward_std"`
	Accuracy         float64 `json:"accuracy"`
	ZeroVarianceFrac float64 `json:"zero_variance_frac"`
	ResponseLenMean  float64 `json:"response_len_mean"`
	ClipLowFrac      float64 `json:"clip_low_frac"`
	ClipHighFrac     float64 `json:"clip_high_frac"`
	KL               float64 `json:"kl"`
	Entropy          float64 `json:"entropy"`
	GradNorm         float64 `json:"grad_norm"`
	LR               float64 `json:"lr"`
	TokensPerSec     float64 `json:"tokens_per_sec"`
	RolloutS         float64 `json:"time_rollout_s"`
	VerifyS          float64 `json:"time_verify_s"`
	LearnS           float64 `json:"time_learn_s"`
	StepS            float64 `json:"step_s"`
	Resampled        int     `json:"resampled"`
	Skipped          bool    `json:"skipped_update"` // no signal in the batch: no optimizer step
}

// EvalMetrics are one line of eval.jsonl.
type EvalMetrics struct {
	Step       int     `json:"step"`
	Split      string  `json:"split"`
	Greedy     float64 `json:"greedy"`
	GreedyLow  float64 `json:"greedy_low"`
	GreedyHigh float64 `json:"greedy_high"`
}

// runState is what a checkpoint records beyond the weights and optimizer.
type runState struct {
	Step   int `json:"step"`   // steps completed
	Cursor int `json:"cursor"` // training problems drawn so far
}

// RL trains a model with the configured algorithm, writing config, metrics,
// evaluations and checkpoints to runDir. With resume it continues from the
// newest checkpoint there. progress, if not nil, gets every step's metrics.
func RL(ctx context.Context, cfg RLConfig, runDir string, resume bool, progress func(StepMetrics)) error {
	if err := cfg.Resolve(); err != nil {
		return err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	start, modelDir := runState{}, cfg.Model
	if modelDir == "" {
		modelDir = PretrainedPath(DefaultPretrain())
	}
	if resume {
		if dir, st, ok, err := latestCheckpoint(runDir); err != nil {
			return err
		} else if ok {
			start, modelDir = st, dir
		}
	}
	l, err := checkpoint.Open(modelDir, "")
	if err != nil {
		return err
	}
	// One copy of the weights: the sampler sees every update.
	learner, err := local.NewLearner(l.Model, cfg.AdamW)
	if err != nil {
		return err
	}
	if resume && start.Step > 0 {
		if err := learner.LoadOptimizer(modelDir); err != nil {
			return err
		}
	}
	var ref *checkpoint.Loaded
	if cfg.KL != 0 {
		base := cfg.Model
		if base == "" {
			base = PretrainedPath(DefaultPretrain())
		}
		if ref, err = checkpoint.Open(base, ""); err != nil {
			return err
		}
	}
	fam, err := method.NewFamily(cfg.Algorithm, cfg.MaxTokens)
	if err != nil {
		return err
	}
	fam.ClipLow, fam.ClipHigh = cfg.ClipLow, cfg.ClipHigh
	fam.RefKLEstimator, fam.Entropy = cfg.KLEstimator, cfg.Entropy
	if !cfg.KLInReward {
		fam.RefKL = cfg.KL
	}
	if err := writeConfig(runDir, cfg); err != nil {
		return err
	}
	if err := truncateJSONL(filepath.Join(runDir, "metrics.jsonl"), start.Step); err != nil {
		return err
	}
	if err := truncateJSONL(filepath.Join(runDir, "eval.jsonl"), start.Step); err != nil {
		return err
	}
	if start.Step == 0 { // a fresh run starts fresh logs
		os.Remove(filepath.Join(runDir, "metrics.jsonl"))
		os.Remove(filepath.Join(runDir, "eval.jsonl"))
	}
	sampler := sample.New(l.Model, l.Tokenizer)
	sched := optim.Schedule{Kind: optim.Constant, PeakLR: cfg.LR, WarmupSteps: cfg.Warmup, TotalSteps: cfg.Steps}
	train := world.Examples(cfg.Seed, cfg.Steps*cfg.PromptsPerStep*(1+cfg.MaxResample)+1, cfg.Levels)
	heldOut := world.Examples(cfg.Seed+1_000_000, cfg.EvalProblems*len(cfg.Levels), cfg.Levels)
	cursor := start.Cursor
	optSteps := start.Step * cfg.Epochs * cfg.MiniBatches
	if start.Step == 0 { // the starting model's score, for before/after
		if err := evaluate(ctx, l, heldOut, 0, runDir, cfg.MaxTokens); err != nil {
			return err
		}
	}
	for step := start.Step; step < cfg.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		var m StepMetrics
		m.Step = step + 1
		if cfg.Algorithm == method.SFT {
			if err := sftStep(ctx, l, learner, train[cursor:cursor+cfg.PromptsPerStep], sched.LR(optSteps), cfg.GradClip, &m); err != nil {
				return fmt.Errorf("step %d: %w", step+1, err)
			}
			cursor += cfg.PromptsPerStep
			optSteps++
			m.StepS = time.Since(t0).Seconds()
			if err := appendJSONL(filepath.Join(runDir, "metrics.jsonl"), m); err != nil {
				return err
			}
			if progress != nil {
				progress(m)
			}
			if err := endOfStep(ctx, cfg, step, l, learner, heldOut, runDir, cursor); err != nil {
				return err
			}
			continue
		}
		// Rollout and verification, resampling for DAPO until the batch
		// holds enough groups with signal.
		var kept []method.Scored
		var rolloutS, verifyS float64
		var all []method.Scored
		for round := 0; round <= cfg.MaxResample; round++ {
			need := cfg.PromptsPerStep - len(kept)
			if round > 0 && (!cfg.DynamicSampling || need <= 0) {
				break
			}
			batch := train[cursor : cursor+need]
			cursor += need
			prompts := make([][]int32, len(batch))
			for i, e := range batch {
				prompts[i] = l.Encode(e.Prompt)
			}
			tr := time.Now()
			groups, err := rollout.SampleGroups(ctx, sampler, l.Tokenizer, prompts, cfg.GroupSize,
				sample.Params{MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, StopTokens: l.StopTokens,
					Seed: cfg.Seed*1_000_003 + uint64(step)*7919 + uint64(round)})
			if err != nil {
				return fmt.Errorf("step %d: %w", step+1, err)
			}
			rolloutS += time.Since(tr).Seconds()
			tv := time.Now()
			for i, g := range groups {
				s := method.Scored{Example: batch[i], Group: g}
				for _, t := range g.Trajectories {
					r, _ := eval.Reward(batch[i], t.Text)
					s.Correct = append(s.Correct, r > 0)
					if cfg.OverlongBuffer > 0 {
						r += method.OverlongPenalty(t.PolicyTokens(), cfg.MaxTokens, cfg.OverlongBuffer)
					}
					s.Rewards = append(s.Rewards, r)
				}
				all = append(all, s)
				if !cfg.DynamicSampling || !method.ZeroVariance(s.Rewards) {
					kept = append(kept, s)
				}
			}
			verifyS += time.Since(tv).Seconds()
			if round > 0 {
				m.Resampled += len(batch)
			}
		}
		if ref != nil && cfg.KLInReward {
			kl, err := rewardKL(ctx, ref, kept, cfg.KL, cfg.KLEstimator)
			if err != nil {
				return err
			}
			m.KL = kl
		}
		fillRolloutMetrics(&m, all)
		tl := time.Now()
		terms, built, err := fam.Build(kept)
		if err != nil {
			return err
		}
		if built.Trained == 0 && fam.Entropy == 0 && fam.RefKL == 0 {
			// No answer carries a signal (every group all right or all
			// wrong) and no other term applies: skip the update rather
			// than let Adam's momentum move the weights on zero gradients.
			terms = nil
			m.Skipped = true
		}
		tokens := 0
		var met backend.Metrics
		// Reference logprobs depend only on the data: once per step, not
		// once per epoch.
		for _, term := range terms {
			if term.Loss.RefKL != 0 {
				if err := refLogprobs(ctx, ref, term.Data); err != nil {
					return err
				}
			}
		}
		for epoch := 0; epoch < cfg.Epochs; epoch++ {
			for _, term := range terms {
				if len(term.Data) == 0 {
					continue
				}
				for mb := 0; mb < cfg.MiniBatches; mb++ {
					lo, hi := mb*len(term.Data)/cfg.MiniBatches, (mb+1)*len(term.Data)/cfg.MiniBatches
					data := cloneWeights(term.Data[lo:hi])
					// Aggregation is over the whole mini-batch; the learner's
					// sums over micro-batches then add up to it exactly.
					if err := backend.Aggregate(data, term.Aggregation, term.Norm); err != nil {
						return err
					}
					for _, micro := range microBatches(data, cfg.MicroBatchTokens) {
						res, err := learner.ForwardBackward(ctx, micro, term.Loss)
						if err != nil {
							return fmt.Errorf("step %d: %w", step+1, err)
						}
						met.Add(res.Metrics)
						for _, d := range micro {
							tokens += d.Len()
						}
					}
					lr := sched.LR(optSteps)
					sr, err := learner.OptimStep(ctx, backend.OptimParams{LearningRate: float32(lr), GradClipNorm: cfg.GradClip})
					if err != nil {
						return fmt.Errorf("step %d: %w", step+1, err)
					}
					m.GradNorm, m.LR = sr.GradNorm, lr
					optSteps++
				}
			}
		}
		m.LearnS = time.Since(tl).Seconds()
		if met.Tokens > 0 {
			n := float64(met.Tokens)
			m.ClipLowFrac, m.ClipHighFrac = float64(met.ClipLow)/n, float64(met.ClipHigh)/n
			m.Entropy = met.Entropy / n
			if !cfg.KLInReward {
				m.KL = met.RefKL / n
			}
		}
		m.RolloutS, m.VerifyS = rolloutS, verifyS
		m.StepS = time.Since(t0).Seconds()
		m.TokensPerSec = float64(tokens) / math.Max(m.LearnS, 1e-9)
		if err := appendJSONL(filepath.Join(runDir, "metrics.jsonl"), m); err != nil {
			return err
		}
		if progress != nil {
			progress(m)
		}
		if err := endOfStep(ctx, cfg, step, l, learner, heldOut, runDir, cursor); err != nil {
			return err
		}
	}
	return nil
}

// endOfStep evaluates and checkpoints when the step calls for it.
func endOfStep(ctx context.Context, cfg RLConfig, step int, l *checkpoint.Loaded, learner *local.Learner, heldOut []task.Example, runDir string, cursor int) error {
	last := step+1 == cfg.Steps
	if last || cfg.EvalEvery > 0 && (step+1)%cfg.EvalEvery == 0 {
		if err := evaluate(ctx, l, heldOut, step+1, runDir, cfg.MaxTokens); err != nil {
			return err
		}
	}
	if last || cfg.CheckpointEvery > 0 && (step+1)%cfg.CheckpointEvery == 0 {
		return saveCheckpoint(ctx, learner, runDir, runState{Step: step + 1, Cursor: cursor}, cfg.KeepLast)
	}
	return nil
}

// sftStep is one optimizer step of NLL on the examples' reference
// solutions.
func sftStep(ctx context.Context, l *checkpoint.Loaded, learner *local.Learner, examples []task.Example, lr float64, clip float32, m *StepMetrics) error {
	tl := time.Now()
	var data []backend.Datum
	for _, e := range examples {
		d, err := exampleDatum(l, e, false)
		if err != nil {
			return err
		}
		data = append(data, d)
	}
	if err := backend.Aggregate(data, backend.TokenMean, 0); err != nil {
		return err
	}
	res, err := learner.ForwardBackward(ctx, data, backend.Loss{NLL: 1})
	if err != nil {
		return err
	}
	sr, err := learner.OptimStep(ctx, backend.OptimParams{LearningRate: float32(lr), GradClipNorm: clip})
	if err != nil {
		return err
	}
	m.GradNorm, m.LR, m.LearnS = sr.GradNorm, lr, time.Since(tl).Seconds()
	m.Entropy = res.Metrics.Entropy / float64(max(res.Metrics.Tokens, 1))
	tokens := 0
	for _, d := range data {
		tokens += d.Len()
	}
	m.TokensPerSec = float64(tokens) / m.LearnS
	return nil
}

// fillRolloutMetrics summarizes every sampled group of the step.
func fillRolloutMetrics(m *StepMetrics, groups []method.Scored) {
	var rewards []float64
	var lens, correct, zero float64
	for _, g := range groups {
		rewards = append(rewards, g.Rewards...)
		if method.ZeroVariance(g.Rewards) {
			zero++
		}
		for i, t := range g.Trajectories {
			lens += float64(t.PolicyTokens())
			if g.Correct[i] {
				correct++
			}
		}
	}
	n := float64(len(rewards))
	m.RewardMean, m.RewardStd = method.Mean(rewards), method.StdDev(rewards)
	m.Accuracy, m.ResponseLenMean = correct/n, lens/n
	m.ZeroVarianceFrac = zero / float64(len(groups))
}

// microBatches splits data into runs of at most maxTokens tokens (at least
// one datum each); maxTokens 0 keeps it whole.
func microBatches(data []backend.Datum, maxTokens int) [][]backend.Datum {
	if maxTokens <= 0 {
		return [][]backend.Datum{data}
	}
	var out [][]backend.Datum
	start, tokens := 0, 0
	for i, d := range data {
		if tokens+d.Len() > maxTokens && i > start {
			out = append(out, data[start:i])
			start, tokens = i, 0
		}
		tokens += d.Len()
	}
	return append(out, data[start:])
}

// rewardKL subtracts β·Σ_t k(q_t, ref_t) from each answer's reward, with q
// the sampler's logprobs of the policy's tokens, and returns the mean
// per-token KL estimate.
func rewardKL(ctx context.Context, ref *checkpoint.Loaded, groups []method.Scored, beta float32, est backend.KLEstimator) (float64, error) {
	var data []backend.Datum
	for _, g := range groups {
		for i := range g.Trajectories {
			t := &g.Trajectories[i]
			full := append(append([]int32(nil), t.Prompt...), t.Tokens...)
			data = append(data, backend.Datum{Tokens: full[:len(full)-1], Targets: full[1:], Weights: make([]float32, len(full)-1)})
		}
	}
	if len(data) == 0 {
		return 0, nil
	}
	lps, err := local.Logprobs(ctx, ref.Model, data)
	if err != nil {
		return 0, err
	}
	var total float64
	var tokens int
	k := 0
	for gi := range groups {
		g := &groups[gi]
		for i := range g.Trajectories {
			t := &g.Trajectories[i]
			off := len(t.Prompt) - 1
			var sum float64
			for j, pol := range t.Policy {
				if !pol {
					continue
				}
				d := float64(t.Logprobs[j] - lps[k][off+j])
				switch est {
				case backend.K1:
					sum += d
				case backend.K2:
					sum += d * d / 2
				default:
					sum += math.Exp(-d) - 1 + d
				}
				tokens++
			}
			g.Rewards[i] -= float64(beta) * sum
			total += sum
			k++
		}
	}
	return total / math.Max(float64(tokens), 1), nil
}

// cloneWeights copies the datums' weights, which Aggregate scales in
// place, so later epochs start from the method's weights again.
func cloneWeights(data []backend.Datum) []backend.Datum {
	out := make([]backend.Datum, len(data))
	for i, d := range data {
		d.Weights = append([]float32(nil), d.Weights...)
		out[i] = d
	}
	return out
}

// refLogprobs fills the datums' reference logprobs from the frozen model.
func refLogprobs(ctx context.Context, ref *checkpoint.Loaded, data []backend.Datum) error {
	lps, err := local.Logprobs(ctx, ref.Model, data)
	if err != nil {
		return err
	}
	for i := range data {
		data[i].RefLogprobs = lps[i]
	}
	return nil
}

// evaluate scores greedy accuracy on the held-out problems.
func evaluate(ctx context.Context, l *checkpoint.Loaded, heldOut []task.Example, step int, runDir string, maxTokens int) error {
	rep, err := eval.Run(ctx, eval.NewLocal(l), heldOut, eval.Config{MaxTokens: maxTokens})
	if err != nil {
		return err
	}
	return appendJSONL(filepath.Join(runDir, "eval.jsonl"), EvalMetrics{Step: step, Split: "val",
		Greedy: rep.Greedy.Mean, GreedyLow: rep.Greedy.Low, GreedyHigh: rep.Greedy.High})
}

func writeConfig(runDir string, cfg RLConfig) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(runDir, "config.yaml"), b)
}

// appendJSONL appends one JSON line and syncs it.
func appendJSONL(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// truncateJSONL keeps the lines of a step-indexed JSONL file up to step,
// dropping what a killed run wrote after its last checkpoint.
func truncateJSONL(path string, step int) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	var keep []byte
	for _, line := range strings.SplitAfter(string(b), "\n") {
		var v struct {
			Step int `json:"step"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Step <= step && strings.HasSuffix(line, "\n") {
			keep = append(keep, line...)
		}
	}
	return atomicfile.WriteBytes(path, keep)
}

// saveCheckpoint writes ckpt-<step>/ (weights, optimizer, run state)
// atomically and keeps the newest keep.
func saveCheckpoint(ctx context.Context, l *local.Learner, runDir string, st runState, keep int) error {
	final := filepath.Join(runDir, fmt.Sprintf("ckpt-%06d", st.Step))
	tmp := final + ".tmp"
	os.RemoveAll(tmp)
	if err := l.Save(ctx, tmp); err != nil {
		return err
	}
	b, _ := json.Marshal(st)
	if err := atomicfile.WriteBytes(filepath.Join(tmp, "state.json"), b); err != nil {
		return err
	}
	os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	ckpts, _ := checkpoints(runDir)
	for len(ckpts) > max(keep, 1) {
		os.RemoveAll(ckpts[0])
		ckpts = ckpts[1:]
	}
	return nil
}

// checkpoints lists complete checkpoint directories, oldest first.
func checkpoints(runDir string) ([]string, error) {
	entries, err := os.ReadDir(runDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "ckpt-") && !strings.HasSuffix(e.Name(), ".tmp") {
			if _, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "ckpt-")); err == nil {
				out = append(out, filepath.Join(runDir, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func latestCheckpoint(runDir string) (string, runState, bool, error) {
	ckpts, err := checkpoints(runDir)
	if err != nil || len(ckpts) == 0 {
		return "", runState{}, false, nil
	}
	dir := ckpts[len(ckpts)-1]
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return "", runState{}, false, fmt.Errorf("train: %s: %w", dir, err)
	}
	var st runState
	if err := json.Unmarshal(b, &st); err != nil {
		return "", runState{}, false, fmt.Errorf("train: %s/state.json: %w", dir, err)
	}
	return dir, st, true, nil
}

// LoadRLConfig reads a YAML config over the defaults; unknown keys are
// errors that name them.
func LoadRLConfig(path string) (RLConfig, error) {
	cfg := DefaultRL()
	f, err := os.Open(path)
	if err != nil {
		return cfg, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && err.Error() != "EOF" {
		return cfg, fmt.Errorf("train: %s: %w", path, err)
	}
	return cfg, nil
}
