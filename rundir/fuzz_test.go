package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad reads run directories with arbitrary config.yaml, metrics.jsonl
// and eval.jsonl: Load returns a run or an error, never panics, and the
// steps it returns are in order, one per step.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("algorithm: grpo\nseed: 3\n"), []byte(`{"step":1,"accuracy":0.5,"done":true}`+"\n"+`{"step":2,"accuracy":"x"}`+"\n"), []byte(`{"step":0,"split":"val","greedy":0.1,"experts":{"E0":0.1}}`+"\n"))
	f.Add([]byte("seed: [1\n"), []byte(`{"step":2}`+"\n"+`{"step":1}`+"\n"+`{"step":1,"a":1e999}`), []byte(`{"step":"0"}`))
	f.Add([]byte{}, []byte("{\n"), []byte("null\n[]\n"))
	f.Add([]byte("seed: 1\n"), []byte(`{"step":1}`+"\n"), []byte(`{"step":1,"split":"test","problems":3,"outcomes":"01-"}`+"\n"+`{"step":1,"outcomes":"0\u00001"}`+"\n"))
	f.Fuzz(func(t *testing.T, config, metrics, evals []byte) {
		dir := t.TempDir()
		for name, b := range map[string][]byte{ConfigFile: config, MetricsFile: metrics, EvalFile: evals} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Load(dir, "accuracy")
		if err != nil {
			return
		}
		for i := 1; i < len(r.Steps); i++ {
			if r.Steps[i].Step <= r.Steps[i-1].Step {
				t.Fatalf("steps out of order or repeated: %d then %d", r.Steps[i-1].Step, r.Steps[i].Step)
			}
		}
		for _, e := range r.Evals {
			if strings.Trim(e.Outcomes, "01-") != "" || e.Problems > 0 && e.Outcomes != "" && len(e.Outcomes) != e.Problems {
				t.Fatalf("outcomes %q for %d problems read without an error", e.Outcomes, e.Problems)
			}
		}
		r.Keys()
		r.LastStep()
	})
}
