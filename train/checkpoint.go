package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/backend/remote"
	"rlvr/internal/atomicfile"
	"rlvr/rundir"
)

// runState is what a checkpoint records beyond the weights and optimizer.
type runState struct {
	Step   int `json:"step"`   // steps completed
	Cursor int `json:"cursor"` // training examples drawn so far
	// OptSteps is the learning-rate schedule's position: optimizer steps
	// of the shared update taken so far (skipped steps take none).
	// It is nil in checkpoints written before it was stored.
	OptSteps *int            `json:"opt_steps"`
	Method   json.RawMessage `json:"method,omitempty"` // the method's own state
	// ColdStart is the cold start's progress, in the step-0 checkpoints
	// it writes; nil in a run without one.
	ColdStart *coldStartState `json:"cold_start,omitempty"`
}

func writeConfig(runDir string, cfg RLConfig) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(runDir, rundir.ConfigFile), b)
}

// saveCheckpoint writes ckpt-<step>/ (a complete model directory, the
// optimizer, the run and method state) atomically and keeps the newest
// keep. It stages the checkpoint in ckpt-<step>.tmp/, a name of the run
// directory's lock holder alone (the remote backend names its save after
// it), and a save that fails, on a full disk say, removes it. With
// optimizerLast, the checkpoints it keeps other than ckpt-<step>/ lose
// their optimizer state (RLConfig.KeepOptimizer), once ckpt-<step>/ is in
// place.
func saveCheckpoint(ctx context.Context, l backend.Learner, runDir string, st runState, keep int, optimizerLast bool) (err error) {
	final := rundir.CheckpointDir(runDir, st.Step)
	tmp := final + ".tmp"
	os.RemoveAll(tmp)
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := l.Save(ctx, tmp); err != nil {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(tmp, rundir.StateFile), b); err != nil {
		return err
	}
	os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	ckpts, _ := rundir.Checkpoints(runDir)
	for len(ckpts) > max(keep, 1) {
		os.RemoveAll(ckpts[0])
		ckpts = ckpts[1:]
	}
	if optimizerLast {
		for _, dir := range ckpts {
			if dir != final {
				if err := os.Remove(filepath.Join(dir, local.OptimizerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
	}
	return nil
}

// ExportModel copies the final checkpoint of a run, without the optimizer
// and run state, to out: a Hugging Face model directory.
func ExportModel(runDir, out string) error {
	ckpts, err := rundir.Checkpoints(runDir)
	if err != nil {
		return err
	}
	if len(ckpts) == 0 {
		return fmt.Errorf("train: %s has no checkpoint", runDir)
	}
	src := ckpts[len(ckpts)-1]
	if path, ok, err := remote.ReadState(src); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("train: %s trained on a Tinker backend: its weights are on the server, at %s", runDir, path)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == rundir.StateFile || e.Name() == local.OptimizerFile {
			continue
		}
		if err := atomicfile.Copy(filepath.Join(src, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// openResumed opens the policy a run trains: with resume, from the newest
// intact checkpoint in runDir, whose run state it returns, and otherwise
// (or when runDir has none) from base.
func openResumed(ctx context.Context, runDir, base string, cfg *RLConfig, resume bool, logf func(string, ...any)) (*policy, runState, error) {
	var start runState
	var pol *policy
	if resume {
		// A local checkpoint is intact when its model opens; a remote one
		// when it names the server's saved state, loaded below.
		var state string
		dir, st, skipped, err := latestIntact(runDir, func(dir string, st runState) (err error) {
			if cfg.Backend.remote() {
				state, err = remoteState(dir)
			} else if _, err = os.Stat(filepath.Join(dir, local.OptimizerFile)); err != nil && st.Step < cfg.Steps {
				// Resuming without it would restart AdamW's moments. A
				// checkpoint of the last step has no step left to train,
				// only its evaluation, and needs none.
				err = fmt.Errorf("no optimizer state to resume from (keep_optimizer: %s kept only a newer checkpoint's): %w", KeepOptimizerLast, err)
			} else {
				pol, err = openPolicy(ctx, base, dir, cfg)
			}
			return err
		})
		for _, s := range skipped {
			logf("resume: skipping damaged checkpoint %s", s)
		}
		if err != nil {
			return nil, start, err
		}
		if dir != "" {
			start = st
			logf("resume: from %s (step %d)", dir, st.Step)
			if state != "" {
				// Loaded once: a failure ends the run rather than falling
				// back to an older checkpoint.
				if pol, err = openRemote(ctx, base, state, cfg); err != nil {
					return nil, start, err
				}
			}
		}
	}
	if pol == nil {
		var err error
		if pol, err = openPolicy(ctx, base, "", cfg); err != nil {
			return nil, start, err
		}
	}
	return pol, start, nil
}

// optimizerSteps is the learning-rate schedule's position at the start of
// a run that resumes from s.
func (s runState) optimizerSteps(c *RLConfig) int {
	if s.OptSteps != nil {
		return *s.OptSteps
	}
	// A checkpoint from before the schedule position was stored: the best
	// estimate is one update per mini-batch of every step.
	return s.Step * c.Epochs * c.MiniBatches
}
