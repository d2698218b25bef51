package rundir

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMachines: Load reads machine.jsonl's lines in order, skips one that
// does not parse with a warning naming the file and line, and a resumed
// run drops the line of a start after its checkpoint.
func TestMachines(t *testing.T) {
	dir := t.TempDir()
	first := Machine{Step: 0, CPU: "AMD EPYC family 25 model 17", Features: "AVX2+FMA, AVX-512, AVX512-BF16, no AMX", Threads: 2,
		Learner: "bf16: oneDNN", Sampler: "bf16: oneDNN; decoding on the FMA tiles (AVX-512)", Revision: "abc+modified"}
	later := first
	later.Step, later.Sampler = 5, "bf16: oneDNN; decoding on the AVX512-BF16 tiles (VDPBF16PS)"
	for _, m := range []Machine{first, later} {
		if err := AppendMachine(dir, m); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, MachineFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":7,"threads":2}` + "\n")
	f.Close()
	if err := AppendEval(dir, Eval{Step: 0, Split: "val"}); err != nil {
		t.Fatal(err)
	}
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Machines) != 2 || r.Machines[0] != first || r.Machines[1] != later {
		t.Fatalf("Machines = %+v, want [%+v %+v]", r.Machines, first, later)
	}
	if !strings.Contains(strings.Join(r.Warnings, "\n"), MachineFile+":3: skipped") {
		t.Errorf("warnings %q do not name the line without cpu or backend", r.Warnings)
	}
	if got, want := first.Engine(), "AMD EPYC family 25 model 17 (AVX2+FMA, AVX-512, AVX512-BF16, no AMX); learner bf16: oneDNN; sampler bf16: oneDNN; decoding on the FMA tiles (AVX-512)"; got != want {
		t.Errorf("Engine() = %q, want %q", got, want)
	}
	same := Machine{CPU: "x", Features: "y", Learner: "fp32: Go", Sampler: "fp32: Go", Threads: 8, Step: 3}
	if got := same.Engine(); got != "x (y); fp32: Go" {
		t.Errorf("Engine() of one kernel = %q", got)
	}
	if got := (Machine{CPU: "x", Backend: "tinker at http://h"}).Engine(); got != "tinker at http://h" {
		t.Errorf("Engine() of a remote backend = %q", got)
	}
	if err := TruncateLogs(dir, 4); err != nil {
		t.Fatal(err)
	}
	if r, err = Load(dir); err != nil || len(r.Machines) != 1 || r.Machines[0] != first {
		t.Fatalf("after TruncateLogs(4): %+v (%v), want the first start alone", r.Machines, err)
	}
}

// FuzzParseMachine: parseMachine never panics, and a line it accepts
// names a CPU or a backend and reads back the same once written again.
func FuzzParseMachine(f *testing.F) {
	f.Add([]byte(`{"step":0,"cpu":"AMD EPYC","features":"AVX2+FMA","threads":2,"learner":"fp32: Go","sampler":"fp32: Go"}`))
	f.Add([]byte(`{"step":"0","cpu":1}`))
	f.Add([]byte(`{"backend":"tinker at http://127.0.0.1:1"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseMachine(line)
		if err != nil {
			return
		}
		if m.CPU == "" && m.Backend == "" {
			t.Fatalf("accepted %q without a cpu or backend", line)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseMachine(b)
		if err != nil || again != m {
			t.Fatalf("%q read back as %+v (%v), want %+v", b, again, err, m)
		}
	})
}
