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

// slotsHarness serves the test model with a decoding loop of slots
// slots of capacity tokens each.
func slotsHarness(t *testing.T, slots, capacity int) *harness {
	t.Helper()
	l, err := checkpoint.Open(testModelDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, Config{MaxBatch: slots, KVCacheBytes: sampler.KVBytes(l.Model.Config, slots*capacity)})
}

// TestDecodingLoopRunsLongCallsAlone serves a loop of 3 slots of 10
// tokens and submits two calls that fit a slot; while they run, two
// that need 23 and 13 positions (3 and 2 samples, the first with prompt
// logprobs), which fit only the whole cache, one sample at a time; and
// two more that fit a slot, queued behind them. It checks every call
// completes with what the whole-batch server gives it alone.
func TestDecodingLoopRunsLongCallsAlone(t *testing.T) {
	const slots, capacity = 3, 10
	h := slotsHarness(t, slots, capacity)
	whole := newHarness(t, Config{WholeBatches: true, MaxBatch: 1})
	calls := []sampleCase{
		{prompt: []int32{256, 72, 105}, n: 1, seed: 1, temp: 1, topK: -1, topP: 1, maxTok: 4},
		{prompt: []int32{256, 10}, n: 2, seed: -7, temp: 0.7, topK: 20, topP: 0.9, maxTok: 8},
		{prompt: []int32{256, 81, 58}, n: 3, seed: 11, temp: 1.3, topK: -1, topP: 1, maxTok: 20},
		{prompt: []int32{256}, n: 2, seed: 12, temp: 1, topK: -1, topP: 1, maxTok: 12},
		{prompt: []int32{256, 65, 66, 67, 68}, n: 3, seed: 3, temp: 0, topK: 0, topP: 1, maxTok: 5},
		{prompt: []int32{256, 72, 105}, n: 3, seed: 4, temp: 1, topK: -1, topP: 1, maxTok: 7, stop: []string{"e", "a"}},
	}
	reqs := make([]tinker.SampleRequest, len(calls))
	for i, c := range calls {
		reqs[i] = c.wire("", testBase)
		reqs[i].PromptLogprobs = i == 2 || i == 4
	}
	// The loop is held where the first of the two short calls ends, the
	// other still in flight, while the rest are submitted.
	bl := block(h.srv)
	futures := []tinker.Future{h.submit(tinker.PathSample, reqs[0]), h.submit(tinker.PathSample, reqs[1])}
	bl.waitEntered(t, "asample")
	for _, r := range reqs[2:] {
		futures = append(futures, h.submit(tinker.PathSample, r))
	}
	bl.unblock(h.srv)
	for i, f := range futures {
		var got, want tinker.SampleResponse
		strict(t, h.wait(f.RequestID), &got)
		whole.call(tinker.PathSample, reqs[i], &want)
		sameResponse(t, fmt.Sprintf("call %d", i), got, want, !gemm.UsingBLAS())
		if i == 2 && (len(got.Sequences[0].Tokens) != 20 || len(got.PromptLogprobs) != 3) {
			t.Fatalf("the long call drew %d tokens, with prompt logprobs %v: it ended early", len(got.Sequences[0].Tokens), got.PromptLogprobs)
		}
	}
}

// TestDecodingLoopRefuses checks a call whose prompt and max_tokens need
// more than a decoding loop's whole cache holds, so that one sample
// would not fit even alone, fails as the user's, saying so, as does a
// prompt beyond the model's context; and that a call of more samples
// than the loop's slots is served in parts, which draw what the
// whole-batch server draws for it alone.
func TestDecodingLoopRefuses(t *testing.T) {
	const slots, capacity = 2, 8
	h := slotsHarness(t, slots, capacity)
	c := sampleCases[0] // a prompt of 3 tokens
	c.n, c.maxTok = 1, 14
	const want = "need 17 cache positions; the loop's whole cache holds 16 (2 slots of 8), too few for one continuation even alone"
	if f := h.failure(tinker.PathSample, c.wire("", testBase)); f.Category != "user" || !strings.Contains(f.Message, want) {
		t.Errorf("failure %+v, want %q", f, want)
	}
	beyond := c
	beyond.prompt, beyond.maxTok = make([]int32, testModelConfig.MaxSeq), 1
	const wantContext = "prompt has 64 tokens, leaving no room in the model's context of 64"
	if f := h.failure(tinker.PathSample, beyond.wire("", testBase)); f.Category != "user" || !strings.Contains(f.Message, wantContext) {
		t.Errorf("failure %+v, want %q", f, wantContext)
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
