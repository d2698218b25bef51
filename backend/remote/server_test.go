package remote

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	m, err := model.New(model.Config{Vocab: tokenizer.NewByteTokenizer().VocabSize(), Dim: 16, Layers: 1, Heads: 2, Hidden: 32, MaxSeq: 32}, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
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
