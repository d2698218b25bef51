package tinkerserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"rlvr/api/tinker"
	"rlvr/api/tinker/tinkerpb"
)

// The official SDK's side of the wire, built from the generated protobuf
// types: forward_backward in protobuf (zstd compressed, as client/config
// asks), results asked for with Accept: application/x-protobuf, sampling
// through sampling sessions.

// protoDatum is one datum in the SDK's protobuf form: tokens as int32
// bytes, targets as int64, floats as float32.
func protoDatum(tokens, targets []int32, floats map[string][]float32) *tinkerpb.Datum {
	var tok, tgt []byte
	for _, x := range tokens {
		tok = binary.LittleEndian.AppendUint32(tok, uint32(x))
	}
	for _, x := range targets {
		tgt = binary.LittleEndian.AppendUint64(tgt, uint64(x))
	}
	d := &tinkerpb.Datum{
		ModelInput: []*tinkerpb.Chunk{{Chunk: &tinkerpb.Chunk_EncodedText{EncodedText: &tinkerpb.EncodedTextChunk{Tokens: tok}}}},
		LossFnInputs: map[string]*tinkerpb.Tensor{
			"target_tokens": {Encoding: &tinkerpb.Tensor_Dense{Dense: tgt}, Dtype: tinkerpb.DType_DTYPE_INT64, Shape: []int64{int64(len(targets))}},
		},
	}
	for k, xs := range floats {
		var b []byte
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		d.LossFnInputs[k] = &tinkerpb.Tensor{Encoding: &tinkerpb.Tensor_Dense{Dense: b}, Dtype: tinkerpb.DType_DTYPE_FLOAT32, Shape: []int64{int64(len(xs))}}
	}
	return d
}

// jsonDatum is the same datum in JSON.
func jsonDatum(tokens, targets []int32, floats map[string][]float32) tinker.Datum {
	d := tinker.Datum{ModelInput: tinker.Text(tokens), LossFnInputs: map[string]tinker.TensorData{"target_tokens": tinker.Ints(targets)}}
	for k, xs := range floats {
		d.LossFnInputs[k] = tinker.Floats(xs)
	}
	return d
}

// sdkPost sends a protobuf body as the SDK does, zstd compressed when
// compress is set, and returns the status and answer.
func (h *harness) sdkPost(path string, m proto.Message, compress bool) (int, []byte) {
	h.t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		h.t.Fatal(err)
	}
	header := []string{"Content-Type", tinker.ContentTypeProtobuf}
	if compress {
		enc, _ := zstd.NewWriter(nil)
		b = enc.EncodeAll(b, nil)
		enc.Close()
		header = append(header, "Content-Encoding", "zstd")
	}
	return h.do(http.MethodPost, path, b, header...)
}

// waitProto retrieves a future as the SDK does, accepting protobuf, and
// returns the body with whether it came as protobuf.
func (h *harness) waitProto(id string) ([]byte, bool) {
	h.t.Helper()
	for {
		req, _ := json.Marshal(tinker.RetrieveFutureRequest{RequestID: id})
		hr, err := http.NewRequest(http.MethodPost, h.url+tinker.PathRetrieveFuture, bytes.NewReader(req))
		if err != nil {
			h.t.Fatal(err)
		}
		hr.Header.Set("Content-Type", tinker.ContentTypeJSON)
		hr.Header.Set("Accept", tinker.ContentTypeProtobuf)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			h.t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusRequestTimeout:
			continue
		case http.StatusOK:
			return buf.Bytes(), resp.Header.Get("Content-Type") == tinker.ContentTypeProtobuf
		}
		h.t.Fatalf("retrieve_future %s: status %d: %s", id, resp.StatusCode, buf.Bytes())
	}
}

// fbOutput reads a protobuf forward_backward result into per-datum
// values by output name, as the SDK slices it.
func fbOutput(t *testing.T, b []byte) (map[string][][]float32, map[string]float64) {
	t.Helper()
	var m tinkerpb.ForwardBackwardOutput
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatalf("the result is not a ForwardBackwardOutput: %v", err)
	}
	out := map[string][][]float32{}
	for _, rec := range m.LossFnOutputs {
		for name, bt := range rec.Fields {
			for i := 0; i+1 < len(bt.Offsets)/8; i++ {
				lo, hi := binary.LittleEndian.Uint64(bt.Offsets[8*i:]), binary.LittleEndian.Uint64(bt.Offsets[8*i+8:])
				var v []float32
				for k := lo; k < hi; k += 4 {
					v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(bt.Data[k:])))
				}
				out[name] = append(out[name], v)
			}
		}
	}
	return out, m.Metrics
}

// TestSDKForwardBackward sends the same data as JSON (rlvr's client) and as
// the SDK's compressed protobuf to two models of the same base: both
// answer the same logprobs, losses and loss:sum, the protobuf one in
// protobuf; forward_only is the forward call; and the two models'
// optimizer steps then agree.
func TestSDKForwardBackward(t *testing.T) {
	h := newHarness(t, Config{})
	_, jsonModel := h.newModel()
	_, protoModel := h.newModel()
	tokens, targets := []int32{72, 105, 33, 10}, []int32{105, 33, 10, 72}
	floats := map[string][]float32{
		"weights":    {0, 1, 1, 1},
		"logprobs":   {0, -5.5, -5.6, -5.4},
		"advantages": {0, 1, -0.5, 2},
	}
	for _, fn := range []string{tinker.CrossEntropy, tinker.ImportanceSampling, tinker.PPO, tinker.CISPO, tinker.DRO} {
		t.Run(fn, func(t *testing.T) {
			in := floats
			if fn == tinker.CrossEntropy {
				in = map[string][]float32{"weights": floats["weights"]}
			}
			var cfg map[string]float64
			v2 := map[string]*tinkerpb.LossConfigValue{}
			if fn == tinker.DRO {
				cfg = map[string]float64{tinker.Beta: 0.1}
				v2[tinker.Beta] = &tinkerpb.LossConfigValue{Value: &tinkerpb.LossConfigValue_Number{Number: 0.1}}
			}
			var want tinker.ForwardBackwardOutput
			h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: jsonModel,
				Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{jsonDatum(tokens, targets, in)}, LossFn: fn, LossFnConfig: cfg}}, &want)

			for _, forwardOnly := range []bool{true, false} {
				status, b := h.sdkPost(tinker.PathForwardBackward, &tinkerpb.ForwardBackwardRequest{
					ModelId: protoModel, LossFn: fn, LossFnConfigV2: v2, ForwardOnly: forwardOnly,
					Data: []*tinkerpb.Datum{protoDatum(tokens, targets, in)},
				}, true)
				if status != http.StatusOK {
					t.Fatalf("forward_only %v: status %d: %s", forwardOnly, status, b)
				}
				var f tinker.Future
				strict(t, b, &f)
				res, isProto := h.waitProto(f.RequestID)
				if !isProto {
					t.Fatalf("forward_only %v: the result came as %s", forwardOnly, res)
				}
				got, metrics := fbOutput(t, res)
				// A forward pass sums the float32 per-token losses, a backward
				// pass its own float64 terms: they agree to float32's precision.
				if d := metrics["loss:sum"] - want.Metrics["loss:sum"]; math.Abs(d) > 1e-6*math.Max(1, math.Abs(want.Metrics["loss:sum"])) {
					t.Errorf("forward_only %v: loss:sum %v, JSON's %v", forwardOnly, metrics["loss:sum"], want.Metrics["loss:sum"])
				}
				for _, name := range []string{"logprobs", "elementwise_loss"} {
					w := want.LossFnOutputs[0][name].Data
					if len(got[name]) != 1 || len(got[name][0]) != len(w) {
						t.Fatalf("forward_only %v: %s is %v, JSON's %v", forwardOnly, name, got[name], w)
					}
					for j := range w {
						if float32(w[j]) != got[name][0][j] {
							t.Errorf("forward_only %v: %s[%d] is %v, JSON's %v", forwardOnly, name, j, got[name][0][j], w[j])
						}
					}
				}
			}
		})
	}
	// Both models accumulated the same gradients (the forward-only calls
	// added none): their steps agree.
	var a, b tinker.OptimStepResponse
	adam := tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-12}
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: jsonModel, AdamParams: adam}, &a)
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: protoModel, AdamParams: adam}, &b)
	if a.Metrics["grad_norm"] != b.Metrics["grad_norm"] || a.Metrics["grad_norm"] == 0 {
		t.Fatalf("grad norms %v (JSON) and %v (protobuf)", a.Metrics, b.Metrics)
	}
}

// TestSDKBadBodies checks that what the server cannot read is an error
// naming the field, at once (400 or 413) or as the call's failure.
func TestSDKBadBodies(t *testing.T) {
	h := newHarness(t, Config{MaxBodyBytes: 1 << 16})
	_, id := h.newModel()
	good := func() *tinkerpb.ForwardBackwardRequest {
		return &tinkerpb.ForwardBackwardRequest{ModelId: id, LossFn: tinker.CrossEntropy,
			Data: []*tinkerpb.Datum{protoDatum([]int32{1, 2}, []int32{2, 3}, map[string][]float32{"weights": {1, 1}})}}
	}
	m := good()
	m.Data[0].LossFnInputs["weights"].Encoding = &tinkerpb.Tensor_Dense{Dense: []byte{1, 2, 3}}
	status, b := h.sdkPost(tinker.PathForwardBackward, m, true)
	expectDetail(t, status, b, http.StatusBadRequest, "data[0].loss_fn_inputs[weights].dense: 3 bytes are not a whole number of 4-byte float32 values")

	// A small zstd body that expands beyond the limit.
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(make([]byte, 1<<20), nil)
	status, b = h.do(http.MethodPost, tinker.PathForwardBackward, bomb, "Content-Type", tinker.ContentTypeProtobuf, "Content-Encoding", "zstd")
	expectDetail(t, status, b, http.StatusRequestEntityTooLarge, "larger than the server's limit of 65536 bytes")

	// Text in loss_fn_config_v2, and losses the server does not offer,
	// fail the call with a user error the SDK raises as RequestFailedError.
	for _, tc := range []struct {
		change func(m *tinkerpb.ForwardBackwardRequest)
		want   string
	}{
		{func(m *tinkerpb.ForwardBackwardRequest) {
			m.LossFnConfigV2 = map[string]*tinkerpb.LossConfigValue{"mode": {Value: &tinkerpb.LossConfigValue_Text{Text: "seq"}}}
		}, `loss_fn_config_v2: mode is text ("seq"); loss_fn cross_entropy takes numbers only`},
		{func(m *tinkerpb.ForwardBackwardRequest) { m.LossFn = "stable_reinforce" }, "loss_fn stable_reinforce is not supported here"},
		{func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].ModelInput = append(m.Data[0].ModelInput, &tinkerpb.Chunk{Chunk: &tinkerpb.Chunk_Image{Image: &tinkerpb.ImageChunk{Data: []byte{1}}}})
		}, `data[0]: model_input.chunks[1]: type "image" is not encoded_text`},
	} {
		m := good()
		tc.change(m)
		status, b := h.sdkPost(tinker.PathForwardBackward, m, false)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		var f tinker.Future
		strict(t, b, &f)
		res, isProto := h.waitProto(f.RequestID)
		var rf tinker.RequestFailed
		strict(t, res, &rf)
		if isProto || rf.Category != "user" || !strings.Contains(rf.Message, tc.want) {
			t.Errorf("failure %s (protobuf %v), want a user error with %q", res, isProto, tc.want)
		}
	}
}

// TestSDKSampling follows the SDK's sampling client: create_model as a
// future, get_info, a sampling session for the base model and one made by
// an unnamed save_weights_for_sampler, GET samplers/<id>, asample through
// the session with one sequence id per sample, the result in protobuf
// equal to its JSON form.
func TestSDKSampling(t *testing.T) {
	h := newHarness(t, Config{})
	sess := h.session()
	var cm tinker.CreateModelResponse
	strict(t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sess, BaseModel: testBase}), &cm)
	var res tinker.CreateModelResponse
	strict(t, h.wait(cm.RequestID), &res)
	if res.ModelID != cm.ModelID {
		t.Fatalf("create_model's future holds %+v, want model %s", res, cm.ModelID)
	}
	var info modelInfo
	strict(t, h.post(tinker.PathGetInfo, map[string]string{"model_id": cm.ModelID}), &info)
	if info.ModelID != cm.ModelID || info.ModelData.TokenizerID != testModelDir(t) || info.IsLoRA {
		t.Fatalf("get_info %+v", info)
	}

	var base struct {
		Type string `json:"type"`
		ID   string `json:"sampling_session_id"`
	}
	strict(t, h.post(tinker.PathCreateSamplingSession, map[string]any{"session_id": sess, "sampling_session_seq_id": 0, "base_model": testBase}), &base)
	var saved struct {
		Path string `json:"path"`
		Type string `json:"type"`
		ID   string `json:"sampling_session_id"`
	}
	h.call(tinker.PathSaveForSampler, map[string]any{"model_id": cm.ModelID, "seq_id": 1, "sampling_session_seq_id": 1, "kind": "snapshot"}, &saved)
	if saved.ID == "" || saved.ID == base.ID || !strings.HasPrefix(saved.Path, "tinker://"+cm.ModelID+"/sampler_weights/") {
		t.Fatalf("save_weights_for_sampler answered %+v", saved)
	}
	var sampler samplerResponse
	strict(t, h.get(tinker.PathSamplers+saved.ID), &sampler)
	if sampler != (samplerResponse{SamplerID: saved.ID, BaseModel: testBase, ModelPath: saved.Path}) {
		t.Fatalf("samplers/%s: %+v", saved.ID, sampler)
	}
	// The same seq for other weights is refused.
	status, b := h.do(http.MethodPost, tinker.PathCreateSamplingSession, map[string]any{"session_id": sess, "sampling_session_seq_id": 1, "base_model": testBase})
	expectDetail(t, status, b, http.StatusConflict, "sampling_session_seq_id 1")

	for _, id := range []string{base.ID, saved.ID} {
		var f tinker.Future
		strict(t, h.post(tinker.PathSample, map[string]any{"sampling_session_id": id, "seq_id": 1, "num_samples": 3, "prompt_logprobs": true,
			"prompt": tinker.Text([]int32{72, 105}), "sampling_params": map[string]any{"max_tokens": 5, "seed": 7}}), &f)
		if len(f.SampleSequenceIDs) != 3 {
			t.Fatalf("sample_sequence_ids %v, want 3", f.SampleSequenceIDs)
		}
		pb, isProto := h.waitProto(f.RequestID)
		var js tinker.SampleResponse
		strict(t, h.wait(f.RequestID), &js)
		var m tinkerpb.SampleResponse
		if err := proto.Unmarshal(pb, &m); !isProto || err != nil {
			t.Fatalf("the result is not protobuf (%v): %s", err, pb)
		}
		if len(m.Sequences) != len(js.Sequences) {
			t.Fatalf("%d sequences in protobuf, %d in JSON", len(m.Sequences), len(js.Sequences))
		}
		for i, s := range js.Sequences {
			if string(m.Sequences[i].Tokens) != string(putInt32sForTest(s.Tokens)) {
				t.Errorf("sequence %d: tokens differ", i)
			}
			for k, lp := range s.Logprobs {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(m.Sequences[i].Logprobs[4*k:])); got != float32(lp) {
					t.Errorf("sequence %d: logprob %d is %v, JSON's %v", i, k, got, lp)
				}
			}
		}
		if first := math.Float32frombits(binary.LittleEndian.Uint32(m.PromptLogprobs)); len(m.PromptLogprobs) != 8 || !math.IsNaN(float64(first)) {
			t.Errorf("prompt logprobs % x: want NaN then one value", m.PromptLogprobs)
		}
	}
}

func putInt32sForTest(xs []int32) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// get sends a GET and requires status 200.
func (h *harness) get(path string) []byte {
	h.t.Helper()
	status, b := h.do(http.MethodGet, path, nil)
	if status != http.StatusOK {
		h.t.Fatalf("GET %s: status %d: %s", path, status, b)
	}
	return b
}
