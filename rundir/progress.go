package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"rlvr/internal/located"
)

// EvalProgressFile holds the completions of the evaluation under way, a
// [Scored] per line: on a CPU the final test evaluation of a chat model
// takes hours, and a run killed in it resumes it from what it had scored
// ([ReadScored]) instead of from its first problem. The loop removes it
// once the evaluation is recorded in eval.jsonl.
const EvalProgressFile = "eval_progress.jsonl"

// Scored is one completion of an evaluation under way.
type Scored struct {
	Step  int    `json:"step"`
	Split string `json:"split"`
	Pass  string `json:"pass"` // "greedy", "sampled" or an expert's name
	ID    string `json:"id"`   // the problem's task.Example.ID
	Index int    `json:"index"`
	Text  string `json:"text"`
}

// AppendScored appends a completion to eval_progress.jsonl.
func AppendScored(runDir string, s Scored) error {
	return appendLine(filepath.Join(runDir, EvalProgressFile), s)
}

// ReadScored reads the completions eval_progress.jsonl holds for the
// evaluation of split after step, by pass and problem, in their order. A
// last line without its newline is one a killed run was writing, and is
// left out; any other malformed line is an error naming it.
func ReadScored(runDir string, step int, split string) (map[string]map[string][]string, error) {
	path := filepath.Join(runDir, EvalProgressFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	out := map[string]map[string][]string{}
	for i, line := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasSuffix(line, "\n") {
			break // "" after the last newline, or the partial last line
		}
		var s Scored
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return nil, located.At("rundir", path, i+1, -1, "", err)
		}
		if s.Step != step || s.Split != split {
			continue
		}
		if out[s.Pass] == nil {
			out[s.Pass] = map[string][]string{}
		}
		texts := out[s.Pass][s.ID]
		if s.Index != len(texts) {
			return nil, located.At("rundir", path, i+1, -1, "", fmt.Errorf("completion %d of problem %q in pass %s follows %d of them", s.Index, s.ID, s.Pass, len(texts)))
		}
		out[s.Pass][s.ID] = append(texts, s.Text)
	}
	return out, nil
}

// RemoveScored removes eval_progress.jsonl.
func RemoveScored(runDir string) error {
	err := os.Remove(filepath.Join(runDir, EvalProgressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// DropEvaluation removes the lines of eval.jsonl and samples.jsonl of the
// evaluation after step, before it is made again: a run killed while it
// made it may have written some.
func DropEvaluation(runDir string, step int) error {
	for _, name := range []string{EvalFile, SamplesFile} {
		if err := filterLines(filepath.Join(runDir, name), func(lineStep int) bool { return lineStep != step }); err != nil {
			return err
		}
	}
	return nil
}
