package remote

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/serve/tinkerserver"
)

// TestHeartbeatsKeepTheSessionAlive runs the client against rlvr's
// Tinker server with a short session lifetime: with heartbeats the model
// outlives it; without, the next call fails, naming the call and the
// expiry.
func TestHeartbeatsKeepTheSessionAlive(t *testing.T) {
	dir := tinyModelDir(t)
	srv, err := tinkerserver.New(tinkerserver.Config{Models: map[string]string{"tiny": dir}, StateDir: t.TempDir(), SessionTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close() }()
	batch := []backend.Datum{{Tokens: []int32{1, 72, 105}, Targets: []int32{72, 105, 2}, Weights: []float32{1, 1, 1}}}
	for _, tc := range []struct {
		heartbeat time.Duration
		expire    bool
	}{{50 * time.Millisecond, false}, {time.Hour, true}} {
		ctx := context.Background()
		rm, err := Open(ctx, Config{Client: Client{BaseURL: hs.URL, Backoff: time.Millisecond}, BaseModel: "tiny", Reduction: Sum, Adam: adam(), Heartbeat: tc.heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // a heartbeat late by most of a second on a loaded machine still arrives in time
		_, err = rm.ForwardBackward(ctx, batch, backend.Loss{NLL: 1})
		rm.Close()
		switch {
		case tc.expire && (err == nil || !strings.Contains(err.Error(), "forward_backward") || !strings.Contains(err.Error(), "expired")):
			t.Errorf("heartbeat every %v: error %v, want forward_backward's session expired", tc.heartbeat, err)
		case !tc.expire && err != nil:
			t.Errorf("heartbeat every %v: %v", tc.heartbeat, err)
		}
	}
}

// TestCloseUnloadsTheModel: against rlvr's Tinker server at its limit of
// one model, a second model opens only once the first is closed, since
// Close unloads it (as SkyRL's adapter slots need) instead of leaving it
// to its session's expiry. A server without unload_model (404) closes
// without an error.
func TestCloseUnloadsTheModel(t *testing.T) {
	dir := tinyModelDir(t)
	srv, err := tinkerserver.New(tinkerserver.Config{Models: map[string]string{"tiny": dir}, StateDir: t.TempDir(), MaxModels: 1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close() }()
	ctx := context.Background()
	cfg := Config{Client: Client{BaseURL: hs.URL, Backoff: time.Millisecond}, BaseModel: "tiny", Reduction: Sum, Adam: adam()}
	first, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, cfg); err == nil || !strings.Contains(err.Error(), "the server's limit of 1") {
		t.Fatalf("a second model beside an open one: error %v, want the limit", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	second, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("a model after the first was closed: %v", err)
	}
	batch := []backend.Datum{{Tokens: []int32{1, 72, 105}, Targets: []int32{72, 105, 2}, Weights: []float32{1, 1, 1}}}
	if _, err := second.ForwardBackward(ctx, batch, backend.Loss{NLL: 1}); err != nil {
		t.Errorf("the second model: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Errorf("close: %v", err)
	}

	f, fake := newFake(t)
	f.submit = func(path string, _ int) (int, string) {
		if path == tinker.PathUnloadModel {
			return 404, `{"detail":"Not Found"}`
		}
		return 0, ""
	}
	old, err := Open(ctx, Config{Client: Client{BaseURL: fake.URL, Backoff: time.Millisecond}, BaseModel: "base", Reduction: Sum, Adam: adam()})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Errorf("close against a server without unload_model: %v", err)
	}
}

// tinyModelDir saves a 1-layer model of the byte tokenizer's vocabulary
// as a Hugging Face directory, the base model the tests serve as "tiny".
func tinyModelDir(t *testing.T) string {
	t.Helper()
	m, err := model.New(model.Config{Vocab: tokenizer.NewByteTokenizer().VocabSize(), Dim: 16, Layers: 1, Heads: 2, Hidden: 32, MaxSeq: 32}, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	return dir
}
