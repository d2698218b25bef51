package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// MachineFile holds a line per start of a process that wrote the run
// ([Machine]): the processor and kernels its numbers were computed with.
// The kernels differ in the last bits (docs/precision.md), so two runs
// compared problem by problem should say they ran on the same ones.
const MachineFile = "machine.jsonl"

// Machine is one line of machine.jsonl: what the process that wrote the
// run from Step on computed with. A run resumed has a line per start,
// each of which may differ (precision may change on a resume). Read
// back, a line without "step" has Step -1.
type Machine struct {
	Step int `json:"step"`
	// CPU is the processor with its family and model, "AMD EPYC family
	// 25 model 17", and Features its matrix instructions, "AVX2+FMA,
	// AVX-512, AVX512-BF16, no AMX" (engine/gemm.CPUInfo).
	CPU      string `json:"cpu"`
	Features string `json:"features"`
	Threads  int    `json:"threads"`
	// Learner and Sampler name what the learner's and the sampler's
	// products ran on (engine/gemm.KernelFor): "bf16: oneDNN …; decoding
	// on the FMA tiles (AVX-512)". Empty for a remote backend, which
	// Backend names instead.
	Learner string `json:"learner,omitempty"`
	Sampler string `json:"sampler,omitempty"`
	Backend string `json:"backend,omitempty"`
	// Revision is the version of rlvr that ran: the VCS revision the
	// binary was built from, "+modified" when its tree had changes;
	// empty when the build did not record one.
	Revision string `json:"revision,omitempty"`
}

// Engine is what the line says the numbers were computed with, the
// processor and kernels without the step, the threads or the revision:
// runs whose Engine is the same compute the same bits.
func (m Machine) Engine() string {
	s := m.CPU + " (" + m.Features + ")"
	switch {
	case m.Backend != "":
		s = m.Backend
	case m.Learner == m.Sampler:
		s += "; " + m.Learner
	default:
		s += "; learner " + m.Learner + "; sampler " + m.Sampler
	}
	return s
}

// AppendMachine appends a start's record to machine.jsonl.
func AppendMachine(runDir string, m Machine) error {
	return appendLine(filepath.Join(runDir, MachineFile), m)
}

// parseMachine reads one machine.jsonl line.
func parseMachine(line []byte) (Machine, error) {
	m := Machine{Step: -1}
	if err := json.Unmarshal(line, &m); err != nil {
		return Machine{}, fmt.Errorf("invalid JSON: %v", jsonMessage(err))
	}
	if m.CPU == "" && m.Backend == "" {
		return Machine{}, errors.New(`neither "cpu" nor "backend"`)
	}
	return m, nil
}
