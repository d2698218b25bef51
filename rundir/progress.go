package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// left out when it does not parse; any other malformed line is an error
// naming it (readLines).
func ReadScored(runDir string, step int, split string) (map[string]map[string][]string, error) {
	path := filepath.Join(runDir, EvalProgressFile)
	out := map[string]map[string][]string{}
	var warnings []string // the partial last line's: nothing a reader acts on
	_, err := readLines(path, &warnings, false, func(line []byte) error {
		var s Scored
		if err := json.Unmarshal(line, &s); err != nil {
			return err
		}
		if s.Step != step || s.Split != split {
			return nil
		}
		if out[s.Pass] == nil {
			out[s.Pass] = map[string][]string{}
		}
		texts := out[s.Pass][s.ID]
		if s.Index != len(texts) {
			return fmt.Errorf("completion %d of problem %q in pass %s follows %d of them", s.Index, s.ID, s.Pass, len(texts))
		}
		out[s.Pass][s.ID] = append(texts, s.Text)
		return nil
	})
	return out, err
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
