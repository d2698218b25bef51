package tinkerserver

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/gemm"
	"rlvr/engine/model"
	"rlvr/format/tokenizer"
	"rlvr/sample"
)

// sampleCase is one asample call and the local sampler's request that
// must give the same samples.
type sampleCase struct {
	prompt []int32
	n      int
	seed   int64
	temp   float64
	topK   int
	topP   float64
	maxTok int
	stop   any // []int32, []string or nil
}

func (c sampleCase) wire(modelPath, baseModel string) tinker.SampleRequest {
	seed := c.seed
	sp := tinker.SamplingParams{MaxTokens: c.maxTok, Seed: &seed, Temperature: c.temp, TopK: c.topK, TopP: c.topP}
	if c.stop != nil {
		sp.Stop, _ = json.Marshal(c.stop)
	}
	return tinker.SampleRequest{NumSamples: c.n, Prompt: tinker.Text(c.prompt), SamplingParams: sp, ModelPath: modelPath, BaseModel: baseModel, Type: "sample"}
}

// local is the sampler request of the case: the model's end tokens stop
// every sample, and a stop string's last token is kept.
func (c sampleCase) local(l *checkpoint.Loaded) sample.Request {
	p := sample.Params{MaxTokens: c.maxTok, Temperature: float32(c.temp), TopP: float32(c.topP), N: c.n, Seed: uint64(c.seed), IncludeStop: true}
	if c.topK > 0 {
		p.TopK = c.topK
	}
	switch s := c.stop.(type) {
	case []int32:
		p.StopTokens = slices.Clone(s)
	case []string:
		p.Stop = s
	}
	p.StopTokens = append(p.StopTokens, l.StopTokens...)
	return sample.Request{Prompt: c.prompt, Params: p}
}

// sameSamples compares a sample result with the local sampler's
// completions.
func sameSamples(t *testing.T, what string, got tinker.SampleResponse, want []sample.Completion, exact bool) {
	t.Helper()
	if got.Type != "sample" || len(got.Sequences) != len(want) {
		t.Fatalf("%s: %d sequences (type %q), want %d", what, len(got.Sequences), got.Type, len(want))
	}
	for k, s := range got.Sequences {
		w := want[k]
		reason := tinker.StopLength
		if w.Finish == sample.FinishStop {
			reason = tinker.StopStop
		}
		if !slices.Equal(s.Tokens, w.Tokens) || s.StopReason != reason || len(s.Logprobs) != len(w.Logprobs) {
			t.Fatalf("%s sample %d: %v (%s), want %v (%s)", what, k, s.Tokens, s.StopReason, w.Tokens, reason)
		}
		for j, lp := range s.Logprobs {
			if lp != float64(w.Logprobs[j]) && (exact || math.Abs(lp-float64(w.Logprobs[j])) > 1e-5) {
				t.Fatalf("%s sample %d token %d: logprob %v, want %v", what, k, j, lp, w.Logprobs[j])
			}
		}
	}
}

// manyStopTokens make a stop likely on the random model.
var manyStopTokens = func() []int32 {
	var ids []int32
	for i := range int32(120) {
		ids = append(ids, i)
	}
	return ids
}()

var sampleCases = []sampleCase{
	{prompt: []int32{256, 72, 105}, n: 3, seed: 1, temp: 1, topK: -1, topP: 1, maxTok: 12},
	{prompt: []int32{256, 10}, n: 2, seed: -7, temp: 0.7, topK: 20, topP: 0.9, maxTok: 9, stop: manyStopTokens},
	{prompt: []int32{256, 65, 66, 67, 68}, n: 1, seed: 3, temp: 0, topK: 0, topP: 1, maxTok: 5},
	{prompt: []int32{256, 81, 58}, n: 4, seed: 11, temp: 1.3, topK: -1, topP: 1, maxTok: 16, stop: []string{"e", "a", "i", "o", "u", "s", "t", "n"}},
	{prompt: []int32{256}, n: 2, seed: 12, temp: 1, topK: -1, topP: 1, maxTok: 70}, // past the context
}

// TestSampleMatchesSampler samples over HTTP, under WholeBatches, the
// calls batched together on the sampling worker, and checks each equals local.Sampler run on
// the request alone over the same weights: bit for bit with the pure-Go
// matrix products, and with MaxBatch 1, which samples each call alone;
// with OpenBLAS, whose products round differently for different batch
// sizes, the tokens agree and the logprobs within 1e-5.
func TestSampleMatchesSampler(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBatch int
		exact    bool
		batches  int // Sample calls after the first
	}{
		{"batched", 0, !gemm.UsingBLAS(), 1},
		{"alone", 1, true, len(sampleCases)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxBatch: tc.maxBatch, WholeBatches: true})
			l, err := checkpoint.Open(testModelDir(t), "")
			if err != nil {
				t.Fatal(err)
			}
			smp := local.NewSampler(l.Model, l.Tokenizer)
			ctx := context.Background()

			// Hold the worker at a first call so that the others queue
			// and run together.
			bl := block(h.srv)
			first := h.submit(tinker.PathSample, sampleCases[0].wire("", testBase))
			bl.waitEntered(t, "asample")
			var futures []tinker.Future
			for _, c := range sampleCases {
				futures = append(futures, h.submit(tinker.PathSample, c.wire("", testBase)))
			}
			var batches atomic.Int32
			count := func(string) { batches.Add(1) }
			h.srv.hook.Store(&count)
			close(bl.release)
			futures = append(futures, first)
			cases := append(slices.Clone(sampleCases), sampleCases[0])
			stopped := map[string]bool{}
			for i, f := range futures {
				var got tinker.SampleResponse
				strict(t, h.wait(f.RequestID), &got)
				want, err := smp.Sample(ctx, []sample.Request{cases[i].local(l)})
				if err != nil {
					t.Fatal(err)
				}
				sameSamples(t, "call "+f.RequestID, got, want[0], tc.exact)
				for _, s := range got.Sequences {
					stopped[s.StopReason] = true
				}
				if got.PromptLogprobs != nil {
					t.Errorf("prompt logprobs %v not asked for", got.PromptLogprobs)
				}
			}
			if n := int(batches.Load()); n != tc.batches {
				t.Errorf("%d Sample calls after the first, want %d", n, tc.batches)
			}
			if !stopped[tinker.StopStop] || !stopped[tinker.StopLength] {
				t.Errorf("stop reasons %v: the cases must end both ways", stopped)
			}
			// A stop string's last token is kept.
			var got tinker.SampleResponse
			strict(t, h.wait(futures[3].RequestID), &got)
			stops := "eaiousnt"
			for k, s := range got.Sequences {
				text := l.Tokenizer.Decode(s.Tokens)
				before := l.Tokenizer.Decode(s.Tokens[:len(s.Tokens)-1])
				if strings.ContainsAny(before, stops) {
					t.Errorf("sample %d %q goes on past a stop string", k, text)
				}
				if s.StopReason == tinker.StopStop && !strings.ContainsAny(text, stops) && s.Tokens[len(s.Tokens)-1] != tokenizer.ByteEOS {
					t.Errorf("sample %d %q stopped without its stop string", k, text)
				}
			}
		})
	}
}

// TestPromptLogprobs asks for the prompt's logprobs as the Tinker
// cookbook computes a reference model's: asample on the base model with
// max_tokens 1.
func TestPromptLogprobs(t *testing.T) {
	h := newHarness(t, Config{})
	l, err := checkpoint.Open(testModelDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, prompt := range [][]int32{{256, 72, 105, 33, 10}, {256}, {256, 1}} {
		body := map[string]any{"prompt": tinker.Text(prompt), "base_model": testBase, "prompt_logprobs": yes,
			"sampling_params": map[string]any{"max_tokens": 1, "seed": 3}}
		var got tinker.SampleResponse
		h.call(tinker.PathSample, body, &got)
		if len(got.PromptLogprobs) != len(prompt) || got.PromptLogprobs[0] != nil {
			t.Fatalf("prompt %v: prompt logprobs %v", prompt, got.PromptLogprobs)
		}
		if len(prompt) == 1 {
			continue
		}
		want := make([]float32, len(prompt)-1)
		if err := l.Model.Logprobs(model.Pack([][]int32{prompt[:len(prompt)-1]}), prompt[1:], want, nil); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if p := got.PromptLogprobs[i+1]; p == nil || *p != float64(w) {
				t.Errorf("prompt %v token %d: logprob %v, want %v", prompt, i+1, p, w)
			}
		}
		if len(got.Sequences) != 1 || len(got.Sequences[0].Tokens) != 1 {
			t.Errorf("sequences %+v, want one of one token", got.Sequences)
		}
		// prompt_logprobs_last_n: the same values for the last n tokens,
		// null before them.
		for n := 1; n < len(prompt); n++ {
			body["prompt_logprobs_last_n"] = n
			var last tinker.SampleResponse
			h.call(tinker.PathSample, body, &last)
			if len(last.PromptLogprobs) != len(prompt) {
				t.Fatalf("prompt %v, last %d: prompt logprobs %v", prompt, n, last.PromptLogprobs)
			}
			for i, p := range last.PromptLogprobs {
				switch {
				case i < len(prompt)-n && p != nil:
					t.Errorf("prompt %v, last %d: token %d has logprob %v, want null", prompt, n, i, *p)
				case i >= len(prompt)-n && (p == nil || *p != float64(want[i-1])):
					t.Errorf("prompt %v, last %d: token %d has logprob %v, want %v", prompt, n, i, p, want[i-1])
				}
			}
		}
		delete(body, "prompt_logprobs_last_n")
	}
	// Out of range, or without prompt_logprobs: the call fails, naming
	// the field.
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"prompt_logprobs": yes, "prompt_logprobs_last_n": 3}, "prompt_logprobs_last_n is 3, want 1 to 2"},
		{map[string]any{"prompt_logprobs": yes, "prompt_logprobs_last_n": 0}, "prompt_logprobs_last_n is 0, want 1 to 2"},
		{map[string]any{"prompt_logprobs_last_n": 1}, "prompt_logprobs_last_n is 1, and prompt_logprobs is not true"},
	} {
		tc.body["prompt"], tc.body["base_model"] = tinker.Text([]int32{256, 72, 105}), testBase
		tc.body["sampling_params"] = map[string]any{"max_tokens": 1}
		if f := h.failure(tinker.PathSample, tc.body); f.Category != "user" || !strings.Contains(f.Message, tc.want) {
			t.Errorf("failure %+v, want %q", f, tc.want)
		}
	}
}

// TestSamplerWeights checks save_weights_for_sampler: a copy samples from
// exactly the weights it was taken from, whatever training follows; the
// oldest copies beyond the limit are dropped.
func TestSamplerWeights(t *testing.T) {
	h := newHarness(t, Config{MaxSamplerWeights: 2})
	_, id := h.newModel()
	l, err := checkpoint.Open(testModelDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	learner := localLearner(t)
	c := sampleCases[0]
	sampleFrom := func(path, base string) tinker.SampleResponse {
		var got tinker.SampleResponse
		h.call(tinker.PathSample, c.wire(path, base), &got)
		return got
	}
	save := func(name string) string {
		var out tinker.SaveWeightsResponse
		h.call(tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: id, Path: name, Type: "save_weights_for_sampler"}, &out)
		if out.Type != "save_weights_for_sampler" || !strings.HasPrefix(out.Path, "tinker://"+id+"/sampler_weights/") {
			t.Fatalf("saved %+v", out)
		}
		return out.Path
	}
	train := func() {
		data, _ := makeBatch(t, r, tinker.CrossEntropy, learner)
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tinker.CrossEntropy}}, &out)
		var os tinker.OptimStepResponse
		h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 0.05, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}, &os)
	}
	before := save("before")
	if before != "tinker://"+id+"/sampler_weights/before" {
		t.Fatalf("path %s", before)
	}
	base := sampleFrom("", testBase)
	train()
	train()
	after := save("") // a generated name
	trained := h.params(id)
	m, err := model.NewEmpty(l.Model.Config)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Params, trained)
	want, err := local.NewSampler(m, l.Tokenizer).Sample(context.Background(), []sample.Request{c.local(l)})
	if err != nil {
		t.Fatal(err)
	}
	train()
	got := sampleFrom(after, "")
	sameSamples(t, "after training", got, want[0], true)
	old := sampleFrom(before, "")
	if !slicesEqualSeq(old, base) {
		t.Errorf("weights saved before training sample %+v, the base model %+v", old, base)
	}
	if slicesEqualSeq(got, base) {
		t.Error("the trained weights sample as the base model does: the test cannot tell the copies apart")
	}
	// The form without the kind is SkyRL's too.
	if other := sampleFrom("tinker://"+id+"/before", ""); !slicesEqualSeq(other, base) {
		t.Error("tinker://<model_id>/<name> does not name the same weights")
	}
	save("third") // drops "before", the oldest of three
	status, b := h.do(http.MethodPost, tinker.PathSample, c.wire(before, ""))
	expectDetail(t, status, b, http.StatusNotFound, "sampler weights "+before+" not found")
	sampleFrom(after, "")

	for _, tc := range []struct {
		req    tinker.SampleRequest
		status int
		want   string
	}{
		{c.wire("tinker://model_nothing/sampler_weights/x", ""), http.StatusNotFound, "model model_nothing not found"},
		{c.wire("tinker://"+id+"/weights/x", ""), http.StatusBadRequest, "is not a sampler weights path"},
		{c.wire("file:///etc/passwd", ""), http.StatusBadRequest, "is not a sampler weights path"},
		{c.wire("", "other"), http.StatusNotFound, `base_model "other" is not served here (served: tiny)`},
		{c.wire(after, testBase), http.StatusBadRequest, "exactly one of model_path and base_model"},
		{c.wire("", ""), http.StatusBadRequest, "exactly one of model_path and base_model"},
	} {
		status, b := h.do(http.MethodPost, tinker.PathSample, tc.req)
		expectDetail(t, status, b, tc.status, tc.want)
	}
}

func slicesEqualSeq(a, b tinker.SampleResponse) bool {
	if len(a.Sequences) != len(b.Sequences) {
		return false
	}
	for i := range a.Sequences {
		if !slices.Equal(a.Sequences[i].Tokens, b.Sequences[i].Tokens) || !slices.Equal(a.Sequences[i].Logprobs, b.Sequences[i].Logprobs) {
			return false
		}
	}
	return true
}

// TestSampleValidation sends sampling parameters wrong in each way: the
// call fails as the user's, naming the field.
func TestSampleValidation(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		name string
		sp   map[string]any
		more map[string]any
		want []string
	}{
		{"no max_tokens", map[string]any{}, nil, []string{"sampling_params.max_tokens is required"}},
		{"zero max_tokens", map[string]any{"max_tokens": 0}, nil, []string{"sampling_params.max_tokens is 0"}},
		{"bad settings", map[string]any{"max_tokens": 4, "temperature": -1, "top_p": 0, "top_k": -3}, nil,
			[]string{"temperature is -1", "top_p is 0, want in (0, 1]", "top_k is -3"}},
		{"mixed stop", map[string]any{"max_tokens": 4, "stop": []any{1, "x"}}, nil, []string{"sampling_params.stop must be a list of token ids or a list of strings"}},
		{"negative stop token", map[string]any{"max_tokens": 4, "stop": []int{-1}}, nil, []string{"sampling_params.stop[0] is -1"}},
		{"stop token outside the vocabulary", map[string]any{"max_tokens": 4, "stop": []int{5, 259}}, nil, []string{"sampling_params.stop token 1 is 259, outside the vocabulary [0, 259)"}},
		{"empty stop string", map[string]any{"max_tokens": 4, "stop": []string{"x", ""}}, nil, []string{"sampling_params.stop[1] is an empty string"}},
		{"zero samples", map[string]any{"max_tokens": 4}, map[string]any{"num_samples": 0}, []string{"num_samples is 0"}},
		{"empty prompt", map[string]any{"max_tokens": 4}, map[string]any{"prompt": tinker.Text(nil)}, []string{"prompt has no tokens"}},
		{"prompt outside vocabulary", map[string]any{"max_tokens": 4}, map[string]any{"prompt": tinker.Text([]int32{1, 500})}, []string{"prompt token 1 is 500"}},
		{"prompt fills the context", map[string]any{"max_tokens": 4}, map[string]any{"prompt": tinker.Text(make([]int32, 64))}, []string{"prompt has 64 tokens, leaving no room"}},
		{"no sampling_params", nil, nil, []string{"sampling_params is missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"prompt": tinker.Text([]int32{256, 1}), "base_model": testBase}
			if tc.sp != nil {
				body["sampling_params"] = tc.sp
			}
			for k, v := range tc.more {
				body[k] = v
			}
			f := h.failure(tinker.PathSample, body)
			for _, w := range tc.want {
				if f.Category != "user" || !strings.Contains(f.Message, w) {
					t.Errorf("%+v does not mention %q as the user's", f, w)
				}
			}
		})
	}
	// A single stop string, as the SDK allows, and defaults for the rest.
	var got tinker.SampleResponse
	h.call(tinker.PathSample, map[string]any{"prompt": tinker.Text([]int32{256, 1}), "base_model": testBase,
		"sampling_params": map[string]any{"max_tokens": 3, "stop": "x"}}, &got)
	if len(got.Sequences) != 1 {
		t.Errorf("num_samples defaults to 1: %d sequences", len(got.Sequences))
	}
	for _, lp := range got.Sequences[0].Logprobs {
		if math.IsNaN(lp) || lp > 0 {
			t.Errorf("logprob %v", lp)
		}
	}
}

// TestFullBatchDoesNotWait checks the whole-batch sampling worker stops waiting for
// others to join a batch once the batch is full.
func TestFullBatchDoesNotWait(t *testing.T) {
	h := newHarness(t, Config{WholeBatches: true, BatchWindow: time.Hour, MaxBatch: 4, PollTimeout: 10 * time.Second})
	c := sampleCases[0]
	req := func(n int) tinker.SampleRequest {
		c.n = n
		return c.wire("", testBase)
	}
	retrieve := func(f tinker.Future, n int) {
		t.Helper()
		status, b := h.do(http.MethodPost, tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: f.RequestID})
		if status != http.StatusOK {
			t.Fatalf("retrieve_future %s: status %d: %s", f.RequestID, status, b)
		}
		var res tinker.SampleResponse
		strict(t, b, &res)
		if len(res.Sequences) != n {
			t.Fatalf("retrieve_future %s: %d sequences, want %d", f.RequestID, len(res.Sequences), n)
		}
	}
	// Two calls that fill a batch together, then one that fills it alone.
	a, b := h.submit(tinker.PathSample, req(3)), h.submit(tinker.PathSample, req(1))
	retrieve(a, 3)
	retrieve(b, 1)
	retrieve(h.submit(tinker.PathSample, req(4)), 4)
}
