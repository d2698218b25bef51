package train

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/rundir"
)

// withoutAsync drops the async run's own metrics, which a synchronous run
// does not log.
func withoutAsync(ms []map[string]float64) []map[string]float64 {
	for _, m := range ms {
		for k := range m {
			if strings.HasPrefix(k, "async/") {
				delete(m, k)
			}
		}
	}
	return ms
}

// finalWeights reads the weights file of a run's last checkpoint.
func finalWeights(t *testing.T, dir string, step int) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rundir.CheckpointDir(dir, step), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAsyncStalenessZeroIsSync: max_staleness 0 runs the producer, the
// snapshots and the learner of an async run, and trains what the
// synchronous loop trains, bit for bit: every step's metrics, the
// evaluations and the final weights.
func TestAsyncStalenessZeroIsSync(t *testing.T) {
	c := smallRL(t)
	c.Steps = 4
	syncDir, asyncDir := filepath.Join(t.TempDir(), "sync"), filepath.Join(t.TempDir(), "async")
	if err := Run(context.Background(), c, syncDir, Options{}); err != nil {
		t.Fatal(err)
	}
	c.Async = &AsyncConfig{MaxStaleness: 0}
	if err := Run(context.Background(), c, asyncDir, Options{}); err != nil {
		t.Fatal(err)
	}
	a, b := stable(t, filepath.Join(syncDir, rundir.MetricsFile)), stable(t, filepath.Join(asyncDir, rundir.MetricsFile))
	for i, m := range b {
		if m[MetricStalenessMax] != 0 {
			t.Errorf("step %d: staleness %v with max_staleness 0", i+1, m[MetricStalenessMax])
		}
	}
	if !reflect.DeepEqual(a, withoutAsync(b)) {
		t.Errorf("metrics differ:\nsync  %v\nasync %v", a, b)
	}
	ea, eb := evalText(filepath.Join(syncDir, rundir.EvalFile)), evalText(filepath.Join(asyncDir, rundir.EvalFile))
	if ea == "" || ea != eb {
		t.Errorf("evaluations differ:\nsync  %s\nasync %s", ea, eb)
	}
	if !bytes.Equal(finalWeights(t, syncDir, c.Steps), finalWeights(t, asyncDir, c.Steps)) {
		t.Error("the final weights differ")
	}
}

// TestAsyncStalenessBound: with max_staleness k, step s trains on a batch
// sampled by the weights of version max(start, s−k) — never older — and
// the batch really comes from those weights: the learner's logprobs before
// the update equal the sampler's on a fresh batch (float32 both) and
// depart from them on a stale one. A resumed run samples its first steps
// from the weights it resumed with, and its checkpoint keeps the cursor of
// the step trained, not of the steps the producer built ahead.
func TestAsyncStalenessBound(t *testing.T) {
	const k = 2
	c := smallRL(t)
	c.Steps, c.CheckpointEvery = 3, 3
	c.Async = &AsyncConfig{MaxStaleness: k}
	dir := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), c, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(rundir.CheckpointDir(dir, 3), rundir.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st runState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if want := 3 * c.PromptsPerStep; st.Cursor != want {
		t.Errorf("checkpoint after step 3 has cursor %d, want %d (the producer's steps ahead are sampled again on resume)", st.Cursor, want)
	}
	c.Steps = 7
	if err := Run(context.Background(), c, dir, Options{Resume: true}); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(dir, rundir.MetricsFile))
	if len(ms) != 7 {
		t.Fatalf("%d steps logged, want 7", len(ms))
	}
	for i, m := range ms {
		start := 0
		if i >= 3 {
			start = 3
		}
		want := min(i-start, k)
		if m[MetricStalenessMax] != float64(want) || m[MetricStalenessMean] != float64(want) || m[MetricSamplerVersion] != float64(i-want) {
			t.Errorf("step %d: staleness mean %v max %v, version %v; want staleness %d of version %d",
				i+1, m[MetricStalenessMean], m[MetricStalenessMax], m[MetricSamplerVersion], want, i-want)
		}
		gap := m[MetricLogprobGapMax]
		switch {
		case want == 0 && gap > 1e-4:
			t.Errorf("step %d: a batch of the learner's own version has a logprob gap of %.3g", i+1, gap)
		case want > 0 && gap < 1e-3:
			t.Errorf("step %d: a batch %d versions old has a logprob gap of %.3g: it was not sampled by older weights", i+1, want, gap)
		}
		if _, ok := m[MetricISWeightMean]; !ok {
			t.Errorf("step %d: no %s: the sampler correction async turns on did not run", i+1, MetricISWeightMean)
		}
	}
}

// TestAsyncConfig: the async section's errors name the field, and an
// async run with stale samples takes the sampler correction by default.
func TestAsyncConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"negative", []string{"async.max_staleness=-1"}, "async.max_staleness = -1 is negative"},
		{"too far", []string{"async.max_staleness=65"}, "async.max_staleness = 65 must be at most 64"},
		{"sft", []string{"algorithm=sft", "async.max_staleness=1"}, "async: algorithm sft samples nothing"},
		{"unknown key", []string{"async.staleness=1"}, "staleness"},
	} {
		c, err := LoadRLConfig("", "", tc.sets...)
		if err == nil {
			_, err = c.Resolve()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		sets []string
		cap  float64 // 0: no correction
	}{
		{[]string{"async.max_staleness=0"}, 0},
		{[]string{"async.max_staleness=1"}, DefaultAsyncCap},
		{[]string{"async.max_staleness=2", "sampler_correction.cap=3"}, 3},
		{[]string{"async.max_staleness=2", "algorithm=rft", "group_size=1"}, 0},
	} {
		c, err := LoadRLConfig("", "", tc.sets...)
		if err == nil {
			_, err = c.Resolve()
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.sets, err)
		}
		var got float64
		if c.SamplerCorrection != nil {
			got = c.SamplerCorrection.Cap
		}
		if got != tc.cap {
			t.Errorf("%v: sampler correction cap %v, want %v", tc.sets, got, tc.cap)
		}
	}
	if c, err := LoadRLConfig("", "", "async.max_staleness=1", "algorithm="+string(method.RFT)); err != nil || c.Async == nil || c.Async.MaxStaleness != 1 {
		t.Errorf("--set async.max_staleness=1: %+v, %v", c.Async, err)
	}
}

// TestEveryMethodRunsAsync runs each method and baseline for three steps
// with max_staleness 1, each part's work logged; sft, which samples
// nothing, is refused at the config.
func TestEveryMethodRunsAsync(t *testing.T) {
	for _, tc := range everyMethod {
		t.Run(tc.name, func(t *testing.T) {
			cfg := remoteRL(t)
			cfg.Steps = 3
			tc.mod(&cfg)
			cfg.Async = &AsyncConfig{MaxStaleness: 1}
			dir := filepath.Join(t.TempDir(), "run")
			err := RL(context.Background(), cfg, dir, false, nil)
			if cfg.Algorithm == method.SFT {
				if err == nil || !strings.Contains(err.Error(), "async: algorithm sft") {
					t.Fatalf("async sft: error %v, want the refusal naming async", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkMethodRan(t, dir, cfg.Steps, tc.check)
		})
	}
}

// TestAsyncOnTinker: on a Tinker server, the producer samples a published
// version by its path while forward_backward runs, and the learner's
// logprobs show the batch came from older weights when it is stale.
func TestAsyncOnTinker(t *testing.T) {
	cfg := remoteRL(t)
	cfg.Steps, cfg.LR = 4, 1e-3
	cfg.Async = &AsyncConfig{MaxStaleness: 1}
	addr, _ := tinkerServer(t, cfg.Model)
	onTinker(&cfg, addr)
	dir := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(dir, rundir.MetricsFile))
	for i, m := range ms {
		want := min(i, 1)
		if m[MetricStalenessMax] != float64(want) {
			t.Errorf("step %d: staleness %v, want %d", i+1, m[MetricStalenessMax], want)
		}
		gap := m[MetricLogprobGapMax]
		switch {
		case want == 0 && gap > 1e-3:
			t.Errorf("step %d: a batch of the learner's own version has a logprob gap of %.3g", i+1, gap)
		case want > 0 && gap < 1e-3:
			t.Errorf("step %d: a stale batch has a logprob gap of %.3g: it was sampled by the learner's current weights", i+1, gap)
		}
	}
}
