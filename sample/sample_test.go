package sample

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"rlvr/engine/model"
	"rlvr/engine/parallel"
	"rlvr/format/llama2c"
	"rlvr/internal/shareddata"
)

var ctx = context.Background()

// stories loads the llama2.c stories260K model and its tokenizer.
func stories(t testing.TB) (*model.Model, *llama2c.Tokenizer) {
	t.Helper()
	m, err := llama2c.LoadModel(shareddata.Path(t, "stories260K/stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := llama2c.ReadTokenizer(shareddata.Path(t, "stories260K/tok512.bin"), m.Config.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

// runCText prints tokens as run.c does: each token's piece after the one
// before it, with run.c's safe_printf filter.
func runCText(tok *llama2c.Tokenizer, ids []int32) string {
	var b strings.Builder
	for i := 1; i < len(ids); i++ {
		p := tok.Decode(ids[i-1], ids[i])
		if len(p) == 1 && !(p[0] >= 0x20 && p[0] < 0x7f || p[0] >= '\t' && p[0] <= '\r') {
			continue
		}
		b.WriteString(p)
	}
	return b.String()
}

// TestGreedyMatchesRunC compares greedy generation with what llama2.c's
// run.c printed for the same prompts (testdata/runc_greedy.json, produced
// by the command its "source" field gives). All prompts run in one batch.
func TestGreedyMatchesRunC(t *testing.T) {
	m, tok := stories(t)
	data, err := os.ReadFile("testdata/runc_greedy.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			Prompt string
			Steps  int
			Output string
		}
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	var reqs []Request
	for _, c := range golden.Cases {
		prompt := tok.Encode(c.Prompt, true, false)
		reqs = append(reqs, Request{Prompt: prompt, Params: Params{MaxTokens: c.Steps - len(prompt) + 1, StopTokens: []int32{llama2c.BOS}}})
	}
	out, err := New(m, nil).Sample(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range golden.Cases {
		gen := out[i][0].Tokens
		if n := len(gen); n > 0 && gen[n-1] == llama2c.BOS {
			gen = gen[:n-1] // run.c stops at BOS without printing it
		}
		got := runCText(tok, append(append([]int32(nil), reqs[i].Prompt...), gen...))
		if got != c.Output {
			t.Errorf("prompt %q:\n got %q\nwant %q", c.Prompt, got, c.Output)
		}
	}
}

// TestLogprobsMatchLearner samples at temperature 1 and compares the
// sampler's logprobs with the learner's on the same sequences.
func TestLogprobsMatchLearner(t *testing.T) {
	m, tok := stories(t)
	var reqs []Request
	for i, p := range []string{"Once upon a time", "The cat", "A big red"} {
		reqs = append(reqs, Request{Prompt: tok.Encode(p, true, false), Params: Params{MaxTokens: 40, Temperature: 1, N: 2, Seed: uint64(i)}})
	}
	out, err := New(m, nil).Sample(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	gap, err := LogprobGap(m, reqs, out)
	if err != nil {
		t.Fatal(err)
	}
	if gap > 1e-4 {
		t.Fatalf("max |sampler − learner| logprob gap %.3g > 1e-4", gap)
	}
	t.Logf("max |sampler − learner| logprob gap: %.3g", gap)
}

// TestReproducibleAndBatchInvariant checks a seed fixes the samples and a
// request gives the same tokens alone as in a batch with others of other
// lengths.
func TestReproducibleAndBatchInvariant(t *testing.T) {
	m, tok := stories(t)
	s := New(m, nil)
	req := Request{Prompt: tok.Encode("The dog", true, false), Params: Params{MaxTokens: 30, Temperature: 0.8, TopP: 0.9, TopK: 40, N: 3, Seed: 7}}
	other := Request{Prompt: tok.Encode("Once upon a time there was a girl", true, false), Params: Params{MaxTokens: 50, Temperature: 1, Seed: 1}}
	alone, err := s.Sample(ctx, []Request{req})
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := s.Sample(ctx, []Request{other, req})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		a, b := alone[0][k].Tokens, mixed[1][k].Tokens
		if !equal(a, b) {
			t.Fatalf("sample %d differs alone and batched:\n%v\n%v", k, a, b)
		}
		if !sameBits(alone[0][k].Logprobs, mixed[1][k].Logprobs) {
			t.Fatalf("sample %d's logprobs differ alone and batched:\n%v\n%v", k, alone[0][k].Logprobs, mixed[1][k].Logprobs)
		}
	}
	if equal(alone[0][0].Tokens, alone[0][1].Tokens) && equal(alone[0][1].Tokens, alone[0][2].Tokens) {
		t.Fatal("three samples at temperature 0.8 are identical")
	}
	req.Params.Seed = 8
	again, _ := s.Sample(ctx, []Request{req})
	if equal(again[0][0].Tokens, alone[0][0].Tokens) && equal(again[0][1].Tokens, alone[0][1].Tokens) {
		t.Fatal("another seed gave the same samples")
	}
}

// TestBatchInvariantAtScale checks, on a model with grouped-query
// attention and q/k/v biases, that a request's tokens and logprobs are
// bitwise the same alone, beside 7 and beside 63 other streams of other
// prompts, and on one or two threads.
func TestBatchInvariantAtScale(t *testing.T) {
	m, err := model.New(model.Config{Vocab: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 96, MaxSeq: 64, AttentionBias: true, TiedEmbeddings: true}, 3)
	if err != nil {
		t.Fatal(err)
	}
	s := New(m, nil)
	req := Request{Prompt: []int32{5, 17, 42}, Params: Params{MaxTokens: 20, Temperature: 1, N: 2, Seed: 11}}
	alone, err := s.Sample(ctx, []Request{req})
	if err != nil {
		t.Fatal(err)
	}
	defer parallel.SetThreads(parallel.Threads())
	for _, threads := range []int{1, 2} {
		parallel.SetThreads(threads)
		for _, others := range []int{6, 62} {
			other := Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, Params: Params{MaxTokens: 30, Temperature: 0.7, N: others, Seed: 3}}
			mixed, err := s.Sample(ctx, []Request{other, req})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 2 {
				a, b := alone[0][k], mixed[1][k]
				if !equal(a.Tokens, b.Tokens) || !sameBits(a.Logprobs, b.Logprobs) {
					t.Fatalf("%d threads, %d other streams: sample %d differs from alone:\n%v %v\n%v %v", threads, others, k, a.Tokens, a.Logprobs, b.Tokens, b.Logprobs)
				}
			}
		}
	}
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTruncationLimits checks top-k 1 and a tiny top-p are greedy.
func TestTruncationLimits(t *testing.T) {
	m, tok := stories(t)
	s := New(m, nil)
	prompt := tok.Encode("Lily", true, false)
	greedy, _ := s.Sample(ctx, []Request{{Prompt: prompt, Params: Params{MaxTokens: 25}}})
	for _, p := range []Params{{MaxTokens: 25, Temperature: 1.5, TopK: 1}, {MaxTokens: 25, Temperature: 1.5, TopP: 1e-6}} {
		got, err := s.Sample(ctx, []Request{{Prompt: prompt, Params: p}})
		if err != nil {
			t.Fatal(err)
		}
		if !equal(got[0][0].Tokens, greedy[0][0].Tokens) {
			t.Errorf("%+v is not greedy", p)
		}
	}
}

type runCDecoder struct{ tok *llama2c.Tokenizer }

func (d runCDecoder) Decode(ids []int32) string { return d.tok.DecodeAll(ids) }

func TestStopStringsAndTokens(t *testing.T) {
	m, tok := stories(t)
	s := New(m, runCDecoder{tok})
	prompt := tok.Encode("Once upon a time", true, false)
	full, err := s.Sample(ctx, []Request{{Prompt: prompt, Params: Params{MaxTokens: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	text := full[0][0].Text
	if full[0][0].Finish != FinishLength || len(full[0][0].Tokens) != 60 {
		t.Fatalf("finish %s after %d tokens", full[0][0].Finish, len(full[0][0].Tokens))
	}
	// Stop at "Lily": the text ends right before it.
	i := strings.Index(text, "Lily")
	if i < 0 {
		t.Fatalf("greedy text %q has no Lily", text)
	}
	var streamed []int32
	cut, err := s.Sample(ctx, []Request{{Prompt: prompt, Params: Params{MaxTokens: 60, Stop: []string{"Lily"}},
		OnToken: func(_ int, tok int32, _ float32) { streamed = append(streamed, tok) }}})
	if err != nil {
		t.Fatal(err)
	}
	c := cut[0][0]
	if c.Finish != FinishStop || c.Text != text[:i] || !equal(streamed, c.Tokens) {
		t.Fatalf("stop string: finish %s text %q (want %q), streamed %d of %d tokens", c.Finish, c.Text, text[:i], len(streamed), len(c.Tokens))
	}
	// With IncludeStop the stop string and the token that completed it
	// are kept.
	kept, err := s.Sample(ctx, []Request{{Prompt: prompt, Params: Params{MaxTokens: 60, Stop: []string{"Lily"}, IncludeStop: true}}})
	if err != nil {
		t.Fatal(err)
	}
	k := kept[0][0]
	if k.Text != text[:i+4] || k.StopString != "Lily" || len(k.Tokens) != len(c.Tokens)+1 || len(k.Logprobs) != len(k.Tokens) {
		t.Fatalf("include stop: text %q, stop %q, %d tokens (without: %d)", k.Text, k.StopString, len(k.Tokens), len(c.Tokens))
	}
	// A stop token is kept and ends the sample.
	stopAt := full[0][0].Tokens[10]
	st, _ := s.Sample(ctx, []Request{{Prompt: prompt, Params: Params{MaxTokens: 60, StopTokens: []int32{stopAt}}}})
	got := st[0][0].Tokens
	if st[0][0].Finish != FinishStop || got[len(got)-1] != stopAt || len(got) > 11 {
		t.Fatalf("stop token: %v (%s)", got, st[0][0].Finish)
	}
}

func TestBadRequests(t *testing.T) {
	m, _ := stories(t)
	s := New(m, nil)
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Prompt: []int32{1}, Params: Params{Temperature: -1, TopP: 2}}, "temperature -1 is negative or NaN; top_p 2 is outside [0, 1]"},
		{Request{Prompt: []int32{1, 9999}}, "prompt token 9999 outside the vocabulary"},
		{Request{}, "empty prompt"},
		{Request{Prompt: []int32{1}, Params: Params{Stop: []string{"x"}}}, "stop strings need a decoder"},
		{Request{Prompt: make([]int32, 600)}, "leaves no room"},
	} {
		_, err := s.Sample(ctx, []Request{{Prompt: []int32{1}}, tc.req})
		if err == nil || !strings.Contains(err.Error(), "request 1: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func TestHoldBack(t *testing.T) {
	for _, tc := range []struct {
		text string
		stop []string
		want int
	}{{"hello wor", []string{"world"}, 3}, {"hello", []string{"xyz"}, 0}, {"a\n\n", []string{"\n\n\n", "Q:"}, 2}, {"", []string{"ab"}, 0}} {
		if got := HoldBack(tc.text, tc.stop); got != tc.want {
			t.Errorf("HoldBack(%q, %q) = %d, want %d", tc.text, tc.stop, got, tc.want)
		}
	}
}

// TestTinyTemperatureIsGreedy checks that temperatures too small to divide
// the logits by sample exactly the greedy tokens, on stories260K (logits of
// order 10, which overflow) and on a random model (logits near 0, whose
// softmax is one-hot), with and without truncation.
func TestTinyTemperatureIsGreedy(t *testing.T) {
	sm, tok := stories(t)
	rm, err := model.New(model.Config{Vocab: 64, Dim: 16, Layers: 2, Heads: 2, Hidden: 32, MaxSeq: 64}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		m      *model.Model
		prompt []int32
	}{
		{"stories260K", sm, tok.Encode("Once upon a time", true, false)},
		{"random", rm, []int32{1, 5, 9}},
	} {
		s := New(tc.m, nil)
		greedyOut, err := s.Sample(ctx, []Request{{Prompt: tc.prompt, Params: Params{MaxTokens: 40}}})
		if err != nil {
			t.Fatal(err)
		}
		want := greedyOut[0][0].Tokens
		for _, temp := range []float32{0, 1e-30, 1e-38, 1e-40, 1e-45, math.SmallestNonzeroFloat32} {
			for _, trunc := range []Params{{}, {TopP: 0.9}, {TopK: 5}} {
				p := trunc
				p.Temperature, p.MaxTokens, p.N, p.Seed = temp, 40, 3, 11
				out, err := s.Sample(ctx, []Request{{Prompt: tc.prompt, Params: p}})
				if err != nil {
					t.Fatal(err)
				}
				for k, c := range out[0] {
					if !equal(c.Tokens, want) {
						t.Errorf("%s: temperature %g, top-p %v, top-k %d, sample %d:\n%v\nwant the greedy\n%v", tc.name, temp, p.TopP, p.TopK, k, c.Tokens, want)
					}
				}
			}
		}
	}
}

// TestGreedyThreshold checks where a temperature stops being divisible:
// only where the largest scaled logit, or 1/t, overflows float32.
func TestGreedyThreshold(t *testing.T) {
	for _, tc := range []struct {
		t, mx float32
		want  bool
	}{
		{0, 3, true},
		{1e-38, 10, true},
		{1e-38, -10, true},
		{1e-38, 1e-3, false}, // divisible: the softmax is one-hot and draws the argmax
		{1e-45, 0, true},
		{math.SmallestNonzeroFloat32, 1e-30, true},
		{1e-30, 10, false},
		{0.8, 10, false},
		{1, math.MaxFloat32, false},
		{0.5, math.MaxFloat32, true},
		{2, -50, false},
	} {
		if got := greedy(tc.t, tc.mx); got != tc.want {
			t.Errorf("greedy(%g, %g) = %v, want %v", tc.t, tc.mx, got, tc.want)
		}
	}
}

// TestReplayMatchesSamplingWithTheRules: tokens sampled without stop
// rules, replayed through them, are what sampling with them gives (a
// remote sampler stops only at its own end tokens).
func TestReplayMatchesSamplingWithTheRules(t *testing.T) {
	m, tok := stories(t)
	dec := runCDecoder{tok}
	s := New(m, dec)
	prompt := tok.Encode("Once upon a time", true, false)
	free := Params{MaxTokens: 60, Temperature: 0.9, N: 4, Seed: 3}
	raw, err := s.Sample(ctx, []Request{{Prompt: prompt, Params: free}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rules := range []Params{
		{Stop: []string{"."}},
		{Stop: []string{" the", "."}, IncludeStop: true},
		{StopTokens: []int32{raw[0][0].Tokens[5]}},
		{MaxTokens: 7},
	} {
		p := free
		p.Stop, p.IncludeStop, p.StopTokens = rules.Stop, rules.IncludeStop, rules.StopTokens
		if rules.MaxTokens > 0 {
			p.MaxTokens = rules.MaxTokens
		}
		want, err := s.Sample(ctx, []Request{{Prompt: prompt, Params: p}})
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range raw[0] {
			got, err := Replay(&p, dec, r.Tokens, r.Logprobs, r.Finish)
			if err != nil {
				t.Fatal(err)
			}
			w := want[0][k]
			if !equal(got.Tokens, w.Tokens) || got.Text != w.Text || got.Finish != w.Finish || got.StopString != w.StopString || len(got.Logprobs) != len(w.Logprobs) {
				t.Errorf("rules %+v, sample %d: replay gives %q (%s, %d tokens), sampling %q (%s, %d tokens)", rules, k, got.Text, got.Finish, len(got.Tokens), w.Text, w.Finish, len(w.Tokens))
			}
		}
	}
	if _, err := Replay(&Params{}, nil, []int32{1, 2}, []float32{-1}, FinishStop); err == nil {
		t.Error("tokens and logprobs of different lengths replayed")
	}
}

// TestPackOnce checks when the sampler sees new weights: at every call by
// default, and with PackOnce only after Repack.
func TestPackOnce(t *testing.T) {
	m, tok := stories(t)
	req := Request{Prompt: tok.Encode("Once upon a time", true, false), Params: Params{MaxTokens: 20, Temperature: 1, Seed: 3}}
	sampleWith := func(s *Sampler) Completion {
		out, err := s.Sample(ctx, []Request{req})
		if err != nil {
			t.Fatal(err)
		}
		return out[0][0]
	}
	every, once := New(m, nil), New(m, nil)
	once.PackOnce = true
	before := sampleWith(every)
	if got := sampleWith(once); !sameBits(got.Logprobs, before.Logprobs) {
		t.Fatal("a PackOnce sampler's first call differs from a default sampler's")
	}
	saved := slices.Clone(m.Params)
	defer copy(m.Params, saved)
	// A projection the cache packs (norms and embeddings are read in place).
	down, _, ok := m.Tensor("model.layers.0.mlp.down_proj.weight")
	if !ok {
		t.Fatal("no layer 0 down projection")
	}
	for i := range down {
		down[i] *= 3
	}
	fresh := sampleWith(New(m, nil))
	if sameBits(fresh.Logprobs, before.Logprobs) {
		t.Fatal("scaling the weights changed no logprob: the test cannot tell packed copies apart")
	}
	if got := sampleWith(every); !sameBits(got.Logprobs, fresh.Logprobs) {
		t.Fatal("a default sampler did not see the new weights")
	}
	if got := sampleWith(once); !sameBits(got.Logprobs, before.Logprobs) {
		t.Fatal("a PackOnce sampler repacked without Repack")
	}
	once.Repack()
	if got := sampleWith(once); !sameBits(got.Logprobs, fresh.Logprobs) {
		t.Fatal("a PackOnce sampler did not see the new weights after Repack")
	}
}
