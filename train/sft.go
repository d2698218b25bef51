package train

import (
	"context"
	"fmt"
	"strings"
	"time"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/optim"
	"rlvr/format/tokenizer"
	"rlvr/task"
)

// SFTConfig is every knob of supervised fine-tuning on reference
// solutions.
type SFTConfig struct {
	Steps       int               // optimizer steps
	BatchTokens int               // tokens per step (whole examples)
	Schedule    optim.Schedule    // learning rate over Steps
	AdamW       optim.AdamWConfig // optimizer hyperparameters
	GradClip    float32           // global gradient-norm clip; 0 disables
	Seed        uint64            // example order
	// Chat renders prompts with the model's chat template (a user turn)
	// when it has one.
	Chat bool
	Out  string // checkpoint directory; "" saves nothing
}

// DefaultSFT fine-tunes for 200 steps of 4096 tokens at a constant 1e-4
// after a short warmup.
func DefaultSFT() SFTConfig {
	return SFTConfig{Steps: 200, BatchTokens: 4096,
		Schedule: optim.Schedule{Kind: optim.Constant, PeakLR: 1e-4, WarmupSteps: 10, TotalSteps: 200},
		AdamW:    optim.DefaultAdamW(), GradClip: 1}
}

// SFTResult summarizes a fine-tuning run.
type SFTResult struct {
	FirstLoss, LastLoss float64
	Examples, Skipped   int // used, and dropped for lacking a solution or exceeding the context
	Elapsed             time.Duration
}

// Response is what a model is taught to answer for an example: its
// reference solution, ending with the gold answer after "####" unless the
// solution already states it (GSM8K's convention, which verifiers read).
func Response(e task.Example) string {
	s := strings.TrimRight(e.Solution, "\n")
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "####") && !strings.Contains(s, `\boxed`) {
		s += "\n#### " + e.Answer
	}
	return s + "\n"
}

// exampleDatum trains on the response to an example's prompt, and on the
// stop token after it.
func exampleDatum(l *checkpoint.Loaded, e task.Example, chat bool) (backend.Datum, error) {
	prompt := e.Prompt
	if chat && l.Chat != nil {
		var err error
		if prompt, err = l.Chat([]tokenizer.Message{{Role: "user", Content: e.Prompt}}); err != nil {
			return backend.Datum{}, err
		}
	}
	seq := l.Encode(prompt)
	start := len(seq)
	for _, t := range l.Tokenizer.Encode(Response(e)) {
		seq = append(seq, int32(t))
	}
	// End with the end-of-turn token in a chat, else end-of-sequence.
	if eos, ok := l.Tokenizer.EOS(); ok && !(chat && l.Chat != nil) {
		seq = append(seq, int32(eos))
	} else if len(l.StopTokens) > 0 {
		seq = append(seq, l.StopTokens[0])
	}
	w := make([]float32, len(seq)-1)
	for i := start - 1; i < len(w); i++ {
		w[i] = 1
	}
	return backend.Datum{Tokens: seq[:len(seq)-1], Targets: seq[1:], Weights: w}, nil
}

// SFT fine-tunes a loaded model on the reference solutions of examples
// (cycled in a seeded order) and saves it to cfg.Out.
func SFT(ctx context.Context, l *checkpoint.Loaded, examples []task.Example, cfg SFTConfig, progress func(Progress)) (*SFTResult, error) {
	if err := cfg.Schedule.Validate(); err != nil {
		return nil, err
	}
	res := &SFTResult{}
	var data []backend.Datum
	for _, e := range examples {
		if Response(e) == "" {
			res.Skipped++
			continue
		}
		d, err := exampleDatum(l, e, cfg.Chat)
		if err != nil {
			return nil, fmt.Errorf("example %s: %w", e.ID, err)
		}
		if d.Len() > l.Model.Config.MaxSeq {
			res.Skipped++
			continue
		}
		data = append(data, d)
	}
	res.Examples = len(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("sft: no example has a reference solution that fits the context of %d tokens", l.Model.Config.MaxSeq)
	}
	task.Shuffle(data, cfg.Seed)
	learner, err := local.NewLearner(l.Model, cfg.AdamW)
	if err != nil {
		return nil, err
	}
	i := 0
	next := func() backend.Datum {
		d := data[i%len(data)]
		i++
		// Aggregate scales weights in place: hand out copies.
		d.Weights = append([]float32(nil), d.Weights...)
		return d
	}
	start := time.Now()
	res.FirstLoss, res.LastLoss, err = fit(ctx, learner, next, cfg.Steps, cfg.BatchTokens, cfg.Schedule, cfg.GradClip, progress)
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	if cfg.Out != "" {
		if err := learner.Save(ctx, cfg.Out); err != nil {
			return nil, err
		}
	}
	return res, nil
}
