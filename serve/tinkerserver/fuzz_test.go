package tinkerserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"rlvr/api/tinker"
)

// fuzzPaths are the calls FuzzRequest sends its bodies to.
var fuzzPaths = []string{
	tinker.PathCreateSession, tinker.PathHeartbeat, tinker.PathCreateModel, tinker.PathForward,
	tinker.PathForwardBackward, tinker.PathOptimStep, tinker.PathSaveWeights, tinker.PathSaveForSampler,
	tinker.PathLoadWeights, tinker.PathSample, tinker.PathRetrieveFuture, tinker.PathClientConfig,
	tinker.PathSaveWeightsExternal, tinker.PathRetrieveFutures, tinker.PathJoinSamplingSession, tinker.PathWeightsInfo,
	tinker.PathCreateCustomLoss,
}

// FuzzRequest sends arbitrary bodies to every call: the server answers
// each with a status it documents and a JSON body, and a call it accepts
// ends in a result or a failure, never a panic.
func FuzzRequest(f *testing.F) {
	srv, err := New(Config{Models: map[string]string{testBase: testModelDir(f)}, StateDir: f.TempDir(), Logger: discard(),
		MaxDatums: 8, MaxCallTokens: 256, MaxSamples: 4, MaxNewTokens: 8, PollTimeout: 10 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	send := func(path string, body []byte) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		return w
	}
	var cs tinker.CreateSessionResponse
	json.Unmarshal(send(tinker.PathCreateSession, []byte(`{"tags":[],"sdk_version":"x"}`)).Body.Bytes(), &cs)
	var cm tinker.CreateModelResponse
	json.Unmarshal(send(tinker.PathCreateModel, []byte(`{"session_id":"`+cs.SessionID+`","base_model":"tiny","lora_config":{"rank":0}}`)).Body.Bytes(), &cm)
	if cm.ModelID == "" {
		f.Fatal("no model")
	}
	ids := map[string]string{"session_3f2a9c1d": cs.SessionID, "model_5e1b": cm.ModelID}
	names, _ := filepath.Glob(filepath.Join(fixtureDir, "*.request.json"))
	for _, n := range names {
		name := filepath.Base(n)
		path := "/api/v1/" + strings.TrimSuffix(name, ".request.json")
		for i, p := range fuzzPaths {
			if p == path {
				f.Add(uint8(i), adapt(f, name, ids))
			}
		}
	}
	f.Add(uint8(3), []byte(`{"model_id":"`+cm.ModelID+`","forward_input":{"loss_fn":"ppo","data":[{"model_input":{"chunks":[{"tokens":[1,2]}]},"loss_fn_inputs":{"target_tokens":{"data":[2,3]},"advantages":{"data":[1e38,1]},"logprobs":{"data":[-100,0]}}}]}}`))
	f.Add(uint8(9), []byte(`{"base_model":"tiny","prompt":{"chunks":[{"tokens":[256]}]},"num_samples":2,"prompt_logprobs":true,"sampling_params":{"max_tokens":8,"stop":["a",""],"top_k":3}}`))
	f.Add(uint8(0), []byte(`{"tags": [1e400]}`))
	f.Add(uint8(5), []byte(`{"model_id":"`+cm.ModelID+`","adam_params":{"learning_rate":1e39}}`))
	f.Add(uint8(13), []byte(`{"target":{"sampling_session_id":"s","cloned_sampler_id":-1},"prev_cursor":1e30,"timeout":1e308}`))
	f.Add(uint8(14), []byte(`{"sampling_session_id":[]}`))
	f.Add(uint8(15), []byte(`{"tinker_path":"tinker://`+cm.ModelID+`/weights/../x"}`))
	if fx, err := os.ReadFile(filepath.Join("testdata", "custom_losses.json")); err == nil {
		var losses []json.RawMessage
		json.Unmarshal(fx, &losses)
		for _, l := range losses {
			var body map[string]any
			json.Unmarshal(l, &body)
			delete(body, "cases")
			body["session_id"], body["custom_loss_seq_id"] = cs.SessionID, 0
			b, _ := json.Marshal(body)
			f.Add(uint8(16), b)
		}
	}

	allowed := map[int]bool{200: true, 400: true, 404: true, 409: true, 410: true, 413: true, 415: true, 429: true}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := fuzzPaths[int(which)%len(fuzzPaths)]
		w := send(path, body)
		if !allowed[w.Code] {
			t.Fatalf("%s %q: status %d: %s", path, body, w.Code, w.Body.Bytes())
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %q: the answer is not JSON: %q", path, body, w.Body.Bytes())
		}
		if w.Code != 200 || path == tinker.PathRetrieveFuture {
			return
		}
		var fut tinker.Future
		if json.Unmarshal(w.Body.Bytes(), &fut) != nil || fut.RequestID == "" {
			return // a call answered at once
		}
		res := send(tinker.PathRetrieveFuture, []byte(`{"request_id":"`+fut.RequestID+`"}`))
		if res.Code != 200 {
			t.Fatalf("%s %q: retrieve_future: %d %s", path, body, res.Code, res.Body.Bytes())
		}
		var failed tinker.RequestFailed
		if json.Unmarshal(res.Body.Bytes(), &failed) == nil && strings.Contains(failed.Message, "internal error") {
			t.Fatalf("%s %q: %s", path, body, failed.Message)
		}
	})
}

// FuzzReadPaths sends arbitrary paths to the REST reads and the download
// URLs: each answers 200 or 404 with a JSON body, and none reads outside
// the state directory (a name that is not a saved state's is never found).
func FuzzReadPaths(f *testing.F) {
	state := f.TempDir()
	srv, err := New(Config{Models: map[string]string{testBase: testModelDir(f)}, StateDir: state, Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	for _, p := range []string{"m/checkpoints", "m/checkpoints/external_weights/final/external_weights_urls", "../../etc/checkpoints",
		"m/checkpoints/external_weights/../../x/external_weights_urls", "%2e%2e/checkpoints"} {
		f.Add(false, p)
	}
	f.Add(true, "0123/../../config.json")
	f.Fuzz(func(t *testing.T, files bool, rest string) {
		prefix := tinker.PathTrainingRuns
		if files {
			prefix = tinker.PathFiles
		}
		req, err := http.NewRequest(http.MethodGet, "http://x"+prefix, nil)
		if err != nil {
			t.Skip()
		}
		req.URL.Path += rest
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
			t.Fatalf("GET %q: status %d: %s", req.URL.Path, w.Code, w.Body)
		}
		if w.Code == http.StatusOK && files {
			t.Fatalf("GET %q: a download served without a token: %s", req.URL.Path, w.Body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("GET %q: body %q is not JSON", req.URL.Path, w.Body)
		}
	})
}

// FuzzCheckpointTTL sends PUT …/ttl with any path and body: it answers
// 200, 400, 404 or 405 with a JSON body, never panics, and writes a TTL's
// record only beside a checkpoint that is there.
func FuzzCheckpointTTL(f *testing.F) {
	state := f.TempDir()
	srv, err := New(Config{Models: map[string]string{testBase: testModelDir(f)}, StateDir: state, Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	kept := filepath.Join(state, "m", "weights", "kept")
	if err := os.MkdirAll(kept, 0o755); err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{"m/checkpoints/weights/kept/ttl", "m/checkpoints/sampler_weights/s/ttl", "m/checkpoints/weights/../../x/ttl",
		"m/checkpoints/weights/.expires-kept/ttl", "m/checkpoints/other/kept/ttl"} {
		for _, body := range []string{`{"ttl_seconds":3600}`, `{"ttl_seconds":null}`, `{"ttl_seconds":-1}`, `{"ttl_seconds":1e30}`, `[]`, ``} {
			f.Add(p, []byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, rest string, body []byte) {
		req, err := http.NewRequest(http.MethodPut, "http://x"+tinker.PathTrainingRuns, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.URL.Path += rest
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
		default:
			t.Fatalf("PUT %q %q: status %d: %s", req.URL.Path, body, w.Code, w.Body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("PUT %q: body %q is not JSON", req.URL.Path, w.Body)
		}
		records, _ := filepath.Glob(filepath.Join(state, "*", "*", ".expires-*"))
		for _, r := range records {
			if r != expiryFile(kept) {
				t.Fatalf("PUT %q %q wrote %s, beside no checkpoint", req.URL.Path, body, r)
			}
		}
	})
}

// FuzzUnzstd decompresses arbitrary bodies under a limit: no input panics
// or yields more than the limit, and a body is called too large only when
// it could hold more than the limit.
func FuzzUnzstd(f *testing.F) {
	const limit = 1 << 16
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	f.Add(enc.EncodeAll([]byte(`{"model_id": "m"}`), nil))
	f.Add(enc.EncodeAll(make([]byte, 1<<20), nil))
	f.Add([]byte("\x28\xb5\x2f\xfd\x17\xbf\x12\x21\x5d\x6c\x80\x46\x6c\x7c\x2a\xe4"))
	f.Add([]byte("\x28\xb5\x2f\xfd junk"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := unzstd(b, limit)
		switch {
		case errors.Is(err, errTooLarge) && len(b) <= limit/maxZstdExpansion:
			t.Fatalf("%d bytes called too large", len(b))
		case err == nil && len(out) > limit:
			t.Fatalf("%d bytes out, over the limit", len(out))
		}
	})
}
