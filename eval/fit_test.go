package eval_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rlvr/backend/local"
	"rlvr/checkpoint"
	client "rlvr/client/openai"
	"rlvr/engine/model"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task"
	"rlvr/task/world"
)

// smallModel saves a random model of the built-in world's byte vocabulary
// with a context of 64 tokens, and opens it as rlvr eval does.
func smallModel(t *testing.T) *checkpoint.Loaded {
	t.Helper()
	cfg := model.Config{Vocab: 259, Dim: 16, Layers: 1, Heads: 2, Hidden: 32, MaxSeq: 64, RopeTheta: 10000, NormEps: 1e-5}
	m, err := model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if !l.AddBOS || l.Model.Config.MaxSeq != 64 {
		t.Fatalf("model: BOS %v, context %d", l.AddBOS, l.Model.Config.MaxSeq)
	}
	return l
}

// gsm8kFile writes GSM8K records with the given questions, one a line, and
// loads them.
func gsm8kFile(t *testing.T, questions ...string) (string, []task.Example) {
	t.Helper()
	var b strings.Builder
	for _, q := range questions {
		fmt.Fprintf(&b, `{"question": %q, "answer": "#### 3"}`+"\n", q)
	}
	path := filepath.Join(t.TempDir(), "test.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ex, err := task.Load("gsm8k", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, ex
}

// TestLocalFits checks the bound of a prompt: its tokens (BOS and one a
// byte) and the answer's fill the context of 64.
func TestLocalFits(t *testing.T) {
	g := eval.NewLocal(smallModel(t))
	for _, tt := range []struct {
		prompt    int // bytes
		maxTokens int
		fits      bool
	}{
		{10, 8, true},
		{55, 8, true}, // 1 + 55 + 8 = 64
		{56, 8, false},
		{62, 1, true},
		{63, 1, false},
		{63, 0, true},
		{64, 0, false},
	} {
		if got := g.Fits(strings.Repeat("x", tt.prompt), tt.maxTokens); got != tt.fits {
			t.Errorf("Fits(%d bytes, %d tokens) = %v, want %v", tt.prompt, tt.maxTokens, got, tt.fits)
		}
	}
	if !(&eval.Local{}).Fits(strings.Repeat("x", 1000), 1000) {
		t.Error("a Local without a model refused a prompt")
	}
}

// TestRunSkipsLongPrompts evaluates a real model on a file of which some
// prompts do not fit its context: they are skipped and named by file and
// line, the others evaluated.
func TestRunSkipsLongPrompts(t *testing.T) {
	l := smallModel(t)
	short, long := "1+2?", strings.Repeat("1+", 28)+"1?" // 4 and 58 bytes
	tests := []struct {
		desc      string
		questions []string
		cfg       eval.Config
		long      []int // lines skipped
	}{
		{"one long", []string{short, long, short}, eval.Config{MaxTokens: 8}, []int{2}},
		{"longer than the context", []string{short, short, strings.Repeat("x", 100), short}, eval.Config{MaxTokens: 8, Batch: 2}, []int{3}},
		{"long with the answer's room", []string{short, strings.Repeat("x", 50)}, eval.Config{MaxTokens: 16}, []int{2}},
		{"long with an expert suffix", []string{strings.Repeat("x", 40), short}, eval.Config{MaxTokens: 8, Experts: []eval.Expert{{Suffix: strings.Repeat("@", 20)}}}, []int{1}},
		{"sampled", []string{long, short, long}, eval.Config{MaxTokens: 8, K: 2}, []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			path, ex := gsm8kFile(t, tt.questions...)
			rep, err := eval.Run(context.Background(), eval.NewLocal(l), ex, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range tt.long {
				want = append(want, fmt.Sprintf("%s:%d", path, line))
			}
			if rep.SkippedLong != len(want) || !reflect.DeepEqual(rep.LongSources, want) {
				t.Errorf("skipped %d: %q, want %q", rep.SkippedLong, rep.LongSources, want)
			}
			if n := len(ex) - len(want); rep.Problems != n || rep.Greedy.N != n {
				t.Errorf("%d problems, greedy over %d, want %d", rep.Problems, rep.Greedy.N, n)
			}
			// Each example's outcome stays at its place, the skipped ones
			// marked.
			for i := range ex {
				skipped := slices.Contains(tt.long, i+1)
				if o := rep.Outcomes[i]; skipped != (o == '-') || !skipped && o != '0' && o != '1' {
					t.Errorf("outcomes %q: example %d (skipped %v)", rep.Outcomes, i+1, skipped)
				}
			}
			if table := rep.Table(); !strings.Contains(table, fmt.Sprintf("skipped %d too long for the model's context: %s", len(want), want[0])) {
				t.Errorf("table:\n%s", table)
			}
		})
	}
}

// TestRunWithoutExamples checks that Run says why nothing was evaluated.
func TestRunWithoutExamples(t *testing.T) {
	l := smallModel(t)
	path, long := gsm8kFile(t, strings.Repeat("x", 60), strings.Repeat("y", 70))
	tests := []struct {
		desc     string
		examples []task.Example
		want     string
	}{
		{"none", nil, "eval: no examples"},
		{"empty", []task.Example{}, "eval: no examples"},
		{"unreadable answers", []task.Example{{ID: "a", Prompt: "p", Kind: task.Math}}, "eval: no example has a readable gold answer (1 skipped)"},
		{"all too long", long, "eval: no example's prompt fits the model's context with room for 256 tokens (2 skipped, such as " + path + ":1)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, err := eval.Run(context.Background(), eval.NewLocal(l), tt.examples, eval.Config{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %s", err, tt.want)
			}
		})
	}
}

// TestRemoteRefusedPrompt evaluates through a server whose model has a
// context of 300 tokens: the one prompt too long for it is a failed
// example named by its source, and the run goes on.
func TestRemoteRefusedPrompt(t *testing.T) {
	models := expert.WorldModels()[:1] // E0, always right
	models[0].ContextLength = 300
	base := servetest.Start(t, serve.Config{}, models...)
	examples := world.Examples(5, 20, []int{1, 2})
	tooLong := examples[7]
	tooLong.Prompt += strings.Repeat(" ", 100) // 100 + 256 tokens of answer exceed 300
	tooLong.Source = "world.jsonl:8"
	examples[7] = tooLong
	gen := &eval.Remote{Client: client.New(client.Config{BaseURL: base, Model: "E0"})}
	rep, err := eval.Run(context.Background(), gen, examples, eval.Config{K: 2, Temperature: 1, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed) != 1 || rep.Failed[0].Source != "world.jsonl:8" || !strings.Contains(rep.Failed[0].Error, "context length") {
		t.Fatalf("failed %+v, want world.jsonl:8 refused for its context length", rep.Failed)
	}
	if want := 19.0 / 20; rep.Problems != 20 || rep.Greedy.Mean != want || rep.AvgAtK != want {
		t.Errorf("%d problems, greedy %v, avg@2 %v; want 20, %v, %v", rep.Problems, rep.Greedy.Mean, rep.AvgAtK, want, want)
	}
	if !strings.Contains(rep.Table(), "failed 1, refused by the generator and scored wrong: world.jsonl:8") {
		t.Errorf("table:\n%s", rep.Table())
	}
}

// stubGenerator answers "#### 3" to every prompt, but refuses or fails at
// the prompts it is told.
type stubGenerator struct {
	refuse        map[string]bool // prompts refused
	refuseSampled bool            // refuse them only when sampling (N > 1)
	fail          string          // a prompt that fails the batch
}

func (g stubGenerator) Generate(_ context.Context, prompts []string, p sample.Params) ([][]string, error) {
	out := make([][]string, len(prompts))
	refused := &eval.RefusedError{}
	for i, text := range prompts {
		switch {
		case text == g.fail:
			return nil, &eval.PromptError{Index: i, Err: errors.New("connection reset")}
		case g.refuse[text] && (!g.refuseSampled || p.N > 1):
			refused.Prompts = append(refused.Prompts, &eval.PromptError{Index: i, Err: errors.New("400 too long")})
		default:
			for range max(p.N, 1) {
				out[i] = append(out[i], "#### 3")
			}
		}
	}
	if len(refused.Prompts) > 0 {
		return out, refused
	}
	return out, nil
}

// TestRunGeneratorErrors checks refusals and failures name the example's
// source.
func TestRunGeneratorErrors(t *testing.T) {
	path, ex := gsm8kFile(t, "a", "b", "c", "d")
	tests := []struct {
		desc    string
		gen     stubGenerator
		cfg     eval.Config
		failed  []string // lines
		greedy  float64
		wantErr string
	}{
		{"refused", stubGenerator{refuse: map[string]bool{"b": true}}, eval.Config{Batch: 3}, []string{"2"}, 0.75, ""},
		{"refused with experts", stubGenerator{refuse: map[string]bool{"d@E1": true, "a": true}}, eval.Config{K: 2, Experts: []eval.Expert{{Suffix: "@E0"}, {Suffix: "@E1"}}},
			[]string{"1", "4"}, 0.75, ""},
		{"every prompt refused", stubGenerator{refuse: map[string]bool{"a": true, "b": true, "c": true, "d": true}}, eval.Config{Batch: 2},
			nil, 0, "eval: the generator refused every prompt (first " + path + ":1: 400 too long)"},
		{"every sampled prompt refused", stubGenerator{refuse: map[string]bool{"a": true, "b": true, "c": true, "d": true}, refuseSampled: true}, eval.Config{K: 2},
			nil, 0, "eval: the generator refused every prompt (first " + path + ":1: 400 too long)"},
		{"failure", stubGenerator{fail: "c"}, eval.Config{Batch: 2}, nil, 0, "eval: " + path + ":3: connection reset"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			rep, err := eval.Run(context.Background(), tt.gen, ex, tt.cfg)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range rep.Failed {
				got = append(got, strings.TrimPrefix(f.Source, path+":"))
			}
			if !reflect.DeepEqual(got, tt.failed) || rep.Greedy.Mean != tt.greedy || rep.Problems != 4 {
				t.Errorf("failed %q, greedy %v over %d; want %q, %v over 4", got, rep.Greedy.Mean, rep.Problems, tt.failed, tt.greedy)
			}
		})
	}
}

// TestLocalStopStrings checks that a completion ends at a stop string of
// two tokens and that its text is cut before the string, without the
// string's first token, which the sample's tokens still hold.
func TestLocalStopStrings(t *testing.T) {
	g := eval.NewLocal(smallModel(t))
	ctx := context.Background()
	whole, err := g.Generate(ctx, []string{"1+2?"}, sample.Params{MaxTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	text := whole[0][0]
	// The first two adjacent printable ASCII bytes after the start, which
	// the byte vocabulary samples as two tokens.
	at := -1
	for i := 1; i+1 < len(text); i++ {
		if text[i] > ' ' && text[i] < 0x7f && text[i+1] > ' ' && text[i+1] < 0x7f {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatalf("no two printable bytes in a row in %q", text)
	}
	stop := text[at : at+2]
	cut, err := g.Generate(ctx, []string{"1+2?"}, sample.Params{MaxTokens: 40, Stop: []string{stop}})
	if err != nil {
		t.Fatal(err)
	}
	if want := text[:strings.Index(text, stop)]; cut[0][0] != want {
		t.Fatalf("with stop %q: %q, want %q (whole %q)", stop, cut[0][0], want, text)
	}
}

// countingGenerator counts the calls to the generator it wraps, and
// streams when that one does.
type countingGenerator struct {
	g     eval.Generator
	calls *int
}

func (c countingGenerator) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	*c.calls++
	return c.g.Generate(ctx, prompts, p)
}

func (c countingGenerator) Streaming(n int) (eval.Generator, bool) {
	s, ok := c.g.(eval.Streamer)
	if !ok {
		return c, false
	}
	g, ok := s.Streaming(n)
	return countingGenerator{g, c.calls}, ok
}

// hidden hides its generator's methods but Generate.
type hidden struct{ eval.Generator }

// TestStreamingIsTheBatchedDraw checks that a local model given a whole
// pass at once, at most Batch sequences in flight, draws every sample a
// batch-by-batch run draws, in one call per pass.
func TestStreamingIsTheBatchedDraw(t *testing.T) {
	l := smallModel(t)
	var questions []string
	for i := range 11 {
		questions = append(questions, fmt.Sprintf("q%d", i))
	}
	_, examples := gsm8kFile(t, questions...)
	run := func(gen eval.Generator) []eval.Sample {
		var samples []eval.Sample
		cfg := eval.Config{K: 3, Temperature: 1, MaxTokens: 12, Batch: 5, Seed: 9,
			OnSample: func(s eval.Sample) error { samples = append(samples, s); return nil }}
		if _, err := eval.Run(context.Background(), gen, examples, cfg); err != nil {
			t.Fatal(err)
		}
		return samples
	}
	var streamed, batched int
	got := run(countingGenerator{eval.NewLocal(l), &streamed})
	want := run(countingGenerator{hidden{eval.NewLocal(l)}, &batched})
	if streamed != 2 || batched != 3+11 {
		t.Errorf("%d and %d calls, want 2 (a pass each) and 14 (5 greedy prompts a call, then one prompt of 3 samples)", streamed, batched)
	}
	if len(got) != 11*4 || !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed samples differ from batched ones:\n%v\n%v", got, want)
	}
	// The bound reaches the sampler.
	rec := &boundRecorder{s: local.NewFixedSampler(l.Model, l.Tokenizer)}
	if got := run(eval.NewSampled(rec, l)); !reflect.DeepEqual(got, want) {
		t.Fatalf("samples through a recording sampler differ:\n%v\n%v", got, want)
	}
	if !reflect.DeepEqual(rec.streams, []int{5, 5}) {
		t.Errorf("the sampler was asked for %v sequences in flight, want [5 5] (Batch, a pass each)", rec.streams)
	}
}

// boundRecorder records the bounds a streaming sampler is given.
type boundRecorder struct {
	s       *local.Sampler
	streams []int
}

func (r *boundRecorder) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	return r.s.Sample(ctx, reqs)
}

func (r *boundRecorder) SampleStreaming(ctx context.Context, reqs []sample.Request, streams int) ([][]sample.Completion, error) {
	r.streams = append(r.streams, streams)
	return r.s.SampleStreaming(ctx, reqs, streams)
}
