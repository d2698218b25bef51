package meml

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/eval"
	"rlvr/internal/stats"
	"rlvr/method"
	"rlvr/method/dapo"
	"rlvr/method/methodtest"
	"rlvr/method/part"
	"rlvr/rundir"
	"rlvr/task"
)

var e1, e2, e3 = method.Variant{Name: "E1", Suffix: "@E1\n"}, method.Variant{Name: "E2", Suffix: "@E2\n"}, method.Variant{Name: "E3", Suffix: "@E3\n"}

func TestMutualLearningPicksBestAndWorst(t *testing.T) {
	r := methodtest.ByteRender{}
	q, tie := methodtest.Example("q", "7"), methodtest.Example("tie", "5")
	groups := []method.Scored{
		methodtest.Group(r, q, e1, true, true, false, false),
		methodtest.Group(r, q, e2, false, false, false, false),
		methodtest.Group(r, q, e3, true, false, false, false),
		methodtest.Group(r, tie, e1, true, false),
		methodtest.Group(r, tie, e2, false, true),
	}
	for _, exact := range []bool{false, true} {
		sc := methodtest.NewStepContext(nil)
		terms, err := (&MutualLearning{Weight: 0.5, Exact: exact}).Terms(context.Background(), sc, groups)
		if err != nil {
			t.Fatal(err)
		}
		if len(terms) != 1 || len(terms[0].Data) != 2 {
			t.Fatalf("exact %v: terms %+v", exact, terms)
		}
		if sc.Metrics["mutual/fired_frac"] != 0.5 || sc.Metrics["mutual/pair/E1>E2"] != 1 || sc.Metrics["mutual/teacher_logp"] != -0.5 {
			t.Fatalf("metrics %v", sc.Metrics)
		}
		d := terms[0].Data[0]
		student := r.Decode(append(d.Tokens, d.Targets[len(d.Targets)-1]))
		if student != "Q:q\n@E2\n####7" {
			t.Fatalf("student sequence %q: E1's right answer under E2's prompt", student)
		}
		weighted := 0
		for _, w := range d.Weights {
			if w != 0 {
				weighted++
			}
		}
		if weighted != len("####7") {
			t.Fatalf("%d weighted positions, want the answer's %d", weighted, len("####7"))
		}
		if exact {
			if terms[0].Loss.TeacherKL != 0.5 || d.Teacher == nil || d.Teacher.Aligned != 5 ||
				r.Decode(d.Teacher.Tokens) != "Q:q\n@E1\n####" {
				t.Fatalf("exact: loss %+v teacher %+v", terms[0].Loss, d.Teacher)
			}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
		} else if terms[0].Loss.NLL != 0.5 || d.Teacher != nil {
			t.Fatalf("sequence estimator: loss %+v", terms[0].Loss)
		}
	}
	// E+ without a right answer (its mean is best only by shaping): skipped.
	shaped := []method.Scored{methodtest.Group(r, q, e1, false, false), methodtest.Group(r, q, e2, false, false)}
	shaped[1].Rewards = []float64{-1, -1}
	terms, _ := (&MutualLearning{Weight: 1}).Terms(context.Background(), methodtest.NewStepContext(nil), shaped)
	if len(terms) != 0 {
		t.Fatalf("fired without a right answer: %+v", terms)
	}
}

func TestHardBufferProbabilityAndCapacity(t *testing.T) {
	r := methodtest.ByteRender{}
	q := task.Example{ID: "q", Prompt: "Q:q\n", Answer: "7", Solution: "3+4=7"}
	seven := methodtest.Group(r, q, e1, true, false, false, false, false, false, false, false) // 7 of 8 wrong
	six := methodtest.Group(r, q, e2, true, true, false, false, false, false, false, false)    // 6 of 8 wrong
	h := &HardBuffer{K: 6, Capacity: 1 << 30, LR: 1e-5, Weight: 1}
	const steps = 4000
	for s := range steps {
		sc := methodtest.NewStepContext(nil)
		sc.Seed = uint64(s)
		if _, err := h.Terms(context.Background(), sc, []method.Scored{seven, six}); err != nil {
			t.Fatal(err)
		}
	}
	p := float64(len(h.Entries)) / steps
	if math.Abs(p-0.75) > 0.03 { // ±4.4 standard deviations
		t.Fatalf("added with frequency %.3f, want K/G = 0.75", p)
	}
	for _, e := range h.Entries {
		if e.Variant.Name != "E1" {
			t.Fatalf("an expert with only K wrong was added: %+v", e.Variant)
		}
	}
	// Capacity: the update fires when full, at its own learning rate, and
	// empties the buffer.
	h = &HardBuffer{K: 6, Capacity: 3, LR: 1e-5, Weight: 0.5}
	fired := 0
	for s := 0; fired == 0 && s < 100; s++ {
		sc := methodtest.NewStepContext(nil)
		sc.Seed = uint64(s)
		before := len(h.Entries)
		terms, _ := h.Terms(context.Background(), sc, []method.Scored{seven, seven})
		if len(terms) > 0 {
			fired++
			if before+int(sc.Metrics["buffer/added"]) < 3 || len(terms[0].Data) < 3 || terms[0].LR != 1e-5 || terms[0].Loss.NLL != 0.5 ||
				len(h.Entries) != 0 || h.Passes != 1 || sc.Metrics["buffer/fill"] != 0 {
				t.Fatalf("update: terms %+v, entries %d, passes %d", terms, len(h.Entries), h.Passes)
			}
			if got := r.Decode(terms[0].Data[0].Tokens); !strings.HasPrefix(got, "Q:q\n@E1\n3+4=7\n#### 7") {
				t.Fatalf("buffered example %q", got)
			}
		}
	}
	if fired != 1 {
		t.Fatal("the buffer never filled")
	}
}

func TestHardBufferStateSurvives(t *testing.T) {
	r := methodtest.ByteRender{}
	q := task.Example{ID: "q", Prompt: "Q:q\n", Answer: "7", Solution: "3+4=7"}
	h := &HardBuffer{K: 1, Capacity: 10, LR: 1e-5, Weight: 1}
	for s := uint64(0); len(h.Entries) == 0 && s < 100; s++ {
		sc := methodtest.NewStepContext(nil)
		sc.Seed = s
		h.Terms(context.Background(), sc, []method.Scored{methodtest.Group(r, q, e3, false, false)})
	}
	h.Passes = 2
	st, err := h.State()
	if err != nil || len(h.Entries) == 0 {
		t.Fatalf("state %s, %v, entries %d", st, err, len(h.Entries))
	}
	back := &HardBuffer{K: 1, Capacity: 10}
	if err := back.Restore(st); err != nil || len(back.Entries) != len(h.Entries) || back.Entries[0].Variant != e3 || back.Passes != 2 || back.Entries[0].Example.Solution != "3+4=7" {
		t.Fatalf("restored %+v, %v", back, err)
	}
	small := &HardBuffer{Capacity: 0}
	if err := small.Restore(st); err == nil {
		t.Fatal("a state larger than the capacity was accepted")
	}
}

// TestExtrasSeeTheGroupsDynamicSamplingDrops: method.DAPO's filter keeps groups
// all wrong out of the policy-gradient batch, but the hard-example buffer
// still buffers them and mutual learning still pairs a question's expert
// whose answers were all wrong with the expert that got one right.
func TestExtrasSeeTheGroupsDynamicSamplingDrops(t *testing.T) {
	ro := &methodtest.ScriptedRollout{
		// Under E1 the first answer of question "a" is right; every other
		// answer is wrong.
		Policy: func(p string, k int) string {
			if strings.HasPrefix(p, "Q:a\n") && strings.HasSuffix(p, "@E1\n") && k == 0 {
				return "####1"
			}
			return "####0"
		},
		Env: func(string, int) string { return "" },
	}
	buffer := &HardBuffer{K: 3, Capacity: 100, LR: 1e-5, Weight: 1}
	r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 4, Rollout: ro, Filter: dapo.DynamicSampling{MaxRounds: 0},
		Variants: []method.Variant{e1, e2}, Extras: []method.Extra{&MutualLearning{Weight: 1}, buffer}}
	sc := methodtest.NewStepContext(nil)
	sc.Seed = 1
	exs := []task.Example{methodtest.Example("a", "1")}
	for i := range 6 {
		exs = append(exs, task.Example{ID: fmt.Sprint(i), Prompt: fmt.Sprintf("Q:%d\n", i), Answer: "1", Solution: "1"})
	}
	b, err := r.Step(context.Background(), sc, exs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, term := range b.Terms {
		names = append(names, term.Name)
		if term.Name == "pg" && len(term.Data) != 4 {
			t.Errorf("the policy-gradient batch has %d answers, want E1's 4 on question a", len(term.Data))
		}
	}
	if !slices.Contains(names, "mutual") || sc.Metrics["mutual/pair/E1>E2"] != 1 {
		t.Errorf("terms %v, metrics %v: E1 should teach E2 on question a", names, sc.Metrics)
	}
	// Twelve all-wrong groups with a reference solution (six questions,
	// two experts), each buffered with probability 3/4.
	if len(buffer.Entries) < 4 || sc.Metrics["buffer/added"] != float64(len(buffer.Entries)) {
		t.Errorf("the buffer holds %d entries (metrics %v), want most of the 12 all-wrong groups", len(buffer.Entries), sc.Metrics)
	}
}

func TestHardBufferConfig(t *testing.T) {
	run := &part.Run{GroupSize: 8, Parts: []string{PartHardBuffer}}
	for _, tc := range []struct {
		h      HardBufferConfig
		remote bool
		want   string
	}{
		{HardBufferConfig{LR: 1e-4}, false, "hard_buffer.lr = 0.0001 is the separate update's"},
		{HardBufferConfig{Update: "later"}, false, `hard_buffer.update "later" is not joint or separate`},
		{HardBufferConfig{Update: BufferSeparate}, true, "hard_buffer.update separate needs an optimizer state of its own"},
		{HardBufferConfig{K: 8}, false, "hard_buffer.k = 8 must be in [0, group_size)"},
	} {
		r := *run
		r.Remote = tc.remote
		if err := methodtest.Resolve(&tc.h, &r); !strings.Contains(err, tc.want) {
			t.Errorf("%+v: error %q, want %q", tc.h, err, tc.want)
		}
	}
	h := &HardBufferConfig{Update: BufferSeparate}
	if err := methodtest.Resolve(h, run); err != "" || h.LR != 1e-5 || h.K != 6 || h.Capacity != 64 || h.Weight != 1 {
		t.Errorf("separate: %+v, %s", h, err)
	}
}

// TestMutualLearningConfig: mutual learning compares experts, and a
// backend that cannot train a teacher KL refuses the exact estimator.
func TestMutualLearningConfig(t *testing.T) {
	m := &MutualLearningConfig{Estimator: "exact"}
	run := &part.Run{Parts: []string{PartMutualLearning}, CheckLoss: func(l backend.Loss) error {
		if l.TeacherKL != 0 {
			return errors.New("no teacher KL here")
		}
		return nil
	}}
	err := methodtest.Resolve(m, run)
	for _, want := range []string{"mutual_learning needs expert_prompts in parts", "exact: no teacher KL here (estimator: sequence)"} {
		if !strings.Contains(err, want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestExpertEvaluatorBestOnValidation: the test split reports the expert
// best on the validation before it, not the best on test, and the
// majority vote's difference to it, and says where it was chosen.
func TestExpertEvaluatorBestOnValidation(t *testing.T) {
	x := &ExpertEvaluator{Variants: []method.Variant{e1, e2, e3}}
	report := func(acc ...float64) *eval.Report {
		rep := &eval.Report{ExpertMajority: &stats.Interval{Mean: 0.5}}
		for i, a := range acc {
			rep.Experts = append(rep.Experts, eval.ExpertResult{Name: x.Variants[i].Name, Accuracy: stats.Interval{Mean: a}})
		}
		return rep
	}
	var val, test rundir.Eval
	const on = "validation (3 problems held out of the training file)"
	if err := x.Record(&part.Evaluation{Split: "val"}, report(0.2, 0.4, 0.4), &val); err != nil {
		t.Fatal(err)
	}
	if err := x.Record(&part.Evaluation{Split: "test", ChosenOn: on}, report(0.6, 0.3, 0.1), &test); err != nil {
		t.Fatal(err)
	}
	v, ok, err := ExpertRecordOf(val)
	if !ok || err != nil || v.BestExpert != "" || len(v.Experts) != 3 || *v.Majority != 0.5 || val.ChosenOn != "" {
		t.Errorf("validation record %+v (%v, %v), chosen on %q", v, ok, err, val.ChosenOn)
	}
	x2, _, _ := ExpertRecordOf(test)
	if x2.BestExpert != "E2" || *x2.Best != 0.3 || *x2.Delta != 0.2 || test.ChosenOn != on {
		t.Errorf("test record: best %s at %v, delta %v, chosen on %q; want E2 (the first best on validation) at 0.3, delta 0.2, on %q", x2.BestExpert, *x2.Best, *x2.Delta, test.ChosenOn, on)
	}
}
