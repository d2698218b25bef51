package train

import (
	"runtime/debug"

	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/engine/parallel"
	"rlvr/rundir"
)

// MachineRecord is machine.jsonl's line for a process that computes a
// run from step on: this machine's processor and threads, and the kernels
// the learner's and the sampler's products run on in their precisions.
func MachineRecord(step int, learner, sampler model.Precision) rundir.Machine {
	m := hostRecord(step)
	m.Learner, m.Sampler = gemm.KernelFor(learner), gemm.KernelFor(sampler)
	return m
}

// hostRecord is the line's part every process fills alike: the step, this
// machine's processor and threads, and rlvr's revision.
func hostRecord(step int) rundir.Machine {
	cpu := gemm.DetectCPU()
	return rundir.Machine{Step: step, CPU: cpu.Identity(), Features: cpu.Features(), Threads: parallel.Threads(), Revision: revision()}
}

// EndpointRecord is the line of a process whose model computes at an
// endpoint, a server elsewhere: this machine, and the server's address.
func EndpointRecord(step int, url string) rundir.Machine {
	m := hostRecord(step)
	m.Backend = url
	return m
}

// machineRecord is the run's line: MachineRecord for a local backend; for
// a remote one, the Tinker server it trains on.
func (c *RLConfig) machineRecord(step int) (rundir.Machine, error) {
	if c.Backend.remote() {
		return EndpointRecord(step, "tinker at "+c.Backend.URL), nil
	}
	learner, sampler, err := c.precisions()
	if err != nil {
		return rundir.Machine{}, err
	}
	return MachineRecord(step, learner, sampler), nil
}

// revision is the VCS revision the binary was built from, with
// "+modified" when its tree had changes; "" when the build recorded none
// (go test, go run of a file).
func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + modified
}
