package rundir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"rlvr/internal/atomicfile"
)

// AppendMetrics appends a step's metrics to metrics.jsonl: m holds the
// step under StepField beside them.
func AppendMetrics(runDir string, m map[string]float64) error {
	return appendLine(filepath.Join(runDir, MetricsFile), m)
}

// AppendEval appends an evaluation to eval.jsonl.
func AppendEval(runDir string, e Eval) error {
	return appendLine(filepath.Join(runDir, EvalFile), e)
}

// AppendSample appends a text to samples.jsonl.
func AppendSample(runDir string, s Sample) error {
	return appendLine(filepath.Join(runDir, SamplesFile), s)
}

// appendLine appends v as one line of JSON and syncs it, so that a run
// killed after it returns keeps the line.
func appendLine(path string, v any) error {
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

// TruncateLogs prepares the logs for a run that continues after step:
// it keeps their lines up to step, dropping what a killed run wrote after
// its last checkpoint. At step 0 it keeps the starting model's
// evaluation, whole or in part, which a run killed in it resumes.
func TruncateLogs(runDir string, step int) error {
	for _, name := range logs {
		if err := truncateLines(filepath.Join(runDir, name), step); err != nil {
			return err
		}
	}
	return nil
}

// truncateLines keeps the complete lines of a log whose step is at most
// step.
func truncateLines(path string, step int) error {
	return filterLines(path, func(lineStep int) bool { return lineStep <= step })
}

// filterLines keeps the complete lines of a log whose step keep accepts.
func filterLines(path string, keep func(step int) bool) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	var kept []byte
	for _, line := range strings.SplitAfter(string(b), "\n") {
		var v struct {
			Step int `json:"step"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && keep(v.Step) && strings.HasSuffix(line, "\n") {
			kept = append(kept, line...)
		}
	}
	return atomicfile.WriteBytes(path, kept)
}
