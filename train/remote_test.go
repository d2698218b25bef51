package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend/remote"
	"rlvr/engine/optim"
	"rlvr/format/safetensors"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
	"rlvr/serve/tinkerserver"
)

// tinkerServer serves the Tinker API over the local engine on loopback,
// with the model in dir as base model "world"; it returns the server's
// address and the directory its saved weights go in.
func tinkerServer(t testing.TB, dir string) (string, string) {
	t.Helper()
	state := t.TempDir()
	// A run's model stays alive until its session's heartbeat lapses;
	// the tests' runs follow one another faster than that.
	srv, err := tinkerserver.New(tinkerserver.Config{Models: map[string]string{"world": dir}, StateDir: state, APIKey: "test-key",
		PollTimeout: 2 * time.Second, MaxModels: 32})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL, state
}

// onTinker points cfg at the server at addr.
func onTinker(cfg *RLConfig, addr string) {
	cfg.Backend = &BackendConfig{Kind: BackendTinker, URL: addr, BaseModel: "world", APIKeyEnv: "RLVR_TEST_TINKER_KEY"}
}

func init() { os.Setenv("RLVR_TEST_TINKER_KEY", "test-key") }

// remoteRL is a short run of the world model that earns rewards, so every
// step has a gradient without an entropy bonus.
func remoteRL(t *testing.T) RLConfig {
	t.Helper()
	cfg := DefaultRL()
	cfg.Model, cfg.Data.Levels, cfg.Steps = worldModel(t), []int{1}, 2
	cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 3, 4, 48
	cfg.LR, cfg.EvalEvery, cfg.EvalProblems, cfg.CheckpointEvery = 1e-4, 0, 4, 1
	return cfg
}

// TestRemoteMatchesLocal: the same run on the local engine and through
// the Tinker API gives the same metrics and the same weights, to float
// tolerance. GRPO with a k3 KL to the reference runs the two-pass route
// and the remote reference; without a KL, the groups of equal rewards go
// through forward calls, not forward_backward.
func TestRemoteMatchesLocal(t *testing.T) {
	for _, kl := range []float32{0.05, 0} {
		t.Run(fmt.Sprintf("kl=%v", kl), func(t *testing.T) { remoteMatchesLocal(t, kl) })
	}
}

func remoteMatchesLocal(t *testing.T, kl float32) {
	cfg := remoteRL(t)
	cfg.KL = kl
	localDir := filepath.Join(t.TempDir(), "local")
	if err := RL(context.Background(), cfg, localDir, false, nil); err != nil {
		t.Fatal(err)
	}
	addr, state := tinkerServer(t, cfg.Model)
	onTinker(&cfg, addr)
	remoteDir := filepath.Join(t.TempDir(), "remote")
	if err := RL(context.Background(), cfg, remoteDir, false, nil); err != nil {
		t.Fatal(err)
	}
	a, b := stable(t, filepath.Join(localDir, "metrics.jsonl")), stable(t, filepath.Join(remoteDir, "metrics.jsonl"))
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("%d local and %d remote steps", len(a), len(b))
	}
	zeroVariance := 0.0
	for i := range a {
		if a[i]["grad_norm"] == 0 || kl != 0 && a[i]["kl"] == 0 && i > 0 {
			t.Fatalf("step %d has no gradient or no KL: %v", i+1, a[i])
		}
		zeroVariance += a[i]["zero_variance_frac"]
		delete(a[i], "entropy") // unknown remotely
	}
	if ok, diff := metricsWithin(a, b, 1e-4); !ok {
		t.Errorf("local and remote runs differ: %s", diff)
	}
	if kl == 0 && zeroVariance == 0 {
		t.Fatal("no group had equal rewards: nothing went through the forward-only route")
	}
	t.Logf("step 2, local: loss %v, kl %v, grad norm %v, reward %v; remote: loss %v", a[1]["loss/pg"], a[1]["kl"], a[1]["grad_norm"], a[1]["reward_mean"], b[1]["loss/pg"])
	ea, eb := evalText(filepath.Join(localDir, "eval.jsonl")), evalText(filepath.Join(remoteDir, "eval.jsonl"))
	if ea != eb {
		t.Errorf("evaluations differ:\n%s\n%s", ea, eb)
	}
	// The final weights: the local checkpoint's against what the server
	// saved for the remote one.
	worst := weightsDiff(t, readWeights(t, filepath.Join(localDir, "ckpt-000002", "model.safetensors")), remoteWeights(t, remoteDir, state, "ckpt-000002"))
	t.Logf("weights differ by up to %g", worst)
	if worst > 1e-5 {
		t.Errorf("weights differ by up to %g", worst)
	}
	if err := ExportModel(remoteDir, filepath.Join(t.TempDir(), "out")); err == nil || !strings.Contains(err.Error(), "on the server") {
		t.Errorf("exporting a remote run: %v", err)
	}
}

// remoteWeights reads the weights the server saved for the checkpoint
// ckpt of the remote run in runDir, under the server's state directory.
func remoteWeights(t *testing.T, runDir, state, ckpt string) map[string][]float32 {
	t.Helper()
	path, ok, err := remote.ReadState(filepath.Join(runDir, ckpt))
	if err != nil || !ok {
		t.Fatalf("remote checkpoint: %v %v", ok, err)
	}
	rest, found := strings.CutPrefix(path, "tinker://")
	if !found {
		t.Fatalf("saved path %q", path)
	}
	return readWeights(t, filepath.Join(state, filepath.FromSlash(rest), "model.safetensors"))
}

// weightsDiff is the largest difference between the weights a and b,
// which must hold the same tensors.
func weightsDiff(t *testing.T, a, b map[string][]float32) float64 {
	t.Helper()
	var worst float64
	for name, x := range a {
		y, ok := b[name]
		if !ok || len(x) != len(y) {
			t.Fatalf("tensor %s missing or resized", name)
		}
		for i := range x {
			worst = math.Max(worst, math.Abs(float64(x[i]-y[i])))
		}
	}
	return worst
}

func readWeights(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for _, ti := range f.Tensors() {
		v, _, err := f.Float32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		out[ti.Name] = v
	}
	return out
}

// TestEveryMethodRunsRemotely runs each method and baseline for two steps
// with every rollout, loss and optimizer step on the Tinker server.
func TestEveryMethodRunsRemotely(t *testing.T) {
	base := remoteRL(t)
	addr, _ := tinkerServer(t, base.Model)
	for _, tc := range everyMethod {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			onTinker(&cfg, addr)
			dir := filepath.Join(t.TempDir(), "run")
			if err := RL(context.Background(), cfg, dir, false, nil); err != nil {
				t.Fatal(err)
			}
			checkMethodRan(t, dir, cfg.Steps, tc.check)
		})
	}
}

// checkMethodRan checks that the run in dir logged steps steps and that
// one of them has the metric check, which the method sets.
func checkMethodRan(t *testing.T, dir string, steps int, check string) {
	t.Helper()
	ms := stable(t, filepath.Join(dir, "metrics.jsonl"))
	if len(ms) != steps {
		t.Fatalf("%d steps logged", len(ms))
	}
	seen := false
	for _, m := range ms {
		_, ok := m[check]
		seen = seen || ok
	}
	if !seen {
		t.Fatalf("no step logged %s: %v", check, ms)
	}
}

// everyMethod is every algorithm and guidance part in a short run, with a
// metric each must log.
var everyMethod = []struct {
	name  string
	mod   func(*RLConfig)
	check string // a metric the method's part must have set
}{
	{"grpo", func(*RLConfig) {}, "loss/pg"},
	{"dr-grpo", func(c *RLConfig) { c.Algorithm = method.DrGRPO }, "loss/pg"},
	{"dapo", func(c *RLConfig) { c.Algorithm = method.DAPO }, "loss/pg"},
	{"reinforce++", func(c *RLConfig) { c.Algorithm = method.ReinforcePP }, "loss/pg"},
	{"rft", func(c *RLConfig) { c.Algorithm = method.RFT }, "loss/rft"},
	{"sft", func(c *RLConfig) { c.Algorithm = method.SFT }, "loss/sft"},
	{"grpo+kl k2", func(c *RLConfig) { c.KL, c.KLEstimator = 0.1, "k2" }, "kl"},
	{"meml-grpo", func(c *RLConfig) {
		if err := c.ApplyPreset("meml-grpo"); err != nil {
			panic(err)
		}
		c.GroupSize = 2
		c.Sections.Set(&meml.HardBufferConfig{K: 1, Capacity: 8})
	}, "mutual/answers"},
	{"eapo", func(c *RLConfig) {
		c.Algorithm, c.Parts = method.DAPO, []string{eapo.PartConsultation}
		c.Sections.Set(&eapo.ConsultationConfig{Turns: &eapo.Schedule{Kind: optim.Constant, Start: 2, End: 2}})
	}, "consult/call_rate"},
	{"mel-grpo", func(c *RLConfig) {
		c.Parts = []string{mel.PartMetaExperience}
		c.Sections.Set(&mel.MetaExperienceConfig{Pairs: 2})
	}, "mel/pairs"},
}

// TestRemoteResumeAfterSIGKILL: a remote run killed mid-step resumes from
// its last checkpoint (the server's saved state) to the same metrics,
// evaluations and exhibits as a run never killed.
func TestRemoteResumeAfterSIGKILL(t *testing.T) {
	cfg := remoteRL(t)
	cfg.Steps, cfg.CheckpointEvery, cfg.KeepLast = 6, 2, 2
	cfg.Parts = []string{mel.PartMetaExperience}
	cfg.Sections.Set(&mel.MetaExperienceConfig{Pairs: 1})
	addr, _ := tinkerServer(t, cfg.Model)
	onTinker(&cfg, addr)
	// Sampling requests reach the server in varying batches, which (under
	// OpenBLAS) moves logprobs in their last bits, and six steps compound
	// it: remote runs agree to float tolerance, not bit for bit.
	ms := resumeAfterKillWithin(t, cfg, 1e-3)
	var pairs float64
	for _, m := range ms {
		pairs += m["mel/pairs"]
	}
	if pairs == 0 {
		t.Fatalf("no meta-experience pair was formed: %v", ms)
	}
}

// faulty is a proxy before the server that answers some requests itself,
// as a failing network or an overloaded server would.
type faulty struct {
	mu     sync.Mutex
	next   http.Handler
	counts map[string]int
	// fault, given a path and its count so far, answers instead of the
	// server (true) or lets the request through.
	fault func(w http.ResponseWriter, path string, n int) bool
}

func (f *faulty) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.counts[r.URL.Path]++
	n := f.counts[r.URL.Path]
	answered := f.fault(w, r.URL.Path, n)
	f.mu.Unlock()
	if !answered {
		f.next.ServeHTTP(w, r)
	}
}

func faultyProxy(t *testing.T, addr string, fault func(w http.ResponseWriter, path string, n int) bool) (string, *faulty) {
	t.Helper()
	u, _ := url.Parse(addr)
	f := &faulty{next: httputil.NewSingleHostReverseProxy(u), counts: map[string]int{}, fault: fault}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	return hs.URL, f
}

// TestRemoteFaults: transient faults (5xx, 429, 408, dropped
// connections) are retried and change nothing; a forward_backward that
// fails for good ends the run before any optimizer step applies partial
// gradients, naming the call, and the run resumes from its checkpoint.
func TestRemoteFaults(t *testing.T) {
	cfg := remoteRL(t)
	addr, _ := tinkerServer(t, cfg.Model)
	clean := cfg
	onTinker(&clean, addr)
	cleanDir := filepath.Join(t.TempDir(), "clean")
	if err := RL(context.Background(), clean, cleanDir, false, nil); err != nil {
		t.Fatal(err)
	}

	transient, proxy := faultyProxy(t, addr, func(w http.ResponseWriter, path string, n int) bool {
		switch {
		case path == tinker.PathRetrieveFuture && n%3 == 1:
			w.WriteHeader(http.StatusRequestTimeout)
			w.Write([]byte(`{"detail":"Timeout waiting for result"}`))
		case path == tinker.PathForwardBackward && n%2 == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case path == tinker.PathSample && n%5 == 2:
			w.WriteHeader(http.StatusTooManyRequests)
		case path == tinker.PathOptimStep && n == 1:
			// A dropped connection mid-request.
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.Close()
			}
		default:
			return false
		}
		return true
	})
	flaky := cfg
	onTinker(&flaky, transient)
	flaky.Backend.Retries = 8
	flakyDir := filepath.Join(t.TempDir(), "flaky")
	if err := RL(context.Background(), flaky, flakyDir, false, nil); err != nil {
		t.Fatal(err)
	}
	a, b := stable(t, filepath.Join(cleanDir, "metrics.jsonl")), stable(t, filepath.Join(flakyDir, "metrics.jsonl"))
	if ok, diff := metricsWithin(a, b, 1e-4); !ok {
		t.Errorf("faults changed the run: %s", diff)
	}
	if proxy.counts[tinker.PathForwardBackward] < 4 {
		t.Errorf("the faults were not exercised: %v", proxy.counts)
	}

	// forward_backward fails for good in step 2, after step 1's checkpoint.
	broken, proxy := faultyProxy(t, addr, func(w http.ResponseWriter, path string, n int) bool {
		if path == tinker.PathForwardBackward && n >= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"detail":"device lost"}`))
			return true
		}
		return false
	})
	bad := cfg
	onTinker(&bad, broken)
	bad.Backend.Retries = 1
	badDir := filepath.Join(t.TempDir(), "broken")
	err := RL(context.Background(), bad, badDir, false, nil)
	if err == nil || !strings.Contains(err.Error(), "forward_backward") || !strings.Contains(err.Error(), "device lost") {
		t.Fatalf("run over a failing forward_backward: %v", err)
	}
	if n := proxy.counts[tinker.PathOptimStep]; n != 1 {
		t.Fatalf("%d optimizer steps reached the server, want step 1's only", n)
	}
	// The same run resumes from step 1's checkpoint once the server heals.
	onTinker(&bad, addr)
	if err := RL(context.Background(), bad, badDir, true, nil); err != nil {
		t.Fatal(err)
	}
	c := stable(t, filepath.Join(badDir, "metrics.jsonl"))
	if ok, diff := metricsWithin(a, c, 1e-4); !ok {
		t.Errorf("the resumed run differs from the clean one: %s", diff)
	}
	if len(c) != 2 {
		t.Fatalf("resumed run %v, clean run %v", c, a)
	}
}

// BenchmarkRemoteStep measures the step time of the same GRPO run (the
// world model, 8 questions × 8 answers of up to 128 tokens) on the local
// engine in process and through rlvr's Tinker server on loopback, run
// alternately, and reports both and their ratio: the cost of the remote
// path's HTTP, JSON and futures when the server's engine is the same.
//
//	go test ./train -run '^$' -bench RemoteStep -benchtime 5x
func BenchmarkRemoteStep(b *testing.B) {
	cfg := DefaultRL()
	cfg.Model = worldModel(b)
	cfg.Data.Levels, cfg.Steps = []int{4}, 4
	cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 8, 8, 128
	cfg.EvalEvery, cfg.EvalProblems, cfg.CheckpointEvery = 0, 1, 0
	addr, _ := tinkerServer(b, cfg.Model)
	remoteCfg := cfg
	onTinker(&remoteCfg, addr)
	var local, remote float64
	for i := 0; i < b.N; i++ {
		for _, c := range []struct {
			cfg RLConfig
			sum *float64
		}{{cfg, &local}, {remoteCfg, &remote}} {
			dir := filepath.Join(b.TempDir(), "run")
			if err := RL(context.Background(), c.cfg, dir, false, nil); err != nil {
				b.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			for _, line := range lines[1:] { // the first step warms caches up
				var m map[string]float64
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					b.Fatal(err)
				}
				*c.sum += m["step_s"] / float64(len(lines)-1)
			}
		}
	}
	b.ReportMetric(local/float64(b.N), "local-s/step")
	b.ReportMetric(remote/float64(b.N), "remote-s/step")
	b.ReportMetric(remote/local, "remote/local")
}

// TestLoRALocalMatchesRemote trains the same LoRA adapters in process and
// on rlvr serve --tinker: the same metrics and final weights to float
// tolerance. The local run, stopped after step 1 and resumed from its
// checkpoint, ends as the straight one did.
func TestLoRALocalMatchesRemote(t *testing.T) {
	cfg := remoteRL(t)
	cfg.Backend = &BackendConfig{LoraRank: 4}
	localDir := filepath.Join(t.TempDir(), "local")
	if err := RL(context.Background(), cfg, localDir, false, nil); err != nil {
		t.Fatal(err)
	}
	addr, state := tinkerServer(t, cfg.Model)
	rcfg := cfg
	onTinker(&rcfg, addr)
	rcfg.Backend.LoraRank = 4
	remoteDir := filepath.Join(t.TempDir(), "remote")
	if err := RL(context.Background(), rcfg, remoteDir, false, nil); err != nil {
		t.Fatal(err)
	}
	a, b := stable(t, filepath.Join(localDir, "metrics.jsonl")), stable(t, filepath.Join(remoteDir, "metrics.jsonl"))
	for i := range a {
		if a[i]["grad_norm"] == 0 {
			t.Fatalf("step %d has no gradient: %v", i+1, a[i])
		}
		delete(a[i], "entropy") // unknown remotely
	}
	if ok, diff := metricsWithin(a, b, 1e-4); !ok {
		t.Errorf("local and remote LoRA runs differ: %s", diff)
	}
	lw := readWeights(t, filepath.Join(localDir, "ckpt-000002", "model.safetensors"))
	worst := weightsDiff(t, lw, remoteWeights(t, remoteDir, state, "ckpt-000002"))
	base := readWeights(t, filepath.Join(cfg.Model, "model.safetensors"))
	moved := 0
	for name, x := range lw {
		if !slices.Equal(x, base[name]) {
			moved++
			if !strings.HasSuffix(name, "_proj.weight") && name != "model.embed_tokens.weight" && name != "lm_head.weight" {
				t.Errorf("%s moved, which has no adapter", name)
			}
		}
	}
	if worst > 1e-5 || moved == 0 {
		t.Errorf("weights differ by up to %g; %d tensors moved", worst, moved)
	}

	// Stopped after step 1 (its checkpoint), then resumed.
	resumed := filepath.Join(t.TempDir(), "resumed")
	one := cfg
	one.Steps = 1
	if err := RL(context.Background(), one, resumed, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := RL(context.Background(), cfg, resumed, true, nil); err != nil {
		t.Fatal(err)
	}
	if got := readWeights(t, filepath.Join(resumed, "ckpt-000002", "model.safetensors")); !reflect.DeepEqual(got, lw) {
		t.Error("the resumed LoRA run ends with other weights than the straight one")
	}
}
