package model

import (
	"math"

	"rlvr/engine/nn"
)

// InvFreq returns the hd/2 rotary inverse frequencies of c's global
// layers, or of its local ones (plain RoPE at LocalRopeTheta), with c's
// defaults filled in. They are computed in float32 as transformers'
// ROPE_INIT_FUNCTIONS compute them: the unscaled θ^(−2i/hd), then the
// scaling's float32 arithmetic on it.
func InvFreq(c Config, local bool) []float32 {
	c = c.WithDefaults()
	hd := c.HeadDim
	theta := c.RopeTheta
	if local {
		theta = c.LocalRopeTheta
	}
	inv := make([]float32, hd/2)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(hd)))
	}
	if local {
		return inv
	}
	s := c.RopeScaling
	switch s.Type {
	case "linear":
		factor := float32(s.Factor)
		for i := range inv {
			inv[i] /= factor
		}
	case "llama3":
		llama3Scale(inv, s)
	}
	// "dynamic" rescales only past OriginalMaxSeq positions, which
	// Validate keeps beyond MaxSeq.
	return inv
}

// llama3Scale applies Llama 3.1's frequency bands to inv in place: a
// wavelength λ = 2π/f shorter than OriginalMaxSeq/HighFreqFactor keeps its
// frequency, one longer than OriginalMaxSeq/LowFreqFactor has it divided by
// Factor, and those between blend the two by where λ lies, with
// s = (OriginalMaxSeq/λ − low)/(high − low): (1 − s)·f/Factor + s·f. Each
// operation rounds to float32 in transformers' order (PyTorch divides a
// number by a tensor as the tensor's reciprocal times the number).
func llama3Scale(inv []float32, s RopeScaling) {
	factor, low := float32(s.Factor), float32(s.LowFreqFactor)
	orig := float32(s.OriginalMaxSeq)
	lowWavelen := float32(float64(s.OriginalMaxSeq) / s.LowFreqFactor)
	highWavelen := float32(float64(s.OriginalMaxSeq) / s.HighFreqFactor)
	span := float32(s.HighFreqFactor - s.LowFreqFactor)
	twoPi := float32(2 * math.Pi)
	for i, f := range inv {
		wavelen := float32(1/f) * twoPi
		switch {
		case wavelen < highWavelen:
		case wavelen > lowWavelen:
			inv[i] = f / factor
		default:
			smooth := (float32(1/wavelen)*orig - low) / span
			inv[i] = float32((1-smooth)*f)/factor + float32(smooth*f)
		}
	}
}

// ropeTables returns the cos and sin tables (MaxSeq, hd/2) of c's global
// layers or of its local ones.
func ropeTables(c Config, local bool) (cos, sin []float32) {
	return nn.RoPETablesFrom(c.MaxSeq, InvFreq(c, local))
}
