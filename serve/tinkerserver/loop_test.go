package tinkerserver

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"rlvr/api/tinker"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/engine/sampler"
	"rlvr/sample"
)

// sameResponse compares two asample results: tokens, stop reasons and
// prompt logprobs exactly, sample logprobs exactly or, when exact is
// false, within 1e-5.
func sameResponse(t *testing.T, what string, got, want tinker.SampleResponse, exact bool) {
	t.Helper()
	if len(got.Sequences) != len(want.Sequences) {
		t.Fatalf("%s: %d sequences, want %d", what, len(got.Sequences), len(want.Sequences))
	}
	for k, s := range got.Sequences {
		w := want.Sequences[k]
		if !slices.Equal(s.Tokens, w.Tokens) || s.StopReason != w.StopReason || len(s.Logprobs) != len(w.Logprobs) {
			t.Fatalf("%s sample %d: %v (%s), want %v (%s)", what, k, s.Tokens, s.StopReason, w.Tokens, w.StopReason)
		}
		for j, lp := range s.Logprobs {
			if lp != w.Logprobs[j] && (exact || math.Abs(lp-w.Logprobs[j]) > 1e-5) {
				t.Fatalf("%s sample %d token %d: logprob %v, want %v", what, k, j, lp, w.Logprobs[j])
			}
		}
	}
	if len(got.PromptLogprobs) != len(want.PromptLogprobs) {
		t.Fatalf("%s: %d prompt logprobs, want %d", what, len(got.PromptLogprobs), len(want.PromptLogprobs))
	}
	for i, p := range got.PromptLogprobs {
		if w := want.PromptLogprobs[i]; (p == nil) != (w == nil) || p != nil && *p != *w {
			t.Fatalf("%s: prompt token %d has logprob %v, want %v", what, i, p, w)
		}
	}
}

// TestDecodingLoopIsTheSame submits calls to the decoding loop at once,
// more samples than its slots, so that calls join the batch as others
// leave it, and checks each result equals the one the whole-batch server
// gives the call alone: bit for bit with the pure-Go matrix products, and
// with OpenBLAS, whose products round differently for different batch
// sizes, the tokens and prompt logprobs agree and the sample logprobs
// within 1e-5.
func TestDecodingLoopIsTheSame(t *testing.T) {
	loop := newHarness(t, Config{MaxBatch: 6})
	whole := newHarness(t, Config{WholeBatches: true, MaxBatch: 1})
	var reqs []tinker.SampleRequest
	for round := range 2 {
		for i, c := range sampleCases {
			c.seed += int64(100 * round)
			r := c.wire("", testBase)
			r.PromptLogprobs = (i+round)%2 == 0
			reqs = append(reqs, r)
		}
	}
	var futures []tinker.Future
	for _, r := range reqs {
		futures = append(futures, loop.submit(tinker.PathSample, r))
	}
	for i, f := range futures {
		var got, want tinker.SampleResponse
		strict(t, loop.wait(f.RequestID), &got)
		whole.call(tinker.PathSample, reqs[i], &want)
		if reqs[i].PromptLogprobs && len(want.PromptLogprobs) != len(reqs[i].Prompt.Chunks[0].Tokens) {
			t.Fatalf("call %d: the whole-batch server gave prompt logprobs %v", i, want.PromptLogprobs)
		}
		sameResponse(t, fmt.Sprintf("call %d", i), got, want, !gemm.UsingBLAS())
	}
}

// TestDecodingLoopKeepsWeightsApart samples two sampler copies of a
// model, trained apart, and the base model, their calls interleaved and
// submitted at once, and checks each call's samples and prompt logprobs
// are those of its own weights alone.
func TestDecodingLoopKeepsWeightsApart(t *testing.T) {
	h := newHarness(t, Config{MaxBatch: 8})
	_, id := h.newModel()
	l, err := checkpoint.Open(testModelDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	learner := localLearner(t)
	train := func() {
		data, _ := makeBatch(t, r, tinker.CrossEntropy, learner)
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tinker.CrossEntropy}}, &out)
		var os tinker.OptimStepResponse
		h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 0.05, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}, &os)
	}
	// Each source: its path (or base model) and a model over its weights.
	type source struct {
		path, base string
		m          *model.Model
	}
	sources := []source{{base: testBase, m: l.Model}}
	for _, name := range []string{"a", "b"} {
		train()
		var out tinker.SaveWeightsResponse
		h.call(tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: id, Path: name, Type: "save_weights_for_sampler"}, &out)
		m, err := model.NewEmpty(l.Model.Config)
		if err != nil {
			t.Fatal(err)
		}
		copy(m.Params, h.params(id))
		sources = append(sources, source{path: out.Path, m: m})
	}
	type call struct {
		src int
		c   sampleCase
		f   tinker.Future
	}
	var calls []call
	for i := range 12 {
		c := sampleCases[i%len(sampleCases)]
		c.seed += int64(i)
		calls = append(calls, call{src: i % len(sources), c: c})
	}
	for i := range calls {
		req := calls[i].c.wire(sources[calls[i].src].path, sources[calls[i].src].base)
		req.PromptLogprobs = true
		calls[i].f = h.submit(tinker.PathSample, req)
	}
	ctx := context.Background()
	differ := false
	for i, c := range calls {
		var got tinker.SampleResponse
		strict(t, h.wait(c.f.RequestID), &got)
		src := sources[c.src]
		want, err := local.NewSampler(src.m, l.Tokenizer).Sample(ctx, []sample.Request{c.c.local(l)})
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("call %d (source %d)", i, c.src)
		sameSamples(t, what, got, want[0], !gemm.UsingBLAS())
		p := c.c.prompt
		if len(got.PromptLogprobs) != len(p) || got.PromptLogprobs[0] != nil {
			t.Fatalf("%s: prompt logprobs %v", what, got.PromptLogprobs)
		}
		if len(p) < 2 {
			continue
		}
		lps := make([]float32, len(p)-1)
		if err := src.m.Logprobs(model.Pack([][]int32{p[:len(p)-1]}), p[1:], lps, nil); err != nil {
			t.Fatal(err)
		}
		for j, w := range lps {
			if g := got.PromptLogprobs[j+1]; g == nil || *g != float64(w) {
				t.Fatalf("%s: prompt token %d has logprob %v, want %v", what, j+1, g, w)
			}
		}
		// The base model's prompt logprobs against this source's.
		other := make([]float32, len(p)-1)
		if err := sources[(c.src+1)%len(sources)].m.Logprobs(model.Pack([][]int32{p[:len(p)-1]}), p[1:], other, nil); err != nil {
			t.Fatal(err)
		}
		differ = differ || !slices.Equal(lps, other)
	}
	if !differ {
		t.Error("the sources' prompt logprobs are the same: the test cannot tell the weights apart")
	}
}

// TestDecodingLoopRefuses checks a call whose prompt and max_tokens need
// more than a decoding loop's slot holds fails as the user's, saying so,
// and a call of more samples than the loop's slots is served in parts,
// which draw what the whole-batch server draws for it alone.
func TestDecodingLoopRefuses(t *testing.T) {
	l, err := checkpoint.Open(testModelDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	const slots, capacity = 2, 8
	h := newHarness(t, Config{MaxBatch: slots, KVCacheBytes: sampler.KVBytes(l.Model.Config, slots*capacity)})
	c := sampleCases[0] // a prompt of 3 tokens
	c.n, c.maxTok = 1, 6
	const want = "need 9 cache positions; the loop holds 8 per continuation"
	if f := h.failure(tinker.PathSample, c.wire("", testBase)); f.Category != "user" || !strings.Contains(f.Message, want) {
		t.Errorf("failure %+v, want %q", f, want)
	}
	whole := newHarness(t, Config{WholeBatches: true, MaxBatch: 1})
	c.n, c.maxTok = 5, 5
	req := c.wire("", testBase)
	req.PromptLogprobs = true
	var got, alone tinker.SampleResponse
	h.call(tinker.PathSample, req, &got)
	whole.call(tinker.PathSample, req, &alone)
	sameResponse(t, "5 samples in 2 slots", got, alone, !gemm.UsingBLAS())
}
