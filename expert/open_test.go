package expert

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"rlvr/checkpoint"
	"rlvr/format/tokenizer"
)

// TestOpenURLExperts: a URL expert asks its remote model (its name when
// none is given), with the key given or read from the environment, and
// records what it asked for.
func TestOpenURLExperts(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]string{} // model → Authorization
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		mu.Lock()
		asked[req.Model] = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion)
	}))
	defer srv.Close()
	t.Setenv("EXPERT_TEST_KEY", "from-env")
	p := open(t,
		Config{Name: "qwen", URL: srv.URL + "/v1"},
		Config{Name: "r1", URL: srv.URL + "/v1", RemoteModel: "deepseek-r1", APIKeyEnv: "EXPERT_TEST_KEY"},
		Config{Name: "gpt", URL: srv.URL + "/v1", APIKey: "given", APIKeyEnv: "EXPERT_TEST_KEY"},
	)
	for i, want := range []string{"qwen", "deepseek-r1", "gpt"} {
		if m := p.Members[i]; m.Model != want || m.API != APICompletion {
			t.Errorf("member %d: %+v, want model %s", i, m, want)
		}
	}
	for _, a := range p.Answers(context.Background(), []Ask{{0, "q"}, {1, "q"}, {2, "q"}}) {
		if a.Failure != "" {
			t.Fatalf("%s: %v", a.Failure, a.Err)
		}
	}
	want := map[string]string{"qwen": "", "deepseek-r1": "Bearer from-env", "gpt": "Bearer given"}
	for model, auth := range want {
		if got, ok := asked[model]; !ok || got != auth {
			t.Errorf("model %s asked %v with Authorization %q, want %q", model, ok, got, auth)
		}
	}
}

// TestOpenCheckpoint opens a checkpoint without a chat template as a chat
// expert: it is asked by completion, says so, and answers, served on
// loopback or, with Options.Batch, in this process.
func TestOpenCheckpoint(t *testing.T) {
	tokDir := t.TempDir()
	if err := tokenizer.WriteByteTokenizer(tokDir); err != nil {
		t.Fatal(err)
	}
	shape, err := checkpoint.LookupShape("llama-tiny")
	if err != nil {
		t.Fatal(err)
	}
	shape.Dim, shape.Heads, shape.KVHeads, shape.Layers, shape.Hidden, shape.MaxSeq = 16, 2, 1, 1, 32, 128
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, err := checkpoint.InitRandom(checkpoint.InitOptions{Tokenizer: tokDir, Shape: shape, Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{0, 4} {
		experts := []Config{{Name: "tiny", Model: dir, API: APIChat, MaxTokens: 4}, {Name: "copy", Policy: true, MaxTokens: 4}}
		for i := range experts {
			if err := experts[i].Check("experts", i, true); err != nil {
				t.Fatal(err)
			}
		}
		var warnings []string
		p, err := Open(experts, Options{Policy: dir, Seed: 1, Batch: batch, Warn: func(msg string) { warnings = append(warnings, msg) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(warnings) != 2 || !strings.Contains(warnings[0], "expert tiny: "+dir+" has no chat template") {
			t.Errorf("batch %d: warnings %q", batch, warnings)
		}
		for _, m := range p.Members {
			if m.API != APICompletion || m.Model != dir {
				t.Errorf("batch %d: member %+v", batch, m)
			}
			if _, ok := m.Answerer.(*Batched); ok != (batch > 0) {
				t.Errorf("batch %d: %s answers through %T", batch, m.Name, m.Answerer)
			}
		}
		for _, a := range p.Answers(context.Background(), []Ask{{0, "Q:1+1\n"}, {1, "Q:2+2\n"}}) {
			if a.Failure != "" && a.Failure != FailEmpty {
				t.Errorf("batch %d: %s: %v", batch, a.Failure, a.Err)
			}
		}
		p.Close()
	}
}
