package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/engine/optim"
)

func adam() optim.AdamWConfig { return optim.DefaultAdamW() }

// fakeServer answers the Tinker API from a script: submissions get
// futures, and retrieve_future answers with what result says for the
// call. It records every request.
type fakeServer struct {
	t  *testing.T
	mu sync.Mutex
	// submit, if set, answers a submission instead of a future
	// (status, body); status 0 means the normal answer.
	submit func(path string, n int) (int, string)
	// result answers retrieve_future for the call made at path, on its
	// poll-th poll.
	result func(path string, req map[string]any, poll int) (int, string)

	// modelInFuture makes create_model answer with a request_id, as
	// SkyRL does, whose result is result(PathCreateModel, …).
	modelInFuture bool

	calls    []recorded
	polls    map[string]int
	futures  map[string]recorded
	apiKeys  []string
	attempts map[string]int
}

type recorded struct {
	Path string
	Body map[string]any
}

func newFake(t *testing.T) (*fakeServer, *httptest.Server) {
	f := &fakeServer{t: t, polls: map[string]int{}, futures: map[string]recorded{}, attempts: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(b, &body)
	f.apiKeys = append(f.apiKeys, r.Header.Get(tinker.HeaderAPIKey))
	f.attempts[r.URL.Path]++
	answer := func(status int, s string) {
		w.WriteHeader(status)
		io.WriteString(w, s)
	}
	switch r.URL.Path {
	case tinker.PathCreateSession:
		answer(200, `{"session_id":"s1","type":"create_session"}`)
	case tinker.PathCreateModel:
		if !f.modelInFuture {
			answer(200, `{"model_id":"m1","type":"create_model"}`)
			return
		}
		f.futures["cm"] = recorded{r.URL.Path, body}
		answer(200, `{"model_id":"m1","base_model":"base","status":"created","request_id":"cm"}`)
	case tinker.PathHeartbeat:
		answer(200, `{"type":"session_heartbeat"}`)
	case tinker.PathRetrieveFuture:
		id, _ := body["request_id"].(string)
		call := f.futures[id]
		poll := f.polls[id]
		f.polls[id]++
		answer(f.result(call.Path, call.Body, poll))
	default:
		if f.submit != nil {
			if status, s := f.submit(r.URL.Path, f.attempts[r.URL.Path]); status != 0 {
				answer(status, s)
				return
			}
		}
		f.calls = append(f.calls, recorded{r.URL.Path, body})
		id := fmt.Sprintf("f%d", len(f.calls))
		f.futures[id] = recorded{r.URL.Path, body}
		b, _ := json.Marshal(tinker.Future{RequestID: id, ModelID: "m1"})
		answer(200, string(b))
	}
}

// logprobsOf answers a forward(-backward) with logprob −0.5 at every
// target.
func logprobsOf(req map[string]any) string {
	in, _ := req["forward_backward_input"].(map[string]any)
	if in == nil {
		in, _ = req["forward_input"].(map[string]any)
	}
	data, _ := in["data"].([]any)
	var out tinker.ForwardBackwardOutput
	for _, d := range data {
		tt := d.(map[string]any)["loss_fn_inputs"].(map[string]any)["target_tokens"].(map[string]any)["data"].([]any)
		lp := make([]float32, len(tt))
		for i := range lp {
			lp[i] = -0.5
		}
		out.LossFnOutputs = append(out.LossFnOutputs, map[string]tinker.TensorData{"logprobs": tinker.Floats(lp)})
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// normal answers every call successfully.
func normal(path string, req map[string]any, _ int) (int, string) {
	switch path {
	case tinker.PathForward, tinker.PathForwardBackward:
		return 200, logprobsOf(req)
	case tinker.PathOptimStep:
		return 200, `{"metrics":{"grad_norm":0.5}}`
	case tinker.PathSaveWeights, tinker.PathSaveForSampler:
		return 200, `{"path":"tinker://m1/weights/x"}`
	}
	return 200, `{}`
}

func openFake(t *testing.T, srv *httptest.Server, red Reduction) *Model {
	t.Helper()
	m, err := Open(context.Background(), Config{Client: Client{BaseURL: srv.URL, APIKey: "k", Backoff: time.Millisecond},
		BaseModel: "base", Reduction: red, Adam: adam()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestCallRetriesAndPolls(t *testing.T) {
	f, srv := newFake(t)
	// The submission fails twice with 503; the future answers 408, then
	// try_again, then the result.
	f.submit = func(path string, n int) (int, string) {
		if path == tinker.PathOptimStep && n <= 2 {
			return 503, `{"detail":"busy"}`
		}
		return 0, ""
	}
	f.result = func(path string, req map[string]any, poll int) (int, string) {
		switch poll {
		case 0:
			return 408, `{"detail":"Timeout waiting for result"}`
		case 1:
			return 200, `{"type":"try_again","request_id":"x"}`
		}
		return normal(path, req, poll)
	}
	m := openFake(t, srv, Sum)
	sr, err := m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if sr.GradNorm != 0.5 {
		t.Errorf("grad norm %v, want 0.5", sr.GradNorm)
	}
	if got := f.attempts[tinker.PathOptimStep]; got != 3 {
		t.Errorf("optim_step sent %d times, want 3", got)
	}
	if got := f.attempts[tinker.PathRetrieveFuture]; got != 3 {
		t.Errorf("retrieve_future polled %d times, want 3", got)
	}
	for i, k := range f.apiKeys {
		if k != "k" {
			t.Errorf("request %d carried API key %q", i, k)
		}
	}
}

func TestCallErrorsNameTheCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"failed future", 200, `{"error":"target_tokens has 4 values","category":"user"}`, []string{"optim_step", "user error", "target_tokens has 4 values"}},
		{"skyrl failure", 400, `{"detail":"model m1 not found"}`, []string{"optim_step", "HTTP 400", "model m1 not found"}},
		{"malformed result", 200, `{"metrics":`, []string{"optim_step", "malformed result"}},
		{"unknown future", 404, `{"detail":"no such request"}`, []string{"optim_step", "HTTP 404"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t)
			f.result = func(string, map[string]any, int) (int, string) { return tc.status, tc.body }
			m := openFake(t, srv, Sum)
			_, err := m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-3})
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a CallError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRetriesAreBounded(t *testing.T) {
	f, srv := newFake(t)
	f.submit = func(path string, n int) (int, string) {
		if path == tinker.PathOptimStep {
			return 502, "bad gateway"
		}
		return 0, ""
	}
	f.result = normal
	m, err := Open(context.Background(), Config{Client: Client{BaseURL: srv.URL, Retries: 2, Backoff: time.Millisecond}, BaseModel: "base", Reduction: Sum, Adam: adam()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-3})
	var ce *CallError
	if !errors.As(err, &ce) || ce.Attempts != 3 || ce.Status != 502 {
		t.Fatalf("error %v, want a CallError after 3 attempts with HTTP 502", err)
	}
	if !strings.Contains(err.Error(), "bad gateway") {
		t.Errorf("error %q does not carry the body", err)
	}
}

func TestFutureThatNeverResolves(t *testing.T) {
	f, srv := newFake(t)
	f.result = func(string, map[string]any, int) (int, string) {
		time.Sleep(20 * time.Millisecond)
		return 408, `{"detail":"Timeout waiting for result"}`
	}
	m, err := Open(context.Background(), Config{Client: Client{BaseURL: srv.URL, Deadline: 150 * time.Millisecond}, BaseModel: "base", Reduction: Sum, Adam: adam()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-3})
	if err == nil || !strings.Contains(err.Error(), "optim_step") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want optim_step's deadline", err)
	}
}

func TestGoneFutureIsResubmittedWithItsSeqID(t *testing.T) {
	f, srv := newFake(t)
	f.result = func(path string, req map[string]any, poll int) (int, string) {
		if len(f.calls) == 1 {
			return 410, `{"detail":"future expired"}`
		}
		return normal(path, req, poll)
	}
	m := openFake(t, srv, Sum)
	if _, err := m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-3}); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || f.calls[0].Body["seq_id"] != f.calls[1].Body["seq_id"] {
		t.Fatalf("calls %v: want one resubmission with the same seq_id", f.calls)
	}
}

func TestNoOptimizerStepAfterFailedForwardBackward(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"shape mismatch", `{"loss_fn_outputs":[{"logprobs":{"data":[-1],"dtype":"float32"}}]}`},
		{"too few outputs", `{"loss_fn_outputs":[]}`},
		{"positive logprob", `{"loss_fn_outputs":[{"logprobs":{"data":[0.5,-1,-1],"dtype":"float32"}}]}`},
		{"server failure", `{"error":"out of memory","category":"server"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t)
			f.result = func(path string, req map[string]any, poll int) (int, string) {
				if path == tinker.PathForwardBackward {
					return 200, tc.body
				}
				return normal(path, req, poll)
			}
			m := openFake(t, srv, Sum)
			batch := []backend.Datum{nllDatum()}
			if _, err := m.ForwardBackward(context.Background(), batch, backend.Loss{NLL: 1}); err == nil || !strings.Contains(err.Error(), "forward_backward") {
				t.Fatalf("forward_backward error %v", err)
			}
			_, err := m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-3})
			if err == nil || !strings.Contains(err.Error(), "partial gradients") {
				t.Fatalf("optimizer step after a failed forward_backward: %v", err)
			}
			for _, c := range f.calls {
				if c.Path == tinker.PathOptimStep {
					t.Fatal("optim_step reached the server")
				}
			}
		})
	}
}

func nllDatum() backend.Datum {
	return backend.Datum{Tokens: []int32{1, 2, 3}, Targets: []int32{2, 3, 4}, Weights: []float32{0, 1, 1}}
}

// TestOpenWaitsForTheModel: SkyRL makes the model in the future its
// create_model names, and fails it for a LoRA rank outside its range
// (rank 0 among them: its JAX backend trains LoRA adapters only). Open
// fails with the server's reason, before any rollout. The adapter's
// initialization is seeded (SkyRL draws a seed at random otherwise).
func TestOpenWaitsForTheModel(t *testing.T) {
	for _, tc := range []struct {
		rank int
		want string // "" for success
	}{{32, ""}, {0, "LoRA rank 0 must be between 1 and 32"}} {
		f, srv := newFake(t)
		f.modelInFuture = true
		f.result = func(path string, req map[string]any, poll int) (int, string) {
			if path != tinker.PathCreateModel {
				return normal(path, req, poll)
			}
			cfg, _ := req["lora_config"].(map[string]any)
			if seed, _ := cfg["seed"].(float64); seed != 7 {
				t.Errorf("rank %d: lora_config %v, want the run's seed 7", tc.rank, cfg)
			}
			if rank, _ := cfg["rank"].(float64); rank < 1 || rank > 32 {
				return 400, fmt.Sprintf(`{"detail":"LoRA rank %v must be between 1 and 32"}`, rank)
			}
			if poll == 0 {
				return 200, `{"type":"try_again","request_id":"cm","queue_state":"active"}`
			}
			return 200, `{"model_id":"m1","base_model":"base","lora_config":{"rank":32,"alpha":32.0,"seed":3}}`
		}
		m, err := Open(context.Background(), Config{Client: Client{BaseURL: srv.URL, Backoff: time.Millisecond},
			BaseModel: "base", LoraRank: tc.rank, LoraSeed: 7, Reduction: DatumMean, Adam: adam()})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("rank %d: %v", tc.rank, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "create_model") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("rank %d: error %v, want create_model's %q", tc.rank, err, tc.want)
		}
		if err == nil {
			m.Close()
			if f.polls["cm"] != 2 {
				t.Errorf("rank %d: create_model's future polled %d times, want 2", tc.rank, f.polls["cm"])
			}
		}
	}
}

// TestOptimStepWithoutGradNorm: SkyRL tx answers optim_step with no
// metrics; the step's gradient norm is then unknown (NaN), not 0.
func TestOptimStepWithoutGradNorm(t *testing.T) {
	for _, tc := range []struct {
		answer string
		want   float64
	}{{`{"metrics":null}`, math.NaN()}, {`{}`, math.NaN()}, {`{"metrics":{"grad_norm":0}}`, 0}} {
		f, srv := newFake(t)
		f.result = func(path string, req map[string]any, poll int) (int, string) {
			if path == tinker.PathOptimStep {
				return 200, tc.answer
			}
			return normal(path, req, poll)
		}
		m := openFake(t, srv, DatumMean)
		sr, err := m.OptimStep(context.Background(), backend.OptimParams{LearningRate: 1e-5})
		if err != nil {
			t.Fatal(err)
		}
		if math.IsNaN(tc.want) != math.IsNaN(sr.GradNorm) || !math.IsNaN(tc.want) && sr.GradNorm != tc.want {
			t.Errorf("answer %s: grad norm %v, want %v", tc.answer, sr.GradNorm, tc.want)
		}
	}
}

// TestSaveNamesWhatSkyRLAccepts: SkyRL refuses a save_weights path
// outside [a-zA-Z0-9_-]+ (HTTP 422); a checkpoint directory with other
// characters is saved under a name with '-' for each.
func TestSaveNamesWhatSkyRLAccepts(t *testing.T) {
	f, srv := newFake(t)
	f.result = normal
	m := openFake(t, srv, DatumMean)
	if err := m.Save(context.Background(), filepath.Join(t.TempDir(), "ckpt-000003.v2 é.tmp")); err != nil {
		t.Fatal(err)
	}
	var path any
	for _, c := range f.calls {
		if c.Path == tinker.PathSaveWeights {
			path = c.Body["path"]
		}
	}
	if path != "ckpt-000003-v2--" {
		t.Errorf("saved under %q, want %q", path, "ckpt-000003-v2--")
	}
}
