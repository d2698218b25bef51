package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend/remote"
	"rlvr/serve"
)

// TestServeTinker runs rlvr serve --tinker over loopback and makes the
// calls of a short session: the API key is asked for (in X-API-Key, as the
// Tinker SDK sends it, or as a bearer token; without it the answer is
// FastAPI's 401 {"detail": ...}), a model is created and sampled from, and
// its weights are saved under --state.
func TestServeTinker(t *testing.T) {
	cliFixture(t)
	t.Setenv(serve.TokenEnv, "")
	state := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := startServe(t, ctx, []string{"serve", "--tinker", "--model", "model", "--name", "tiny", "--addr", "127.0.0.1:0",
		"--state", state, "--api-key", "k", "--poll-timeout", "5s"}, `serving tiny over the Tinker API on (http://\S+)`)
	get := func(path string, header ...string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if status, _ := get(tinker.PathHealthz); status != http.StatusOK {
		t.Errorf("healthz: %d", status)
	}
	for _, header := range [][]string{nil, {tinker.HeaderAPIKey, "wrong"}, {"Authorization", "Bearer wrong"}} {
		status, b := get(tinker.PathCapabilities, header...)
		var detail tinker.ErrorDetail
		if err := json.Unmarshal(b, &detail); status != http.StatusUnauthorized || err != nil || !strings.Contains(detail.Detail, "API key") {
			t.Errorf("capabilities with %v: %d %s", header, status, b)
		}
	}
	for _, header := range [][]string{{tinker.HeaderAPIKey, "k"}, {"Authorization", "Bearer k"}} {
		status, b := get(tinker.PathCapabilities, header...)
		if status != http.StatusOK || !strings.Contains(string(b), `"model_name":"tiny"`) {
			t.Errorf("capabilities with %v: %d %s", header, status, b)
		}
	}
	client := &remote.Client{BaseURL: base, APIKey: "k"}
	var s tinker.CreateSessionResponse
	client.Post(ctx, "create_session", tinker.PathCreateSession, tinker.CreateSessionRequest{Tags: []string{"t"}, SDKVersion: "t"}, &s)
	var m tinker.CreateModelResponse
	if err := client.Post(ctx, "create_model", tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: s.SessionID, BaseModel: "tiny"}, &m); err != nil || m.ModelID == "" {
		t.Fatalf("create_model: %+v, %v", m, err)
	}
	result := func(path string, body, out any) {
		t.Helper()
		if err := client.Call(ctx, path, path, body, out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	seed := int64(1)
	var res tinker.SampleResponse
	result(tinker.PathSample, tinker.SampleRequest{NumSamples: 2, Prompt: tinker.Text([]int32{256, 81}), BaseModel: "tiny",
		SamplingParams: tinker.SamplingParams{MaxTokens: 4, Seed: &seed, Temperature: 1, TopK: -1, TopP: 1}}, &res)
	if len(res.Sequences) != 2 {
		t.Errorf("asample: %+v", res)
	}
	var saved tinker.SaveWeightsResponse
	result(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: m.ModelID, Path: "first"}, &saved)
	if _, err := os.Stat(filepath.Join(state, m.ModelID, "weights", "first", "model.safetensors")); err != nil {
		t.Errorf("save_weights %s: %v", saved.Path, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve --tinker did not stop")
	}
}

// TestServeTinkerFlags checks the flags that do not go with --tinker, and
// those read only with it.
func TestServeTinkerFlags(t *testing.T) {
	dir := cliFixture(t)
	t.Setenv(serve.TokenEnv, "")
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"serve", "--tinker", "--world-experts"}, []string{"[tinker world-experts] were all set"}},
		{[]string{"serve", "--tinker", "--model", "model", "--expert", "1"}, []string{"[expert tinker] were all set"}},
		{[]string{"serve", "--tinker", "--model", "model", "--system", "x"}, []string{"[system tinker] were all set"}},
		{[]string{"serve", "--tinker", "--model", "model", "--prompt-suffix", "y"}, []string{"[prompt-suffix tinker] were all set"}},
		{[]string{"serve", "--tinker", "--model", "model", "--tokenizer", "afile.txt"}, []string{"[tinker tokenizer] were all set"}},
		{[]string{"serve", "--tinker", "--model", "model", "--poll-timeout", "-1s"}, []string{"--poll-timeout -1s"}},
		{[]string{"serve", "--tinker", "--model", "model", "--poll-timeout", "2h"}, []string{"--poll-timeout 2h0m0s"}},
		{[]string{"serve", "--tinker", "--model", "model", "--state", "afile.txt"}, []string{"--state afile.txt is a file"}},
		{[]string{"serve", "--tinker", "--model", "nosuch"}, []string{"--model nosuch"}},
		{[]string{"serve", "--tinker", "--model", "huge"}, []string{"huge/config.json", "vocab_size 1048576"}},
		{[]string{"serve", "--tinker", "--model", "model", "--max-n", "-1", "--addr", "x"}, []string{"--max-n -1", `--addr "x"`}},
		{[]string{"serve", "--model", "model", "--state", "adir"}, []string{"--state is read only with --tinker"}},
		{[]string{"serve", "--model", "model", "--poll-timeout", "1s"}, []string{"--poll-timeout is read only with --tinker"}},
		{[]string{"serve", "--model", "model", "--max-models", "2"}, []string{"--max-models is read only with --tinker"}},
		{[]string{"serve", "--model", "model", "--max-saved-states", "2"}, []string{"--max-saved-states is read only with --tinker"}},
		{[]string{"serve", "--model", "model", "--max-saved-gib", "2"}, []string{"--max-saved-gib is read only with --tinker"}},
		{[]string{"serve", "--tinker", "--model", "model", "--max-models", "-1", "--max-saved-states", "-2", "--max-saved-gib", "-3"},
			[]string{"--max-models -1", "--max-saved-states -2", "--max-saved-gib -3"}},
		{[]string{"serve", "--tinker", "--model", "model", "--addr", "0.0.0.0:0"}, []string{`--addr "0.0.0.0:0" accepts connections from other machines`, "--api-key", "--insecure"}},
		{[]string{"serve", "--tinker", "--model", "model", "--addr", ":0", "--api-key", ""}, []string{"--api-key is empty", `--addr ":0" accepts connections`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { refused(t, dir, tc.args, tc.want) })
	}
}
