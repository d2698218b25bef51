package tinkerserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"rlvr/api/tinker"
)

// promptLPs samples one token through a sampling session (or from a
// copy's path) with the prompt's logprobs, which say which weights it
// sampled from.
func (h *harness) promptLPs(sessionID, path string) []float64 {
	h.t.Helper()
	body := map[string]any{"prompt": tinker.Text([]int32{256, 72, 105, 33}), "prompt_logprobs": true,
		"sampling_params": map[string]any{"max_tokens": 1, "seed": 1}}
	if sessionID != "" {
		body["sampling_session_id"] = sessionID
	} else {
		body["model_path"] = path
	}
	var res tinker.SampleResponse
	h.call(tinker.PathSample, body, &res)
	var out []float64
	for _, p := range res.PromptLogprobs[1:] {
		out = append(out, *p)
	}
	return out
}

// TestInflight checks kind inflight saves: each answers a new sampling
// session; every inflight session of the model samples the weights of
// the newest inflight save (the same as a snapshot saved beside it),
// older sessions included; a retry finds its session; what an inflight
// save cannot take is refused naming the field.
func TestInflight(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	seq := int64(0)
	next := func() *int64 { seq++; s := seq; return &s }
	inflight := func(ssSeq int64, seqID *int64) string {
		var out struct {
			Path string `json:"path"`
			Type string `json:"type"`
			ID   string `json:"sampling_session_id"`
		}
		h.call(tinker.PathSaveForSampler, map[string]any{"model_id": id, "seq_id": seqID, "sampling_session_seq_id": ssSeq, "kind": "inflight"}, &out)
		if out.ID == "" {
			t.Fatalf("an inflight save answered no sampling session")
		}
		return out.ID
	}
	snapshot := func(name string) string {
		var out tinker.SaveWeightsResponse
		h.call(tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: id, Path: name, SeqID: next()}, &out)
		return out.Path
	}
	train := func() {
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, SeqID: next(),
			Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{sft([]int32{256, 72, 105, 33, 10})}, LossFn: tinker.CrossEntropy}}, &out)
		var step tinker.OptimStepResponse
		h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, SeqID: next(), AdamParams: tinker.AdamParams{LearningRate: 0.05, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}, &step)
	}
	firstSeq := next()
	first := inflight(100, firstSeq)
	w1 := snapshot("w1")
	if got, want := h.promptLPs(first, ""), h.promptLPs("", w1); !slices.Equal(got, want) {
		t.Fatalf("the first inflight session samples %v, the weights saved beside it %v", got, want)
	}
	train()
	second := inflight(101, next())
	w2 := snapshot("w2")
	if second == first {
		t.Fatalf("a second inflight save answered the first one's session")
	}
	want := h.promptLPs("", w2)
	if slices.Equal(want, h.promptLPs("", w1)) {
		t.Fatalf("training changed nothing the test can see")
	}
	for name, ss := range map[string]string{"first": first, "second": second} {
		if got := h.promptLPs(ss, ""); !slices.Equal(got, want) {
			t.Errorf("the %s inflight session samples %v, the newest inflight weights %v", name, got, want)
		}
	}
	// A retry of the first save (same seq_id, same body) answers its result.
	if again := inflight(100, firstSeq); again != first {
		t.Errorf("a retried inflight save answered session %s, not %s", again, first)
	}
	var sampler samplerResponse
	strict(t, h.get(tinker.PathSamplers+first), &sampler)
	if sampler != (samplerResponse{SamplerID: first, BaseModel: testBase}) {
		t.Errorf("samplers/%s: %+v", first, sampler)
	}
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"path": "x", "sampling_session_seq_id": 7}, `kind inflight publishes the model's shared weights, which have no name: path "x"`},
		{map[string]any{"ttl_seconds": 3600, "sampling_session_seq_id": 7}, "which have no TTL: ttl_seconds is not taken"},
		{map[string]any{}, "kind inflight needs sampling_session_seq_id"},
		{map[string]any{"kind": "live", "sampling_session_seq_id": 7}, `kind "live" is not snapshot or inflight`},
	} {
		tc.body["model_id"] = id
		if _, ok := tc.body["kind"]; !ok {
			tc.body["kind"] = "inflight"
		}
		if f := h.failure(tinker.PathSaveForSampler, tc.body); f.Category != "user" || !strings.Contains(f.Message, tc.want) {
			t.Errorf("failure %+v, want %q", f, tc.want)
		}
	}
}

type futuresAnswer struct {
	Completions []futureCompletion `json:"completions"`
	Cursor      int64              `json:"cursor"`
}

// TestRetrieveFutures follows the SDK's sampling poller: completions of a
// sampling session's requests, per clone (seq_id / 10⁹), with a cursor
// that drops what was seen; a failed call reported as failed; a poll with
// nothing new waiting until a completion wakes it, or answering at once
// with timeout 0; join_sampling_session's clone numbers; and bad polls
// refused naming the field.
func TestRetrieveFutures(t *testing.T) {
	h := newHarness(t, Config{})
	sess := h.session()
	var ss struct {
		Type string `json:"type"`
		ID   string `json:"sampling_session_id"`
	}
	strict(t, h.post(tinker.PathCreateSamplingSession, map[string]any{"session_id": sess, "sampling_session_seq_id": 0, "base_model": testBase}), &ss)
	poll := func(clone, cursor int64, timeout float64, retrieved ...string) futuresAnswer {
		t.Helper()
		var a futuresAnswer
		strict(t, h.post(tinker.PathRetrieveFutures, map[string]any{"target": map[string]any{"type": "sampling_session", "sampling_session_id": ss.ID, "cloned_sampler_id": clone},
			"prev_cursor": cursor, "timeout": timeout, "retrieved_request_ids": retrieved}), &a)
		return a
	}
	sampleReq := func(seq int64, maxTokens int) map[string]any {
		return map[string]any{"sampling_session_id": ss.ID, "seq_id": seq, "prompt": tinker.Text([]int32{256, 72}),
			"sampling_params": map[string]any{"max_tokens": maxTokens, "seed": seq}}
	}

	// Held at the sampling worker, a request has not completed: a poll
	// with timeout 0 answers nothing at once, and a long poll waits
	// until the request completes.
	bl := block(h.srv)
	a := h.submit(tinker.PathSample, sampleReq(1, 3))
	bl.waitEntered(t, "asample")
	if got := poll(0, 0, 0); len(got.Completions) != 0 || got.Cursor != 0 {
		t.Fatalf("a poll before any completion answered %+v", got)
	}
	woken := make(chan futuresAnswer)
	go func() {
		var got futuresAnswer
		defer func() { woken <- got }()
		b, _ := json.Marshal(map[string]any{"target": map[string]any{"sampling_session_id": ss.ID}, "prev_cursor": 0, "timeout": 60})
		resp, err := http.Post(h.url+tinker.PathRetrieveFutures, "application/json", bytes.NewReader(b))
		if err != nil {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			json.NewDecoder(resp.Body).Decode(&got)
		}
	}()
	bl.unblock(h.srv)
	got := <-woken
	if len(got.Completions) != 1 || got.Completions[0] != (futureCompletion{"finished", a.RequestID}) || got.Cursor != 1 {
		t.Fatalf("the long poll answered %+v, want request %s finished at cursor 1", got, a.RequestID)
	}

	// Clone 0's second request and a failed one; clone 3's own.
	b := h.submit(tinker.PathSample, sampleReq(2, 3))
	bad := h.submit(tinker.PathSample, sampleReq(3, 0))
	c := h.submit(tinker.PathSample, sampleReq(3*cloneSeqSpan+1, 2))
	h.wait(b.RequestID)
	h.wait(c.RequestID)
	got = poll(0, 1, 10, a.RequestID)
	want := map[futureCompletion]bool{{"finished", b.RequestID}: true, {"failed", bad.RequestID}: true}
	if len(got.Completions) != 2 || !want[got.Completions[0]] || !want[got.Completions[1]] || got.Cursor != 3 {
		t.Fatalf("clone 0 from cursor 1: %+v, want %s finished and %s failed, cursor 3", got, b.RequestID, bad.RequestID)
	}
	if again := poll(0, 3, 0); len(again.Completions) != 0 || again.Cursor != 3 {
		t.Fatalf("clone 0 from cursor 3: %+v, want nothing new at cursor 3", again)
	}
	if other := poll(3, 0, 10); len(other.Completions) != 1 || other.Completions[0].RequestID != c.RequestID || other.Cursor != 1 {
		t.Fatalf("clone 3: %+v, want %s at cursor 1", other, c.RequestID)
	}
	h.srv.mu.Lock()
	retrieved := !h.srv.futures[a.RequestID].retrieved.IsZero()
	h.srv.mu.Unlock()
	if !retrieved {
		t.Errorf("request %s, reported retrieved, is not marked so", a.RequestID)
	}

	for want := int64(1); want <= 2; want++ {
		var j struct {
			Type string `json:"type"`
			N    int64  `json:"client_counter"`
		}
		strict(t, h.post(tinker.PathJoinSamplingSession, map[string]string{"sampling_session_id": ss.ID}), &j)
		if j.N != want {
			t.Errorf("join_sampling_session answered %d, want %d", j.N, want)
		}
	}

	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{tinker.PathRetrieveFutures, `{"prev_cursor": 0}`, 400, "retrieve_futures: target.sampling_session_id is missing"},
		{tinker.PathRetrieveFutures, `{"target": {"type": "model", "sampling_session_id": "x"}}`, 400, `target.type "model" is not sampling_session`},
		{tinker.PathRetrieveFutures, `{"target": {"sampling_session_id": "x"}, "prev_cursor": -1}`, 400, "prev_cursor is -1"},
		{tinker.PathRetrieveFutures, `{"target": {"sampling_session_id": "x"}, "timeout": -2}`, 400, "timeout is -2"},
		{tinker.PathRetrieveFutures, `{"target": {"sampling_session_id": "x"}}`, 404, "retrieve_futures: sampling session x not found"},
		{tinker.PathRetrieveFutures, `{"target": {"sampling_session_id": 5}}`, 400, "field target.sampling_session_id: a JSON number is not a string"},
		{tinker.PathJoinSamplingSession, `{}`, 400, "join_sampling_session: sampling_session_id is missing"},
		{tinker.PathJoinSamplingSession, `{"sampling_session_id": "x"}`, 404, "sampling session x not found"},
	} {
		status, body := h.do(http.MethodPost, tc.path, tc.body)
		expectDetail(t, status, body, tc.status, tc.want)
	}
}
