package tinker

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"rlvr/api/tinker/tinkerpb"
)

// le32 packs int32s as the SDK does (numpy's little-endian tobytes).
func le32(xs ...int32) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func f32s(xs ...float32) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func i64s(xs ...int64) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// sdkRequest is a forward_backward as the SDK 0.38.0 writes it for a ppo
// call: both config maps, tokens as int32 bytes, targets as int64.
func sdkRequest() *tinkerpb.ForwardBackwardRequest {
	return &tinkerpb.ForwardBackwardRequest{
		ModelId: "model_1",
		SeqId:   3,
		LossFn:  "ppo",
		LossFnConfig: map[string]float64{
			"clip_low_threshold": 0.9,
		},
		LossFnConfigV2: map[string]*tinkerpb.LossConfigValue{
			"clip_low_threshold": {Value: &tinkerpb.LossConfigValue_Number{Number: 0.9}},
		},
		Data: []*tinkerpb.Datum{{
			ModelInput: []*tinkerpb.Chunk{
				{Chunk: &tinkerpb.Chunk_EncodedText{EncodedText: &tinkerpb.EncodedTextChunk{Tokens: le32(5, 6)}}},
				{Chunk: &tinkerpb.Chunk_EncodedText{EncodedText: &tinkerpb.EncodedTextChunk{Tokens: le32(7)}}},
			},
			LossFnInputs: map[string]*tinkerpb.Tensor{
				"target_tokens": {Encoding: &tinkerpb.Tensor_Dense{Dense: i64s(6, 7, 8)}, Dtype: tinkerpb.DType_DTYPE_INT64, Shape: []int64{3}},
				"weights":       {Encoding: &tinkerpb.Tensor_Dense{Dense: f32s(0, 1, 1)}, Dtype: tinkerpb.DType_DTYPE_FLOAT32, Shape: []int64{3}},
				"advantages":    {Encoding: &tinkerpb.Tensor_Dense{Dense: []byte{0x80, 0x3f, 0, 0, 0, 0}}, Dtype: tinkerpb.DType_DTYPE_BFLOAT16},
				"logprobs":      {Encoding: &tinkerpb.Tensor_Dense{Dense: le32(0, 0, 0)}, Dtype: tinkerpb.DType_DTYPE_INT32},
			},
		}},
	}
}

func TestDecodeForwardBackwardProto(t *testing.T) {
	b, err := proto.Marshal(sdkRequest())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeForwardBackwardProto(b)
	if err != nil {
		t.Fatal(err)
	}
	seq := int64(3)
	want := &ProtoForwardBackward{Request: ForwardBackwardRequest{
		ModelID: "model_1",
		SeqID:   &seq,
		Input: ForwardBackwardInput{
			LossFn:       "ppo",
			LossFnConfig: map[string]float64{"clip_low_threshold": 0.9},
			Data: []Datum{{
				ModelInput: ModelInput{Chunks: []Chunk{{Type: "encoded_text", Tokens: []int32{5, 6}}, {Type: "encoded_text", Tokens: []int32{7}}}},
				LossFnInputs: map[string]TensorData{
					"target_tokens": {Data: []float64{6, 7, 8}, Dtype: Int64, Shape: []int{3}},
					"weights":       {Data: []float64{0, 1, 1}, Dtype: Float32, Shape: []int{3}},
					"advantages":    {Data: []float64{1, 0, 0}, Dtype: Float32}, // bfloat16 0x3f80 is 1
					"logprobs":      {Data: []float64{0, 0, 0}, Dtype: Int64},
				},
			}},
		},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
	}

	// loss_fn_config_v2 wins over the legacy map, and its text values are
	// kept apart; forward_only is read; seq_id 0 is absent.
	m := sdkRequest()
	m.SeqId, m.ForwardOnly = 0, true
	m.LossFnConfig = map[string]float64{"clip_low_threshold": 0.5}
	m.LossFnConfigV2["mode"] = &tinkerpb.LossConfigValue{Value: &tinkerpb.LossConfigValue_Text{Text: "token"}}
	b, _ = proto.Marshal(m)
	got, err = DecodeForwardBackwardProto(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ForwardOnly || got.Request.SeqID != nil || got.Request.Input.LossFnConfig["clip_low_threshold"] != 0.9 ||
		got.LossFnConfig["mode"] != "token" || len(got.Request.Input.LossFnConfig) != 1 {
		t.Fatalf("decoded %+v", got)
	}
}

// TestDecodeForwardBackwardProtoErrors checks that each malformed part is
// a *ProtoError naming its field.
func TestDecodeForwardBackwardProtoErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m *tinkerpb.ForwardBackwardRequest)
		field  string
		msg    string
	}{
		{"ragged tokens", func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].ModelInput[1].GetEncodedText().Tokens = []byte{1, 2, 3}
		}, "data[0].model_input[1].encoded_text.tokens", "3 bytes are not a whole number of int32 tokens"},
		{"ragged floats", func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].LossFnInputs["weights"].Encoding = &tinkerpb.Tensor_Dense{Dense: []byte{1, 2, 3, 4, 5}}
		}, "data[0].loss_fn_inputs[weights].dense", "5 bytes are not a whole number of 4-byte float32 values"},
		{"shape", func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].LossFnInputs["weights"].Shape = []int64{3, 1}
		}, "data[0].loss_fn_inputs[weights].shape", "only 1-D tensors"},
		{"dtype", func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].LossFnInputs["weights"].Dtype = tinkerpb.DType_DTYPE_UNSPECIFIED
		}, "data[0].loss_fn_inputs[weights].dtype", "DTYPE_UNSPECIFIED is not float32"},
		{"sparse", func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].LossFnInputs["weights"].Encoding = &tinkerpb.Tensor_SparseCsr{SparseCsr: &tinkerpb.SparseCsr{}}
		}, "data[0].loss_fn_inputs[weights].sparse_csr", "sparse tensors are not read"},
		{"empty chunk", func(m *tinkerpb.ForwardBackwardRequest) {
			m.Data[0].ModelInput[0] = &tinkerpb.Chunk{}
		}, "data[0].model_input[0]", "the chunk is empty"},
		{"empty config value", func(m *tinkerpb.ForwardBackwardRequest) {
			m.LossFnConfigV2["clip_low_threshold"] = &tinkerpb.LossConfigValue{}
		}, "loss_fn_config_v2[clip_low_threshold]", "neither a number nor text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sdkRequest()
			tc.change(m)
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeForwardBackwardProto(b)
			var pe *ProtoError
			if !errors.As(err, &pe) || pe.Field != tc.field || !strings.Contains(pe.Msg, tc.msg) {
				t.Fatalf("error %v, want field %s: %s", err, tc.field, tc.msg)
			}
		})
	}
	if _, err := DecodeForwardBackwardProto([]byte{0x0a, 0x05, 'a'}); err == nil || !strings.Contains(err.Error(), "not a ForwardBackwardRequest") {
		t.Fatalf("truncated body: %v", err)
	}
}

// TestForwardBackwardOutputProto decodes the encoding the way the SDK
// does: per field, the datum's values between its byte offsets.
func TestForwardBackwardOutputProto(t *testing.T) {
	out := &ForwardBackwardOutput{
		LossFnOutputType: "TensorData",
		LossFnOutputs: []map[string]TensorData{
			{"logprobs": Floats([]float32{-1, -2}), "elementwise_loss": Floats([]float32{0.5, 0.25})},
			{"logprobs": Floats([]float32{-3}), "elementwise_loss": Floats([]float32{1})},
		},
		Metrics: map[string]float64{"loss:sum": 1.75},
	}
	b, err := ForwardBackwardOutputProto(out)
	if err != nil {
		t.Fatal(err)
	}
	var m tinkerpb.ForwardBackwardOutput
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.LossFnOutputType != "TensorData" || m.Metrics["loss:sum"] != 1.75 || len(m.LossFnOutputs) != 1 || m.LossFnOutputs[0].NumDatums != 2 {
		t.Fatalf("output %v", &m)
	}
	for name, want := range map[string][][]float32{"logprobs": {{-1, -2}, {-3}}, "elementwise_loss": {{0.5, 0.25}, {1}}} {
		bt := m.LossFnOutputs[0].Fields[name]
		if bt.Dtype != tinkerpb.DType_DTYPE_FLOAT32 || len(bt.TrailingShape) != 0 {
			t.Fatalf("%s: %v", name, bt)
		}
		for i, w := range want {
			lo, hi := binary.LittleEndian.Uint64(bt.Offsets[8*i:]), binary.LittleEndian.Uint64(bt.Offsets[8*i+8:])
			var got []float32
			for k := lo; k < hi; k += 4 {
				got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(bt.Data[k:])))
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("%s of datum %d: %v, want %v", name, i, got, w)
			}
		}
	}
	out.LossFnOutputs[1] = map[string]TensorData{"logprobs": Floats([]float32{-3})}
	if _, err := ForwardBackwardOutputProto(out); err == nil {
		t.Fatal("outputs of different names per datum were encoded")
	}
}

func TestSampleResponseProto(t *testing.T) {
	lp := -0.5
	r := &SampleResponse{
		Sequences: []SampledSequence{
			{StopReason: StopStop, Tokens: []int32{4, 5}, Logprobs: []float64{-0.25, -1}},
			{StopReason: StopLength, Tokens: []int32{9}, Logprobs: []float64{-2}},
		},
		PromptLogprobs: []*float64{nil, &lp},
	}
	b, err := SampleResponseProto(r)
	if err != nil {
		t.Fatal(err)
	}
	var m tinkerpb.SampleResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Sequences) != 2 || m.Sequences[1].StopReason != tinkerpb.StopReason_STOP_REASON_LENGTH ||
		string(m.Sequences[0].Tokens) != string(le32(4, 5)) || string(m.Sequences[0].Logprobs) != string(f32s(-0.25, -1)) {
		t.Fatalf("sequences %v", m.Sequences)
	}
	if p := m.PromptLogprobs; len(p) != 8 || !math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))) ||
		math.Float32frombits(binary.LittleEndian.Uint32(p[4:])) != -0.5 {
		t.Fatalf("prompt logprobs % x: want NaN, -0.5", p)
	}
	r.Sequences[0].StopReason = "eos"
	if _, err := SampleResponseProto(r); err == nil {
		t.Fatal("an unknown stop reason was encoded")
	}
}

// FuzzDecodeForwardBackwardProto feeds arbitrary bodies to the decoder:
// it never panics, an error is always a *ProtoError, and what it accepts
// has every tensor 1-D and consistent.
func FuzzDecodeForwardBackwardProto(f *testing.F) {
	seed, _ := proto.Marshal(sdkRequest())
	f.Add(seed)
	m := sdkRequest()
	m.ForwardOnly = true
	m.LossFnConfigV2["x"] = &tinkerpb.LossConfigValue{Value: &tinkerpb.LossConfigValue_Text{Text: "y"}}
	m.Data = append(m.Data, &tinkerpb.Datum{ModelInput: []*tinkerpb.Chunk{{Chunk: &tinkerpb.Chunk_Image{Image: &tinkerpb.ImageChunk{Data: []byte{1}}}}}})
	b, _ := proto.Marshal(m)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x1a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeForwardBackwardProto(body)
		if err != nil {
			var pe *ProtoError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		for i, d := range got.Request.Input.Data {
			for k, td := range d.LossFnInputs {
				if td.check() != nil {
					t.Fatalf("data[%d].loss_fn_inputs[%s]: accepted %+v", i, k, td)
				}
			}
		}
	})
}
