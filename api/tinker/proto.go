package tinker

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"rlvr/api/tinker/tinkerpb"
)

// The official SDK's protobuf form (schema in package tinkerpb): it sends
// forward_backward as a tinker_public.ForwardBackwardRequest, zstd
// compressed when the server's client/config sets proto_compress_fwdbwd,
// and asks retrieve_future for forward_backward and sample results as
// tinker_public.ForwardBackwardOutput and SampleResponse. Packed arrays
// travel as little-endian bytes: tokens as int32, tensors in their dtype.
const (
	ContentTypeProtobuf = "application/x-protobuf"
	ContentTypeJSON     = "application/json"
	EncodingZstd        = "zstd"
)

// ProtoForwardBackward is a forward_backward call as the SDK sends it in
// protobuf: the request in this package's JSON types, whether it is a
// forward pass only (the SDK's form of the forward call), and the
// loss_fn_config values that are text (loss_fn_config_v2's text arm),
// which no JSON field holds.
type ProtoForwardBackward struct {
	Request      ForwardBackwardRequest
	ForwardOnly  bool
	LossFnConfig map[string]string // the text values of loss_fn_config_v2, by key
}

// ProtoError is a protobuf body this package cannot read: Field names
// where (as a path like "data[2].loss_fn_inputs[weights].dense").
type ProtoError struct {
	Field string
	Msg   string
}

func (e *ProtoError) Error() string {
	if e.Field == "" {
		return "tinker: protobuf body: " + e.Msg
	}
	return "tinker: protobuf body: " + e.Field + ": " + e.Msg
}

func protoErr(field, format string, args ...any) *ProtoError {
	return &ProtoError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// DecodeForwardBackwardProto reads a tinker_public.ForwardBackwardRequest.
// loss_fn_config_v2, when it has entries, is the config (the SDK writes
// both maps and servers prefer v2); a seq_id of 0 is taken as absent (the
// SDK numbers calls from 1). Provenance spans, which only the
// stable_reinforce loss reads, are not kept. Every error is a
// *ProtoError naming the field.
func DecodeForwardBackwardProto(b []byte) (*ProtoForwardBackward, error) {
	var m tinkerpb.ForwardBackwardRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		// The protobuf runtime's message names the field number and
		// what is malformed about it.
		return nil, protoErr("", "not a ForwardBackwardRequest: %v", err)
	}
	out := &ProtoForwardBackward{ForwardOnly: m.GetForwardOnly()}
	r := &out.Request
	r.ModelID = m.GetModelId()
	if s := m.GetSeqId(); s != 0 {
		seq := int64(s)
		r.SeqID = &seq
	}
	r.Input.LossFn = m.GetLossFn()
	if v2 := m.GetLossFnConfigV2(); len(v2) > 0 {
		r.Input.LossFnConfig = map[string]float64{}
		for k, v := range v2 {
			switch x := v.GetValue().(type) {
			case *tinkerpb.LossConfigValue_Number:
				r.Input.LossFnConfig[k] = x.Number
			case *tinkerpb.LossConfigValue_Text:
				if out.LossFnConfig == nil {
					out.LossFnConfig = map[string]string{}
				}
				out.LossFnConfig[k] = x.Text
			default:
				return nil, protoErr(fmt.Sprintf("loss_fn_config_v2[%s]", k), "holds neither a number nor text")
			}
		}
	} else if c := m.GetLossFnConfig(); len(c) > 0 {
		r.Input.LossFnConfig = c
	}
	r.Input.Data = make([]Datum, len(m.GetData()))
	for i, d := range m.GetData() {
		if err := datumFromProto(d, &r.Input.Data[i], fmt.Sprintf("data[%d]", i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func datumFromProto(m *tinkerpb.Datum, d *Datum, field string) error {
	for j, c := range m.GetModelInput() {
		f := fmt.Sprintf("%s.model_input[%d]", field, j)
		switch x := c.GetChunk().(type) {
		case *tinkerpb.Chunk_EncodedText:
			toks, err := int32s(x.EncodedText.GetTokens(), f+".encoded_text.tokens")
			if err != nil {
				return err
			}
			d.ModelInput.Chunks = append(d.ModelInput.Chunks, Chunk{Type: "encoded_text", Tokens: toks})
		case *tinkerpb.Chunk_Image:
			// Kept by type, so the call is refused as a JSON image chunk is.
			d.ModelInput.Chunks = append(d.ModelInput.Chunks, Chunk{Type: "image"})
		case *tinkerpb.Chunk_Dmel:
			d.ModelInput.Chunks = append(d.ModelInput.Chunks, Chunk{Type: "dmel"})
		default:
			return protoErr(f, "the chunk is empty")
		}
	}
	if len(m.GetLossFnInputs()) > 0 {
		d.LossFnInputs = make(map[string]TensorData, len(m.GetLossFnInputs()))
	}
	for k, t := range m.GetLossFnInputs() {
		td, err := tensorFromProto(t, fmt.Sprintf("%s.loss_fn_inputs[%s]", field, k))
		if err != nil {
			return err
		}
		d.LossFnInputs[k] = td
	}
	return nil
}

// tensorFromProto reads a dense 1-D Tensor; bfloat16 widens to float32 and
// int32 to int64, as the SDK reads them.
func tensorFromProto(t *tinkerpb.Tensor, field string) (TensorData, error) {
	var td TensorData
	if t == nil {
		return td, protoErr(field, "the tensor is missing")
	}
	if t.GetSparseCsr() != nil {
		return td, protoErr(field+".sparse_csr", "sparse tensors are not read (send it dense)")
	}
	raw := t.GetDense()
	var size int
	switch t.GetDtype() {
	case tinkerpb.DType_DTYPE_FLOAT32:
		td.Dtype, size = Float32, 4
	case tinkerpb.DType_DTYPE_INT64:
		td.Dtype, size = Int64, 8
	case tinkerpb.DType_DTYPE_INT32:
		td.Dtype, size = Int64, 4
	case tinkerpb.DType_DTYPE_BFLOAT16:
		td.Dtype, size = Float32, 2
	default:
		return td, protoErr(field+".dtype", "%v is not float32, int64, int32 or bfloat16", t.GetDtype())
	}
	if len(raw)%size != 0 {
		return td, protoErr(field+".dense", "%d bytes are not a whole number of %d-byte %s values", len(raw), size, strings.ToLower(strings.TrimPrefix(t.GetDtype().String(), "DTYPE_")))
	}
	n := len(raw) / size
	if sh := t.GetShape(); len(sh) > 0 {
		if len(sh) != 1 || sh[0] != int64(n) {
			return td, protoErr(field+".shape", "%v does not fit %d values (only 1-D tensors are read)", sh, n)
		}
		td.Shape = []int{n}
	}
	td.Data = make([]float64, n)
	for i := range n {
		b := raw[i*size:]
		switch t.GetDtype() {
		case tinkerpb.DType_DTYPE_FLOAT32:
			td.Data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		case tinkerpb.DType_DTYPE_INT64:
			td.Data[i] = float64(int64(binary.LittleEndian.Uint64(b)))
		case tinkerpb.DType_DTYPE_INT32:
			td.Data[i] = float64(int32(binary.LittleEndian.Uint32(b)))
		case tinkerpb.DType_DTYPE_BFLOAT16:
			td.Data[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
		}
	}
	return td, nil
}

// int32s reads packed little-endian int32s.
func int32s(b []byte, field string) ([]int32, error) {
	if len(b)%4 != 0 {
		return nil, protoErr(field, "%d bytes are not a whole number of int32 tokens", len(b))
	}
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

func putInt32s(xs []int32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func putFloat32s(xs []float64) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(x)))
	}
	return b
}

// ForwardBackwardOutputProto encodes a forward(-backward) result as the
// SDK reads it: one ArrayRecord holding, per output name, every datum's
// values back to back with their byte offsets.
func ForwardBackwardOutputProto(out *ForwardBackwardOutput) ([]byte, error) {
	rec := &tinkerpb.ArrayRecord{
		TypeTag:   out.LossFnOutputType,
		NumDatums: int64(len(out.LossFnOutputs)),
		Fields:    map[string]*tinkerpb.BatchedTensor{},
	}
	var names []string
	if len(out.LossFnOutputs) > 0 {
		for k := range out.LossFnOutputs[0] {
			names = append(names, k)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		bt := &tinkerpb.BatchedTensor{}
		var data, offsets []byte
		offsets = binary.LittleEndian.AppendUint64(offsets, 0)
		for i, o := range out.LossFnOutputs {
			t, ok := o[name]
			if !ok || len(o) != len(names) {
				return nil, fmt.Errorf("tinker: loss_fn_outputs[%d] does not have the outputs of datum 0", i)
			}
			dt := tinkerpb.DType_DTYPE_FLOAT32
			if t.Dtype == Int64 {
				dt = tinkerpb.DType_DTYPE_INT64
			}
			if i > 0 && dt != bt.Dtype {
				return nil, fmt.Errorf("tinker: loss_fn_outputs[%d][%s] is %s, datum 0's is not", i, name, t.Dtype)
			}
			bt.Dtype = dt
			for _, v := range t.Data {
				if dt == tinkerpb.DType_DTYPE_INT64 {
					data = binary.LittleEndian.AppendUint64(data, uint64(int64(v)))
				} else {
					data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
				}
			}
			offsets = binary.LittleEndian.AppendUint64(offsets, uint64(len(data)))
		}
		bt.Data, bt.Offsets = data, offsets
		rec.Fields[name] = bt
	}
	m := &tinkerpb.ForwardBackwardOutput{
		LossFnOutputType: out.LossFnOutputType,
		LossFnOutputs:    []*tinkerpb.ArrayRecord{rec},
		Metrics:          out.Metrics,
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// SampleResponseProto encodes a sample result as the SDK reads it; a
// prompt logprob that is null (the first token's) travels as NaN.
func SampleResponseProto(r *SampleResponse) ([]byte, error) {
	m := &tinkerpb.SampleResponse{}
	for i, s := range r.Sequences {
		reason := tinkerpb.StopReason_STOP_REASON_STOP
		switch s.StopReason {
		case StopStop:
		case StopLength:
			reason = tinkerpb.StopReason_STOP_REASON_LENGTH
		default:
			return nil, fmt.Errorf("tinker: sequences[%d]: stop reason %q is not %q or %q", i, s.StopReason, StopStop, StopLength)
		}
		seq := &tinkerpb.SampledSequence{StopReason: reason, Tokens: putInt32s(s.Tokens)}
		if s.Logprobs != nil {
			seq.Logprobs = putFloat32s(s.Logprobs)
		}
		m.Sequences = append(m.Sequences, seq)
	}
	if r.PromptLogprobs != nil {
		lps := make([]float64, len(r.PromptLogprobs))
		for i, p := range r.PromptLogprobs {
			lps[i] = math.NaN()
			if p != nil {
				lps[i] = *p
			}
		}
		m.PromptLogprobs = putFloat32s(lps)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}
