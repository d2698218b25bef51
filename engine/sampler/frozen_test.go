package sampler

import (
	"errors"
	"os"
	"slices"
	"testing"

	"rlvr/engine/gemm"
	"rlvr/engine/model"
)

// frozenRequests are greedy and sampled requests of stories260K, several
// continuations each, prompts of different lengths in one batch.
func frozenRequests(tok interface {
	Encode(string, bool, bool) []int32
}) []Request {
	return []Request{
		{Prompt: tok.Encode("Once upon a time", true, false), MaxNew: 40},
		{Prompt: tok.Encode("Lily and Tom went to the park. They", true, false), MaxNew: 30, N: 3, Temperature: 1, Seed: 7},
		{Prompt: tok.Encode("The cat", true, false), MaxNew: 25, N: 2, Temperature: 0.8, TopP: 0.9, Seed: 8},
	}
}

// TestFrozenSamplesTheSame: a sampler over a frozen model (NewFrozen)
// draws the tokens and logprobs a sampler over the unfrozen model draws,
// bit for bit, in FP32 and in BF16, with its model's matrices released;
// more streams than the first cache held (a new cache) share the frozen
// copy.
func TestFrozenSamplesTheSame(t *testing.T) {
	if err := gemm.SetBF16Kernel("emulate"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gemm.SetBF16Kernel(os.Getenv("RLVR_BF16_KERNEL")) })
	for _, prec := range []model.Precision{model.FP32, model.BF16} {
		t.Run(prec.String(), func(t *testing.T) {
			m, tok := stories(t)
			m.Precision = prec
			if m.EffectivePrecision() != prec {
				t.Fatalf("the model runs in %s, not %s", m.EffectivePrecision(), prec)
			}
			want := sampleAll(t, NewFixed(m), frozenRequests(tok)...)
			wide := sampleAll(t, NewFixed(m), slices.Repeat(frozenRequests(tok), 2)...)
			f, _ := stories(t)
			f.Precision = prec
			s := NewFrozen(f)
			if !f.Frozen() || f.Params != nil {
				t.Fatal("NewFrozen left the model's float32 weights")
			}
			for i, got := range sampleAll(t, s, frozenRequests(tok)...) {
				same(t, i, got, want[i])
			}
			for i, got := range sampleAll(t, s, slices.Repeat(frozenRequests(tok), 2)...) {
				same(t, i, got, wide[i])
			}
			for i, got := range sampleAll(t, NewFixed(f), frozenRequests(tok)...) {
				same(t, i, got, want[i]) // another sampler over the frozen model
			}
		})
	}
}

// same fails the test unless request i's continuations drew the same
// tokens and logprobs bit for bit.
func same(t *testing.T, i int, got, want *drawn) {
	t.Helper()
	for k := range want.tokens {
		if !slices.Equal(got.tokens[k], want.tokens[k]) || !sameBits(got.logprobs[k], want.logprobs[k]) {
			t.Fatalf("request %d, continuation %d: frozen %v %v, unfrozen %v %v", i, k, got.tokens[k], got.logprobs[k], want.tokens[k], want.logprobs[k])
		}
	}
}

// TestFrozenRepack: Repack of a sampler over a frozen model fails with
// model.ErrFrozen, and so does every call after it, rather than sample
// what was packed before; a sampler that repacks at every call is
// refused too.
func TestFrozenRepack(t *testing.T) {
	m, tok := stories(t)
	s := NewFrozen(m)
	req := Request{Prompt: tok.Encode("Once", true, false), MaxNew: 5}
	if err := s.Sample(ctx, []Request{req}); err != nil {
		t.Fatal(err)
	}
	if err := s.Repack(); !errors.Is(err, model.ErrFrozen) {
		t.Fatalf("Repack of a frozen model: %v, want model.ErrFrozen", err)
	}
	if err := s.Sample(ctx, []Request{req}); !errors.Is(err, model.ErrFrozen) {
		t.Fatalf("sampling after Repack of a frozen model: %v, want model.ErrFrozen", err)
	}
	if err := New(m).Sample(ctx, []Request{req}); !errors.Is(err, model.ErrFrozen) {
		t.Fatalf("a repacking sampler over a frozen model: %v, want model.ErrFrozen", err)
	}
}
