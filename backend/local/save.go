package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"rlvr/backend"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
)

var _ backend.Learner = (*Learner)(nil)

// OptimizerFile holds AdamW's moments and step beside the weights.
const OptimizerFile = "optimizer.safetensors"

// Save implements backend.Learner: the weights as a Hugging Face checkpoint
// in float32 (config.json, model.safetensors) and the optimizer state in
// optimizer.safetensors, each written atomically.
func (l *Learner) Save(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := hf.Save(dir, l.Model, l.HFConfig, safetensors.F32); err != nil {
		return err
	}
	m, v, step := l.Opt.State()
	ts := []safetensors.Tensor{{Name: "adamw.m", Shape: []int{len(m)}, Data: m}, {Name: "adamw.v", Shape: []int{len(v)}, Data: v}}
	meta := map[string]string{"format": "rlvr-adamw", "step": strconv.FormatInt(step, 10)}
	return safetensors.Write(filepath.Join(dir, OptimizerFile), ts, meta, safetensors.F32)
}

// Load restores a learner saved by Save: the model from the Hugging Face
// checkpoint in dir and, when optimizer.safetensors is there, the AdamW
// state (otherwise the optimizer starts fresh, as when fine-tuning a
// downloaded model).
func Load(dir string, cfg optim.AdamWConfig) (*Learner, error) {
	m, hc, err := hf.Load(dir)
	if err != nil {
		return nil, err
	}
	l, err := NewLearner(m, cfg)
	if err != nil {
		return nil, err
	}
	l.HFConfig = hc
	return l, l.LoadOptimizer(dir)
}

// LoadOptimizer restores the AdamW state Save wrote to dir, if there is
// one; without it the optimizer stays as it is.
func (l *Learner) LoadOptimizer(dir string) error {
	path := filepath.Join(dir, OptimizerFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	mom, _, err1 := f.Float32("adamw.m")
	vel, _, err2 := f.Float32("adamw.v")
	step, err3 := strconv.ParseInt(f.Metadata()["step"], 10, 64)
	for _, e := range []error{err1, err2, err3} {
		if e != nil {
			return fmt.Errorf("local: %s: %w", path, e)
		}
	}
	if err := l.Opt.SetState(mom, vel, step); err != nil {
		return fmt.Errorf("local: %s: %w", path, err)
	}
	return nil
}
