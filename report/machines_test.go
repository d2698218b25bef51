package report

import (
	"strings"
	"testing"

	"rlvr/rundir"
)

// TestMachineNotes: a table says what its runs computed with, once when
// they agree, by run when they do not, and nothing when none recorded it.
func TestMachineNotes(t *testing.T) {
	zen := rundir.Machine{CPU: "AMD EPYC family 25 model 17", Features: "AVX-512, AVX512-BF16, no AMX", Learner: "bf16: oneDNN", Sampler: "bf16: oneDNN"}
	amx := zen
	amx.CPU, amx.Features = "Intel Xeon family 6 model 143", "AVX-512, AVX512-BF16, AMX-BF16"
	run := func(seed string, ms ...rundir.Machine) *rundir.Run {
		return &rundir.Run{Name: "r-seed" + seed, Seed: seed, Machines: ms}
	}
	if got := machineNotes([]Row{{Name: "grpo", Runs: []*rundir.Run{run("1"), run("2")}}}); got != nil {
		t.Errorf("runs without records: notes %q, want none", got)
	}
	same := []Row{{Name: "grpo", Runs: []*rundir.Run{run("1", zen), run("2", zen, zen)}}, {Name: "mel", Runs: []*rundir.Run{run("1", zen)}}}
	if got, want := strings.Join(machineNotes(same), "\n"), "Every run computed on "+zen.Engine()+"."; got != want {
		t.Errorf("one engine: %q, want %q", got, want)
	}
	mixed := []Row{{Name: "grpo", Runs: []*rundir.Run{run("1", zen), run("2", zen, amx)}}, {Name: "mel", Runs: []*rundir.Run{run("1", zen), run("2")}}}
	got := strings.Join(machineNotes(mixed), "\n")
	want := "The runs computed on more than one engine, whose kernels differ in the last bits. grpo seed 1, mel seed 1: " + zen.Engine() +
		"; grpo seed 2: " + zen.Engine() + ", then " + amx.Engine() + "; mel seed 2: not recorded."
	if got != want {
		t.Errorf("several engines:\n got %q\nwant %q", got, want)
	}
}
