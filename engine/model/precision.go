package model

import "rlvr/engine/gemm"

// Precision is the arithmetic of a model's matrix products (see
// Model.Precision). It is package gemm's, which runs the products.
type Precision = gemm.Precision

const (
	// FP32 computes everything in float32 (the zero value).
	FP32 = gemm.FP32
	// BF16 gives the matrix products bf16 inputs with float32
	// accumulation; the weights' master copy, norms, softmax, RoPE, the
	// loss and the logprobs stay float32 (PyTorch's autocast split).
	BF16 = gemm.BF16
	// INT8 is for sampling: a decoding cache's projections and output
	// head multiply by int8 weights with a float32 scale per output
	// feature (weight-only int8, torchao's int8_weight_only), inputs and
	// accumulation float32; every other product is FP32's. A learner
	// cannot train in it.
	INT8 = gemm.INT8
)

// ParsePrecision reads a precision's name: "fp32" or "float32", "bf16" or
// "bfloat16", "int8" (any case; "" is FP32). The error names the value.
func ParsePrecision(s string) (Precision, error) { return gemm.ParsePrecision(s) }

// EffectivePrecision is the precision the products run in: Precision, or
// FP32 where BF16 has no kernel on this machine (after gemm's one-line
// notice, which names the reason).
func (m *Model) EffectivePrecision() Precision { return m.Precision.Effective() }

// Kernel names what runs the model's products in its precision, for logs
// and benchmark tables: "bf16: oneDNN 3.2.0 (…)", "fp32: OpenBLAS (…)", or
// the fp32 fallback and why.
func (m *Model) Kernel() string { return gemm.KernelFor(m.Precision) }

// WithPrecision returns a model sharing m's weights (Params, and Grads
// once made) whose products run in precision p, with activations of its
// own: a bf16 sampler beside a float32 learner, say. The copy reads the
// weights as they are at each call, so an optimizer step on m is seen by
// it; a Cache packed from it must be packed again after one.
func (m *Model) WithPrecision(p Precision) *Model {
	c := *m
	c.Precision, c.prec, c.bw, c.bf = p, FP32, nil, nil
	c.act = activations{}
	c.Profile = nil
	return &c
}

// setPrecision resolves Precision for a forward: in BF16 it rounds the
// weights as they are now into their bf16 copy, one pass over them, so an
// optimizer step or a load since the last forward is always seen. (Every
// product reads the copy: each weight is rounded once per forward, not
// once per product.)
func (m *Model) setPrecision() {
	m.prec, m.bw = m.Precision.Effective(), nil
	if m.prec != BF16 {
		return
	}
	if m.bf == nil {
		m.bf = new(gemm.BF16Weights)
	}
	m.bf.Set(m.Params)
	m.bw = m.bf
}

// BF16WeightBytes is the memory the weights' bf16 copy holds (0 in FP32):
// 2 bytes a parameter with a hardware kernel, 4 when emulated.
func (m *Model) BF16WeightBytes() int64 { return m.bf.Bytes() }
