// Package rundir owns the run directory: what `rlvr train` writes there
// and how it is read back (by `rlvr report`, the command's summaries and
// the scripts). It names the files, defines the records of the logs,
// appends them, and loads a run.
//
// A run directory holds:
//
//   - config.yaml ([ConfigFile]), the resolved training config;
//   - metrics.jsonl ([MetricsFile]), one flat JSON object per training
//     step: "step" ([StepField]) and the step's metrics by name. The
//     loop's and the RL core's metric names are here (metrics.go), so
//     that a reader names them without compiling the loop; a part's own
//     are its package's, and the columns it adds to the report's table
//     are declared here ([Column]);
//   - eval.jsonl ([EvalFile]), one [Eval] per evaluation, with what each
//     of the parts' evaluators measured as a record of its own, whose
//     type is the part's and whose reading the part declares here
//     ([EvalRecord]);
//   - samples.jsonl ([SamplesFile]), one [Sample] per text shown for
//     reading;
//   - machine.jsonl ([MachineFile]), one [Machine] per start of a process
//     that wrote the run: the processor and kernels it computed with;
//   - ckpt-NNNNNN/ ([CheckpointDir]), a checkpoint after step NNNNNN: a
//     model directory with the optimizer and the loop's state
//     ([StateFile]);
//   - .lock ([LockFile]), held by the process that writes the directory
//     ([Lock]), so that a second one, a resume included, is refused.
//
// The three logs grow a synced line at a time, so that a run killed
// mid-step leaves at most a partial last line; a resumed run first drops
// what came after its checkpoint ([TruncateLogs]).
//
// [Load] reads a run back, reading a log compressed with gzip
// (metrics.jsonl.gz) where the plain one is absent: a run kept for the
// record, without its checkpoints, takes little space that way. A
// malformed record is an error that names the file and line
// ([*located.Error]), with two exceptions: a last line without its newline
// that does not parse is the record a live run is still writing, and is
// skipped with a warning; and a malformed line of samples.jsonl is skipped
// with a warning ([Run.Warnings]).
package rundir

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"rlvr/internal/jsonl"
)

// The files of a run directory.
const (
	ConfigFile  = "config.yaml"
	MetricsFile = "metrics.jsonl"
	EvalFile    = "eval.jsonl"
	SamplesFile = "samples.jsonl"
	// StateFile is the loop's state inside a checkpoint directory.
	StateFile = "state.json"
	// CompressedSuffix ends a log kept gzip-compressed ("metrics.jsonl.gz"),
	// which Load reads where the plain log is absent.
	CompressedSuffix = jsonl.Compressed
)

// Files are what a run writes into its directory besides checkpoints.
var Files = []string{ConfigFile, MetricsFile, EvalFile, SamplesFile, EvalProgressFile, MachineFile}

// logs are the files that grow a line per record, each with its step.
var logs = []string{MetricsFile, EvalFile, SamplesFile, EvalProgressFile, MachineFile}

// checkpointPrefix starts a checkpoint directory's name, the step follows.
const checkpointPrefix = "ckpt-"

// CheckpointDir is the directory of the checkpoint after step.
func CheckpointDir(runDir string, step int) string {
	return filepath.Join(runDir, fmt.Sprintf("%s%06d", checkpointPrefix, step))
}

// Checkpoints lists the complete checkpoint directories, oldest first.
func Checkpoints(runDir string) ([]string, error) {
	entries, err := os.ReadDir(runDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), checkpointPrefix) && !strings.HasSuffix(e.Name(), ".tmp") {
			if _, err := strconv.Atoi(strings.TrimPrefix(e.Name(), checkpointPrefix)); err == nil {
				out = append(out, filepath.Join(runDir, e.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Clear removes a run's files and checkpoints, unfinished ones included,
// leaving anything else in runDir.
func Clear(runDir string) error {
	for _, f := range Files {
		if err := os.Remove(filepath.Join(runDir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	entries, _ := os.ReadDir(runDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), checkpointPrefix) {
			if err := os.RemoveAll(filepath.Join(runDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
