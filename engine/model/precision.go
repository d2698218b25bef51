package model

import "fmt"

// Precision is the arithmetic of a model's matrix products.
type Precision uint8

const (
	// FP32 computes everything in float32 (the zero value).
	FP32 Precision = iota
	// BF16 gives the matrix products bf16 inputs with float32
	// accumulation; the weights' master copy, norms, softmax, RoPE, the
	// loss and the logprobs stay float32 (PyTorch's autocast split).
	BF16
)

// String is the precision's name in configs and flags.
func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// ParsePrecision reads a precision's name: fp32 or bf16.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "fp32":
		return FP32, nil
	case "bf16":
		return BF16, nil
	}
	return FP32, fmt.Errorf("precision %q is not fp32 or bf16", s)
}
