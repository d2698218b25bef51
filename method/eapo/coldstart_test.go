package eapo

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"rlvr/expert"
	"rlvr/method/methodtest"
	"rlvr/rollout"
	"rlvr/task"
)

// TestColdStartDemonstrations: each demonstration is the training
// prompt, a consult action asking the pool's experts in turn the whole
// question, the reply as the environment writes it and a closing answer
// read from the reply; only the action and the closing carry weight. An
// expert that fails, or replies without an answer, leaves the action
// alone; each counted.
func TestColdStartDemonstrations(t *testing.T) {
	right := &answerFunc{f: func(string) (string, error) { return "2+3=5\n#### 5", nil }}
	vague := &answerFunc{f: func(string) (string, error) { return "I am not sure.", nil }}
	down := &answerFunc{f: func(string) (string, error) { return "", fmt.Errorf("down: %w", expert.ErrRefused) }}
	c := consultation(1, right, vague, down)
	c.Format = Chat{}
	sc := methodtest.NewStepContext(nil)
	examples := []task.Example{{ID: "a", Prompt: "2+3?", Answer: "5"}, {ID: "b", Prompt: "1+1?", Answer: "2"},
		{ID: "c", Prompt: "4+4?", Answer: "8"}, {ID: "d", Prompt: "5+1?", Answer: "6"}}
	data, err := c.ColdStart().Demonstrations(context.Background(), sc, examples)
	if err != nil {
		t.Fatal(err)
	}
	// E1 answers a and d, E2 b, E3 c.
	if len(data) != 4 || sc.Metrics[MetricColdStartPartial+partialNoAnswer] != 1 || sc.Metrics[MetricColdStartPartial+partialExpertFailed] != 1 {
		t.Fatalf("%d demonstrations, metrics %v", len(data), sc.Metrics)
	}
	r := methodtest.ByteRender{}
	for i, alone := range map[int]string{1: `1+1?<consult>[{"expert":"E2","question":"1+1?"}]</consult>`,
		2: `4+4?<consult>[{"expert":"E3","question":"4+4?"}]</consult>`} {
		d, n := data[i], len(alone)-4
		if fmt.Sprint(append(d.Tokens, d.Targets[len(d.Targets)-1])) != fmt.Sprint(r.Encode(alone)) ||
			slices.ContainsFunc(d.Weights[len(d.Weights)-n:], func(w float32) bool { return w != 1 }) || d.Weights[len(d.Weights)-n-1] != 0 {
			t.Errorf("demonstration %d: sequence %q, weights %v; want the prompt and the action alone, the action trained",
				i, r.Decode(append(d.Tokens, d.Targets[len(d.Targets)-1])), d.Weights)
		}
	}
	for i, q := range map[int]string{0: "2+3?", 3: "5+1?"} {
		d := data[i]
		var trained []int32
		for k, w := range d.Weights {
			switch w {
			case 1:
				trained = append(trained, d.Targets[k])
			case 0:
			default:
				t.Fatalf("weight %g", w)
			}
		}
		action := `<consult>[{"expert":"E1","question":"` + q + `"}]</consult>`
		if got, want := trained, append(r.Encode(action+"#### 5"), 0); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("trained tokens %q, want %q and the stop token", r.Decode(got), action+"#### 5")
		}
		seq := append(d.Tokens, d.Targets[len(d.Targets)-1])
		if got, want := seq, append(r.Encode(q+action+"<expert name=\"E1\">2+3=5\n#### 5</expert>#### 5"), 0); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sequence %q, want %q", r.Decode(got), r.Decode(want))
		}
	}
}

// TestColdStartDeclined: a demonstration of answering alone is the
// training prompt, a consult action asking the pool's experts in turn,
// the reply the environment writes when p(t) declines it, and the
// policy's own answer; the action and the answer carry weight, the reply
// none. No expert is asked.
func TestColdStartDeclined(t *testing.T) {
	asked := 0
	never := &answerFunc{f: func(string) (string, error) { asked++; return "#### 1", nil }}
	c := consultation(0, never, never)
	c.Format = Chat{}
	sc := methodtest.NewStepContext(nil)
	r := methodtest.ByteRender{}
	examples := []task.Example{{ID: "a", Prompt: "2+3?", Answer: "5"}, {ID: "b", Prompt: "1+1?", Answer: "2"}}
	answers := [][]int32{r.Response("#### 4"), r.Response("I think 3.")}
	data, err := c.ColdStart().Unaided(context.Background(), sc, examples, answers)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 2 || asked != 0 {
		t.Fatalf("%d demonstrations, %d asks", len(data), asked)
	}
	env := consultEnv{c: c, render: r, p: 0, seed: 1}
	for i, e := range examples {
		d := data[i]
		action := `<consult>[{"expert":"E` + fmt.Sprint(i+1) + `","question":"` + e.Prompt + `"}]</consult>`
		written, err := env.Respond(context.Background(), []rollout.Call{{Text: action}})
		if err != nil || written[0].Counts[envDeclined] != 1 {
			t.Fatalf("the environment's declined reply: %v, %v", written, err)
		}
		seq := append(d.Tokens, d.Targets[len(d.Targets)-1])
		want := slices.Concat(r.Encode(e.Prompt+action), written[0].Tokens, answers[i])
		if fmt.Sprint(seq) != fmt.Sprint(want) {
			t.Errorf("demonstration %d: %q, want %q", i, r.Decode(seq), r.Decode(want))
		}
		var trained []int32
		for k, w := range d.Weights {
			if w == 1 {
				trained = append(trained, d.Targets[k])
			}
		}
		if want := slices.Concat(r.Encode(action), answers[i]); fmt.Sprint(trained) != fmt.Sprint(want) {
			t.Errorf("demonstration %d trains %q, want the action and the answer %q", i, r.Decode(trained), r.Decode(want))
		}
	}
	if _, err := c.ColdStart().Unaided(context.Background(), sc, examples, answers[:1]); err == nil {
		t.Error("answers not one per example: no error")
	}
}
