package tinkerserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/api/tinker"
)

// fixtureDir holds the wire fixtures written from SkyRL tx's and the
// Tinker SDK's models.
var fixtureDir = filepath.Join("..", "..", "api", "tinker", "testdata")

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// adapt makes a request fixture valid for the test server: its ids are
// replaced by the server's, its token ids folded into the test model's
// vocabulary, its base model and LoRA rank made the served ones.
func adapt(t testing.TB, name string, ids map[string]string) []byte {
	t.Helper()
	b := readFixture(t, name)
	for from, to := range ids {
		b = bytes.ReplaceAll(b, []byte(from), []byte(to))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	vocab := int64(testModelConfig.Vocab)
	fold := func(x any) any {
		list, ok := x.([]any)
		if !ok {
			return x
		}
		for i, e := range list {
			if n, ok := e.(json.Number); ok {
				if k, err := n.Int64(); err == nil {
					list[i] = k % vocab
				} else if f, err := n.Float64(); err == nil {
					list[i] = int64(f) % vocab
				}
			}
		}
		return list
	}
	var walk func(key string, x any) any
	walk = func(key string, x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "tokens", "stop":
					x[k] = fold(e)
				case "base_model":
					x[k] = testBase
				case "rank":
					x[k] = 0
				case "data":
					if key == "target_tokens" {
						x[k] = fold(e)
						continue
					}
					x[k] = walk(k, e)
				default:
					x[k] = walk(k, e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(key, e)
			}
		}
		return x
	}
	out, err := json.Marshal(walk("", v))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keysWithin checks that every object key of got, at any depth, is also
// in want at the same place: the server sends no field the reference
// bodies lack.
func keysWithin(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s fixture: %v", what, err)
	}
	var check func(path string, g, w any)
	check = func(path string, g, w any) {
		switch g := g.(type) {
		case map[string]any:
			wm, ok := w.(map[string]any)
			if !ok {
				t.Errorf("%s: %s is an object, the fixture's is %T", what, path, w)
				return
			}
			for k, v := range g {
				wv, ok := wm[k]
				if !ok {
					t.Errorf("%s: field %s%s is not in the fixture", what, path, k)
					continue
				}
				check(path+k+".", v, wv)
			}
		case []any:
			wl, ok := w.([]any)
			if !ok || len(wl) == 0 {
				return
			}
			for _, e := range g {
				check(path, e, wl[0])
			}
		}
	}
	check("", g, w)
}

// TestFixtures sends every request fixture, made valid for this server,
// and decodes every answer strictly into the api/tinker types, checking
// it has no field the reference answers lack: the server and the
// fixtures cannot drift apart.
func TestFixtures(t *testing.T) {
	h := newHarness(t, Config{PollTimeout: 100 * time.Millisecond})
	sent := map[string]bool{}
	send := func(name string, ids map[string]string) []byte {
		t.Helper()
		sent[name] = true
		path := "/api/v1/" + strings.TrimSuffix(name, ".request.json")
		return h.post(path, adapt(t, name, ids))
	}
	ids := map[string]string{}

	b := send("create_session.request.json", ids)
	var cs tinker.CreateSessionResponse
	strict(t, b, &cs)
	keysWithin(t, "create_session", b, readFixture(t, "create_session.response.json"))
	ids["session_3f2a9c1d"] = cs.SessionID

	b = send("session_heartbeat.request.json", ids)
	var hb struct {
		Type string `json:"type"`
	}
	strict(t, b, &hb)
	if hb.Type != "session_heartbeat" {
		t.Errorf("heartbeat answered %s", b)
	}

	b = send("create_model.request.json", ids)
	var cm tinker.CreateModelResponse
	strict(t, b, &cm)
	keysWithin(t, "create_model", b, readFixture(t, "create_model.response.json"))
	ids["model_5e1b"] = cm.ModelID

	// Each call: its future, then its result, as retrieve_future's own
	// fixture asks for it.
	result := func(call string, v any) []byte {
		t.Helper()
		b := send(call+".request.json", ids)
		var f tinker.Future
		strict(t, b, &f)
		future := "future.response.json"
		if call == "asample" {
			future = "asample.response.json" // the SDK's future, with sample_sequence_ids
		}
		keysWithin(t, call+" future", b, readFixture(t, future))
		if f.ModelID != cm.ModelID && call != "asample" {
			t.Errorf("%s: future %+v names another model", call, f)
		}
		ids[`"12"`] = `"` + f.RequestID + `"`
		var res []byte
		for {
			status, body := h.do(http.MethodPost, tinker.PathRetrieveFuture, adapt(t, "retrieve_future.request.json", ids))
			if status == http.StatusOK {
				res = body
				break
			}
			if status != http.StatusRequestTimeout {
				t.Fatalf("%s: retrieve_future: %d %s", call, status, body)
			}
		}
		sent["retrieve_future.request.json"] = true
		delete(ids, `"12"`)
		strict(t, res, v)
		keysWithin(t, call+" result", res, readFixture(t, call+".result.json"))
		return res
	}
	var fb tinker.ForwardBackwardOutput
	result("forward_backward", &fb)
	if len(fb.LossFnOutputs) != 1 || len(fb.LossFnOutputs[0]["logprobs"].Data) != 4 {
		t.Errorf("forward_backward: %+v", fb)
	}
	var os tinker.OptimStepResponse
	result("optim_step", &os)
	if _, ok := os.Metrics["grad_norm"]; !ok {
		t.Errorf("optim_step: %+v", os)
	}
	var sfs tinker.SaveWeightsResponse
	result("save_weights_for_sampler", &sfs)
	if want := "tinker://" + cm.ModelID + "/sampler_weights/step-000001"; sfs.Path != want {
		t.Errorf("save_weights_for_sampler: %s, want %s", sfs.Path, want)
	}
	var s tinker.SampleResponse
	result("asample", &s)
	if len(s.Sequences) != 2 {
		t.Errorf("asample: %+v", s)
	}
	var sw tinker.SaveWeightsResponse
	result("save_weights", &sw)
	if want := "tinker://" + cm.ModelID + "/weights/ckpt-000025"; sw.Path != want {
		t.Errorf("save_weights: %s, want %s", sw.Path, want)
	}
	var lw tinker.LoadWeightsResponse
	result("load_weights", &lw)

	// A failure, and a poll that times out.
	bad := tinker.ForwardBackwardRequest{ModelID: cm.ModelID, Input: tinker.ForwardBackwardInput{LossFn: tinker.CrossEntropy, Data: []tinker.Datum{{
		ModelInput: tinker.Text([]int32{1, 2, 3}), LossFnInputs: map[string]tinker.TensorData{"target_tokens": tinker.Ints([]int32{1, 2, 3, 4})}}}}}
	f := h.submit(tinker.PathForwardBackward, bad)
	b = h.wait(f.RequestID)
	var rf tinker.RequestFailed
	strict(t, b, &rf)
	keysWithin(t, "request_failed", b, readFixture(t, "request_failed.result.json"))
	if ready, err := tinker.Result(b, &fb); !ready || err == nil || !strings.Contains(err.Error(), "(user): forward_backward: data[0]: loss_fn_inputs.target_tokens has 4 values, model_input 3") {
		t.Errorf("failure read as %v %v", ready, err)
	}
	bl := block(h.srv)
	f = h.submit(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: cm.ModelID, AdamParams: tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}})
	bl.waitEntered(t, "optim_step")
	status, b := h.do(http.MethodPost, tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: f.RequestID})
	expectDetail(t, status, b, http.StatusRequestTimeout, "Timeout waiting for result")
	keysWithin(t, "timeout", b, readFixture(t, "timeout.408.json"))
	if !bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(readFixture(t, "timeout.408.json"))) {
		var a, w any
		json.Unmarshal(b, &a)
		json.Unmarshal(readFixture(t, "timeout.408.json"), &w)
		if a.(map[string]any)["detail"] != w.(map[string]any)["detail"] {
			t.Errorf("408 body %s, fixture %s", b, readFixture(t, "timeout.408.json"))
		}
	}
	bl.unblock(h.srv)
	h.wait(f.RequestID)

	// Last, as it ends the model: SkyRL's unload_model.
	b = send("unload_model.request.json", ids)
	var um tinker.UnloadModelResponse
	strict(t, b, &um)
	keysWithin(t, "unload_model", b, readFixture(t, "unload_model.response.json"))
	ids[`"12"`] = `"` + um.RequestID + `"`
	b = h.wait(um.RequestID)
	strict(t, b, &um)
	keysWithin(t, "unload_model result", b, readFixture(t, "unload_model.result.json"))
	if um.ModelID != cm.ModelID || um.Status != "unloaded" {
		t.Errorf("unload_model: %s", b)
	}

	names, err := filepath.Glob(filepath.Join(fixtureDir, "*.request.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !sent[filepath.Base(n)] {
			t.Errorf("fixture %s was not sent", filepath.Base(n))
		}
	}
}
