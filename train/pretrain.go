// Package train holds rlvr's training loops. Pretrain fits a small model
// from scratch on the built-in world's reference solutions, so later
// commands start from a model that knows the formats.
package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/tokenizer"
	"rlvr/internal/atomicfile"
	"rlvr/task/world"
)

// PretrainConfig is every knob of a pretraining run. The zero value of a
// field means the default DefaultPretrain gives it.
type PretrainConfig struct {
	Model model.Config // architecture; its Vocab is set to the tokenizer's
	Seed  uint64       // initialization and corpus seed
	Steps int          // optimizer steps
	// BatchTokens is how many tokens one step trains on: whole problems are
	// packed until the next one would not fit.
	BatchTokens int
	Schedule    optim.Schedule    // learning rate over Steps
	AdamW       optim.AdamWConfig // optimizer hyperparameters
	GradClip    float32           // global gradient-norm clip; 0 disables
	Levels      []int             // world levels evaluated
	// Corpus is the mix of documents trained on (its Levels are the levels
	// drawn from); the loss covers the model's own turns only.
	Corpus world.CorpusConfig
	// EvalProblems is how many held-out problems per level the final
	// evaluation scores.
	EvalProblems int
	Out          string // checkpoint directory; "" saves nothing
}

// DefaultPretrain is the built-in world's model: a 0.9M-parameter
// Llama-style model, 4000 steps of 4096 tokens of the whole corpus (about
// ten minutes on two cores), evaluated on every level.
func DefaultPretrain() PretrainConfig {
	return PretrainConfig{
		Model: model.Tiny(0), Seed: 1, Steps: 4000, BatchTokens: 4096,
		Schedule: optim.Schedule{Kind: optim.Cosine, PeakLR: 3e-3, WarmupSteps: 100, TotalSteps: 4000, MinLRRatio: 0.1},
		AdamW:    optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.01},
		GradClip: 1, Levels: []int{0, 1, 2, 3, 4, 5, 6}, Corpus: world.DefaultCorpus([]int{0, 1, 2, 3, 4, 5, 6}),
		EvalProblems: 200,
	}
}

// Progress is reported after every step.
type Progress struct {
	Step, Steps  int
	Loss         float64 // token-mean NLL of the step's batch
	LR           float64
	TokensPerSec float64
}

// LevelResult is the held-out evaluation of one level.
type LevelResult struct {
	Level string
	// Loss is the token-mean NLL of the reference solutions.
	Loss float64
	// Exact is the fraction of problems whose whole reference solution is
	// the greedy continuation of the prompt: every solution token is the
	// model's most likely next token.
	Exact float64
}

// PretrainResult summarizes a run.
type PretrainResult struct {
	FirstLoss, LastLoss float64
	Eval                []LevelResult
	Params              int
	Elapsed             time.Duration
	// Cached says the model came from the cache rather than this run, and
	// Shipped that it was just installed there from the copy that comes
	// with rlvr (package worldmodel).
	Cached, Shipped bool `json:"-"`
}

// encodeProblem is BOS, the prompt and the solution, EOS, with the number
// of prompt tokens (including BOS).
func encodeProblem(tok *tokenizer.ByteTokenizer, p world.Problem) ([]int32, int) {
	d := encodeDocument(tok, world.Document{Spans: []world.Span{{Text: p.Prompt()}, {Text: p.Solution(), Train: true}}})
	return append(d.Tokens, d.Targets[len(d.Targets)-1]), len(tok.Encode(p.Prompt())) + 1
}

// encodeDocument makes a next-token datum of BOS, the document and EOS,
// weighting the positions that predict a trained span's tokens (and the
// EOS after a final trained span).
func encodeDocument(tok *tokenizer.ByteTokenizer, d world.Document) backend.Datum {
	seq := []int32{tokenizer.ByteBOS}
	train := []bool{false}
	for _, s := range d.Spans {
		for _, t := range tok.Encode(s.Text) {
			seq = append(seq, t)
			train = append(train, s.Train)
		}
	}
	seq = append(seq, tokenizer.ByteEOS)
	train = append(train, d.Spans[len(d.Spans)-1].Train)
	w := make([]float32, len(seq)-1)
	for i := range w {
		if train[i+1] {
			w[i] = 1
		}
	}
	return backend.Datum{Tokens: seq[:len(seq)-1], Targets: seq[1:], Weights: w}
}

// fitState is where a fit stands: steps done and datums consumed.
type fitState struct {
	Step      int     `json:"step"`
	Datums    int     `json:"datums"`     // datums next() handed out that training used
	FirstLoss float64 `json:"first_loss"` // step 1's loss
	ElapsedS  float64 `json:"elapsed_s"`  // training time before this process
}

// fit runs optimizer steps st.Step+1 … steps of token-mean NLL on batches
// of about batchTokens tokens drawn from next, updating st. When stop is
// closed it returns after the step under way with stopped set.
func fit(ctx context.Context, l backend.Learner, next func() backend.Datum, st *fitState, steps, batchTokens int, sched optim.Schedule, clip float32, progress func(Progress), stop <-chan struct{}) (last float64, halted bool, err error) {
	pending := next()
	for step := st.Step; step < steps; step++ {
		if err := ctx.Err(); err != nil {
			return last, false, err
		}
		t0 := time.Now()
		var batch []backend.Datum
		tokens := 0
		for tokens+pending.Len() <= batchTokens || len(batch) == 0 {
			batch = append(batch, pending)
			tokens += pending.Len()
			pending = next()
		}
		if err := backend.Aggregate(batch, backend.TokenMean, 0); err != nil {
			return last, false, err
		}
		out, err := l.ForwardBackward(ctx, batch, backend.Loss{NLL: 1})
		if err != nil {
			return last, false, fmt.Errorf("step %d: %w", step, err)
		}
		lr := sched.LR(step)
		if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: float32(lr), GradClipNorm: clip}); err != nil {
			return last, false, fmt.Errorf("step %d: %w", step, err)
		}
		last = out.Metrics.NLL / float64(out.Metrics.Tokens)
		if step == 0 {
			st.FirstLoss = last
		}
		st.Step, st.Datums = step+1, st.Datums+len(batch)
		if progress != nil {
			progress(Progress{Step: step + 1, Steps: steps, Loss: last, LR: lr, TokensPerSec: float64(tokens) / time.Since(t0).Seconds()})
		}
		if stopped(stop) && step+1 < steps {
			return last, true, nil
		}
	}
	return last, false, nil
}

// PretrainOptions are what a pretraining run takes beyond its config.
type PretrainOptions struct {
	Progress func(Progress) // called after every step; may be nil
	// Stop, when closed, ends the run after the step under way: the model,
	// optimizer and position are written to State, and PretrainWith
	// returns ErrStopped.
	Stop <-chan struct{}
	// State is the directory of the resumable checkpoint: written when
	// stopped, and continued from when it holds one. "" keeps none.
	State string
	// Log receives notices, such as a wait for another process that
	// pretrains the same model into the cache; nil discards them.
	Log func(format string, args ...any)
}

// PretrainStateFile marks a directory holding a stopped pretraining run.
const PretrainStateFile = "pretrain-state.json"

// Pretrain trains a model from scratch on world problems and evaluates it
// on held-out ones. progress, if not nil, is called after every step.
func Pretrain(ctx context.Context, cfg PretrainConfig, progress func(Progress)) (*PretrainResult, error) {
	return PretrainWith(ctx, cfg, PretrainOptions{Progress: progress})
}

// PretrainWith is Pretrain with options: it can be stopped and resumed,
// and a resumed run ends with the weights an uninterrupted one reaches.
func PretrainWith(ctx context.Context, cfg PretrainConfig, opts PretrainOptions) (*PretrainResult, error) {
	tok := tokenizer.NewByteTokenizer()
	cfg.Model.Vocab = tok.VocabSize()
	if err := cfg.Schedule.Validate(); err != nil {
		return nil, err
	}
	var st fitState
	var l *local.Learner
	statePath := filepath.Join(opts.State, PretrainStateFile)
	if b, err := os.ReadFile(statePath); opts.State != "" && err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("train: %s: %w", statePath, err)
		}
		if l, err = local.Load(opts.State, cfg.AdamW); err != nil {
			return nil, err
		}
		if !l.Model.Config.WithDefaults().Equal(cfg.Model.WithDefaults()) {
			return nil, fmt.Errorf("train: %s holds a stopped run of another model; remove it to start again", opts.State)
		}
	} else {
		m, err := model.New(cfg.Model, cfg.Seed)
		if err != nil {
			return nil, err
		}
		if l, err = local.NewLearner(m, cfg.AdamW); err != nil {
			return nil, err
		}
	}
	m := l.Model
	// Every save is a Hugging Face directory whose config.json carries the
	// byte tokenizer's BOS and EOS ids.
	l.HFConfig = hf.Config(m.Config, []int32{tokenizer.ByteBOS}, []int32{tokenizer.ByteEOS})
	res := &PretrainResult{Params: m.NumParams()}
	start := time.Now()
	// The corpus is an endless seeded stream; held-out problems come from
	// another seed.
	corpus := world.NewCorpus(cfg.Corpus, cfg.Seed)
	next := func() backend.Datum {
		for {
			// Documents longer than the model's context are skipped.
			if d := encodeDocument(tok, corpus.Next()); d.Len() <= cfg.Model.MaxSeq {
				return d
			}
		}
	}
	for range st.Datums { // a resumed run continues the stream where it stopped
		next()
	}
	last, stop, err := fit(ctx, l, next, &st, cfg.Steps, cfg.BatchTokens, cfg.Schedule, cfg.GradClip, opts.Progress, opts.Stop)
	if err != nil {
		return nil, err
	}
	st.ElapsedS += time.Since(start).Seconds()
	if stop && opts.State != "" {
		if err := l.Save(ctx, opts.State); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(st)
		if err := atomicfile.WriteBytes(statePath, b); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w (pretraining at step %d of %d)", ErrStopped, st.Step, cfg.Steps)
	} else if stop {
		return nil, ErrStopped
	}
	res.FirstLoss, res.LastLoss = st.FirstLoss, last
	res.Elapsed = time.Duration(st.ElapsedS * float64(time.Second))
	for _, level := range cfg.Levels {
		r, err := evalLevel(m, tok, cfg.Seed+1000, level, cfg.EvalProblems)
		if err != nil {
			return nil, err
		}
		res.Eval = append(res.Eval, r)
	}
	if cfg.Out != "" {
		// A complete Hugging Face directory, with the tokenizer's own files.
		if err := l.Save(ctx, cfg.Out); err != nil {
			return nil, err
		}
		if err := tokenizer.WriteByteTokenizer(cfg.Out); err != nil {
			return nil, err
		}
	}
	if opts.State != "" {
		os.Remove(statePath) // finished: nothing left to resume
	}
	return res, nil
}

// evalLevel scores n held-out problems of one level by teacher forcing.
func evalLevel(m *model.Model, tok *tokenizer.ByteTokenizer, seed uint64, level, n int) (LevelResult, error) {
	r := LevelResult{Level: world.Levels[level].Name}
	problems := world.Mix(seed, n, []int{level})
	var nll float64
	var count, exact int
	for i := 0; i < len(problems); i += 64 {
		var seqs [][]int32
		var from []int
		for _, p := range problems[i:min(i+64, len(problems))] {
			seq, prompt := encodeProblem(tok, p)
			seqs = append(seqs, seq)
			from = append(from, prompt)
		}
		var inputs, targets [][]int32
		for _, s := range seqs {
			inputs, targets = append(inputs, s[:len(s)-1]), append(targets, s[1:])
		}
		b := model.Pack(inputs)
		flat := model.Pack(targets).Tokens
		lp, top := make([]float32, len(flat)), make([]bool, len(flat))
		if err := m.Logprobs(b, flat, lp, top); err != nil {
			return r, err
		}
		for s := range seqs {
			all := true
			for k := b.Offsets[s] + from[s] - 1; k < b.Offsets[s+1]; k++ {
				nll -= float64(lp[k])
				count++
				all = all && top[k]
			}
			if all {
				exact++
			}
		}
	}
	r.Loss, r.Exact = nll/float64(count), float64(exact)/float64(len(problems))
	return r, nil
}

// Table renders the evaluation as aligned text.
func (r *PretrainResult) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %9s %14s\n", "level", "loss", "greedy exact")
	for _, e := range r.Eval {
		fmt.Fprintf(&b, "%-16s %9.4f %13.1f%%\n", e.Level, e.Loss, 100*e.Exact)
	}
	return b.String()
}
