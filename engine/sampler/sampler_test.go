package sampler

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

// drawn is what a request's continuations drew: tokens[k] and logprobs[k]
// of continuation k.
type drawn struct {
	tokens   [][]int32
	logprobs [][]float32
}

// record makes r's Accept record every token into the returned drawn,
// ending a continuation at any of the stop tokens.
func record(r *Request, stop ...int32) *drawn {
	d := &drawn{tokens: make([][]int32, max(r.N, 1)), logprobs: make([][]float32, max(r.N, 1))}
	r.Accept = func(k int, tok int32, lp float32, _ bool) bool {
		d.tokens[k] = append(d.tokens[k], tok)
		d.logprobs[k] = append(d.logprobs[k], lp)
		return slices.Contains(stop, tok)
	}
	return d
}

// sampleAll draws reqs in one call and returns what each drew.
func sampleAll(t testing.TB, s *Sampler, reqs ...Request) []*drawn {
	t.Helper()
	out := make([]*drawn, len(reqs))
	for i := range reqs {
		out[i] = record(&reqs[i])
	}
	if err := s.Sample(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	return out
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
		reqs = append(reqs, Request{Prompt: prompt, MaxNew: c.Steps - len(prompt) + 1})
	}
	var out []*drawn
	for i := range reqs {
		out = append(out, record(&reqs[i], llama2c.BOS))
	}
	if err := New(m).Sample(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	for i, c := range golden.Cases {
		gen := out[i].tokens[0]
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
	m, prompts, conts, lps := storySamples(t, 2)
	gap, err := LogprobGap(m, prompts, conts, lps)
	if err != nil {
		t.Fatal(err)
	}
	if gap > 1e-4 {
		t.Fatalf("max |sampler − learner| logprob gap %.3g > 1e-4", gap)
	}
	t.Logf("max |sampler − learner| logprob gap: %.3g", gap)
}

// TestLogprobGapAcrossPasses: sequences beyond one learner pass
// (gapPassTokens) are scored in several, each against its own
// continuation: a logprob moved by 0.5 in the last sequence is the gap.
func TestLogprobGapAcrossPasses(t *testing.T) {
	m, prompts, conts, lps := storySamples(t, 40)
	tokens := 0
	for i := range prompts {
		tokens += len(prompts[i]) + len(conts[i])
	}
	if tokens <= gapPassTokens {
		t.Fatalf("%d tokens: too few to need more than one pass of %d", tokens, gapPassTokens)
	}
	last := lps[len(lps)-1]
	last[len(last)-1] += 0.5
	gap, err := LogprobGap(m, prompts, conts, lps)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(gap-0.5) > 1e-4 {
		t.Fatalf("gap %.6f over %d sequences (%d tokens), want 0.5 (the moved logprob)", gap, len(lps), tokens)
	}
}

// storySamples samples n continuations of 40 tokens at temperature 1 of
// each of three prompts from stories260K, and returns the model and every
// sample as a sequence: its prompt, its continuation and the sampler's
// logprobs of it.
func storySamples(t *testing.T, n int) (m *model.Model, prompts, conts [][]int32, lps [][]float32) {
	t.Helper()
	m, tok := stories(t)
	var reqs []Request
	for i, p := range []string{"Once upon a time", "The cat", "A big red"} {
		reqs = append(reqs, Request{Prompt: tok.Encode(p, true, false), MaxNew: 40, Temperature: 1, N: n, Seed: uint64(i)})
	}
	for i, d := range sampleAll(t, New(m), reqs...) {
		for k := range d.tokens {
			prompts, conts, lps = append(prompts, reqs[i].Prompt), append(conts, d.tokens[k]), append(lps, d.logprobs[k])
		}
	}
	return m, prompts, conts, lps
}

// TestReproducibleAndBatchInvariant checks a seed fixes the samples and a
// request gives the same tokens alone as in a batch with others of other
// lengths.
func TestReproducibleAndBatchInvariant(t *testing.T) {
	m, tok := stories(t)
	s := New(m)
	req := Request{Prompt: tok.Encode("The dog", true, false), MaxNew: 30, Temperature: 0.8, TopP: 0.9, TopK: 40, N: 3, Seed: 7}
	other := Request{Prompt: tok.Encode("Once upon a time there was a girl", true, false), MaxNew: 50, Temperature: 1, Seed: 1}
	alone := sampleAll(t, s, req)[0]
	mixed := sampleAll(t, s, other, req)[1]
	for k := range 3 {
		if a, b := alone.tokens[k], mixed.tokens[k]; !slices.Equal(a, b) {
			t.Fatalf("sample %d differs alone and batched:\n%v\n%v", k, a, b)
		}
		if !sameBits(alone.logprobs[k], mixed.logprobs[k]) {
			t.Fatalf("sample %d's logprobs differ alone and batched:\n%v\n%v", k, alone.logprobs[k], mixed.logprobs[k])
		}
	}
	if slices.Equal(alone.tokens[0], alone.tokens[1]) && slices.Equal(alone.tokens[1], alone.tokens[2]) {
		t.Fatal("three samples at temperature 0.8 are identical")
	}
	req.Seed = 8
	again := sampleAll(t, s, req)[0]
	if slices.Equal(again.tokens[0], alone.tokens[0]) && slices.Equal(again.tokens[1], alone.tokens[1]) {
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
	s := New(m)
	req := Request{Prompt: []int32{5, 17, 42}, MaxNew: 20, Temperature: 1, N: 2, Seed: 11}
	alone := sampleAll(t, s, req)[0]
	defer parallel.SetThreads(parallel.Threads())
	for _, threads := range []int{1, 2} {
		parallel.SetThreads(threads)
		for _, others := range []int{6, 62} {
			other := Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, MaxNew: 30, Temperature: 0.7, N: others, Seed: 3}
			mixed := sampleAll(t, s, other, req)[1]
			for k := range 2 {
				if !slices.Equal(alone.tokens[k], mixed.tokens[k]) || !sameBits(alone.logprobs[k], mixed.logprobs[k]) {
					t.Fatalf("%d threads, %d other streams: sample %d differs from alone:\n%v %v\n%v %v", threads, others, k,
						alone.tokens[k], alone.logprobs[k], mixed.tokens[k], mixed.logprobs[k])
				}
			}
		}
	}
}

// TestMaxStreamsIsTheSame checks that a bound on the streams in flight
// (continuous batching: requests start as others end, in slots others
// left) draws bitwise the same tokens and logprobs as one batch of all,
// for bounds below, at and above the widest request, with continuations
// ending early at a stop token and late at their token budget; and that
// no more continuations than the bound are ever in flight.
func TestMaxStreamsIsTheSame(t *testing.T) {
	m, err := model.New(model.Config{Vocab: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 96, MaxSeq: 64, AttentionBias: true, TiedEmbeddings: true}, 5)
	if err != nil {
		t.Fatal(err)
	}
	requests := func() ([]Request, []*drawn) {
		reqs := []Request{
			{Prompt: []int32{5, 17, 42}, MaxNew: 20, Temperature: 1, N: 3, Seed: 11},
			{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, MaxNew: 40, Temperature: 0.7, N: 2, Seed: 3},
			{Prompt: []int32{9}, MaxNew: 6, N: 1, Seed: 4}, // greedy
			{Prompt: []int32{8, 8, 8, 8}, MaxNew: 30, Temperature: 1.3, TopK: 50, N: 4, Seed: 5},
			{Prompt: []int32{250, 3}, MaxNew: 12, Temperature: 1, N: 1, Seed: 6},
		}
		out := make([]*drawn, len(reqs))
		for i := range reqs {
			// Tokens below 30 end a continuation: about one draw in ten.
			out[i] = record(&reqs[i], slices.Collect(func(yield func(int32) bool) {
				for tok := range int32(30) {
					if !yield(tok) {
						return
					}
				}
			})...)
		}
		return reqs, out
	}
	s := New(m)
	reqs, all := requests()
	if err := s.Sample(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	var lengths []int
	for _, d := range all {
		for _, toks := range d.tokens {
			lengths = append(lengths, len(toks))
		}
	}
	if slices.Min(lengths) == slices.Max(lengths) {
		t.Fatalf("every continuation drew %d tokens: the test needs some to end before others", lengths[0])
	}
	// inFlight wraps every continuation's Accept to count the
	// continuations that have drawn and not ended, and returns the most
	// at once.
	inFlight := func(reqs []Request) *int {
		live, most := 0, new(int)
		for i := range reqs {
			accept, started := reqs[i].Accept, map[int]bool{}
			reqs[i].Accept = func(k int, tok int32, lp float32, last bool) bool {
				if !started[k] {
					started[k] = true
					live++
					*most = max(*most, live)
				}
				done := accept(k, tok, lp, last)
				if done || last {
					live--
				}
				return done
			}
		}
		return most
	}
	for _, bound := range []int{0, 1, 2, 3, 4, 5, 9, 100} {
		s.MaxStreams = bound
		reqs, got := requests()
		most := inFlight(reqs)
		if err := s.Sample(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		// Unbounded, more than 5 run at once (some end at their first
		// token), so the count can catch a bound of 1 to 5 ignored. The
		// widest request (4 continuations) starts whole.
		if bound == 0 && *most <= 5 {
			t.Fatalf("unbounded: at most %d continuations in flight, want more than 5", *most)
		}
		if want := max(bound, 4); bound > 0 && *most > want {
			t.Errorf("MaxStreams %d: %d continuations in flight at once, want at most %d", bound, *most, want)
		}
		for i := range all {
			for k := range all[i].tokens {
				if !slices.Equal(all[i].tokens[k], got[i].tokens[k]) || !sameBits(all[i].logprobs[k], got[i].logprobs[k]) {
					t.Fatalf("MaxStreams %d: request %d's continuation %d differs from the unbounded batch:\n%v\n%v",
						bound, i, k, all[i].tokens[k], got[i].tokens[k])
				}
			}
		}
	}
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestTruncationLimits checks top-k 1 and a tiny top-p are greedy.
func TestTruncationLimits(t *testing.T) {
	m, tok := stories(t)
	s := New(m)
	prompt := tok.Encode("Lily", true, false)
	greedy := sampleAll(t, s, Request{Prompt: prompt, MaxNew: 25})[0]
	for _, r := range []Request{{Prompt: prompt, MaxNew: 25, Temperature: 1.5, TopK: 1}, {Prompt: prompt, MaxNew: 25, Temperature: 1.5, TopP: 1e-6}} {
		if got := sampleAll(t, s, r)[0]; !slices.Equal(got.tokens[0], greedy.tokens[0]) {
			t.Errorf("top-k %d, top-p %v is not greedy", r.TopK, r.TopP)
		}
	}
}

// TestLengths checks that a continuation ends at MaxNew tokens or at the
// model's context, telling Accept its last token, and where Accept says.
func TestLengths(t *testing.T) {
	m, tok := stories(t)
	prompt := tok.Encode("Once upon a time", true, false)
	room := m.Config.MaxSeq - len(prompt)
	for _, tc := range []struct {
		maxNew, endAt int // endAt: the token after which Accept ends it, or -1
		want          int
		last          bool // whether Accept is told the final token is the last
	}{{10, -1, 10, true}, {room + 50, -1, room, true}, {10, 3, 4, false}} {
		var n int
		var last bool
		r := Request{Prompt: prompt, MaxNew: tc.maxNew, Temperature: 1, Seed: 5,
			Accept: func(_ int, _ int32, _ float32, l bool) bool {
				n, last = n+1, l
				return n-1 == tc.endAt
			}}
		if err := New(m).Sample(ctx, []Request{r}); err != nil {
			t.Fatal(err)
		}
		if n != tc.want || last != tc.last {
			t.Errorf("MaxNew %d, ended after token %d: %d tokens, the final one last %v; want %d, %v", tc.maxNew, tc.endAt, n, last, tc.want, tc.last)
		}
	}
}

func TestBadRequests(t *testing.T) {
	m, _ := stories(t)
	s := New(m)
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{Prompt: []int32{1, 9999}, MaxNew: 1}, "prompt token 9999 outside the vocabulary"},
		{Request{MaxNew: 1}, "empty prompt"},
		{Request{Prompt: make([]int32, 600), MaxNew: 1}, "leaves no room"},
		{Request{Prompt: []int32{1}}, "MaxNew 0"},
	} {
		err := s.Sample(ctx, []Request{{Prompt: []int32{1}, MaxNew: 1}, tc.req})
		if err == nil || !strings.Contains(err.Error(), "request 1: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
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
		s := New(tc.m)
		want := sampleAll(t, s, Request{Prompt: tc.prompt, MaxNew: 40})[0].tokens[0]
		for _, temp := range []float32{0, 1e-30, 1e-38, 1e-40, 1e-45, math.SmallestNonzeroFloat32} {
			for _, trunc := range []Request{{}, {TopP: 0.9}, {TopK: 5}} {
				r := trunc
				r.Prompt, r.Temperature, r.MaxNew, r.N, r.Seed = tc.prompt, temp, 40, 3, 11
				for k, got := range sampleAll(t, s, r)[0].tokens {
					if !slices.Equal(got, want) {
						t.Errorf("%s: temperature %g, top-p %v, top-k %d, sample %d:\n%v\nwant the greedy\n%v", tc.name, temp, r.TopP, r.TopK, k, got, want)
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

// TestPackOnce checks when the sampler sees new weights: at every call by
// default, and with PackOnce only after Repack.
func TestPackOnce(t *testing.T) {
	m, tok := stories(t)
	req := Request{Prompt: tok.Encode("Once upon a time", true, false), MaxNew: 20, Temperature: 1, Seed: 3}
	logprobs := func(s *Sampler) []float32 { return sampleAll(t, s, req)[0].logprobs[0] }
	every, once := New(m), New(m)
	once.PackOnce = true
	before := logprobs(every)
	if got := logprobs(once); !sameBits(got, before) {
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
	fresh := logprobs(New(m))
	if sameBits(fresh, before) {
		t.Fatal("scaling the weights changed no logprob: the test cannot tell packed copies apart")
	}
	if got := logprobs(every); !sameBits(got, fresh) {
		t.Fatal("a default sampler did not see the new weights")
	}
	if got := logprobs(once); !sameBits(got, before) {
		t.Fatal("a PackOnce sampler repacked without Repack")
	}
	once.Repack()
	if got := logprobs(once); !sameBits(got, fresh) {
		t.Fatal("a PackOnce sampler did not see the new weights after Repack")
	}
}

// TestFirstIsTheSame checks that a request's continuations drawn in parts
// (First) are bitwise those drawn together, and that a negative First is
// refused.
func TestFirstIsTheSame(t *testing.T) {
	m := loopModel(t)
	r := Request{Prompt: []int32{5, 17, 42}, MaxNew: 12, Temperature: 1, N: 5, Seed: 11}
	want := sampleAll(t, New(m), r)[0]
	a, b := r, r
	a.N = 2
	b.First, b.N = 2, 3
	parts := sampleAll(t, New(m), a, b)
	got := &drawn{tokens: append(parts[0].tokens, parts[1].tokens...), logprobs: append(parts[0].logprobs, parts[1].logprobs...)}
	for k := range want.tokens {
		if !slices.Equal(got.tokens[k], want.tokens[k]) || !slices.Equal(got.logprobs[k], want.logprobs[k]) {
			t.Errorf("continuation %d: in parts %v %v, together %v %v", k, got.tokens[k], got.logprobs[k], want.tokens[k], want.logprobs[k])
		}
	}
	r.First = -1
	if err := New(m).Sample(ctx, []Request{r}); err == nil || !strings.Contains(err.Error(), "First -1") {
		t.Errorf("First -1: %v, want it refused", err)
	}
}
