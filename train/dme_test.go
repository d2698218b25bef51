package train

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/expert/collect/dmetest"
	"rlvr/method"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/rundir"
	"rlvr/task"
)

// TestWarmupSplitSides: the world's stream for the RL side never yields a
// warm-up question and the other way round, and the warm-up side is about
// its fraction of the questions drawn.
func TestWarmupSplitSides(t *testing.T) {
	draw := func(part string) (*source, []task.Example) {
		cfg := DefaultRL()
		cfg.Data.Levels, cfg.EvalProblems = []int{5}, 10
		cfg.Data.WarmupFraction, cfg.Data.Part = 0.2, part
		if _, err := cfg.Resolve(); err != nil {
			t.Fatal(err)
		}
		src, _, _, err := loadData(&cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := src.next(400)
		if err != nil {
			t.Fatal(err)
		}
		return src, got
	}
	src, warm := draw("warmup")
	for _, e := range warm {
		if task.Fraction(e) >= 0.2 {
			t.Fatalf("warm-up side drew %q (fraction %.3f)", e.Prompt, task.Fraction(e))
		}
	}
	// 400 warm-up questions out of about 2000 drawn.
	if share := 400 / float64(src.drawn); share < 0.16 || share > 0.24 {
		t.Errorf("warm-up share %.3f of the stream, want about 0.2", share)
	}
	_, rl := draw("rl")
	for _, e := range rl {
		if task.Fraction(e) < 0.2 {
			t.Fatalf("RL side drew the warm-up question %q", e.Prompt)
		}
	}
}

// TestWorldTestSplit: test problems are disjoint from validation and
// never trained on.
func TestWorldTestSplit(t *testing.T) {
	cfg := DefaultRL()
	cfg.Data.Levels, cfg.EvalProblems, cfg.TestProblems = []int{0}, 100, 100 // level 0 repeats
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	src, held, sum, err := loadData(&cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(held.Val) != 100 || len(held.Test) == 0 || len(held.Test) > 100 || sum.Test != len(held.Test) {
		t.Fatalf("val %d, test %d, summary %+v", len(held.Val), len(held.Test), sum)
	}
	val := map[string]bool{}
	for _, e := range held.Val {
		val[e.Prompt] = true
	}
	test := map[string]bool{}
	for _, e := range held.Test {
		if val[e.Prompt] {
			t.Fatalf("%q is both validation and test", e.Prompt)
		}
		test[e.Prompt] = true
	}
	train, _ := src.next(3000)
	for _, e := range train {
		if test[e.Prompt] || val[e.Prompt] {
			t.Fatalf("held-out %q drawn for training", e.Prompt)
		}
	}
}

// TestDMEExamples: a D_ME file becomes one SFT example per correct answer
// of the experts the run trains, each tagged with its expert's variant;
// held-out questions and the other side of the split are left out.
func TestDMEExamples(t *testing.T) {
	path, recs := dmetest.World(t, 3, 60, []int{3})
	cfg := DefaultRL()
	cfg.Algorithm, cfg.Parts = method.SFT, []string{meml.PartExpertPrompts}
	cfg.Sections.Set(&meml.ExpertPromptsConfig{Experts: []int{0, 2}})
	cfg.Data = DataConfig{Name: "world", Levels: []int{3}, DME: path, WarmupFraction: 0.5, Part: "warmup"}
	cfg.EvalProblems = 5
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	experts := func() []method.Variant { return part.Get[*meml.ExpertPromptsConfig](cfg.Sections).Variants() }
	src, _, sum, err := loadData(&cfg, nil, experts())
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, r := range recs {
		if (r.Expert == 0 || r.Expert == 2) && r.Correct && task.Fraction(task.Example{Prompt: r.Question}) < 0.5 {
			want++
		}
	}
	if len(src.pool) != want || want == 0 || sum.Train != want {
		t.Fatalf("%d examples, want %d (summary %v)", len(src.pool), want, sum)
	}
	wrongE2 := 0
	for _, r := range recs {
		if r.Expert == 2 && !r.Correct {
			wrongE2++
		}
	}
	if wrongE2 == 0 {
		t.Fatal("fixture: E2 is never wrong, so the correct-only filter is not tested")
	}
	lines := map[string]bool{}
	for _, e := range src.pool {
		v := e.Meta[method.VariantKey]
		if v != "E0" && v != "E2" || e.Solution == "" || !strings.HasPrefix(e.Source, path+":") {
			t.Fatalf("example %+v", e)
		}
		lines[e.Source] = true
	}
	if len(lines) != want {
		t.Errorf("%d distinct sources for %d examples", len(lines), want)
	}
	// Every answer, wrong ones too.
	cfg.Data.DMEAnswers = "all"
	src, _, _, err = loadData(&cfg, nil, experts())
	if err != nil || len(src.pool) <= want {
		t.Fatalf("dme_answers all: %d examples, want more than %d (%v)", len(src.pool), want, err)
	}
	// An expert the file lacks is an error, not an empty run.
	part.Get[*meml.ExpertPromptsConfig](cfg.Sections).Experts = []int{0, 7}
	if _, _, _, err := loadData(&cfg, nil, experts()); err == nil || !strings.Contains(err.Error(), "expert E7") || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing expert: %v", err)
	}
	// A malformed line names the file and the line.
	b, _ := os.ReadFile(path)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, append(b[:len(b):len(b)], []byte(`{"id": "x", "expert": "one"}`+"\n")...), 0o644)
	cfg.Data.DME = bad
	n := strings.Count(string(b), "\n") + 1
	if _, _, _, err := loadData(&cfg, nil, experts()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bad.jsonl:%d", n)) && !strings.Contains(err.Error(), fmt.Sprintf("line %d", n)) {
		t.Fatalf("malformed line %d: %v", n, err)
	}
}

// TestDMEDistillation: without expert prompts, the experts' correct
// answers are trained behind the plain prompt (SFT distillation of expert
// answers): every expert but the reference by default, or those of
// data.dme_experts.
func TestDMEDistillation(t *testing.T) {
	path, recs := dmetest.World(t, 5, 40, []int{3})
	cfg := DefaultRL()
	cfg.Algorithm = method.SFT
	cfg.Data = DataConfig{Name: "world", Levels: []int{3}, DME: path}
	cfg.EvalProblems = 5
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		experts []int
		want    map[int]bool
	}{{nil, map[int]bool{1: true, 2: true, 3: true}}, {[]int{2}, map[int]bool{2: true}}} {
		cfg.Data.DMEExperts = tc.experts
		src, _, _, err := loadData(&cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, r := range recs {
			if tc.want[r.Expert] && r.Correct {
				want++
			}
		}
		if len(src.pool) != want || want == 0 {
			t.Fatalf("experts %v: %d examples, want %d", tc.experts, len(src.pool), want)
		}
		for _, e := range src.pool {
			if _, ok := e.Meta[method.VariantKey]; ok || e.Solution == "" {
				t.Fatalf("experts %v: example %+v is not for the plain prompt", tc.experts, e)
			}
		}
	}
}

// TestDMEConfigChecks: the config refuses D_ME outside sft, experts
// chosen twice, and a split without its side.
func TestDMEConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		edit func(*RLConfig)
		want string
	}{
		{func(c *RLConfig) { c.Data.DME = "d.jsonl" }, "trained by sft"},
		{func(c *RLConfig) {
			c.Algorithm, c.Data.DME, c.Data.DMEExperts, c.Parts = method.SFT, "d.jsonl", []int{1}, []string{meml.PartExpertPrompts}
		}, "dme_experts is for training answers behind the plain prompt"},
		{func(c *RLConfig) { c.Algorithm, c.Data.DME, c.Data.DMEExperts = method.SFT, "d.jsonl", []int{-1} }, "dme_experts: -1"},
		{func(c *RLConfig) { c.Data.WarmupFraction = 0.2 }, "data.part"},
		{func(c *RLConfig) { c.Data.WarmupFraction = 1 }, "warmup_fraction = 1"},
		{func(c *RLConfig) { c.Data.Part = "rl" }, "needs data.warmup_fraction"},
		{func(c *RLConfig) { c.Data.DMEAnswers = "some" }, "dme_answers"},
		{func(c *RLConfig) { c.TestProblems = -1 }, "test_problems"},
	} {
		c := DefaultRL()
		tc.edit(&c)
		if _, err := c.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
}

// TestMEFRunReportsBestExpertOnTest runs MEF (SFT on D_ME behind expert
// prompts) for a few steps and checks the final evaluation: a validation
// line per expert and a test line that reports the expert best on
// validation, with the majority vote's delta.
func TestMEFRunReportsBestExpertOnTest(t *testing.T) {
	path, _ := dmetest.World(t, 4, 40, []int{3})
	cfg := DefaultRL()
	cfg.Algorithm, cfg.Parts = method.SFT, []string{meml.PartExpertPrompts}
	cfg.Sections.Set(&meml.ExpertPromptsConfig{Experts: []int{0, 1, 2}})
	cfg.Model, cfg.Data = tinyWorldModel(t), DataConfig{Name: "world", Levels: []int{3}, DME: path}
	cfg.Steps, cfg.PromptsPerStep, cfg.MaxTokens, cfg.LR = 3, 8, 24, 1e-3
	cfg.EvalEvery, cfg.EvalProblems, cfg.TestProblems, cfg.CheckpointEvery = 0, 6, 6, 3
	dir := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), cfg, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "eval.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []rundir.Eval
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var m rundir.Eval
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 || lines[0].Split != "val" || lines[1].Split != "val" || lines[2].Split != "test" {
		t.Fatalf("eval.jsonl %+v", lines)
	}
	val, test := lines[1], lines[2]
	if len(test.ProblemSet) != 12 || len(test.Outcomes) != test.Problems || len(val.Outcomes) == 0 {
		t.Errorf("test line's problem set %q, want a 12-digit fingerprint; outcomes %q (test) %q (val)", test.ProblemSet, test.Outcomes, val.Outcomes)
	}
	x, v := expertsOf(t, test), expertsOf(t, val)
	if len(x.Experts) != 3 || test.Problems != 6 || x.BestExpert == "" || x.Best == nil || x.Majority == nil || x.Delta == nil {
		t.Fatalf("test line %+v, its record %+v", test, x)
	}
	if *x.Best != x.Experts[x.BestExpert] || *x.Delta != *x.Majority-*x.Best {
		t.Errorf("best %v, experts %v, delta %v", *x.Best, x.Experts, *x.Delta)
	}
	for name, acc := range v.Experts {
		if acc > v.Experts[x.BestExpert] {
			t.Errorf("%s scored %v on validation, above the chosen %s (%v)", name, acc, x.BestExpert, v.Experts[x.BestExpert])
		}
	}
}
