package local

import (
	"slices"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/internal/shareddata"
	"rlvr/sample"
)

// stories opens llama2.c's stories260K with its tokenizer.
func stories(t testing.TB) *checkpoint.Loaded {
	t.Helper()
	l, err := checkpoint.Open(shareddata.Path(t, "stories260K/stories260K.bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestStopStringsAndTokens(t *testing.T) {
	l := stories(t)
	s := NewSampler(l.Model, l.Tokenizer)
	prompt := l.Encode("Once upon a time")
	full, err := s.Sample(ctx, []sample.Request{{Prompt: prompt, Params: sample.Params{MaxTokens: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	text := full[0][0].Text
	if full[0][0].Finish != sample.FinishLength || len(full[0][0].Tokens) != 60 {
		t.Fatalf("finish %s after %d tokens", full[0][0].Finish, len(full[0][0].Tokens))
	}
	// Stop at "Lily": the text ends right before it.
	i := strings.Index(text, "Lily")
	if i < 0 {
		t.Fatalf("greedy text %q has no Lily", text)
	}
	var streamed []int32
	cut, err := s.Sample(ctx, []sample.Request{{Prompt: prompt, Params: sample.Params{MaxTokens: 60, Stop: []string{"Lily"}},
		OnToken: func(_ int, tok int32, _ float32) { streamed = append(streamed, tok) }}})
	if err != nil {
		t.Fatal(err)
	}
	c := cut[0][0]
	if c.Finish != sample.FinishStop || c.Text != text[:i] || !slices.Equal(streamed, c.Tokens) {
		t.Fatalf("stop string: finish %s text %q (want %q), streamed %d of %d tokens", c.Finish, c.Text, text[:i], len(streamed), len(c.Tokens))
	}
	// With IncludeStop the stop string and the token that completed it
	// are kept.
	kept, err := s.Sample(ctx, []sample.Request{{Prompt: prompt, Params: sample.Params{MaxTokens: 60, Stop: []string{"Lily"}, IncludeStop: true}}})
	if err != nil {
		t.Fatal(err)
	}
	k := kept[0][0]
	if k.Text != text[:i+4] || k.StopString != "Lily" || len(k.Tokens) != len(c.Tokens)+1 || len(k.Logprobs) != len(k.Tokens) {
		t.Fatalf("include stop: text %q, stop %q, %d tokens (without: %d)", k.Text, k.StopString, len(k.Tokens), len(c.Tokens))
	}
	// A stop token is kept and ends the sample.
	stopAt := full[0][0].Tokens[10]
	st, _ := s.Sample(ctx, []sample.Request{{Prompt: prompt, Params: sample.Params{MaxTokens: 60, StopTokens: []int32{stopAt}}}})
	got := st[0][0].Tokens
	if st[0][0].Finish != sample.FinishStop || got[len(got)-1] != stopAt || len(got) > 11 {
		t.Fatalf("stop token: %v (%s)", got, st[0][0].Finish)
	}
}

// TestBadRequests checks that the parameters are validated and the
// engine's errors name the request.
func TestBadRequests(t *testing.T) {
	s := NewSampler(stories(t).Model, nil)
	for _, tc := range []struct {
		req  sample.Request
		want string
	}{
		{sample.Request{Prompt: []int32{1}, Params: sample.Params{Temperature: -1, TopP: 2}}, "temperature -1 is negative or NaN; top_p 2 is outside [0, 1]"},
		{sample.Request{Prompt: []int32{1, 9999}}, "prompt token 9999 outside the vocabulary"},
		{sample.Request{Prompt: []int32{1}, Params: sample.Params{Stop: []string{"x"}}}, "stop strings need a decoder"},
	} {
		_, err := s.Sample(ctx, []sample.Request{{Prompt: []int32{1}}, tc.req})
		if err == nil || !strings.Contains(err.Error(), "request 1: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestReplayMatchesSamplingWithTheRules: tokens sampled without stop
// rules, replayed through them, are what sampling with them gives (a
// remote sampler stops only at its own end tokens).
func TestReplayMatchesSamplingWithTheRules(t *testing.T) {
	l := stories(t)
	dec := l.Tokenizer
	s := NewSampler(l.Model, dec)
	prompt := l.Encode("Once upon a time")
	free := sample.Params{MaxTokens: 60, Temperature: 0.9, N: 4, Seed: 3}
	raw, err := s.Sample(ctx, []sample.Request{{Prompt: prompt, Params: free}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rules := range []sample.Params{
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
		want, err := s.Sample(ctx, []sample.Request{{Prompt: prompt, Params: p}})
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range raw[0] {
			got, err := sample.Replay(&p, dec, r.Tokens, r.Logprobs, r.Finish)
			if err != nil {
				t.Fatal(err)
			}
			w := want[0][k]
			if !slices.Equal(got.Tokens, w.Tokens) || got.Text != w.Text || got.Finish != w.Finish || got.StopString != w.StopString || len(got.Logprobs) != len(w.Logprobs) {
				t.Errorf("rules %+v, sample %d: replay gives %q (%s, %d tokens), sampling %q (%s, %d tokens)", rules, k, got.Text, got.Finish, len(got.Tokens), w.Text, w.Finish, len(w.Tokens))
			}
		}
	}
}
