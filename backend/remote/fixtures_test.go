package remote

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/sample"
)

// fixture reads a wire fixture of api/tinker/testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "api", "tinker", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keys lists the JSON object's keys at every depth, as dotted paths
// (array elements under "[]").
func keys(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				set[prefix+k] = true
				walk(prefix+k+".", e)
			}
		case []any:
			for _, e := range x {
				walk(prefix+"[].", e)
			}
		}
	}
	walk("", v)
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestClientSpeaksTheFixtures runs the client against a server answering
// with the wire fixtures (written from SkyRL's and the SDK's schemas), and
// checks that every request the client sends uses only fields the
// fixture of that request has — so client and fixtures cannot drift apart,
// as the server's own fixture test holds it to them.
func TestClientSpeaksTheFixtures(t *testing.T) {
	results := map[string]string{
		tinker.PathCreateModel:     "create_model.result.json",
		tinker.PathForwardBackward: "forward_backward.result.json",
		tinker.PathOptimStep:       "optim_step.result.json",
		tinker.PathSaveWeights:     "save_weights.result.json",
		tinker.PathSaveForSampler:  "save_weights_for_sampler.result.json",
		tinker.PathLoadWeights:     "load_weights.result.json",
		tinker.PathSample:          "asample.result.json",
		tinker.PathUnloadModel:     "unload_model.result.json",
	}
	requests := map[string]string{
		tinker.PathCreateSession:   "create_session.request.json",
		tinker.PathCreateModel:     "create_model.request.json",
		tinker.PathForwardBackward: "forward_backward.request.json",
		tinker.PathOptimStep:       "optim_step.request.json",
		tinker.PathSaveWeights:     "save_weights.request.json",
		tinker.PathSaveForSampler:  "save_weights_for_sampler.request.json",
		tinker.PathLoadWeights:     "load_weights.request.json",
		tinker.PathSample:          "asample.request.json",
		tinker.PathRetrieveFuture:  "retrieve_future.request.json",
		tinker.PathHeartbeat:       "session_heartbeat.request.json",
		tinker.PathUnloadModel:     "unload_model.request.json",
	}
	var mu sync.Mutex
	sent := map[string][][]byte{}
	last := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		sent[r.URL.Path] = append(sent[r.URL.Path], b)
		switch r.URL.Path {
		case tinker.PathCreateSession:
			w.Write(fixture(t, "create_session.response.json"))
		case tinker.PathCreateModel:
			last = r.URL.Path
			w.Write(fixture(t, "create_model.response.json"))
		case tinker.PathUnloadModel:
			last = r.URL.Path
			w.Write(fixture(t, "unload_model.response.json"))
		case tinker.PathRetrieveFuture:
			w.Write(fixture(t, results[last]))
		default:
			last = r.URL.Path
			w.Write(fixture(t, "future.response.json"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	m, err := Open(ctx, Config{Client: Client{BaseURL: srv.URL}, BaseModel: "Qwen/Qwen3-0.6B", LoraRank: 32, Reduction: Sum, Adam: adam()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.ID() != "model_5e1b" {
		t.Errorf("model id %q", m.ID())
	}
	d := backend.Datum{Tokens: []int32{151644, 872, 198, 16}, Targets: []int32{872, 198, 16, 151645}, Weights: []float32{0, 0, 1, 1},
		Advantages: []float32{0, 0, 0.5, 0.5}, SamplerLogprobs: []float32{0, 0, -0.25, -1.5}}
	res, err := m.ForwardBackward(ctx, []backend.Datum{d}, backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Logprobs[0]; len(got) != 4 || got[0] != -3.5 || got[3] != -1.25 {
		t.Errorf("logprobs %v", got)
	}
	sr, err := m.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-6, GradClipNorm: 1})
	if err != nil || sr.GradNorm != 0.75 {
		t.Fatalf("optim_step: %v %v", sr, err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt-000025.tmp")
	if err := m.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	path, ok, err := ReadState(dir)
	if err != nil || !ok || path != "tinker://model_5e1b/weights/ckpt-000025" {
		t.Fatalf("saved state %q %v %v", path, ok, err)
	}
	if err := m.Load(ctx, path, true); err != nil {
		t.Fatal(err)
	}
	s := &Sampler{Model: m}
	out, err := s.Sample(ctx, []sample.Request{{Prompt: []int32{151644, 872, 198}, Params: sample.Params{MaxTokens: 16, Temperature: 1, N: 2, Seed: 11, StopTokens: []int32{151645}}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := out[0]; len(c) != 2 || c[0].Finish != sample.FinishStop || len(c[0].Tokens) != 2 || c[1].Finish != sample.FinishLength {
		t.Errorf("samples %+v", out)
	}
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for path, bodies := range sent {
		want := keys(t, fixture(t, requests[path]))
		for _, b := range bodies {
			for _, k := range keys(t, b) {
				if i := sort.SearchStrings(want, k); i == len(want) || want[i] != k {
					t.Errorf("%s: the client sends %q, which %s does not have", path, k, requests[path])
				}
			}
		}
	}
	for _, p := range []string{tinker.PathForwardBackward, tinker.PathOptimStep, tinker.PathSaveWeights, tinker.PathSaveForSampler, tinker.PathLoadWeights, tinker.PathSample, tinker.PathUnloadModel} {
		if len(sent[p]) == 0 {
			t.Errorf("the client never called %s", strings.TrimPrefix(p, "/api/v1/"))
		}
	}
}
