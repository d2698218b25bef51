package train

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/method"
	"rlvr/method/dapo"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
	"rlvr/method/part"
	_ "rlvr/method/part/all"
	"rlvr/rundir"
	"rlvr/task"
	"rlvr/worldmodel"
)

// The child side of TestResumeAfterSIGKILL: a separate process running the
// config in $RLVR_RL_CHILD until it is killed.
func TestMain(m *testing.M) {
	if spec := os.Getenv("RLVR_RL_CHILD"); spec != "" {
		var c struct {
			Cfg string // as YAML, the config's own format
			Run string
		}
		if err := json.Unmarshal([]byte(spec), &c); err != nil {
			panic(err)
		}
		var cfg RLConfig
		if err := yaml.Unmarshal([]byte(c.Cfg), &cfg); err != nil {
			panic(err)
		}
		// Slow steps, so the parent's kill lands mid-run.
		slow := func(method.Metrics) { time.Sleep(250 * time.Millisecond) }
		if err := RL(context.Background(), cfg, c.Run, false, slow); err != nil {
			panic(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tinyWorldModel saves a small random model of the world's byte tokenizer.
func tinyWorldModel(t *testing.T) string {
	t.Helper()
	mc := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	mc.Dim, mc.Layers, mc.Hidden = 32, 1, 64
	m, _ := model.New(mc, 5)
	dir := filepath.Join(t.TempDir(), "base")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	return dir
}

// worldModel installs the built-in world model, which knows the world's
// formats, into a temporary directory.
func worldModel(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "world")
	if err := worldmodel.Install(worldmodel.FS(1), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// smallRL is a few quick steps from a small random world model.
func smallRL(t *testing.T) RLConfig {
	t.Helper()
	cfg := DefaultRL()
	cfg.Model, cfg.Data.Levels, cfg.Steps = tinyWorldModel(t), []int{0}, 6
	cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 4, 4, 24
	cfg.LR, cfg.EvalEvery, cfg.EvalProblems, cfg.CheckpointEvery = 1e-3, 0, 8, 2
	// An entropy bonus gives every step a gradient: a random model never
	// answers right, and a step without signal would change nothing.
	cfg.Entropy = 0.01
	return cfg
}

// timing are the metrics that differ between identical runs.
var timing = []string{"tokens_per_sec", "time_rollout_s", "time_verify_s", "time_learn_s", "step_s"}

// stable reads metrics.jsonl without the timing fields.
func stable(t testing.TB, path string) []map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if slices.Contains(timing, k) || strings.HasPrefix(k, "time_") {
				delete(m, k)
			}
		}
		out = append(out, m)
	}
	return out
}

// evalText is the eval.jsonl at path without each evaluation's time, the
// one field two runs of the same work do not share; "" when it is missing.
func evalText(path string) string {
	b, _ := os.ReadFile(path)
	return evalSeconds.ReplaceAllString(string(b), "")
}

// evalSeconds matches an evaluation line's "seconds" field.
var evalSeconds = regexp.MustCompile(`,"seconds":[0-9.e+-]+`)

// TestResumeAfterSIGKILL kills a training process with SIGKILL after its
// second checkpoint, resumes it, and checks the metrics of every step and
// the final evaluation equal an uninterrupted run's — for every algorithm
// and for a run with a guidance part.
func TestResumeAfterSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*RLConfig)
		check func([]map[string]float64) bool // of the uninterrupted run's metrics
	}{
		{"grpo", func(*RLConfig) {}, nil},
		{"dr-grpo", func(c *RLConfig) { c.Algorithm = method.DrGRPO }, nil},
		{"dapo", func(c *RLConfig) {
			c.Algorithm = method.DAPO
			c.Sections, c.Parts = nil, nil
		}, nil},
		{"reinforce++", func(c *RLConfig) { c.Algorithm = method.ReinforcePP }, nil},
		{"rft", func(c *RLConfig) { c.Algorithm = method.RFT }, nil},
		{"sft", func(c *RLConfig) { c.Algorithm = method.SFT; c.Entropy = 0 }, nil},
		{"grpo+expert_prompts", func(c *RLConfig) { c.Parts = []string{meml.PartExpertPrompts}; c.GroupSize = 2 }, nil},
		// A half-full hard-example buffer crosses the kill: 12 all-wrong
		// groups a step each join with probability 1/2, capacity 15.
		{"grpo+experts+mutual+hard_buffer", func(c *RLConfig) {
			c.Parts, c.GroupSize = []string{meml.PartExpertPrompts, meml.PartMutualLearning, meml.PartHardBuffer}, 2
			c.Sections.Set(&meml.ExpertPromptsConfig{Experts: []int{1, 2, 3}})
			c.Sections.Set(&meml.HardBufferConfig{K: 1, Capacity: 15})
			c.Sections.Set(&meml.MutualLearningConfig{Estimator: "exact"})
		}, func(ms []map[string]float64) bool { return ms[3]["buffer/fill"] > 0 && ms[5]["buffer/passes"] >= 1 }},
		// p(t) and the turn budget anneal across the kill.
		{"dapo+consultation", func(c *RLConfig) {
			c.Algorithm, c.Parts = method.DAPO, []string{eapo.PartConsultation}
			c.Sections.Set(&eapo.ConsultationConfig{Turns: &eapo.Schedule{Kind: optim.Linear, Start: 4, End: 1}})
		}, func(ms []map[string]float64) bool {
			return ms[0]["consult/p"] == 1 && ms[5]["consult/p"] < ms[3]["consult/p"] && ms[5]["consult/turn_budget"] < ms[0]["consult/turn_budget"]
		}},
		// Meta-experiences are written, validated and trained on both
		// sides of the kill, by the world model on a level it half solves,
		// and the one shown at each evaluation survives it.
		{"grpo+meta_experience", func(c *RLConfig) {
			c.Model, c.Data.Levels, c.MaxTokens, c.EvalEvery = worldModel(t), []int{3}, 96, 3
			c.Parts = []string{mel.PartMetaExperience}
			c.Sections.Set(&mel.MetaExperienceConfig{Pairs: 2})
		}, func(ms []map[string]float64) bool {
			var before, after float64
			for i, m := range ms {
				if i < 4 {
					before += m["mel/validated"]
				} else {
					after += m["mel/validated"]
				}
			}
			return before > 0 && after > 0 && ms[0]["mel/pairs"] > 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallRL(t)
			tc.mod(&cfg)
			ms := resumeAfterKill(t, cfg)
			if tc.check != nil && !tc.check(ms) {
				t.Fatalf("the run did not exercise what it tests: %v", ms)
			}
		})
	}
}

func resumeAfterKill(t *testing.T, cfg RLConfig) []map[string]float64 {
	return resumeAfterKillWithin(t, cfg, 0)
}

// resumeAfterKillWithin is resumeAfterKill with metrics equal to the
// relative tolerance tol (0: exactly).
func resumeAfterKillWithin(t *testing.T, cfg RLConfig, tol float64) []map[string]float64 {
	straight := filepath.Join(t.TempDir(), "straight")
	if err := RL(context.Background(), cfg, straight, false, nil); err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(t.TempDir(), "killed")
	// As a run directory records it: YAML writes parts unset as an empty
	// list.
	resolved := cfg
	r, err := resolved.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(resolved.recorded(r))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(struct {
		Cfg string
		Run string
	}{string(y), killed})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "RLVR_RL_CHILD="+string(spec))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it in step 6: step 5's metrics are written after the checkpoint
	// of step 4, then each step sleeps 250 ms before the next, and step 6's
	// checkpoint waits for its own sleep.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, ckptErr := os.Stat(filepath.Join(killed, "ckpt-000004", "state.json"))
		b, _ := os.ReadFile(filepath.Join(killed, "metrics.jsonl"))
		if ckptErr == nil && strings.Count(string(b), "\n") >= 5 {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatal("the child wrote no fifth step after its second checkpoint in 60 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(260 * time.Millisecond)
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	if _, err := os.Stat(filepath.Join(killed, "ckpt-000006")); err == nil {
		t.Fatal("the child finished before it was killed")
	}
	if n := len(stable(t, filepath.Join(killed, "metrics.jsonl"))); n < 5 {
		t.Fatalf("killed after %d steps, want the kill after step 5's metrics", n)
	}
	if err := RL(context.Background(), cfg, killed, true, nil); err != nil {
		t.Fatal(err)
	}
	a, b := stable(t, filepath.Join(straight, "metrics.jsonl")), stable(t, filepath.Join(killed, "metrics.jsonl"))
	if len(a) != cfg.Steps {
		t.Fatalf("%d steps in the straight run, want %d", len(a), cfg.Steps)
	}
	if ok, diff := metricsWithin(a, b, tol); !ok {
		t.Fatalf("metrics differ after resuming: %s", diff)
	}
	ea, eb := evalText(filepath.Join(straight, "eval.jsonl")), evalText(filepath.Join(killed, "eval.jsonl"))
	if ea != eb || !strings.Contains(ea, `"step":6`) {
		t.Fatalf("evaluations differ:\n%s\n%s", ea, eb)
	}
	xa, _ := os.ReadFile(filepath.Join(straight, "samples.jsonl"))
	xb, _ := os.ReadFile(filepath.Join(killed, "samples.jsonl"))
	if string(xa) != string(xb) {
		t.Fatalf("exhibits differ:\n%s\n%s", xa, xb)
	}
	ckpts, _ := rundir.Checkpoints(killed)
	if len(ckpts) != cfg.KeepLast {
		t.Fatalf("%d checkpoints kept, want %d", len(ckpts), cfg.KeepLast)
	}
	return a
}

// metricsWithin says two runs' metrics (as stable reads them) have the
// same keys and values equal to the relative tolerance tol (absolute below
// 1; 0 asks for equality); else it names the first difference.
func metricsWithin(a, b []map[string]float64, tol float64) (bool, string) {
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d steps against %d", len(a), len(b))
	}
	for i := range a {
		for _, k := range slices.Sorted(maps.Keys(a[i])) {
			v := a[i][k]
			w, ok := b[i][k]
			if !ok || math.Abs(v-w) > tol*math.Max(1, math.Abs(v)) {
				return false, fmt.Sprintf("step %d: %s is %v against %v (present %v)", i+1, k, v, w, ok)
			}
		}
		if len(a[i]) != len(b[i]) {
			return false, fmt.Sprintf("step %d: %d metrics against %d", i+1, len(a[i]), len(b[i]))
		}
	}
	return true, ""
}

// counting is a method with state: it counts its steps, trains SFT only on
// even counts (odd steps take no optimizer step) and logs the count.
type counting struct {
	inner method.Method
	count int
}

func (c *counting) Step(ctx context.Context, sc *method.StepContext, ex []task.Example) (*method.Batch, error) {
	c.count++
	sc.Metrics.Set("count", float64(c.count))
	if c.count%2 == 1 {
		return &method.Batch{}, nil
	}
	return c.inner.Step(ctx, sc, ex)
}

func (c *counting) State() (json.RawMessage, error) { return json.Marshal(c.count) }
func (c *counting) Restore(b json.RawMessage) error { return json.Unmarshal(b, &c.count) }

// TestResumeRestoresMethodStateAndSchedule interrupts a run of a stateful
// method that skips every other update, resumes it, and checks the
// method's counter and the learning-rate position (which a recomputation
// from the step count would get wrong after skipped steps) continue as in
// an uninterrupted run.
func TestResumeRestoresMethodStateAndSchedule(t *testing.T) {
	cfg := smallRL(t)
	cfg.Algorithm, cfg.Entropy, cfg.Warmup = method.SFT, 0, 10
	run := func(dir string, resume bool, stopAfter int) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		return Run(ctx, cfg, dir, Options{Resume: resume, Method: &counting{inner: &method.Supervised{}},
			Progress: func(m method.Metrics) {
				if int(m["step"]) == stopAfter {
					cancel()
				}
			}})
	}
	straight, cut := filepath.Join(t.TempDir(), "straight"), filepath.Join(t.TempDir(), "cut")
	if err := run(straight, false, 0); err != nil {
		t.Fatal(err)
	}
	if err := run(cut, false, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if err := run(cut, true, 0); err != nil {
		t.Fatal(err)
	}
	a, b := stable(t, filepath.Join(straight, "metrics.jsonl")), stable(t, filepath.Join(cut, "metrics.jsonl"))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("metrics differ after resuming:\nstraight %v\nresumed  %v", a, b)
	}
	if a[5]["count"] != 6 || a[5]["lr"] == 0 || a[5]["lr"] >= cfg.LR {
		t.Fatalf("step 6: count %v, lr %v (warming up to %v over 10 optimizer steps, 3 taken)", a[5]["count"], a[5]["lr"], cfg.LR)
	}
}

// recordingLearner is a learner that records the calls the loop makes.
type recordingLearner struct {
	calls    []string
	lrs      []float32
	states   []string // each optimizer step's backend.OptimParams.State
	gradNorm float64  // what each optimizer step reports
}

func (r *recordingLearner) ForwardBackward(_ context.Context, batch []backend.Datum, loss backend.Loss) (backend.Result, error) {
	name := "pg"
	if loss.NLL != 0 {
		name = "nll"
	}
	r.calls = append(r.calls, name)
	return backend.Result{Metrics: backend.Metrics{Tokens: len(batch)}}, nil
}
func (r *recordingLearner) Logprobs(context.Context, []backend.Datum) ([][]float32, error) {
	return nil, nil
}
func (r *recordingLearner) OptimStep(_ context.Context, p backend.OptimParams) (backend.StepResult, error) {
	r.calls = append(r.calls, "step")
	r.lrs = append(r.lrs, p.LearningRate)
	r.states = append(r.states, p.State)
	return backend.StepResult{GradNorm: r.gradNorm}, nil
}
func (r *recordingLearner) Save(context.Context, string) error { return nil }

// pipelinedLearner is a recordingLearner that is backend.Pipelined: it
// records each call when it is submitted and when it is awaited.
type pipelinedLearner struct{ recordingLearner }

func (p *pipelinedLearner) SubmitForwardBackward(ctx context.Context, batch []backend.Datum, loss backend.Loss) (backend.Future[backend.Result], error) {
	r, err := p.ForwardBackward(ctx, batch, loss)
	name := p.calls[len(p.calls)-1]
	return func(context.Context) (backend.Result, error) {
		p.calls = append(p.calls, "await "+name)
		return r, err
	}, nil
}

func (p *pipelinedLearner) SubmitOptimStep(ctx context.Context, o backend.OptimParams) (backend.Future[backend.StepResult], error) {
	r, err := p.OptimStep(ctx, o)
	return func(context.Context) (backend.StepResult, error) {
		p.calls = append(p.calls, "await step")
		return r, err
	}, nil
}

// TestUpdateIsPipelined: with a pipelined learner, each optimizer step is
// submitted after its passes and before any of them is awaited, and the
// step's metrics are the unpipelined learner's.
func TestUpdateIsPipelined(t *testing.T) {
	cfg := DefaultRL()
	cfg.MiniBatches, cfg.Epochs, cfg.LR, cfg.Warmup = 2, 1, 1e-6, 0
	learn := func(learner backend.Learner) method.Metrics {
		l := &loop{cfg: &cfg, pol: &policy{learner: learner}, sched: scheduleOf(&cfg)}
		m := method.Metrics{}
		if err := l.learn(context.Background(), threeTerms(), m); err != nil {
			t.Fatal(err)
		}
		delete(m, rundir.MetricTokensPerSec)
		return m
	}
	rec, pip := &recordingLearner{gradNorm: 0.5}, &pipelinedLearner{recordingLearner{gradNorm: 0.5}}
	want, got := learn(rec), learn(pip)
	update := []string{"pg", "nll", "step", "await pg", "await nll", "await step"}
	calls := append(append(slices.Clone(update), update...), "nll", "step", "await nll", "await step")
	if !reflect.DeepEqual(pip.calls, calls) {
		t.Errorf("calls %v, want %v", pip.calls, calls)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics pipelined %v, unpipelined %v", got, want)
	}
}

// TestTermsShareOneGradient checks that a step's terms sum into one
// optimizer step per mini-batch (so λ-weighted terms are one objective),
// and that a term with its own learning rate takes a step of its own.
// threeTerms is a batch of two terms that share the update and one with
// a learning rate of its own.
func threeTerms() *method.Batch {
	datum := func() backend.Datum {
		return backend.Datum{Tokens: []int32{1, 2}, Targets: []int32{2, 3}, Weights: []float32{1, 1},
			Advantages: []float32{1, 1}, SamplerLogprobs: []float32{-1, -1}}
	}
	data := func(n int) []backend.Datum {
		var out []backend.Datum
		for range n {
			out = append(out, datum())
		}
		return out
	}
	return &method.Batch{Terms: []method.Term{
		{Name: "pg", Data: data(4), Loss: backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2}, Aggregation: backend.TokenMean},
		{Name: "kl", Data: data(2), Loss: backend.Loss{NLL: 0.5}, Aggregation: backend.TokenMean},
		{Name: "buffer", Data: data(3), Loss: backend.Loss{NLL: 1}, Aggregation: backend.TokenMean, LR: 1e-5},
	}}
}

func TestTermsShareOneGradient(t *testing.T) {
	batch := threeTerms()
	cfg := DefaultRL()
	cfg.MiniBatches, cfg.Epochs, cfg.LR, cfg.Warmup = 2, 1, 1e-6, 0
	rec := &recordingLearner{}
	l := &loop{cfg: &cfg, pol: &policy{learner: rec}, sched: scheduleOf(&cfg)}
	m := method.Metrics{}
	if err := l.learn(context.Background(), batch, m); err != nil {
		t.Fatal(err)
	}
	want := []string{"pg", "nll", "step", "pg", "nll", "step", "nll", "step"}
	if !reflect.DeepEqual(rec.calls, want) {
		t.Fatalf("calls %v, want %v", rec.calls, want)
	}
	if rec.lrs[0] != 1e-6 || rec.lrs[1] != 1e-6 || rec.lrs[2] != 1e-5 {
		t.Fatalf("learning rates %v", rec.lrs)
	}
	if l.optSteps != 2 || m["skipped_update"] != 0 {
		t.Fatalf("%d shared optimizer steps, metrics %v", l.optSteps, m)
	}
	rec2 := &recordingLearner{}
	l.pol.learner = rec2
	if err := l.learn(context.Background(), &method.Batch{Terms: []method.Term{{Name: "pg"}}}, m); err != nil {
		t.Fatal(err)
	}
	if len(rec2.calls) != 0 || m["skipped_update"] != 1 {
		t.Fatalf("an empty batch made calls %v (skipped %v)", rec2.calls, m["skipped_update"])
	}
	// no_signal: step takes the update's optimizer steps on a zero
	// gradient, at the schedule's learning rate, and counts them.
	cfg.NoSignal = NoSignalStep
	rec3 := &recordingLearner{}
	l.pol.learner = rec3
	if err := l.learn(context.Background(), &method.Batch{Terms: []method.Term{{Name: "pg"}}}, m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec3.calls, []string{"step", "step"}) || rec3.lrs[0] != 1e-6 || l.optSteps != 4 || m["skipped_update"] != 1 {
		t.Fatalf("no_signal step: calls %v, learning rates %v, %d optimizer steps, skipped %v", rec3.calls, rec3.lrs, l.optSteps, m["skipped_update"])
	}
}

// TestNoSignalStepMovesWeightsByMomentum: on the local learner, an
// optimizer step on the zero gradient after one with a gradient moves the
// weights (Adam's momentum), as a trainer that steps on an all-zero loss
// does; skipping leaves them.
func TestNoSignalStepMovesWeightsByMomentum(t *testing.T) {
	for _, mode := range []string{NoSignalSkip, NoSignalStep} {
		cfg := DefaultRL()
		cfg.LR, cfg.Warmup, cfg.NoSignal = 1e-3, 0, mode
		m, err := model.New(model.Tiny(16), 3)
		if err != nil {
			t.Fatal(err)
		}
		learner, err := local.NewLearner(m, cfg.AdamW)
		if err != nil {
			t.Fatal(err)
		}
		l := &loop{cfg: &cfg, pol: &policy{learner: learner}, sched: scheduleOf(&cfg)}
		d := backend.Datum{Tokens: []int32{1, 2, 3}, Targets: []int32{2, 3, 4}, Weights: []float32{1, 1, 1},
			Advantages: []float32{1, 1, 1}, SamplerLogprobs: []float32{-1, -1, -1}}
		signal := &method.Batch{Terms: []method.Term{{Name: "pg", Data: []backend.Datum{d},
			Loss: backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2}, Aggregation: backend.TokenMean}}}
		if err := l.learn(context.Background(), signal, method.Metrics{}); err != nil {
			t.Fatal(err)
		}
		before := slices.Clone(m.Params)
		if err := l.learn(context.Background(), &method.Batch{Terms: []method.Term{{Name: "pg"}}}, method.Metrics{}); err != nil {
			t.Fatal(err)
		}
		moved := !slices.Equal(before, m.Params)
		if moved != (mode == NoSignalStep) {
			t.Errorf("no_signal %s: the weights moved %v", mode, moved)
		}
	}
}

// TestUnreportedGradNormIsNotLogged: a backend that reports no gradient
// norm (NaN; SkyRL tx) leaves grad_norm out of the step's metrics, where
// a norm of 0 would claim the step had no gradient; a reported one is
// logged.
func TestUnreportedGradNormIsNotLogged(t *testing.T) {
	term := method.Term{Name: "pg", Loss: backend.Loss{NLL: 1}, Aggregation: backend.TokenMean,
		Data: []backend.Datum{{Tokens: []int32{1, 2}, Targets: []int32{2, 3}, Weights: []float32{1, 1}}}}
	cfg := DefaultRL()
	cfg.Warmup = 0
	for _, norm := range []float64{math.NaN(), 0.5} {
		l := &loop{cfg: &cfg, pol: &policy{learner: &recordingLearner{gradNorm: norm}}, sched: scheduleOf(&cfg)}
		m := method.Metrics{}
		if err := l.learn(context.Background(), &method.Batch{Terms: []method.Term{term}}, m); err != nil {
			t.Fatal(err)
		}
		got, logged := m["grad_norm"]
		if logged != !math.IsNaN(norm) || logged && got != norm {
			t.Errorf("reported norm %v: metrics %v", norm, m)
		}
	}
}

func TestRLConfigResolveReportsEverything(t *testing.T) {
	cfg := DefaultRL()
	cfg.Algorithm, cfg.Steps, cfg.Data.Levels, cfg.GroupSize = "ppo", 0, []int{99}, 1
	cfg.LR, cfg.KL, cfg.EvalProblems = math.NaN(), -1, -3
	cfg.Parts = []string{"telepathy"}
	cfg.Sections.Set(&dapo.OverlongPenaltyConfig{})
	_, err := cfg.Resolve()
	for _, want := range []string{`algorithm "ppo"`, "steps = 0", "no world level 99", "group_size 1", "lr = NaN", "kl = -1",
		"eval_problems = -3", `"telepathy" is not one of`, "section overlong_penalty is set but overlong_penalty is not in parts"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	d := DefaultRL()
	d.Algorithm = method.DAPO
	d.Parts = []string{dapo.PartDynamicSampling, dapo.PartOverlongPenalty}
	d.Sections.Set(&dapo.OverlongPenaltyConfig{})
	r, err := d.Resolve()
	if err != nil || part.Get[*dapo.DynamicSamplingConfig](r.Sections) == nil || part.Get[*dapo.OverlongPenaltyConfig](r.Sections).Buffer != 64 || r.Family.ClipLow != 0.2 || r.Family.ClipHigh != 0.28 {
		t.Fatalf("dapo defaults: %+v %v", r, err)
	}
	// What resolves is the recipe's: the config keeps what was written.
	if len(d.Sections) != 1 || part.Get[*dapo.OverlongPenaltyConfig](d.Sections).Buffer != 0 || d.ClipLow != 0 || d.ClipHigh != 0 || d.AdvantageNorm != "" {
		t.Errorf("resolving wrote into the config: sections %v, clip %v/%v, advantage_norm %q", d.Sections, d.ClipLow, d.ClipHigh, d.AdvantageNorm)
	}
	unlisted := DefaultRL()
	unlisted.Algorithm = method.DAPO
	if r, err := unlisted.Resolve(); err != nil || unlisted.Parts != nil || !slices.Equal(r.Run.Parts, []string{dapo.PartDynamicSampling, dapo.PartOverlongPenalty}) {
		t.Fatalf("dapo's default parts: config %v, recipe %+v, %v", unlisted.Parts, r, err)
	}
	ds := DefaultRL()
	ds.Data = DataConfig{Name: "gsm9k", Train: "x.jsonl"}
	if _, err := ds.Resolve(); err == nil || !strings.Contains(err.Error(), `data.name "gsm9k" is not world or one of`) {
		t.Fatalf("unknown dataset: %v", err)
	}
}

func TestLoadRLConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("algorithm: dapo\nstepz: 3\n"), 0o644)
	if _, err := LoadRLConfig(p, ""); err == nil || !strings.Contains(err.Error(), "stepz") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error %v", err)
	}
	os.WriteFile(p, []byte("algorithm: dr-grpo\nsteps: 7\n"), 0o644)
	c, err := LoadRLConfig(p, "")
	if err != nil || c.Algorithm != method.DrGRPO || c.Steps != 7 || c.GroupSize != 8 {
		t.Fatalf("%+v %v", c, err)
	}
	os.WriteFile(p, []byte("preset: sft\nsteps: 7\n"), 0o644)
	if c, err = LoadRLConfig(p, ""); err != nil || c.Algorithm != method.SFT || c.LR != 1e-4 || c.Steps != 7 {
		t.Fatalf("preset from the file: %+v %v", c, err)
	}
	os.WriteFile(p, []byte("preset: meml\n"), 0o644)
	if _, err := LoadRLConfig(p, ""); err == nil || !strings.Contains(err.Error(), `preset "meml" is not one of`) || !strings.Contains(err.Error(), p) {
		t.Fatalf("unknown preset: %v", err)
	}
}

// TestKLPlacedOnce: the recipe places the KL to the starting model in the
// loss or, with kl_in_reward, in the reward, never both; sft and kl 0
// have none, and need no reference.
func TestKLPlacedOnce(t *testing.T) {
	for _, tc := range []struct {
		name             string
		alg              method.Algorithm
		kl               float32
		inReward         bool
		inLoss, asShaper bool
	}{
		{"loss", method.GRPO, 0.1, false, true, false},
		{"reward", method.GRPO, 0.1, true, false, true},
		{"none", method.GRPO, 0, true, false, false},
		{"sft", method.SFT, 0.1, false, false, false},
	} {
		c := DefaultRL()
		c.Algorithm, c.KL, c.KLInReward = tc.alg, tc.kl, tc.inReward
		r, err := c.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		inLoss := r.Family != nil && r.Family.RefKL == tc.kl && tc.kl != 0
		if inLoss != tc.inLoss || (r.RewardKL != nil) != tc.asShaper || r.UsesReference() != (tc.inLoss || tc.asShaper) {
			t.Errorf("%s: family %+v, reward KL %+v, reference %v", tc.name, r.Family, r.RewardKL, r.UsesReference())
		}
		m, _ := newMethod(t, &c, part.Setup{MaxLen: 512})
		if rl, ok := m.(*method.RL); ok && tc.asShaper && (len(rl.Shapers) == 0 || rl.Shapers[0] != method.Shaper(*r.RewardKL)) {
			t.Errorf("%s: shapers %v, want the KL first", tc.name, rl.Shapers)
		}
	}
}

// TestKLOptionsAndMicroBatchesRun runs the loop with the KL in the loss,
// with the KL in the reward, and with gradient accumulation: the step-1
// metrics of accumulation equal one pass's, and a KL is reported.
func TestKLOptionsAndMicroBatchesRun(t *testing.T) {
	base := smallRL(t)
	base.Steps, base.CheckpointEvery = 2, 0
	run := func(mod func(*RLConfig)) []map[string]float64 {
		c := base
		mod(&c)
		dir := filepath.Join(t.TempDir(), "run")
		if err := RL(context.Background(), c, dir, false, nil); err != nil {
			t.Fatal(err)
		}
		return stable(t, filepath.Join(dir, "metrics.jsonl"))
	}
	plain := run(func(*RLConfig) {})
	micro := run(func(c *RLConfig) { c.MicroBatchTokens = 40 })
	if plain[0]["reward_mean"] != micro[0]["reward_mean"] || math.Abs(plain[0]["grad_norm"]-micro[0]["grad_norm"]) > 1e-5*plain[0]["grad_norm"] {
		t.Fatalf("accumulated step differs: %v vs %v", plain[0], micro[0])
	}
	// An entropy bonus moves the policy even without rewards, so the KL to
	// the start is positive by step 2.
	inLoss := run(func(c *RLConfig) { c.KL = 0.1 })
	inReward := run(func(c *RLConfig) { c.KL, c.KLInReward = 0.1, true })
	if inLoss[1]["kl"] <= 0 || inReward[1]["kl"] <= 0 {
		t.Fatalf("KL not reported: loss %v reward %v", inLoss[1]["kl"], inReward[1]["kl"])
	}
}

// TestSampleBatchChangesNothingSampled: bounding the sequences in flight,
// below one step's rollouts and one evaluation's samples, leaves every
// metric and evaluation of a run as it was.
func TestSampleBatchChangesNothingSampled(t *testing.T) {
	base := smallRL(t)
	// The world model, whose answers are partly right: the evaluations
	// have something to differ in.
	base.Model, base.Data.Levels, base.MaxTokens, base.Entropy = worldModel(t), []int{1}, 64, 0
	base.Steps, base.CheckpointEvery, base.EvalEvery, base.EvalSamples = 2, 0, 1, 3
	run := func(batch int) ([]map[string]float64, string) {
		c := base
		c.SampleBatch = batch
		dir := filepath.Join(t.TempDir(), "run")
		if err := RL(context.Background(), c, dir, false, nil); err != nil {
			t.Fatal(err)
		}
		return stable(t, filepath.Join(dir, "metrics.jsonl")), evalText(filepath.Join(dir, "eval.jsonl"))
	}
	allMetrics, allEvals := run(0)
	boundMetrics, boundEvals := run(base.GroupSize) // one group at a time
	if !reflect.DeepEqual(allMetrics, boundMetrics) {
		t.Errorf("metrics with sample_batch %d differ:\n%v\nwant\n%v", base.GroupSize, boundMetrics, allMetrics)
	}
	if allEvals == "" || allEvals != boundEvals {
		t.Errorf("evaluations with sample_batch %d differ:\n%s\nwant\n%s", base.GroupSize, boundEvals, allEvals)
	}
}

// TestGradientCheckpointing: gradient_checkpointing reaches the engine of
// both a full and a LoRA learner, and a run with it logs every metric as
// the run without it does.
func TestGradientCheckpointing(t *testing.T) {
	base := smallRL(t)
	base.Steps, base.CheckpointEvery = 2, 0
	for _, rank := range []int{0, 2} {
		c := base
		c.GradientCheckpointing = true
		if rank > 0 {
			c.Backend = &BackendConfig{Kind: BackendLocal, LoraRank: rank}
		}
		p, err := openPolicy(context.Background(), c.Model, "", &c)
		if err != nil {
			t.Fatal(err)
		}
		if s := p.learner.(*local.Session); !s.Model.Recompute {
			t.Errorf("lora_rank %d: gradient_checkpointing did not set the model's recomputation", rank)
		}
	}
	run := func(checkpointing bool) []map[string]float64 {
		c := base
		c.GradientCheckpointing = checkpointing
		dir := filepath.Join(t.TempDir(), "run")
		if err := RL(context.Background(), c, dir, false, nil); err != nil {
			t.Fatal(err)
		}
		return stable(t, filepath.Join(dir, "metrics.jsonl"))
	}
	if off, on := run(false), run(true); !reflect.DeepEqual(off, on) {
		t.Errorf("metrics with gradient_checkpointing differ:\n%v\nwant\n%v", on, off)
	}
}

// TestExpertEvaluation: a run with expert prompts scores each expert's
// greedy accuracy and their majority vote on the held-out problems.
func TestExpertEvaluation(t *testing.T) {
	cfg := smallRL(t)
	cfg.Steps, cfg.CheckpointEvery, cfg.GroupSize = 1, 0, 2
	cfg.Parts = []string{meml.PartExpertPrompts}
	cfg.Sections.Set(&meml.ExpertPromptsConfig{Experts: []int{0, 2}})
	dir := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "eval.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e rundir.Eval
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		x := expertsOf(t, e)
		if len(x.Experts) != 2 || x.Majority == nil {
			t.Fatalf("evaluation %s has no per-expert scores", line)
		}
		if _, ok := x.Experts["E2"]; !ok {
			t.Fatalf("experts %v", x.Experts)
		}
	}
}

// newMethod assembles the method of a config, as Run does, and closes
// what its parts opened when the test ends.
func newMethod(t *testing.T, c *RLConfig, s part.Setup) (method.Method, *part.Build) {
	t.Helper()
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	m, b, err := r.Assemble(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return m, b
}
