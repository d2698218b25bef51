package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/reflection"
	"rlvr/report"
)

func TestMetaExperienceConfig(t *testing.T) {
	c := DefaultRL()
	c.Parts = []string{PartMetaExperience}
	if err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	if m := c.MetaExperience; m == nil || m.Pairs != 4 || m.Weight != 1 || m.MaxTokens != c.MaxTokens || m.Temperature != c.Temperature {
		t.Fatalf("defaults %+v", c.MetaExperience)
	}
	bad := DefaultRL()
	bad.Algorithm, bad.Parts = method.SFT, []string{PartMetaExperience}
	bad.MetaExperience = &MetaExperienceConfig{Pairs: -1, AllPairs: true, Weight: float32(math.Inf(1)),
		Instruction: "compare {correct_ans}", Validation: "no memory here"}
	err := bad.Resolve()
	for _, want := range []string{"pairs = -1 and all_pairs are both set", "meta_experience.pairs = -1", "meta_experience.weight = +Inf",
		"instruction must hold {correct_ans} and {error_ans}", "validation must hold {experience}", "part meta_experience needs rollouts"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	all := DefaultRL()
	all.Parts, all.MetaExperience = []string{PartMetaExperience}, &MetaExperienceConfig{AllPairs: true}
	if err := all.Resolve(); err != nil || all.MetaExperience.Pairs != 0 {
		t.Fatalf("all_pairs: %+v, %v", all.MetaExperience, err)
	}
	m, err := NewMethod(&all, Setup{MaxLen: 512, Chat: true})
	if err != nil {
		t.Fatal(err)
	}
	extras := m.(*method.RL).Extras
	if len(extras) != 1 {
		t.Fatalf("extras %+v", extras)
	}
	if me := extras[0].(*method.MetaExperience); me.Pairs != 0 || me.Format != (reflection.Chat{}) {
		t.Fatalf("a chat model's part %+v", me)
	}
}

// TestMetaExperienceExhibited runs MEL with the world model and checks a
// validated meta-experience is written beside each evaluation, in the
// world's reflection format, with a replay that verifies.
func TestMetaExperienceExhibited(t *testing.T) {
	cfg := smallRL(t)
	cfg.Model, cfg.Data.Levels, cfg.MaxTokens, cfg.Steps, cfg.EvalEvery = worldModel(t), []int{3}, 96, 4, 2
	cfg.Parts, cfg.MetaExperience = []string{PartMetaExperience}, &MetaExperienceConfig{}
	run := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	r, err := report.Load(run)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, x := range r.Samples {
		if x.Title != "meta-experience" || !strings.Contains(x.Text, "question:\nQ:") || !strings.Contains(x.Text, "replay with M (verified):\n") {
			t.Fatalf("sample %+v", x)
		}
		_, m, _ := strings.Cut(x.Text, "meta-experience M:\n")
		m, _, _ = strings.Cut(m, "\n\n")
		if _, err := (reflection.World{}).Parse(m); err != nil {
			t.Fatalf("the shown reflection %q does not parse: %v", m, err)
		}
		steps = append(steps, x.Step)
	}
	if len(steps) == 0 || steps[len(steps)-1] != 4 {
		t.Fatalf("samples at steps %v, want one at the last evaluation (4)", steps)
	}
	ms := stable(t, filepath.Join(run, "metrics.jsonl"))
	for _, m := range ms {
		if m["mel/validated"] > m["mel/parsed"] || m["mel/parsed"]+m["mel/parse_failures"] != m["mel/pairs"] {
			t.Fatalf("yields out of order: %v", m)
		}
		if m["mel/validated"] > 0 && !(m["loss/mel"] > 0 && m["mel/nll"] > 0) {
			t.Fatalf("validated meta-experiences without an NLL term: %v", m)
		}
	}
}
