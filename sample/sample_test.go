package sample

import (
	"strings"
	"testing"
)

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

// letters decodes token i as the letter 'a'+i.
type letters struct{}

func (letters) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteByte(byte('a' + id))
	}
	return b.String()
}

// TestReplayRules checks each stop rule on tokens spelling "abcdef":
// where it cuts, what it keeps and why the completion ended.
func TestReplayRules(t *testing.T) {
	toks := []int32{0, 1, 2, 3, 4, 5}
	lps := []float32{-1, -2, -3, -4, -5, -6}
	for _, tc := range []struct {
		name   string
		p      Params
		text   string
		tokens int
		finish Finish
	}{
		{"none", Params{}, "abcdef", 6, FinishStop},
		// "c" was kept before "d" completed the stop string; "d" is dropped.
		{"stop string", Params{Stop: []string{"cd"}}, "ab", 3, FinishStop},
		{"stop string kept", Params{Stop: []string{"cd"}, IncludeStop: true}, "abcd", 4, FinishStop},
		{"stop token", Params{StopTokens: []int32{2}}, "abc", 3, FinishStop},
		{"max tokens", Params{MaxTokens: 4}, "abcd", 4, FinishLength},
	} {
		c, err := Replay(&tc.p, letters{}, toks, lps, FinishStop)
		if err != nil {
			t.Fatal(err)
		}
		if c.Text != tc.text || len(c.Tokens) != tc.tokens || len(c.Logprobs) != tc.tokens || c.Finish != tc.finish {
			t.Errorf("%s: %q, %d tokens, %d logprobs, %s; want %q, %d, %s", tc.name, c.Text, len(c.Tokens), len(c.Logprobs), c.Finish, tc.text, tc.tokens, tc.finish)
		}
	}
	if _, err := Replay(&Params{}, nil, []int32{1, 2}, []float32{-1}, FinishStop); err == nil {
		t.Error("tokens and logprobs of different lengths replayed")
	}
	if _, err := Replay(&Params{Stop: []string{"x"}}, nil, toks, lps, FinishStop); err == nil {
		t.Error("stop strings replayed without a decoder")
	}
}
