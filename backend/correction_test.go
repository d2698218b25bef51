package backend

import (
	"math"
	"strings"
	"testing"
)

// TestSamplerCorrectionTruncates folds the correction into a datum whose
// tokens the learner rates above, equal to and below the sampler: each
// weighted advantage is scaled by min(exp(old − sampler), cap), the cap
// truncating the one far above, and its sampler logprob becomes the
// learner's; context positions, a datum without sampler logprobs and the
// caller's slices are left as they were.
func TestSamplerCorrectionTruncates(t *testing.T) {
	c := SamplerCorrection{Cap: 2}
	d := Datum{Tokens: make([]int32, 5), Targets: make([]int32, 5),
		Weights:         []float32{0, 1, 1, 1, 1},
		Advantages:      []float32{0, 1, -2, 0.5, 1},
		SamplerLogprobs: []float32{-9, -1.5, -1, -1, -2}}
	nll := Datum{Tokens: make([]int32, 2), Targets: make([]int32, 2), Weights: []float32{1, 1}}
	old := [][]float32{{-3, -1, -1, -2, 0}, {-1, -1}}
	adv, q := d.Advantages, d.SamplerLogprobs
	data := []Datum{d, nll}
	st, err := c.Apply(data, old)
	if err != nil {
		t.Fatal(err)
	}
	// exp(0.5), exp(0), exp(−1), and exp(2) truncated at 2.
	w := []float64{0, math.Exp(0.5), 1, math.Exp(-1), 2}
	for j := range w {
		want := float32(float64(adv[j]) * w[j])
		if got := data[0].Advantages[j]; math.Abs(float64(got-want)) > 1e-6 {
			t.Errorf("position %d: advantage %v, want %v·%v = %v", j, got, adv[j], w[j], want)
		}
		wantQ := old[0][j]
		if j == 0 {
			wantQ = q[0] // context: untouched
		}
		if got := data[0].SamplerLogprobs[j]; got != wantQ {
			t.Errorf("position %d: sampler logprob %v, want %v", j, got, wantQ)
		}
	}
	if adv[1] != 1 || q[1] != -1.5 {
		t.Error("Apply wrote into the caller's slices")
	}
	if data[1].SamplerLogprobs != nil || data[1].Advantages != nil {
		t.Error("a datum without sampler logprobs was changed")
	}
	wantSum := w[1] + w[2] + w[3] + w[4]
	if st.Tokens != 4 || st.Capped != 1 || math.Abs(st.Sum-wantSum) > 1e-9 {
		t.Errorf("stats %+v, want 4 tokens, 1 capped, sum %v", st, wantSum)
	}
}

// TestSamplerCorrectionRefuses: a cap below 1, infinite or NaN, and
// logprobs that do not fit the data are errors.
func TestSamplerCorrectionRefuses(t *testing.T) {
	for _, cap := range []float64{0, 0.5, math.Inf(1), math.NaN(), -2} {
		if err := (SamplerCorrection{Cap: cap}).Validate(); err == nil || !strings.Contains(err.Error(), "cap") {
			t.Errorf("cap %v: error %v, want one naming the cap", cap, err)
		}
	}
	if err := (SamplerCorrection{Cap: 1}).Validate(); err != nil {
		t.Errorf("cap 1: %v", err)
	}
	d := Datum{Tokens: make([]int32, 3), Targets: make([]int32, 3), Weights: []float32{1, 1, 1},
		Advantages: make([]float32, 3), SamplerLogprobs: make([]float32, 3)}
	c := SamplerCorrection{Cap: 2}
	if _, err := c.Apply([]Datum{d}, nil); err == nil {
		t.Error("no logprobs for one datum: no error")
	}
	if _, err := c.Apply([]Datum{d}, [][]float32{{0, 0}}); err == nil || !strings.Contains(err.Error(), "datum 0") {
		t.Errorf("2 logprobs for 3 tokens: error %v, want one naming datum 0", err)
	}
}
