package tinkerserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/api/tinker"
)

// TestServiceCalls checks the calls answered at once.
func TestServiceCalls(t *testing.T) {
	h := newHarness(t, Config{})
	status, b := h.do(http.MethodGet, tinker.PathHealthz, nil)
	if status != http.StatusOK || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", status, b)
	}
	status, b = h.do(http.MethodGet, tinker.PathCapabilities, nil)
	var caps struct {
		SupportedModels []struct {
			ModelName string `json:"model_name"`
		} `json:"supported_models"`
	}
	strict(t, b, &caps)
	if status != http.StatusOK || len(caps.SupportedModels) != 1 || caps.SupportedModels[0].ModelName != testBase {
		t.Errorf("capabilities: %d %s", status, b)
	}
	status, b = h.do(http.MethodPost, tinker.PathClientConfig, `{"sdk_version":"0.3.0"}`)
	var cc map[string]any
	if err := json.Unmarshal(b, &cc); status != http.StatusOK || err != nil {
		t.Errorf("client/config: %d %s", status, b)
	}
	status, b = h.do(http.MethodPost, tinker.PathHeartbeat, tinker.HeartbeatRequest{SessionID: "session_nothing"})
	expectDetail(t, status, b, http.StatusNotFound, "session session_nothing not found")
	status, b = h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: "session_nothing", BaseModel: testBase})
	expectDetail(t, status, b, http.StatusNotFound, "session session_nothing not found")
	sess := h.session()
	status, b = h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, BaseModel: testBase, LoraConfig: tinker.LoraConfig{Rank: 32}})
	expectDetail(t, status, b, http.StatusBadRequest, "create_model: lora: rank 32 exceeds model.layers.0.self_attn.q_proj.weight's 16 × 16")
	status, b = h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, BaseModel: testBase, LoraConfig: tinker.LoraConfig{Rank: -1}})
	expectDetail(t, status, b, http.StatusBadRequest, "lora_config.rank is -1")
	off := false
	status, b = h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, BaseModel: testBase,
		LoraConfig: tinker.LoraConfig{Rank: 2, TrainAttn: &off, TrainMLP: &off, TrainUnembed: &off}})
	expectDetail(t, status, b, http.StatusBadRequest, "lora: no matrix chosen")
	status, b = h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, BaseModel: "Qwen/Qwen3-8B"})
	expectDetail(t, status, b, http.StatusNotFound, `base_model "Qwen/Qwen3-8B" is not served here (served: tiny)`)
	status, b = h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess})
	expectDetail(t, status, b, http.StatusBadRequest, "create_model: base_model is missing")

	// A retried create_model finds its model; another model_seq_id makes
	// another.
	create := func(seq int64) string {
		var m tinker.CreateModelResponse
		strict(t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, ModelSeqID: seq, BaseModel: testBase}), &m)
		return m.ModelID
	}
	a := create(0)
	if again := create(0); again != a {
		t.Errorf("a retried create_model made model %s, then %s", a, again)
	}
	// The ids the SDK derives for a model it creates by loading a state.
	if a != sess+":train:0" {
		t.Errorf("model_seq_id 0 made model %s", a)
	}
	if other := create(1); other != sess+":train:1" {
		t.Errorf("model_seq_id 1 made model %s (model_seq_id 0: %s)", other, a)
	}
}

// TestAPIKey checks that every call but healthz needs the key, in
// X-API-Key or as a bearer token.
func TestAPIKey(t *testing.T) {
	h := newHarness(t, Config{APIKey: "sekret"})
	for _, tc := range []struct {
		header []string
		status int
	}{
		{[]string{tinker.HeaderAPIKey, ""}, http.StatusUnauthorized},
		{[]string{tinker.HeaderAPIKey, "wrong"}, http.StatusUnauthorized},
		{[]string{tinker.HeaderAPIKey, ""}, http.StatusUnauthorized},
		{[]string{tinker.HeaderAPIKey, "", "Authorization", "Bearer wrong"}, http.StatusUnauthorized},
		{[]string{tinker.HeaderAPIKey, "", "Authorization", "Bearer sekret"}, http.StatusOK},
		{[]string{tinker.HeaderAPIKey, "sekret"}, http.StatusOK},
	} {
		for _, path := range []string{tinker.PathCapabilities, tinker.PathCreateSession, tinker.PathRetrieveFuture, "/api/v1/nothing"} {
			method, body := http.MethodPost, any(`{"tags":[],"sdk_version":"x","request_id":"1"}`)
			if path == tinker.PathCapabilities {
				method, body = http.MethodGet, nil
			}
			status, b := h.do(method, path, body, tc.header...)
			want := tc.status
			if want == http.StatusOK && path == "/api/v1/nothing" {
				want = http.StatusNotFound
			}
			if want == http.StatusOK && path == tinker.PathRetrieveFuture {
				want = http.StatusNotFound // no such future, but let in
			}
			if status != want {
				t.Errorf("%s with %v: status %d, want %d: %s", path, tc.header, status, want, b)
			}
			if status == http.StatusUnauthorized {
				expectDetail(t, status, b, http.StatusUnauthorized, "API key")
			}
		}
	}
	if status, _ := h.do(http.MethodGet, tinker.PathHealthz, nil, tinker.HeaderAPIKey, ""); status != http.StatusOK {
		t.Errorf("healthz without the key: %d", status)
	}
}

// TestLimits checks each of the server's limits is a 400 (or 413) naming
// the field and the limit.
func TestLimits(t *testing.T) {
	h := newHarness(t, Config{MaxBodyBytes: 4096, MaxDatums: 2, MaxCallTokens: 10, MaxSamples: 3, MaxNewTokens: 5})
	_, id := h.newModel()
	datum := sft([]int32{1, 2, 3, 4})
	fb := func(data ...tinker.Datum) tinker.ForwardBackwardRequest {
		return tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tinker.CrossEntropy}}
	}
	status, b := h.do(http.MethodPost, tinker.PathForwardBackward, fb(datum, datum, datum))
	expectDetail(t, status, b, http.StatusBadRequest, "data has 3 datums, more than the server's limit of 2")
	status, b = h.do(http.MethodPost, tinker.PathForward, tinker.ForwardRequest{ModelID: id, Input: fb(sft(make([]int32, 12))).Input})
	expectDetail(t, status, b, http.StatusBadRequest, "forward: data has 11 model_input tokens, more than the server's limit of 10")
	h.submit(tinker.PathForwardBackward, fb(datum, datum)) // at the limits
	status, b = h.do(http.MethodPost, tinker.PathForwardBackward, strings.Repeat(" ", 5000))
	expectDetail(t, status, b, http.StatusRequestEntityTooLarge, "larger than the server's limit of 4096 bytes")

	sample := func(n, maxTokens int, prompt []int32) map[string]any {
		return map[string]any{"base_model": testBase, "num_samples": n, "prompt": tinker.Text(prompt), "sampling_params": map[string]any{"max_tokens": maxTokens}}
	}
	status, b = h.do(http.MethodPost, tinker.PathSample, sample(4, 5, []int32{1}))
	expectDetail(t, status, b, http.StatusBadRequest, "num_samples is 4, more than the server's limit of 3")
	status, b = h.do(http.MethodPost, tinker.PathSample, sample(3, 6, []int32{1}))
	expectDetail(t, status, b, http.StatusBadRequest, "sampling_params.max_tokens is 6, more than the server's limit of 5")
	status, b = h.do(http.MethodPost, tinker.PathSample, sample(3, 5, make([]int32, 11)))
	expectDetail(t, status, b, http.StatusBadRequest, "the prompt has 11 tokens, more than the server's limit of 10")
	var res tinker.SampleResponse
	h.call(tinker.PathSample, sample(3, 5, []int32{256, 1}), &res)
}

// TestQueueLimit fills a model's queue: the next call gets 429.
func TestQueueLimit(t *testing.T) {
	h := newHarness(t, Config{MaxQueue: 2})
	_, id := h.newModel()
	bl := block(h.srv)
	step := tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}
	first := h.submit(tinker.PathOptimStep, step)
	bl.waitEntered(t, "optim_step")
	h.submit(tinker.PathOptimStep, step)
	h.submit(tinker.PathOptimStep, step)
	status, b := h.do(http.MethodPost, tinker.PathOptimStep, step)
	expectDetail(t, status, b, http.StatusTooManyRequests, "2 calls waiting already")
	bl.unblock(h.srv)
	h.wait(first.RequestID)
}

// TestSessionExpiry lets a session go without a heartbeat: its models
// stop, their queued calls fail, and later calls naming them say so.
func TestSessionExpiry(t *testing.T) {
	ttl := 300 * time.Millisecond
	h := newHarness(t, Config{SessionTTL: ttl})
	sess, id := h.newModel()
	// Heartbeats keep it alive past its time.
	for range 4 {
		time.Sleep(ttl / 3)
		h.post(tinker.PathHeartbeat, tinker.HeartbeatRequest{SessionID: sess})
	}
	var out tinker.OptimStepResponse
	step := tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}
	h.call(tinker.PathOptimStep, step, &out)
	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: id, Path: "s"}, &saved)

	// A call held at the worker and one queued behind it when the
	// session expires.
	bl := block(h.srv)
	running := h.submit(tinker.PathOptimStep, step)
	bl.waitEntered(t, "optim_step")
	queued := h.submit(tinker.PathOptimStep, step)
	time.Sleep(ttl + ttl/2)
	bl.unblock(h.srv)
	var f tinker.RequestFailed
	strict(t, h.wait(queued.RequestID), &f)
	if f.Category != "user" || !strings.Contains(f.Message, "session "+sess+" expired") {
		t.Errorf("the queued call: %+v", f)
	}
	h.wait(running.RequestID) // it ran, or failed; either way it is settled

	for _, tc := range []struct {
		path string
		body any
	}{
		{tinker.PathHeartbeat, tinker.HeartbeatRequest{SessionID: sess}},
		{tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, ModelSeqID: 1, BaseModel: testBase}},
		{tinker.PathOptimStep, step},
		{tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{sft([]int32{1, 2})}, LossFn: tinker.CrossEntropy}}},
		{tinker.PathSample, sampleCases[0].wire(saved.Path, "")},
	} {
		status, b := h.do(http.MethodPost, tc.path, tc.body)
		expectDetail(t, status, b, http.StatusGone, "session "+sess+" expired")
	}
	h.srv.mu.Lock()
	m := h.srv.models[id]
	h.srv.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); ; {
		h.srv.mu.Lock()
		freed := m.samplers == nil
		h.srv.mu.Unlock()
		if freed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired model's weights were not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A new session works.
	h.newModel()
}

// TestFutures checks retrieve_future's answers: 404 for an id never
// issued, 408 while the call runs, the result once done, and 410 once
// the result is dropped.
func TestFutures(t *testing.T) {
	h := newHarness(t, Config{PollTimeout: 50 * time.Millisecond, ResultTTL: 200 * time.Millisecond})
	_, id := h.newModel()
	for _, bad := range []string{"999", "abc", "01", "-1"} {
		status, b := h.do(http.MethodPost, tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: bad})
		expectDetail(t, status, b, http.StatusNotFound, "Future not found")
	}
	status, b := h.do(http.MethodPost, tinker.PathRetrieveFuture, `{}`)
	expectDetail(t, status, b, http.StatusBadRequest, "request_id is missing")

	bl := block(h.srv)
	step := tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}
	f := h.submit(tinker.PathOptimStep, step)
	bl.waitEntered(t, "optim_step")
	start := time.Now()
	status, b = h.do(http.MethodPost, tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: f.RequestID})
	expectDetail(t, status, b, http.StatusRequestTimeout, "Timeout waiting for result")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("408 after %v, before the poll timeout", d)
	}
	bl.unblock(h.srv)
	var out tinker.OptimStepResponse
	strict(t, h.wait(f.RequestID), &out)
	strict(t, h.wait(f.RequestID), &out) // again, as a client's retry
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, b = h.do(http.MethodPost, tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: f.RequestID})
		if status != http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	expectDetail(t, status, b, http.StatusGone, "the result of request "+f.RequestID+" is no longer kept")
}

// TestSeqID checks a repeated (model_id, seq_id) answers with the call
// already recorded and does not run it again, and a reused one for
// another request is refused.
func TestSeqID(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	seq := int64(7)
	step := tinker.OptimStepRequest{ModelID: id, SeqID: &seq, AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, Type: "optim_step"}
	a := h.submit(tinker.PathOptimStep, step)
	b := h.submit(tinker.PathOptimStep, step)
	if a.RequestID != b.RequestID {
		t.Errorf("a retried call got request %s, then %s", a.RequestID, b.RequestID)
	}
	h.wait(a.RequestID)
	c := h.submit(tinker.PathOptimStep, step)
	if c.RequestID != a.RequestID {
		t.Errorf("a retry after the result got request %s, want %s", c.RequestID, a.RequestID)
	}
	h.srv.mu.Lock()
	_, _, steps := h.srv.models[id].learner.Opt.State()
	h.srv.mu.Unlock()
	if steps != 1 {
		t.Errorf("%d optimizer steps, want 1", steps)
	}
	other := step
	other.AdamParams.LearningRate = 1
	status, body := h.do(http.MethodPost, tinker.PathOptimStep, other)
	expectDetail(t, status, body, http.StatusConflict, "seq_id 7 of model "+id+" was already used by another request")
	status, body = h.do(http.MethodPost, tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "x", SeqID: &seq})
	expectDetail(t, status, body, http.StatusConflict, "seq_id 7")
	// A failed call holds its seq_id too.
	bad := int64(8)
	f := h.submit(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "../x", SeqID: &bad})
	if g := h.submit(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "../x", SeqID: &bad}); g.RequestID != f.RequestID {
		t.Errorf("a retried failed call got request %s, then %s", f.RequestID, g.RequestID)
	}
}

// TestMalformedRequests sends bodies that are not the call's JSON: each
// gets an HTTP error naming what is wrong.
func TestMalformedRequests(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	for _, tc := range []struct {
		method, path string
		body         string
		header       []string
		status       int
		want         string
	}{
		{"POST", tinker.PathForwardBackward, `{"model_id": "` + id + `", "forward_backward_input": {"data": [{"model_input": {"chunks": [{"tokens": "abc"}]}}]}}`, nil,
			400, "field forward_backward_input.data.model_input.chunks.tokens: a JSON string is not a []int32"},
		{"POST", tinker.PathForwardBackward, `{"model_id": "` + id + `", "forward_backward_input": {"data": [{"model_input": {"chunks": [{"tokens": [1.5]}]}}]}}`, nil,
			400, "field forward_backward_input.data.model_input.chunks.tokens: a JSON number 1.5 is not a int32"},
		{"POST", tinker.PathForwardBackward, `{"model_id": "` + id + `", "forward_backward_input": {"data": [{"model_input": {"chunks": [{"tokens": [99999999999]}]}}]}}`, nil,
			400, "is not a int32"},
		{"POST", tinker.PathOptimStep, `{"model_id": 3}`, nil, 400, "field model_id: a JSON number is not a string"},
		{"POST", tinker.PathCreateSession, `{"tags": ["x"]`, nil, 400, "ends early"},
		{"POST", tinker.PathCreateSession, `{"tags": ["x"]}}`, nil, 400, "data after the JSON object"},
		{"POST", tinker.PathCreateSession, `{tags: 1}`, nil, 400, "malformed JSON at byte 2"},
		{"POST", tinker.PathCreateSession, `[1, 2]`, nil, 400, "a JSON array, not an object"},
		{"POST", tinker.PathCreateSession, ``, nil, 400, "the body is empty"},
		{"POST", tinker.PathSample, `null`, nil, 400, "name exactly one of model_path and base_model"},
		{"POST", tinker.PathForwardBackward, `{}`, nil, 400, "model_id is missing"},
		{"POST", tinker.PathForwardBackward, `{"model_id": "model_nothing"}`, nil, 404, "model model_nothing not found"},
		{"POST", tinker.PathForwardBackward, "\x0a\x05abc", []string{"Content-Type", "application/x-protobuf"}, 400, "not a ForwardBackwardRequest"},
		{"POST", tinker.PathOptimStep, "\x0a\x03abc", []string{"Content-Type", "application/x-protobuf"}, 415, "reads JSON only"},
		{"POST", tinker.PathForwardBackward, "\x28\xb5\x2f\xfd junk", []string{"Content-Type", "application/x-protobuf", "Content-Encoding", "zstd"}, 400, "not valid zstd"},
		// 16 bytes whose frame header declares more than the 64 MiB limit.
		{"POST", tinker.PathForwardBackward, "\x28\xb5\x2f\xfd\x17\xbf\x12\x21\x5d\x6c\x80\x46\x6c\x7c\x2a\xe4", []string{"Content-Type", "application/x-protobuf", "Content-Encoding", "zstd"},
			400, "the body is not valid zstd (Content-Encoding: zstd): its frame header"},
		{"POST", tinker.PathForwardBackward, `{}`, []string{"Content-Encoding", "br"}, 415, `Content-Encoding "br" is not read`},
		{"GET", tinker.PathForwardBackward, ``, nil, 405, "takes POST"},
		{"POST", tinker.PathHealthz, ``, nil, 405, "takes GET"},
		{"POST", "/api/v1/unload_model", `{}`, nil, 400, "model_id is missing"},
		{"POST", "/api/v1/weights_info", `{}`, nil, 400, `weights_info: tinker_path "" is not a checkpoint's path`},
		{"POST", "/api/v1/weights_info", `{"tinker_path": "tinker://model_1/weights/none"}`, nil, 404, "weights_info: no checkpoint tinker://model_1/weights/none"},
		{"POST", "/api/v1/create_custom_loss", `{}`, nil, 400, "create_custom_loss: custom_loss_seq_id is missing"},
		{"POST", "/api/v1/create_custom_loss", `{"custom_loss_seq_id": 0}`, nil, 400, "create_custom_loss: graph.format is 0; this server reads format 1"},
		{"POST", "/api/v1/create_custom_loss", `{"custom_loss_seq_id": 0, "graph": {"format": 1}, "inputs": [{"name": "logprobs", "rank": 1}]}`, nil, 400, "create_custom_loss: graph.nodes: no output node"},
		{"POST", "/api/v1/create_custom_loss", `{"custom_loss_seq_id": 0, "graph": {"format": 1, "nodes": [{"op": "output", "name": "o", "args": [{"tuple": [1, {"dict": {}}]}]}]}, "inputs": [{"name": "logprobs", "rank": 1}]}`, nil, 400, "graph.nodes[0] (o): the loss is not a node"},
		{"POST", "/api/v1/create_custom_loss", `{"custom_loss_seq_id": 0, "graph": {"format": 1, "nodes": [{"op": "placeholder", "name": "logprobs", "target": "logprobs"}, {"op": "output", "name": "o", "args": [{"tuple": [{"ref": "logprobs"}, {"dict": {}}]}]}]}, "inputs": [{"name": "logprobs", "rank": 1}], "session_id": "s"}`, nil, 404, "create_custom_loss: session s not found"},
		{"GET", "/api/v1/auth/apikey/me", ``, nil, 404, "auth (auth/apikey/me) is not offered by this server (rlvr serve --tinker): the API key is fixed"},
		{"POST", "/api/v1/sessions/search", `{}`, nil, 404, "sessions/search is not offered by this server (rlvr serve --tinker): searching"},
		{"PUT", "/api/v1/sessions/s/project", `{}`, nil, 404, "sessions/<id>/project is not offered by this server (rlvr serve --tinker): this server keeps no projects"},
		{"GET", "/api/v1/sessions/s/trace_export", ``, nil, 404, "sessions/<id>/trace_export is not offered by this server (rlvr serve --tinker): this server keeps no traces"},
		{"GET", "/api/v1/sessions/none", ``, nil, 404, "session none not found"},
		{"GET", "/api/v1/training_runs?limit=0", ``, nil, 400, `limit is "0", want a whole number from 1`},
		{"GET", "/api/v1/training_runs?offset=x", ``, nil, 400, `offset is "x"`},
		{"GET", "/api/v1/checkpoints?access_scope=all", ``, nil, 400, `access_scope is "all", want owned or accessible`},
		{"GET", "/api/v1/training_runs?project_id=p", ``, nil, 400, "project_id: this server keeps no projects"},
		{"GET", "/api/v1/training_runs/model_1/checkpoints", ``, nil, 404, "no training run model_1"},
		{"GET", "/api/v1/training_runs/model_1/publish", ``, nil, 404, "training_runs (model_1/publish) is not offered"},
		{"GET", "/api/v1/training_runs/../x/checkpoints", ``, nil, 404, "names no training run"},
		{"GET", "/api/v1/training_runs/" + id + "/checkpoints/external_weights/none/external_weights_urls", ``, nil, 404, "no weights are exported at tinker://" + id + "/external_weights/none"},
		{"GET", tinker.PathFiles + "0123/adapter_config.json", ``, nil, 404, "no such download"},
		{"GET", tinker.PathTelemetry, ``, nil, 405, "takes POST"},
		{"POST", tinker.PathSample, `{"sampling_session_id": "s", "prompt": {"chunks": []}, "sampling_params": {}}`, nil, 404, "sampling session s not found"},
		{"POST", tinker.PathSample, `{"base_model": "tiny", "record_stability_info": true, "prompt": {"chunks": []}, "sampling_params": {}}`, nil, 400, "record_stability_info is not supported"},
		{"GET", tinker.PathSamplers + "sampler_none", ``, nil, 404, "sampling session sampler_none not found"},
		{"POST", tinker.PathSample, `{"base_model": "tiny", "topk_prompt_logprobs": 5, "prompt": {"chunks": []}, "sampling_params": {}}`, nil, 400, "topk_prompt_logprobs is not supported"},
	} {
		status, b := h.do(tc.method, tc.path, tc.body, tc.header...)
		expectDetail(t, status, b, tc.status, tc.want)
	}
}

// TestClose stops the server with a call running and one queued: the
// running one finishes, the queued one fails, later submissions get 503.
func TestClose(t *testing.T) {
	srv, err := New(Config{Models: map[string]string{testBase: testModelDir(t)}, StateDir: t.TempDir(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	h := &harness{t: t, srv: srv, url: hs.URL}
	_, id := h.newModel()
	bl := block(srv)
	step := tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}
	running := h.submit(tinker.PathOptimStep, step)
	bl.waitEntered(t, "optim_step")
	queued := h.submit(tinker.PathOptimStep, step)
	sampled := h.submit(tinker.PathSample, sampleCases[0].wire("", testBase))
	bl.waitEntered(t, "asample")
	sampleQueued := h.submit(tinker.PathSample, sampleCases[1].wire("", testBase))
	closed := make(chan error)
	go func() { closed <- srv.Close() }()
	time.Sleep(20 * time.Millisecond)
	bl.unblock(srv)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	var out tinker.OptimStepResponse
	strict(t, h.wait(running.RequestID), &out)
	for _, f := range []tinker.Future{queued, sampled, sampleQueued} {
		var rf tinker.RequestFailed
		strict(t, h.wait(f.RequestID), &rf)
		if rf.Category != "server" || !strings.Contains(rf.Message, "shutting down") && !strings.Contains(rf.Message, "context canceled") {
			t.Errorf("call %s after Close: %+v", f.RequestID, rf)
		}
	}
	status, b := h.do(http.MethodPost, tinker.PathOptimStep, step)
	expectDetail(t, status, b, http.StatusServiceUnavailable, "shutting down")
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNewRefuses checks New's own errors.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{StateDir: dir}, "no models"},
		{Config{Models: map[string]string{"m": testModelDir(t)}}, "no state directory"},
		{Config{Models: map[string]string{"m": filepath.Join(dir, "nothing")}, StateDir: dir}, "model m"},
		{Config{Models: map[string]string{"": testModelDir(t)}, StateDir: dir}, "has no name"},
		{Config{Models: map[string]string{"m": testModelDir(t)}, StateDir: filepath.Join(file, "x")}, "state directory"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

// TestTelemetryDropped sends a batch of the SDK's telemetry: it is taken,
// as the SDK expects, and kept nowhere.
func TestTelemetryDropped(t *testing.T) {
	h := newHarness(t, Config{})
	status, b := h.do("POST", tinker.PathTelemetry, `{"events": [{"event": "SESSION_START"}], "session_id": "s", "platform": "linux", "sdk_version": "0.38.0"}`)
	if status != 200 || strings.TrimSpace(string(b)) != `{"status":"accepted"}` {
		t.Fatalf("telemetry: %d %s", status, b)
	}
}
