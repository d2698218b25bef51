package train

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/method"
)

// The child side of TestResumeAfterSIGKILL: a separate process running the
// config in $RLVR_RL_CHILD until it is killed.
func TestMain(m *testing.M) {
	if spec := os.Getenv("RLVR_RL_CHILD"); spec != "" {
		var c struct {
			Cfg RLConfig
			Run string
		}
		if err := json.Unmarshal([]byte(spec), &c); err != nil {
			panic(err)
		}
		// Slow steps, so the parent's kill lands mid-run.
		slow := func(StepMetrics) { time.Sleep(300 * time.Millisecond) }
		if err := RL(context.Background(), c.Cfg, c.Run, false, slow); err != nil {
			panic(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// smallRL is a few quick steps from a small random world model.
func smallRL(t *testing.T) RLConfig {
	t.Helper()
	mc := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	mc.Dim, mc.Layers, mc.Hidden = 32, 1, 64
	m, _ := model.New(mc, 5)
	dir := filepath.Join(t.TempDir(), "base")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultRL()
	cfg.Model, cfg.Levels, cfg.Steps = dir, []int{0}, 6
	cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 4, 4, 24
	cfg.LR, cfg.EvalEvery, cfg.EvalProblems, cfg.CheckpointEvery = 1e-3, 0, 8, 2
	return cfg
}

// stable drops the timing fields, which differ between runs.
func stable(t *testing.T, path string) []StepMetrics {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []StepMetrics
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m StepMetrics
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		m.TokensPerSec, m.RolloutS, m.VerifyS, m.LearnS, m.StepS = 0, 0, 0, 0, 0
		out = append(out, m)
	}
	return out
}

// TestResumeAfterSIGKILL kills a training process with SIGKILL after its
// second checkpoint, resumes it, and checks the metrics of every step and
// the final evaluation equal an uninterrupted run's.
func TestResumeAfterSIGKILL(t *testing.T) {
	cfg := smallRL(t)
	straight := filepath.Join(t.TempDir(), "straight")
	if err := RL(context.Background(), cfg, straight, false, nil); err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(t.TempDir(), "killed")
	spec, _ := json.Marshal(struct {
		Cfg RLConfig
		Run string
	}{cfg, killed})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "RLVR_RL_CHILD="+string(spec))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(killed, "ckpt-000004", "state.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatal("the child wrote no second checkpoint in 60 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond) // into step 5 or 6, past the checkpoint
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
	if len(a) != cfg.Steps || !reflect.DeepEqual(a, b) {
		t.Fatalf("metrics differ after resuming:\nstraight %+v\nresumed  %+v", a, b)
	}
	ea, _ := os.ReadFile(filepath.Join(straight, "eval.jsonl"))
	eb, _ := os.ReadFile(filepath.Join(killed, "eval.jsonl"))
	if string(ea) != string(eb) || !strings.Contains(string(ea), `"step":6`) {
		t.Fatalf("evaluations differ:\n%s\n%s", ea, eb)
	}
	ckpts, _ := checkpoints(killed)
	if len(ckpts) != cfg.KeepLast {
		t.Fatalf("%d checkpoints kept, want %d", len(ckpts), cfg.KeepLast)
	}
}

func TestRLConfigResolveReportsEverything(t *testing.T) {
	cfg := DefaultRL()
	cfg.Algorithm, cfg.Steps, cfg.Levels, cfg.GroupSize = "ppo", 0, []int{99}, 1
	err := cfg.Resolve()
	for _, want := range []string{`algorithm "ppo"`, "steps = 0", "no world level 99", "group_size 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	d := DefaultRL()
	d.Algorithm = method.DAPO
	if err := d.Resolve(); err != nil || !d.DynamicSampling || d.OverlongBuffer == 0 || d.ClipLow != 0.2 || d.ClipHigh != 0.28 {
		t.Fatalf("dapo defaults: %+v %v", d, err)
	}
}

func TestLoadRLConfigRejectsUnknownKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(p, []byte("algorithm: dapo\nstepz: 3\n"), 0o644)
	if _, err := LoadRLConfig(p); err == nil || !strings.Contains(err.Error(), "stepz") {
		t.Fatalf("error %v", err)
	}
	os.WriteFile(p, []byte("algorithm: dr-grpo\nsteps: 7\n"), 0o644)
	c, err := LoadRLConfig(p)
	if err != nil || c.Algorithm != method.DrGRPO || c.Steps != 7 || c.GroupSize != 8 {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestMicroBatches(t *testing.T) {
	mk := func(n int) backend.Datum { return backend.Datum{Tokens: make([]int32, n)} }
	data := []backend.Datum{mk(5), mk(5), mk(12), mk(3), mk(3)}
	var sizes []int
	for _, mb := range microBatches(data, 10) {
		sizes = append(sizes, len(mb))
	}
	if !reflect.DeepEqual(sizes, []int{2, 1, 2}) {
		t.Fatalf("micro-batch sizes %v, want [2 1 2]", sizes)
	}
	if got := microBatches(data, 0); len(got) != 1 || len(got[0]) != 5 {
		t.Fatal("0 must keep one pass")
	}
}

// TestKLOptionsAndMicroBatchesRun runs the loop with the KL in the loss,
// with the KL in the reward, and with gradient accumulation: the step-1
// metrics of accumulation equal one pass's, and a KL is reported.
func TestKLOptionsAndMicroBatchesRun(t *testing.T) {
	base := smallRL(t)
	base.Steps, base.CheckpointEvery = 2, 0
	run := func(mod func(*RLConfig)) []StepMetrics {
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
	if plain[0].RewardMean != micro[0].RewardMean || abs(plain[0].GradNorm-micro[0].GradNorm) > 1e-5*plain[0].GradNorm {
		t.Fatalf("accumulated step differs: %+v vs %+v", plain[0], micro[0])
	}
	// An entropy bonus moves the policy even without rewards, so the KL to
	// the start is positive by step 2.
	inLoss := run(func(c *RLConfig) { c.KL, c.Entropy = 0.1, 0.01 })
	inReward := run(func(c *RLConfig) { c.KL, c.KLInReward, c.Entropy = 0.1, true, 0.01 })
	if inLoss[1].KL <= 0 || inReward[1].KL <= 0 {
		t.Fatalf("KL not reported: loss %v reward %v", inLoss[1].KL, inReward[1].KL)
	}
}

func abs(x float64) float64 { return math.Abs(x) }

func TestSFTAlgorithmRuns(t *testing.T) {
	c := smallRL(t)
	c.Algorithm, c.Steps, c.CheckpointEvery = method.SFT, 3, 0
	dir := filepath.Join(t.TempDir(), "sft")
	if err := RL(context.Background(), c, dir, false, nil); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(dir, "metrics.jsonl"))
	if len(ms) != 3 || ms[2].GradNorm == 0 {
		t.Fatalf("%+v", ms)
	}
}
