package local

import (
	"context"

	"rlvr/backend"
	"rlvr/checkpoint"
	"rlvr/engine/lora"
	"rlvr/engine/model"
	"rlvr/engine/optim"
)

// Session is a model opened for training in this process: a learner and a
// sampler over one copy of the weights, so every rollout sees the latest
// update, and the model's tokenizer side.
type Session struct {
	*Learner
	Sampler *Sampler
	Text    *checkpoint.Loaded
}

// Open loads the checkpoint in dir (weights and tokenizer) for training;
// withOptimizer also restores the optimizer state saved beside them, as a
// resumed run does (a new run starts its optimizer fresh).
func Open(dir string, adam optim.AdamWConfig, withOptimizer bool) (*Session, error) {
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		return nil, err
	}
	learner, err := NewLearner(l.Model, adam)
	if err != nil {
		return nil, err
	}
	// Saves keep the model's own config.json (token ids, architecture)
	// and its tokenizer files.
	learner.Source, learner.HFConfig = dir, l.HFConfig
	if withOptimizer {
		if err := learner.LoadOptimizer(dir); err != nil {
			return nil, err
		}
	}
	return &Session{Learner: learner, Sampler: NewSampler(l.Model, l.Tokenizer), Text: l}, nil
}

// SetPrecision sets the arithmetic of the learner's passes and of the
// sampler's. They share the weights: a sampler in another precision than
// the learner's draws from the model's model.Model.WithPrecision, which
// reads the same parameters and so sees every update.
func (s *Session) SetPrecision(learner, sampler model.Precision) {
	s.Model.Precision = learner
	m := s.Model
	if sampler != learner {
		m = s.Model.WithPrecision(sampler)
	}
	s.Sampler.Engine.Model = m
}

// Frozen scores sequences under fixed weights: the reference model of a
// KL term.
type Frozen struct{ Model *model.Model }

// OpenFrozen loads the weights in dir as a reference model.
func OpenFrozen(dir string) (*Frozen, error) {
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		return nil, err
	}
	return &Frozen{Model: l.Model}, nil
}

// Logprobs implements backend.Logprober.
func (f *Frozen) Logprobs(ctx context.Context, batch []backend.Datum) ([][]float32, error) {
	return Logprobs(ctx, f.Model, batch)
}

// OpenLoRA opens the model in base for training LoRA adapters (cfg) over
// its weights; with ckpt, a checkpoint a LoRA learner over the same base
// saved, it restores the adapters and their optimizer state, as a resumed
// run does.
func OpenLoRA(base, ckpt string, adam optim.AdamWConfig, cfg lora.Config) (*Session, error) {
	l, err := checkpoint.Open(base, "")
	if err != nil {
		return nil, err
	}
	learner, err := NewLoRALearner(l.Model, adam, cfg)
	if err != nil {
		return nil, err
	}
	learner.Source, learner.HFConfig = base, l.HFConfig
	if ckpt != "" {
		if err := learner.LoadLoRA(ckpt); err != nil {
			return nil, err
		}
		if err := learner.LoadOptimizer(ckpt); err != nil {
			return nil, err
		}
	}
	return &Session{Learner: learner, Sampler: NewSampler(l.Model, l.Tokenizer), Text: l}, nil
}
