package backend

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestAggregate(t *testing.T) {
	// Two sequences: 2 weighted tokens (of 3) and 4 weighted tokens.
	mk := func() []Datum {
		return []Datum{
			{Tokens: make([]int32, 3), Targets: make([]int32, 3), Weights: []float32{0, 1, 1}},
			{Tokens: make([]int32, 4), Targets: make([]int32, 4), Weights: []float32{1, 1, 1, 1}},
			{Tokens: make([]int32, 2), Targets: make([]int32, 2), Weights: []float32{0, 0}}, // not a sequence of the loss
		}
	}
	for _, tc := range []struct {
		mode   Aggregation
		norm   float32
		w0, w1 float32 // the scale of sequence 0's and 1's tokens
	}{
		{TokenMean, 0, 1.0 / 6, 1.0 / 6},
		{SeqMeanTokenMean, 0, 1.0 / (2 * 2), 1.0 / (2 * 4)},
		{SeqMeanTokenSumNorm, 10, 1.0 / (2 * 10), 1.0 / (2 * 10)},
	} {
		b := mk()
		if err := Aggregate(b, tc.mode, tc.norm); err != nil {
			t.Fatal(err)
		}
		want := [][]float32{{0, tc.w0, tc.w0}, {tc.w1, tc.w1, tc.w1, tc.w1}, {0, 0}}
		for i := range b {
			if fmt.Sprint(b[i].Weights) != fmt.Sprint(want[i]) {
				t.Errorf("%s: datum %d weights %v, want %v", tc.mode, i, b[i].Weights, want[i])
			}
		}
	}
	if err := Aggregate(mk(), SeqMeanTokenSumNorm, 0); err == nil {
		t.Error("sum-norm with no normalizer: no error")
	}
	if err := Aggregate(mk(), "mean", 0); err == nil || !strings.Contains(err.Error(), `unknown loss aggregation "mean"`) {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestLossValidateReportsAllProblems(t *testing.T) {
	l := Loss{PolicyGradient: ClippedPG, ClipLow: 1.5, ClipHigh: -1, RefKL: 1, RefKLEstimator: "k4"}
	err := l.Validate()
	for _, want := range []string{"clip low 1.5", "clip high -1", `unknown KL estimator "k4"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	if err := (&Loss{NLL: 1}).Validate(); err != nil {
		t.Error(err)
	}
	// Bounds of exactly 1 (ε = 0) are allowed; NaN is not.
	if err := (&Loss{PolicyGradient: ClippedPG}).Validate(); err != nil {
		t.Error(err)
	}
	nan := float32(math.NaN())
	if err := (&Loss{PolicyGradient: ClippedPG, ClipLow: nan, ClipHigh: nan}).Validate(); err == nil || !strings.Contains(err.Error(), "clip low NaN") || !strings.Contains(err.Error(), "clip high NaN") {
		t.Errorf("NaN clip bounds: %v", err)
	}
}

func TestLossNeeds(t *testing.T) {
	for _, tc := range []struct {
		loss                 Loss
		adv, sampler, refLPs bool
	}{
		{Loss{NLL: 1}, false, false, false},
		{Loss{PolicyGradient: Reinforce}, true, false, false},
		{Loss{PolicyGradient: ClippedPG, ClipLow: 0.2, ClipHigh: 0.2}, true, true, false},
		{Loss{PolicyGradient: Importance, RefKL: 0.1, RefKLEstimator: K3}, true, true, true},
		{Loss{PolicyGradient: CISPO, ClipLow: 0.2, ClipHigh: 0.2}, true, true, false},
		{Loss{PolicyGradient: DRO, DROBeta: 0.05}, true, true, false},
	} {
		if err := tc.loss.Validate(); err != nil {
			t.Errorf("%+v: %v", tc.loss, err)
		}
		adv, sampler, ref := tc.loss.Needs()
		if adv != tc.adv || sampler != tc.sampler || ref != tc.refLPs {
			t.Errorf("%+v needs advantages %v, sampler logprobs %v, reference logprobs %v; want %v %v %v", tc.loss, adv, sampler, ref, tc.adv, tc.sampler, tc.refLPs)
		}
	}
}

func ExampleAggregate() {
	batch := []Datum{
		{Tokens: []int32{5, 6}, Targets: []int32{6, 7}, Weights: []float32{1, 1}},
		{Tokens: []int32{5, 6, 7, 8}, Targets: []int32{6, 7, 8, 9}, Weights: []float32{1, 1, 1, 1}},
	}
	Aggregate(batch, SeqMeanTokenMean, 0)
	fmt.Println(batch[0].Weights, batch[1].Weights)
	// Output: [0.25 0.25] [0.125 0.125 0.125 0.125]
}

func TestInertPositions(t *testing.T) {
	pg := Loss{PolicyGradient: ClippedPG, ClipLow: 0.2, ClipHigh: 0.2}
	for _, tc := range []struct {
		name    string
		loss    Loss
		w, adv  float32
		teacher bool
		inert   bool
	}{
		{"zero weight", Loss{NLL: 1}, 0, 1, false, true},
		{"zero advantage", pg, 1, 0, false, true},
		{"advantage", pg, 1, 0.5, false, false},
		{"nll", Loss{NLL: 1}, 1, 0, false, false},
		{"entropy bonus", Loss{PolicyGradient: Reinforce, Entropy: 0.01}, 1, 0, false, false},
		{"reference kl", Loss{PolicyGradient: Reinforce, RefKL: 0.1, RefKLEstimator: K3}, 1, 0, false, false},
		{"teacher here", Loss{PolicyGradient: Reinforce, TeacherKL: 1}, 1, 0, true, false},
		{"teacher elsewhere", Loss{PolicyGradient: Reinforce, TeacherKL: 1}, 1, 0, false, true},
	} {
		if got := tc.loss.Inert(TokenInputs{Weight: float64(tc.w), Advantage: float64(tc.adv)}, tc.teacher); got != tc.inert {
			t.Errorf("%s: inert %v, want %v", tc.name, got, tc.inert)
		}
	}
}

// TestCISPOAndDROTerms checks the two losses against Tinker's documented
// definitions at one position: CISPO's loss −clip(ρ)·A·logp with the
// clipped ratio held constant in the gradient, and DRO's
// −(A·logp − β/2·(logp − q)²), whose derivative finite differences check.
func TestCISPOAndDROTerms(t *testing.T) {
	const w, adv, q = 0.5, 1.5, -2.0
	in := TokenInputs{Weight: w, Advantage: adv, SamplerLogp: q}
	cispo := Loss{PolicyGradient: CISPO, ClipLow: 0.25, ClipHigh: 0.25}
	for _, tc := range []struct {
		logp, coef float64
		clip       int8
	}{
		{q, 1, 0}, // ρ = 1
		{q + 0.1, math.Exp(0.1), 0},
		{q + 1, 1.25, 1},  // ρ = e, clipped at 1 + ε_high
		{q - 1, 0.75, -1}, // ρ = 1/e, clipped at 1 − ε_low
	} {
		got := cispo.LogpTerms(tc.logp, in)
		if want := -w * tc.coef * adv * tc.logp; math.Abs(got.Loss-want) > 1e-12 {
			t.Errorf("cispo at logp %v: loss %v, want %v", tc.logp, got.Loss, want)
		}
		// A clipped token still has REINFORCE's gradient, scaled.
		if want := -w * tc.coef * adv; math.Abs(got.DLogp-want) > 1e-12 || got.Clip != tc.clip {
			t.Errorf("cispo at logp %v: dloss/dlogp %v (clip %d), want %v (clip %d)", tc.logp, got.DLogp, got.Clip, want, tc.clip)
		}
	}

	dro := Loss{PolicyGradient: DRO, DROBeta: 0.25}
	for _, logp := range []float64{q, q + 0.7, q - 1.3} {
		got := dro.LogpTerms(logp, in)
		d := logp - q
		if want := -w * (adv*logp - 0.125*d*d); math.Abs(got.Loss-want) > 1e-12 {
			t.Errorf("dro at logp %v: loss %v, want %v", logp, got.Loss, want)
		}
		const h = 1e-6
		fd := (dro.LogpTerms(logp+h, in).Loss - dro.LogpTerms(logp-h, in).Loss) / (2 * h)
		if math.Abs(got.DLogp-fd) > 1e-6 {
			t.Errorf("dro at logp %v: dloss/dlogp %v, finite differences %v", logp, got.DLogp, fd)
		}
	}
	// DRO's penalty pulls toward the sampler even with no advantage.
	if dro.Inert(TokenInputs{Weight: 1, SamplerLogp: q}, false) || !cispo.Inert(TokenInputs{Weight: 1, SamplerLogp: q}, false) {
		t.Error("a zero advantage: DRO's position must not be inert, CISPO's must")
	}
	if err := (&Loss{PolicyGradient: DRO, DROBeta: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "DRO beta -1") {
		t.Errorf("negative beta: %v", err)
	}
	if err := (&Loss{PolicyGradient: CISPO, ClipLow: 1.5}).Validate(); err == nil || !strings.Contains(err.Error(), "clip low 1.5") {
		t.Errorf("cispo clip low 1.5: %v", err)
	}
}

// TestMicroBatches checks the split: runs within the budget, a datum over
// it alone, and 0 as one pass.
func TestMicroBatches(t *testing.T) {
	mk := func(n int) Datum { return Datum{Tokens: make([]int32, n)} }
	data := []Datum{mk(5), mk(5), mk(12), mk(3), mk(3)}
	var sizes []int
	for _, mb := range MicroBatches(data, 10) {
		sizes = append(sizes, len(mb))
	}
	if !reflect.DeepEqual(sizes, []int{2, 1, 2}) {
		t.Fatalf("micro-batch sizes %v, want [2 1 2]", sizes)
	}
	if got := MicroBatches(data, 0); len(got) != 1 || len(got[0]) != 5 {
		t.Fatal("0 must keep one pass")
	}
}
