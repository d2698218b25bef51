// Package methodtest holds what the tests of the RL core and of its
// guidance parts share: a renderer of bytes, a step's environment whose
// verifier reads "####answer", and a rollout that follows a script instead
// of a model.
package methodtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/task"
)

// ByteRender renders prompts as their bytes plus the variant's suffix;
// prompts longer than 64 bytes are too long. A response ends with token 0.
type ByteRender struct{}

// Prompt implements method.Renderer.
func (ByteRender) Prompt(e task.Example, v method.Variant) ([]int32, error) {
	s := e.Prompt + v.Suffix
	if len(s) > 64 {
		return nil, fmt.Errorf("%s: %w", e.ID, method.ErrPromptTooLong)
	}
	return ByteRender{}.Encode(s), nil
}

// Response implements method.Renderer.
func (ByteRender) Response(text string) []int32 { return append(ByteRender{}.Encode(text), 0) }

// EnvTurn implements method.Renderer.
func (ByteRender) EnvTurn(text string) ([]int32, error) { return ByteRender{}.Encode(text), nil }

// Encode implements method.Renderer.
func (ByteRender) Encode(text string) []int32 {
	out := make([]int32, len(text))
	for i := range len(text) {
		out[i] = int32(text[i])
	}
	return out
}

// Decode implements method.Renderer.
func (ByteRender) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

// NewStepContext is a step's environment over ByteRender, whose verifier rewards a
// response holding "####" and the gold answer, and whose More draws from
// more in order (an error once they run out).
func NewStepContext(more []task.Example) *method.StepContext {
	return &method.StepContext{Render: ByteRender{}, Metrics: method.Metrics{},
		Reward: func(e task.Example, response string) (float64, bool) {
			if strings.Contains(response, "####"+e.Answer) {
				return 1, true
			}
			return 0, true
		},
		More: func(n int) ([]task.Example, error) {
			if n > len(more) {
				return nil, errors.New("no more")
			}
			out := more[:n]
			more = more[n:]
			return out, nil
		}}
}

// Example is the question "Q:<id>\n" with its gold answer.
func Example(id, answer string) task.Example {
	return task.Example{ID: id, Prompt: "Q:" + id + "\n", Answer: answer}
}

// Family is an algorithm's objective at a budget of 64 tokens.
func Family(t testing.TB, a method.Algorithm) *method.Family {
	t.Helper()
	f, err := method.NewFamily(a, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// ScriptedRollout answers every prompt with g two-part episodes: the
// policy writes Policy(prompt, k), then the environment Env(prompt, k).
// Calls counts its rollouts.
type ScriptedRollout struct {
	Policy, Env func(prompt string, k int) string
	Calls       int
}

// Rollout implements method.Rollout.
func (s *ScriptedRollout) Rollout(_ context.Context, sc *method.StepContext, prompts [][]int32, _ []task.Example, g int, seed uint64) ([]rollout.Group, error) {
	s.Calls++
	groups := make([]rollout.Group, len(prompts))
	for i, p := range prompts {
		groups[i].Prompt = p
		for k := range g {
			pt, et := sc.Render.Encode(s.Policy(sc.Render.Decode(p), k)), sc.Render.Encode(s.Env(sc.Render.Decode(p), k))
			t := rollout.Trajectory{Prompt: p, Tokens: append(append([]int32(nil), pt...), et...)}
			for range pt {
				t.Policy, t.Logprobs = append(t.Policy, true), append(t.Logprobs, -1)
			}
			for range et {
				t.Policy, t.Logprobs = append(t.Policy, false), append(t.Logprobs, 0)
			}
			t.Text, t.PolicyText = sc.Render.Decode(t.Tokens), sc.Render.Decode(pt)
			groups[i].Trajectories = append(groups[i].Trajectories, t)
		}
	}
	return groups, nil
}

// Group is a scored group of answers to e under variant v, whose prompt
// r renders: right[k] says whether answer k is right (the text
// "####<answer>", else "####0"), and sets its verdict and its reward of 1
// or 0. Every token is the policy's, with logprob −0.5.
func Group(r method.Renderer, e task.Example, v method.Variant, right ...bool) method.Scored {
	p, _ := r.Prompt(e, v)
	g := method.Scored{Example: e, Variant: v, Group: rollout.Group{Prompt: p}}
	for _, ok := range right {
		text := "####0"
		if ok {
			text = "####" + e.Answer
		}
		toks := r.Encode(text)
		t := rollout.Trajectory{Prompt: p, Tokens: toks, Policy: make([]bool, len(toks)), Logprobs: make([]float32, len(toks)), PolicyText: text}
		for i := range t.Policy {
			t.Policy[i], t.Logprobs[i] = true, -0.5
		}
		g.Trajectories = append(g.Trajectories, t)
		g.Correct = append(g.Correct, ok)
		g.Rewards = append(g.Rewards, map[bool]float64{true: 1}[ok])
	}
	return g
}

// Resolve resolves a part's section against run and returns every problem
// it reported, joined by "; " ("" for none).
func Resolve(s part.Section, run *part.Run) string {
	var msgs []string
	s.Resolve(run, func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) })
	return strings.Join(msgs, "; ")
}
