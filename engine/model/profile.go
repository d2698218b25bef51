package model

import "time"

// Op names a kernel family in a Profile.
type Op int

const (
	OpEmbedding Op = iota
	OpRMSNorm
	OpMatmul // the projections inside the blocks
	OpRoPE
	OpAttention
	OpSwiGLU
	OpResidual
	OpHeadMatmul // the output head's logits and their gradient
	OpLossTerms  // softmax and the per-token loss terms
	numOps
)

var opNames = [numOps]string{"embedding", "rmsnorm", "matmul", "rope", "attention", "swiglu", "residual", "head matmul", "loss terms"}

func (o Op) String() string { return opNames[o] }

// Profile accumulates wall time per op, forward and backward apart. Set
// Model.Profile to collect; nil (the default) costs nothing.
type Profile struct {
	Forward, Backward [numOps]time.Duration
}

// Ops lists every op in display order.
func Ops() []Op {
	ops := make([]Op, numOps)
	for i := range ops {
		ops[i] = Op(i)
	}
	return ops
}

// tic starts timing when profiling is on.
func (m *Model) tic() time.Time {
	if m.Profile == nil {
		return time.Time{}
	}
	return time.Now()
}

// toc adds the time since t to op's forward or backward total.
func (m *Model) toc(op Op, backward bool, t time.Time) {
	if m.Profile == nil {
		return
	}
	d := time.Since(t)
	if backward {
		m.Profile.Backward[op] += d
	} else {
		m.Profile.Forward[op] += d
	}
}
