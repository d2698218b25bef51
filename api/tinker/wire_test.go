package tinker

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRequestFixtures decodes every request fixture strictly (a field the
// type lacks is an error), encodes it again, and checks the two bodies are
// the same JSON: the types carry exactly the fields of the real API's
// requests, under their names.
func TestRequestFixtures(t *testing.T) {
	for name, v := range map[string]any{
		"create_session.request.json":           &CreateSessionRequest{},
		"session_heartbeat.request.json":        &HeartbeatRequest{},
		"create_model.request.json":             &CreateModelRequest{},
		"retrieve_future.request.json":          &RetrieveFutureRequest{},
		"forward_backward.request.json":         &ForwardBackwardRequest{},
		"optim_step.request.json":               &OptimStepRequest{},
		"save_weights_for_sampler.request.json": &SaveWeightsForSamplerRequest{},
		"save_weights.request.json":             &SaveWeightsRequest{},
		"load_weights.request.json":             &LoadWeightsRequest{},
		"asample.request.json":                  &SampleRequest{},
	} {
		t.Run(name, func(t *testing.T) {
			body := fixture(t, name)
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			json.Unmarshal(body, &a)
			json.Unmarshal(again, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("re-encoded\n%s\nwant\n%s", again, body)
			}
		})
	}
}

func TestForwardBackwardFixture(t *testing.T) {
	var req ForwardBackwardRequest
	if err := json.Unmarshal(fixture(t, "forward_backward.request.json"), &req); err != nil {
		t.Fatal(err)
	}
	in := req.Input
	if in.LossFn != PPO || in.LossFnConfig[ClipLowThreshold] != 0.8 || in.LossFnConfig[ClipHighThreshold] != 1.28 || *req.SeqID != 1 {
		t.Fatalf("%+v", req)
	}
	d := in.Data[0]
	toks, err := d.ModelInput.Tokens()
	if err != nil {
		t.Fatal(err)
	}
	targets, err := d.LossFnInputs["target_tokens"].Int32s()
	if err != nil {
		t.Fatal(err)
	}
	weights, err := d.LossFnInputs["weights"].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 4 || targets[3] != 151645 || toks[1] != targets[0] || weights[2] != 1 {
		t.Fatalf("tokens %v targets %v weights %v", toks, targets, weights)
	}
	// What rlvr writes reads back the same.
	mine := Datum{ModelInput: Text(toks), LossFnInputs: map[string]TensorData{"target_tokens": Ints(targets), "weights": Floats(weights),
		"logprobs": d.LossFnInputs["logprobs"], "advantages": d.LossFnInputs["advantages"]}}
	if !reflect.DeepEqual(mine, d) {
		t.Fatalf("built %+v\nread  %+v", mine, d)
	}
}

func TestTensorErrorsNameTheProblem(t *testing.T) {
	for _, tc := range []struct {
		t    TensorData
		ints bool
		want string
	}{
		{TensorData{Data: []float64{1.5}, Dtype: Int64}, true, "data[0] = 1.5 is not a token id"},
		{TensorData{Data: []float64{-1}, Dtype: Int64}, true, "is not a token id"},
		{TensorData{Data: []float64{1, 2}, Dtype: Int64, Shape: []int{3}}, true, "shape [3] does not fit 2 values"},
		{TensorData{Data: []float64{1}, Dtype: Float32, Shape: []int{1, 1}}, false, "only 1-D tensors"},
		{TensorData{Data: []float64{1}, Dtype: "bfloat16"}, false, `dtype "bfloat16"`},
		{TensorData{Data: []float64{1e39}, Dtype: Float32}, false, "is not a finite float32"},
	} {
		var err error
		if tc.ints {
			_, err = tc.t.Int32s()
		} else {
			_, err = tc.t.Float32s()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.t, err, tc.want)
		}
	}
	if _, err := (ModelInput{Chunks: []Chunk{{Type: "image"}}}).Tokens(); err == nil || !strings.Contains(err.Error(), `chunks[0]: type "image"`) {
		t.Errorf("image chunk: %v", err)
	}
}

// TestResults reads each retrieve_future answer as the SDK does.
func TestResults(t *testing.T) {
	var fb ForwardBackwardOutput
	if ready, err := Result(fixture(t, "forward_backward.result.json"), &fb); !ready || err != nil {
		t.Fatalf("forward_backward: %v %v", ready, err)
	}
	lps, err := fb.LossFnOutputs[0]["logprobs"].Float32s()
	if err != nil || len(lps) != 4 || lps[1] != -0.75 || fb.Metrics["loss:sum"] != -1 {
		t.Fatalf("%+v %v", fb, err)
	}
	var s SampleResponse
	if ready, err := Result(fixture(t, "asample.result.json"), &s); !ready || err != nil {
		t.Fatalf("asample: %v %v", ready, err)
	}
	if len(s.Sequences) != 2 || s.Sequences[0].StopReason != StopStop || s.Sequences[1].StopReason != StopLength || s.Sequences[1].Logprobs[1] != -2 {
		t.Fatalf("%+v", s)
	}
	var o OptimStepResponse
	if ready, err := Result(fixture(t, "optim_step.result.json"), &o); !ready || err != nil || o.Metrics["grad_norm"] != 0.75 {
		t.Fatalf("optim_step: %v %v %+v", ready, err, o)
	}
	for _, name := range []string{"save_weights.result.json", "save_weights_for_sampler.result.json"} {
		var w SaveWeightsResponse
		if ready, err := Result(fixture(t, name), &w); !ready || err != nil || !strings.HasPrefix(w.Path, "tinker://model_5e1b/") {
			t.Fatalf("%s: %v %v %+v", name, ready, err, w)
		}
	}
	var m CreateModelResponse
	if err := json.Unmarshal(fixture(t, "create_model.response.json"), &m); err != nil || m.ModelID != "model_5e1b" {
		t.Fatalf("create_model: %v %+v", err, m)
	}
	var f Future
	if err := json.Unmarshal(fixture(t, "future.response.json"), &f); err != nil || f.RequestID != "12" {
		t.Fatalf("future: %v %+v", err, f)
	}
	var cs CreateSessionResponse
	if err := json.Unmarshal(fixture(t, "create_session.response.json"), &cs); err != nil || cs.SessionID != "session_3f2a9c1d" {
		t.Fatalf("create_session: %v %+v", err, cs)
	}
	if ready, err := Result(fixture(t, "try_again.result.json"), &fb); ready || err != nil {
		t.Fatalf("try_again: ready %v, %v", ready, err)
	}
	if ready, err := Result([]byte(`{"status": "complete_metadata", "response_payload_size": 10}`), &fb); ready || err != nil {
		t.Fatalf("metadata only: ready %v, %v", ready, err)
	}
	ready, err := Result(fixture(t, "request_failed.result.json"), &fb)
	var failed *RequestFailed
	if !ready || !errors.As(err, &failed) || failed.Category != "user" || !strings.Contains(err.Error(), "(user): loss_fn_inputs: target_tokens") {
		t.Fatalf("request_failed: %v %v", ready, err)
	}
	var detail ErrorDetail
	if err := json.Unmarshal(fixture(t, "timeout.408.json"), &detail); err != nil || detail.Detail == "" {
		t.Fatalf("408 body: %v %+v", err, detail)
	}
	for _, bad := range []string{`not json`, `{"error": 3}`, `{"sequences": "x"}`} {
		if _, err := Result([]byte(bad), &s); err == nil {
			t.Errorf("%s read without an error", bad)
		}
	}
}

func FuzzResult(f *testing.F) {
	for _, name := range []string{"forward_backward.result.json", "asample.result.json", "try_again.result.json", "request_failed.result.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata", name))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fb ForwardBackwardOutput
		ready, err := Result(body, &fb)
		if err != nil || !ready {
			return
		}
		for _, out := range fb.LossFnOutputs {
			for _, td := range out {
				td.Float32s() // errors, never panics
				td.Int32s()
			}
		}
	})
}
