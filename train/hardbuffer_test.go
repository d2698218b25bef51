package train

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/method/meml"
	"rlvr/method/methodtest"
	"rlvr/method/part"
)

// hardBufferTerm builds the method a config describes and returns the SFT
// term its hard-example buffer trains once an all-wrong group fills it
// (capacity 1).
func hardBufferTerm(t *testing.T, c RLConfig) method.Term {
	t.Helper()
	if _, err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	m, _ := newMethod(t, &c, part.Setup{MaxLen: 512})
	var buf *meml.HardBuffer
	for _, x := range m.(*method.RL).Extras {
		if h, ok := x.(*meml.HardBuffer); ok {
			buf = h
		}
	}
	if buf == nil {
		t.Fatal("no hard-example buffer")
	}
	// Two wrong answers of two are more than K = 1: buffered with
	// probability 1/2, so some seed fills the buffer.
	buf.K, buf.Capacity = 1, 1
	g := scoredGroup([]bool{false, false}, nil)
	g.Example.Solution = "1+1=2"
	for seed := range uint64(64) {
		sc := &method.StepContext{Render: methodtest.ByteRender{}, Seed: seed, Metrics: method.Metrics{}}
		terms, err := buf.Terms(context.Background(), sc, []method.Scored{g})
		if err != nil {
			t.Fatal(err)
		}
		if len(terms) == 1 {
			return terms[0]
		}
	}
	t.Fatal("the buffer never filled")
	return method.Term{}
}

// TestHardBufferJoinsTheOneGradient: MEML-GRPO's eq. 11 is one objective,
// L_GRPO + λ1·L_KL + λ2·L_SFT: in the preset and the shipped configs the
// buffer's SFT term joins the step's shared gradient, and the step takes
// one optimizer step, not a second one on the shared AdamW moments.
func TestHardBufferJoinsTheOneGradient(t *testing.T) {
	preset := DefaultRL()
	if err := preset.ApplyPreset("meml-grpo"); err != nil {
		t.Fatal(err)
	}
	cases := map[string]RLConfig{"preset": preset}
	for _, f := range []string{"world-meml-grpo.yaml", "world-meml-grpo-hsft.yaml", "world-sparse-meml-grpo.yaml", "world-meml-eapo-mel.yaml"} {
		c, err := LoadRLConfig(filepath.Join("..", "configs", f), "")
		if err != nil {
			t.Fatal(err)
		}
		cases[f] = c
	}
	for name, c := range cases {
		buffer := hardBufferTerm(t, c)
		pg := method.Term{Name: "pg", Loss: backend.Loss{PolicyGradient: backend.Reinforce}, Aggregation: backend.TokenMean,
			Data: []backend.Datum{{Tokens: []int32{1, 2}, Targets: []int32{2, 3}, Weights: []float32{1, 1},
				Advantages: []float32{1, 1}, SamplerLogprobs: []float32{-1, -1}}}}
		rec := &recordingLearner{}
		l := &loop{cfg: &c, pol: &policy{learner: rec}, sched: scheduleOf(&c)}
		if err := l.learn(context.Background(), &method.Batch{Terms: []method.Term{pg, buffer}}, method.Metrics{}); err != nil {
			t.Fatal(err)
		}
		if want := []string{"pg", "nll", "step"}; !reflect.DeepEqual(rec.calls, want) {
			t.Errorf("%s: learner calls %v, want %v: one gradient, one optimizer step", name, rec.calls, want)
		}
	}
}

// TestHardBufferSeparateUpdate: update: separate trains the buffer in an
// optimizer step of its own, at its own rate, on optimizer state of its
// own.
func TestHardBufferSeparateUpdate(t *testing.T) {
	c, err := LoadRLConfig(filepath.Join("..", "configs", "world-meml-grpo-hsft.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	part.Get[*meml.HardBufferConfig](c.Sections).Update, part.Get[*meml.HardBufferConfig](c.Sections).LR = meml.BufferSeparate, 1e-4
	buffer := hardBufferTerm(t, c)
	pg := method.Term{Name: "pg", Loss: backend.Loss{PolicyGradient: backend.Reinforce}, Aggregation: backend.TokenMean,
		Data: []backend.Datum{{Tokens: []int32{1, 2}, Targets: []int32{2, 3}, Weights: []float32{1, 1},
			Advantages: []float32{1, 1}, SamplerLogprobs: []float32{-1, -1}}}}
	rec := &recordingLearner{}
	l := &loop{cfg: &c, pol: &policy{learner: rec}, sched: scheduleOf(&c)}
	if err := l.learn(context.Background(), &method.Batch{Terms: []method.Term{pg, buffer}}, method.Metrics{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"pg", "step", "nll", "step"}; !reflect.DeepEqual(rec.calls, want) ||
		!reflect.DeepEqual(rec.states, []string{"", buffer.Name}) || rec.lrs[1] != 1e-4 {
		t.Errorf("learner calls %v, states %q, rates %v", rec.calls, rec.states, rec.lrs)
	}
}
