package eval

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
)

// styleGenerator answers world prompts the way the scripted experts do:
// "@E<i>" picks style i, no expert prompt means the reference; sampled
// calls (temperature > 0) alternate styles per sample.
type styleGenerator struct{}

func (styleGenerator) Generate(_ context.Context, prompts []string, p sample.Params) ([][]string, error) {
	out := make([][]string, len(prompts))
	for i, text := range prompts {
		q, _, _ := strings.Cut(text, "\n")
		prob, err := world.ParseQuestion(q)
		if err != nil {
			return nil, err
		}
		style := 0
		if k := strings.Index(text, "@E"); k >= 0 {
			style = int(text[k+2] - '0')
		}
		for n := 0; n < max(p.N, 1); n++ {
			s := style
			if p.Temperature > 0 {
				s = n % len(world.Styles)
			}
			sol, _ := world.Solve(prob, s)
			out[i] = append(out[i], sol)
		}
	}
	return out, nil
}

// TestRunOnScriptedExperts evaluates the scripted styles, whose answers
// are known, and checks every figure against a direct count.
func TestRunOnScriptedExperts(t *testing.T) {
	problems := world.Mix(3, 300, []int{3, 4, 5})
	exs := world.Examples(3, 300, []int{3, 4, 5}) // the same problems
	var experts []Expert
	for i := range world.Styles {
		experts = append(experts, Expert{Suffix: world.ExpertPrompt(i)})
	}
	var samples []Sample
	keep := func(s Sample) error { samples = append(samples, s); return nil }
	rep, err := Run(context.Background(), styleGenerator{}, exs, Config{K: 4, Temperature: 1, Experts: experts, Batch: 37, OnSample: keep})
	if err != nil {
		t.Fatal(err)
	}
	// Every completion is reported once, and the rewards add up to the report's figures.
	if want := len(exs) * (1 + 4 + len(experts)); len(samples) != want {
		t.Fatalf("%d samples reported, want %d", len(samples), want)
	}
	rewards := map[string]float64{}
	for _, s := range samples {
		rewards[s.Pass] += s.Reward
		if (s.Prompt != "") != (s.Index == 0) || s.Gold == "" || s.ID == "" {
			t.Fatalf("sample %+v: prompt only on index 0, gold and id always", s)
		}
	}
	if got := rewards["sampled"] / float64(4*len(exs)); abs(got-rep.AvgAtK) > 1e-12 {
		t.Errorf("sampled rewards average %v, avg@4 %v", got, rep.AvgAtK)
	}
	if got := rewards["greedy"] / float64(len(exs)); abs(got-rep.Greedy.Mean) > 1e-12 {
		t.Errorf("greedy rewards average %v, greedy %v", got, rep.Greedy.Mean)
	}
	if rep.Greedy.Mean != 1 {
		t.Fatalf("the reference style scored %v greedy", rep.Greedy.Mean)
	}
	// Direct counts.
	wrong := make([]int, len(world.Styles))
	allWrong, right4 := 0, 0
	for _, p := range problems {
		all := true
		c := 0
		for s := range world.Styles {
			_, ans := world.Solve(p, s)
			if ans != p.Answer {
				wrong[s]++
			} else {
				c++
			}
			all = all && ans != p.Answer
		}
		if all {
			allWrong++
		}
		right4 += c
	}
	for s, e := range rep.Experts {
		if got := rep.Overlap.Rows[s].Errors; got != wrong[s] {
			t.Errorf("%s: %d errors, counted %d", e.Name, got, wrong[s])
		}
	}
	for s := range world.Styles {
		if rep.Overlap.Shared[s][s] != wrong[s] || rep.Overlap.Shared[0][s] != 0 {
			t.Errorf("shared errors row %d: %v (errors %d; the reference shares none)", s, rep.Overlap.Shared[s], wrong[s])
		}
	}
	if rep.Overlap.AllWrong != allWrong || allWrong != 0 {
		t.Errorf("all wrong %d, counted %d (the reference is always right)", rep.Overlap.AllWrong, allWrong)
	}
	if rep.Overlap.Rows[1].CorrectedByOthers != wrong[1] {
		t.Errorf("every slip of E1 is corrected by the reference: %d of %d", rep.Overlap.Rows[1].CorrectedByOthers, wrong[1])
	}
	if want := float64(right4) / float64(4*len(problems)); abs(rep.AvgAtK-want) > 1e-12 {
		t.Errorf("avg@4 %v, counted %v", rep.AvgAtK, want)
	}
	if rep.PassAtK[4] != 1 || rep.MajAtK < rep.AvgAtK {
		t.Errorf("pass@4 %v maj@4 %v avg@4 %v", rep.PassAtK[4], rep.MajAtK, rep.AvgAtK)
	}
	if !strings.Contains(rep.Table(), "wrong for every expert") {
		t.Error("table lacks the overlap line")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// countingGenerator records the most sequences (prompts × samples) asked
// of it in one call.
type countingGenerator struct {
	styleGenerator
	most int
}

func (g *countingGenerator) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	g.most = max(g.most, len(prompts)*max(p.N, 1))
	return g.styleGenerator.Generate(ctx, prompts, p)
}

// TestRunBatchBoundsSequences checks that Batch bounds the sequences in
// flight, samples included, so that pass@k on long prompts fits in memory.
func TestRunBatchBoundsSequences(t *testing.T) {
	exs := world.Examples(3, 50, []int{2})
	g := &countingGenerator{}
	if _, err := Run(context.Background(), g, exs, Config{K: 8, Temperature: 1, Batch: 20}); err != nil {
		t.Fatal(err)
	}
	if g.most != 20 {
		t.Errorf("at most %d sequences per call, want 20 (2 prompts of 8 samples, or 20 greedy)", g.most)
	}
}

// TestRunExpertPrompts gives each expert its prompts whole, as a chat
// model's are, and checks they score what the same prompts as suffixes
// do, example by example past one whose gold answer cannot be read; and
// that a list of prompts of the wrong length is an error naming the
// expert.
func TestRunExpertPrompts(t *testing.T) {
	exs := world.Examples(3, 40, []int{3, 4})
	exs[5].Answer = "" // skipped: the prompts after it must stay with their examples
	var bySuffix, whole []Expert
	for i := range world.Styles {
		bySuffix = append(bySuffix, Expert{Suffix: world.ExpertPrompt(i)})
		x := Expert{Name: task.ExpertName(i)}
		for _, e := range exs {
			x.Prompts = append(x.Prompts, e.Prompt+world.ExpertPrompt(i))
		}
		whole = append(whole, x)
	}
	want, err := Run(context.Background(), styleGenerator{}, exs, Config{Experts: bySuffix})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), styleGenerator{}, exs, Config{Experts: whole})
	if err != nil {
		t.Fatal(err)
	}
	if got.Skipped != 1 || !reflect.DeepEqual(got.Experts, want.Experts) || !reflect.DeepEqual(got.Overlap, want.Overlap) ||
		*got.ExpertMajority != *want.ExpertMajority || got.Experts[1].Accuracy.Mean == 1 {
		t.Fatalf("whole prompts: %+v %+v %v\nsuffixes: %+v %+v %v", got.Experts, got.Overlap, *got.ExpertMajority,
			want.Experts, want.Overlap, *want.ExpertMajority)
	}
	// The skipped example's outcome is marked at its place, and the right
	// ones count to the greedy accuracy.
	if len(got.Outcomes) != len(exs) || got.Outcomes[5] != '-' || strings.Count(got.Outcomes, "-") != 1 ||
		strings.Count(got.Outcomes, "1") != int(math.Round(got.Greedy.Mean*float64(got.Greedy.N))) {
		t.Errorf("outcomes %q, greedy %+v", got.Outcomes, got.Greedy)
	}
	// Each expert's outcomes likewise, at the examples' places.
	for _, x := range got.Experts {
		if len(x.Outcomes) != len(exs) || x.Outcomes[5] != '-' || strings.Count(x.Outcomes, "-") != 1 ||
			strings.Count(x.Outcomes, "1") != int(math.Round(x.Accuracy.Mean*float64(x.Accuracy.N))) {
			t.Errorf("%s: outcomes %q, accuracy %+v", x.Name, x.Outcomes, x.Accuracy)
		}
	}
	whole[2].Prompts = whole[2].Prompts[1:]
	if _, err := Run(context.Background(), styleGenerator{}, exs, Config{Experts: whole}); err == nil ||
		err.Error() != "eval: expert E2 has 39 prompts for 40 examples" {
		t.Fatalf("short prompt list: %v", err)
	}
}

// seededGenerator answers greedily with the reference style, and at a
// temperature with a style drawn from the prompt's seed (its index among
// all prompts, sample.PromptSeed), so that a prompt's samples change when
// its seed does; it records the prompts it is asked.
type seededGenerator struct {
	asked []string
}

func (g *seededGenerator) Generate(_ context.Context, prompts []string, p sample.Params) ([][]string, error) {
	out := make([][]string, len(prompts))
	for i, text := range prompts {
		g.asked = append(g.asked, text)
		q, _, _ := strings.Cut(text, "\n")
		prob, err := world.ParseQuestion(q)
		if err != nil {
			return nil, err
		}
		for n := range max(p.N, 1) {
			s := 0
			if p.Temperature > 0 {
				s = int((sample.PromptSeed(p.Seed, i)/1_000_003 + uint64(n)) % uint64(len(world.Styles)))
			}
			sol, _ := world.Solve(prob, s)
			out[i] = append(out[i], sol)
		}
	}
	return out, nil
}

// TestRunResumesScored: an evaluation given the completions an earlier
// one scored for some problems asks the generator for the rest only, and
// reports what the whole evaluation did, the rest sampled with the seeds
// they had in it.
func TestRunResumesScored(t *testing.T) {
	exs := world.Examples(5, 12, []int{2})
	cfg := Config{K: 4, Temperature: 1, Batch: 8, Seed: 9}
	var all []Sample
	whole := cfg
	whole.OnSample = func(s Sample) error { all = append(all, s); return nil }
	want, err := Run(context.Background(), &seededGenerator{}, exs, whole)
	if err != nil {
		t.Fatal(err)
	}
	// The even problems were scored before the evaluation stopped.
	kept := map[string]map[string][]string{}
	var rest []Sample
	for _, s := range all {
		if i := slices.IndexFunc(exs, func(e task.Example) bool { return e.ID == s.ID }); i%2 == 1 {
			rest = append(rest, s)
			continue
		}
		if kept[s.Pass] == nil {
			kept[s.Pass] = map[string][]string{}
		}
		kept[s.Pass][s.ID] = append(kept[s.Pass][s.ID], s.Text)
	}
	gen := &seededGenerator{}
	var emitted []Sample
	resumed := cfg
	resumed.Scored = func(pass, id string) []string { return kept[pass][id] }
	resumed.OnSample = func(s Sample) error { emitted = append(emitted, s); return nil }
	got, err := Run(context.Background(), gen, exs, resumed)
	if err != nil {
		t.Fatal(err)
	}
	if !(got.Seconds > 0) {
		t.Errorf("the resumed report took %v s, want its time", got.Seconds)
	}
	got.Seconds = want.Seconds // the time differs, not the report
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resumed report %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(emitted, rest) {
		t.Errorf("the resumed evaluation scored\n%v\nwant the odd problems' completions of the whole one\n%v", emitted, rest)
	}
	if len(gen.asked) != 12 { // 6 problems, greedy and sampled
		t.Errorf("asked %d prompts, want the 6 odd problems' twice", len(gen.asked))
	}
	for i, e := range exs {
		if i%2 == 0 && slices.Contains(gen.asked, e.Prompt) {
			t.Errorf("problem %d, already scored, was asked again", i)
		}
	}
}
