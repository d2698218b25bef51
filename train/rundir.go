package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"rlvr/rundir"
)

// ErrStopped is returned by Run when Options.Stop asked the run to end: the
// step under way finished and a checkpoint holds it, so --resume continues.
var ErrStopped = errors.New("train: stopped; the last step is checkpointed")

// ResumeSafe lists the knobs a resumed run may change: they do not change
// what was trained so far or what comes next, only how long it runs, how
// fast it samples and learns and in how much memory (precision and
// sampler_precision also round the steps after differently: the
// checkpoint holds float32 weights either way), how often it is looked at or saved, and where and how
// patiently a remote backend is reached (its server may move between a
// run's lives; the saved state it resumes from names the server's
// weights).
var ResumeSafe = []string{"steps", "eval_every", "checkpoint_every", "keep_last", "keep_optimizer", "micro_batch_tokens", "gradient_checkpointing",
	"sample_batch", "precision", "sampler_precision", "backend.url", "backend.api_key_env", "backend.retries", "backend.timeout"}

// claimRunDir makes runDir this run's: a fresh run refuses a directory
// holding another run unless overwrite clears it; a resumed run refuses a
// config that changes what ran (see ResumeSafe).
func claimRunDir(runDir string, cfg *RLConfig, resume, overwrite bool) error {
	var held []string
	for _, f := range rundir.Files {
		if exists(filepath.Join(runDir, f)) {
			held = append(held, f)
		}
	}
	ckpts, _ := rundir.Checkpoints(runDir)
	if len(ckpts) > 0 {
		held = append(held, fmt.Sprintf("%d checkpoints", len(ckpts)))
	}
	if resume {
		if len(held) == 0 {
			return nil // nothing ran yet: a fresh start
		}
		if len(ckpts) == 0 && !exists(filepath.Join(runDir, rundir.ConfigFile)) {
			return fmt.Errorf("train: --resume: %s has no checkpoint to resume from (it holds %s); start again with --overwrite", runDir, strings.Join(held, ", "))
		}
		// Without a checkpoint the run resumes from its start, which its
		// config determines: what it scored of the starting model's
		// evaluation is kept, its steps are made again.
		return checkResumeConfig(runDir, cfg)
	}
	if len(held) == 0 {
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return fmt.Errorf("train: run directory: %w", err)
		}
		return nil
	}
	if !overwrite {
		return fmt.Errorf("train: %s holds another run (%s): continue it with --resume, or replace it with --overwrite", runDir, strings.Join(held, ", "))
	}
	return rundir.Clear(runDir)
}

// checkResumeConfig compares the config of a resumed run, as recorded
// (RLConfig.recorded), with the one the directory recorded, and names
// every knob that changed and may not.
func checkResumeConfig(runDir string, cfg *RLConfig) error {
	path := filepath.Join(runDir, rundir.ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("train: --resume: %w", err)
	}
	var saved map[string]any
	if err := yaml.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("train: --resume: %s: %w", path, err)
	}
	// A knob added since the run was saved takes the default it resolves
	// to, so that the run stays resumable.
	var savedCfg RLConfig
	if yaml.Unmarshal(b, &savedCfg) == nil {
		if r, err := savedCfg.Resolve(); err == nil {
			savedCfg = savedCfg.recorded(r)
			if m, err := configMap(&savedCfg); err == nil {
				saved = m
			}
		}
	}
	now, err := configMap(cfg)
	if err != nil {
		return err
	}
	was, is := flatten("", saved), flatten("", now)
	var changed []string
	for _, k := range unionKeys(was, is) {
		a, b := was[k], is[k]
		if a != b && !slices.Contains(ResumeSafe, k) {
			changed = append(changed, fmt.Sprintf("%s %s -> %s", k, orNone(a), orNone(b)))
		}
	}
	if len(changed) > 0 {
		return fmt.Errorf("train: --resume: the config changes what %s ran: %s (a resumed run may change only %s)", runDir, strings.Join(changed, ", "), strings.Join(ResumeSafe, ", "))
	}
	return nil
}

// configMap is a recorded config as the generic map its YAML decodes to.
func configMap(cfg *RLConfig) (map[string]any, error) {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, yaml.Unmarshal(b, &m)
}

// flatten turns nested maps into dotted keys with their values as JSON.
func flatten(prefix string, m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok {
			for sk, sv := range flatten(key, sub) {
				out[sk] = sv
			}
			continue
		}
		if v == nil {
			out[key] = ""
		} else {
			out[key] = fmt.Sprint(v)
		}
	}
	return out
}

func unionKeys(a, b map[string]string) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func orNone(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// checkPaths checks that the files a config names exist, before a run
// directory is made.
func checkPaths(c *RLConfig) error {
	var errs []string
	for _, p := range []struct{ key, path string }{{"model", c.Model}, {"data.train", c.Data.Train}, {"data.test", c.Data.Test}, {"data.validation", c.Data.ValidationFile()}} {
		if p.path == "" {
			continue
		}
		if _, err := os.Stat(p.path); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p.key, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("train config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// latestIntact returns the newest checkpoint whose run state reads back
// and that intact accepts, skipping (and reporting) damaged newer ones.
func latestIntact(runDir string, intact func(dir string, st runState) error) (string, runState, []string, error) {
	ckpts, err := rundir.Checkpoints(runDir)
	if errors.Is(err, os.ErrNotExist) {
		return "", runState{}, nil, nil
	} else if err != nil {
		return "", runState{}, nil, err
	}
	var skipped []string
	for i := len(ckpts) - 1; i >= 0; i-- {
		dir := ckpts[i]
		st, err := readState(dir)
		if err == nil {
			err = intact(dir, st)
		}
		if err == nil {
			return dir, st, skipped, nil
		}
		skipped = append(skipped, fmt.Sprintf("%s (%v)", filepath.Base(dir), err))
	}
	if len(ckpts) > 0 {
		return "", runState{}, skipped, fmt.Errorf("train: --resume: no intact checkpoint in %s: %s", runDir, strings.Join(skipped, "; "))
	}
	return "", runState{}, nil, nil
}

func readState(dir string) (runState, error) {
	var st runState
	b, err := os.ReadFile(filepath.Join(dir, rundir.StateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", rundir.StateFile, err)
	}
	// Step 0 is a cold start's checkpoint, and only that.
	if st.Step < 0 || st.Step == 0 && st.ColdStart == nil {
		return st, fmt.Errorf("%s: step %d", rundir.StateFile, st.Step)
	}
	return st, nil
}
