package rollout

import (
	"context"
	"slices"
	"strings"
	"testing"

	"rlvr/format/tokenizer"
	"rlvr/sample"
)

// scripted is a policy that, on each turn, writes the next of its lines
// (one byte per token, logprob −0.5 each), ending a turn early on a stop
// string the way the real sampler does with IncludeStop.
type scripted struct {
	tok   *tokenizer.ByteTokenizer
	turns []string
	calls int
}

func (s *scripted) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	s.calls++
	out := make([][]sample.Completion, len(reqs))
	for i, r := range reqs {
		hist := s.tok.Decode(r.Prompt)
		turn := strings.Count(hist, "!") // one reply per finished turn
		text := s.turns[min(turn, len(s.turns)-1)]
		c := sample.Completion{Finish: sample.FinishStop}
		for _, st := range r.Params.Stop {
			if k := strings.Index(text, st); k >= 0 && r.Params.IncludeStop {
				text, c.StopString = text[:k+len(st)], st
			}
		}
		c.Tokens = s.tok.Encode(text)
		for range c.Tokens {
			c.Logprobs = append(c.Logprobs, -0.5)
		}
		c.Text = text
		for range max(r.Params.N, 1) {
			out[i] = append(out[i], c)
		}
	}
	return out, nil
}

// echoEnv answers every call with the same reply and records the calls.
type echoEnv struct {
	tok   *tokenizer.ByteTokenizer
	seen  []string
	turns []int // calls per Respond
}

func (e *echoEnv) Respond(_ context.Context, calls []Call) ([]Response, error) {
	e.turns = append(e.turns, len(calls))
	var out []Response
	for _, c := range calls {
		e.seen = append(e.seen, c.Text)
		out = append(out, Response{Tokens: e.tok.Encode("!E1:19\n"), Counts: map[string]float64{"replies": 1}})
	}
	return out, nil
}

func TestEpisodesMaskEnvironmentTokens(t *testing.T) {
	tok := tokenizer.NewByteTokenizer()
	pol := &scripted{tok: tok, turns: []string{"?E1:12+7?\n", "19*3=57\n####57\n"}}
	env := &echoEnv{tok: tok}
	prompt := append([]int32{tokenizer.ByteBOS}, tok.Encode("Q:(12+7)*3\n")...)
	groups, err := Episodes(context.Background(), pol, tok, env, [][]int32{prompt}, 2, sample.Params{MaxTokens: 40}, []string{"?\n"}, 4, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || len(groups[0].Trajectories) != 2 {
		t.Fatalf("%d groups", len(groups))
	}
	want := "?E1:12+7?\n!E1:19\n19*3=57\n####57\n"
	for _, tr := range groups[0].Trajectories {
		if tr.Text != want || tr.Turns != 2 {
			t.Fatalf("text %q after %d turns, want %q after 2", tr.Text, tr.Turns, want)
		}
		for i, b := range tr.Tokens {
			env := i >= len("?E1:12+7?\n") && i < len("?E1:12+7?\n!E1:19\n")
			if tr.Policy[i] == env {
				t.Fatalf("token %d (%q): policy %v", i, rune(b), tr.Policy[i])
			}
			if want := map[bool]float32{true: -0.5, false: 0}[tr.Policy[i]]; tr.Logprobs[i] != want {
				t.Fatalf("token %d: logprob %v", i, tr.Logprobs[i])
			}
		}
		if tr.PolicyTokens() != len(want)-len("!E1:19\n") {
			t.Fatalf("%d policy tokens", tr.PolicyTokens())
		}
	}
	if pol.calls != 2 || len(env.seen) != 2 || !slices.Equal(env.turns, []int{2}) {
		t.Fatalf("%d sampler calls (want one batch per turn), environment saw %d turns in Respond calls of %v (want both episodes in one)", pol.calls, len(env.seen), env.turns)
	}
	for _, tr := range groups[0].Trajectories {
		if tr.Counts["replies"] != 1 {
			t.Fatalf("env counts %v", tr.Counts)
		}
	}
}

func TestEpisodesStopAtMaxTurns(t *testing.T) {
	tok := tokenizer.NewByteTokenizer()
	pol := &scripted{tok: tok, turns: []string{"?E1:1+1?\n"}} // asks forever
	groups, err := Episodes(context.Background(), pol, tok, &echoEnv{tok: tok}, [][]int32{{tokenizer.ByteBOS}}, 1, sample.Params{MaxTokens: 20}, []string{"?\n"}, 3, 500)
	if err != nil {
		t.Fatal(err)
	}
	tr := groups[0].Trajectories[0]
	if tr.Turns != 3 || strings.Count(tr.Text, "?E1") != 3 || strings.Count(tr.Text, "!E1") != 2 || tr.Counts[EnvUnanswered] != 1 {
		t.Fatalf("%d turns: %q", tr.Turns, tr.Text)
	}
}

func TestSampleGroups(t *testing.T) {
	tok := tokenizer.NewByteTokenizer()
	pol := &scripted{tok: tok, turns: []string{"12+7=19\n####19\n"}}
	groups, err := SampleGroups(context.Background(), pol, tok, [][]int32{{1}, {2}}, 3, sample.Params{MaxTokens: 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if len(g.Trajectories) != 3 {
			t.Fatalf("%d trajectories, want 3", len(g.Trajectories))
		}
		for _, tr := range g.Trajectories {
			if tr.PolicyTokens() != len(tr.Tokens) || tr.Text != "12+7=19\n####19\n" {
				t.Fatalf("%+v", tr)
			}
		}
	}
}
