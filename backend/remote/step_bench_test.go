package remote

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/serve/tinkerserver"
)

// callTimes is a slog.Handler that sums the time the Tinker server says
// each call took ("tinkerserver: call done", at Debug).
type callTimes struct {
	mu   sync.Mutex
	took map[string]time.Duration
}

func (h *callTimes) Enabled(context.Context, slog.Level) bool { return true }
func (h *callTimes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *callTimes) WithGroup(string) slog.Handler            { return h }
func (h *callTimes) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "tinkerserver: call done" {
		return nil
	}
	var call string
	var took time.Duration
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "call":
			call = a.Value.String()
		case "took":
			took = a.Value.Duration()
		}
		return true
	})
	h.mu.Lock()
	h.took[call] += took
	h.mu.Unlock()
	return nil
}

func (h *callTimes) total(calls ...string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var t time.Duration
	for _, c := range calls {
		t += h.took[c]
	}
	return t
}

// BenchmarkClientStep times an SFT step (forward_backward, then
// optim_step, awaited in turn or pipelined) at the client against rlvr's Tinker server on loopback,
// beside the time the server says the two calls took, and reports the
// ratio: the client's own overhead (round trips, polling, encoding).
// Two models: the built-in world's shape (4 layers, d 128) and a tiny
// one (1 layer, d 16), where the server's work is small and the
// overhead shows; a batch of 8 sequences of 96 tokens.
func BenchmarkClientStep(b *testing.B) {
	vocab := tokenizer.NewByteTokenizer().VocabSize()
	for _, c := range []struct {
		name string
		cf   model.Config
	}{
		{"world-d128", model.Config{Vocab: vocab, Dim: 128, Layers: 4, Heads: 4, Hidden: 344, MaxSeq: 128}},
		{"tiny-d16", model.Config{Vocab: vocab, Dim: 16, Layers: 1, Heads: 2, Hidden: 32, MaxSeq: 128}},
	} {
		for _, pipelined := range []bool{false, true} {
			name := c.name + "/awaited"
			if pipelined {
				name = c.name + "/pipelined"
			}
			b.Run(name, func(b *testing.B) { benchClientStep(b, c.cf, pipelined) })
		}
	}
}

// benchClientStep times the step with forward_backward awaited before
// optim_step is sent, or with both submitted first (pipelined), as the
// training loop sends them.
func benchClientStep(b *testing.B, cf model.Config, pipelined bool) {
	m, err := model.New(cf, 1)
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "world")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		b.Fatal(err)
	}
	times := &callTimes{took: map[string]time.Duration{}}
	srv, err := tinkerserver.New(tinkerserver.Config{Models: map[string]string{"world": dir}, StateDir: b.TempDir(), Logger: slog.New(times)})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close() }()
	ctx := context.Background()
	rm, err := Open(ctx, Config{Client: Client{BaseURL: hs.URL}, BaseModel: "world", Reduction: Sum, Adam: adam()})
	if err != nil {
		b.Fatal(err)
	}
	defer rm.Close()
	step := sftStep(b, rm, pipelined)
	step() // the first step packs and allocates on the server
	before := times.total("forward_backward", "optim_step")
	b.ResetTimer()
	for range b.N {
		step()
	}
	b.StopTimer()
	client := b.Elapsed() / time.Duration(b.N)
	server := (times.total("forward_backward", "optim_step") - before) / time.Duration(b.N)
	b.ReportMetric(float64(client.Microseconds())/1000, "client-ms/step")
	b.ReportMetric(float64(server.Microseconds())/1000, "server-ms/step")
	b.ReportMetric(float64(client)/float64(server), "client/server")
}

// sftStep is one SFT step of 8 sequences of 96 tokens on rm: forward_backward
// and then optim_step, awaited in turn or both submitted first (pipelined).
func sftStep(b *testing.B, rm *Model, pipelined bool) func() {
	ctx := context.Background()
	batch := make([]backend.Datum, 8)
	for i := range batch {
		d := backend.Datum{Tokens: make([]int32, 96), Targets: make([]int32, 96), Weights: make([]float32, 96)}
		for j := range d.Tokens {
			d.Tokens[j], d.Targets[j], d.Weights[j] = int32(32+(i*7+j)%90), int32(32+(i*7+j+1)%90), 1
		}
		batch[i] = d
	}
	return func() {
		if !pipelined {
			if _, err := rm.ForwardBackward(ctx, batch, backend.Loss{NLL: 1}); err != nil {
				b.Fatal(err)
			}
			if _, err := rm.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-4}); err != nil {
				b.Fatal(err)
			}
			return
		}
		fb, err := rm.SubmitForwardBackward(ctx, batch, backend.Loss{NLL: 1})
		if err != nil {
			b.Fatal(err)
		}
		opt, err := rm.SubmitOptimStep(ctx, backend.OptimParams{LearningRate: 1e-4})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fb.Await(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Await(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientStepServer times the same SFT step at the client against
// a Tinker-compatible server already running (SkyRL tx on loopback,
// scripts/client-overhead.sh): RLVR_TINKER_URL is its address,
// RLVR_TINKER_MODEL the base model's name there, RLVR_TINKER_LORA_RANK the
// adapter's rank (default 32). The server's own time for the calls is in
// its log, which the script sums beside this benchmark's client-ms/step.
func BenchmarkClientStepServer(b *testing.B) {
	url, base := os.Getenv("RLVR_TINKER_URL"), os.Getenv("RLVR_TINKER_MODEL")
	if url == "" || base == "" {
		b.Skip("RLVR_TINKER_URL and RLVR_TINKER_MODEL name no server (scripts/client-overhead.sh starts one)")
	}
	rank := 32
	if r := os.Getenv("RLVR_TINKER_LORA_RANK"); r != "" {
		var err error
		if rank, err = strconv.Atoi(r); err != nil || rank < 1 {
			b.Fatalf("RLVR_TINKER_LORA_RANK = %q is not a positive rank", r)
		}
	}
	for _, pipelined := range []bool{false, true} {
		name := "awaited"
		if pipelined {
			name = "pipelined"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			rm, err := Open(ctx, Config{Client: Client{BaseURL: url}, BaseModel: base, LoraRank: rank, LoraSeed: 1, Reduction: DatumMean, Adam: adam()})
			if err != nil {
				b.Fatal(err)
			}
			defer rm.Close()
			step := sftStep(b, rm, pipelined)
			step() // the first step compiles on the server
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.StopTimer()
			b.ReportMetric(float64((b.Elapsed()/time.Duration(b.N)).Microseconds())/1000, "client-ms/step")
		})
	}
}
