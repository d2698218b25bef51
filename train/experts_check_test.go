package train

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/expert"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/task"
)

// referenceRun is a chat model's consultation run on the JSON Lines file
// at path, read through fields, whose pool is a reference expert.
func referenceRun(t *testing.T, path string, fields *FieldsConfig) RLConfig {
	t.Helper()
	cfg := smallRL(t)
	cfg.Model, cfg.Chat = byteChatModel(t, 512), ChatConfig{Template: "on"}
	cfg.Data = DataConfig{Name: "plain", Train: path, Fields: fields}
	cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens, cfg.CheckpointEvery = 1, 2, 2, 32, 0
	cfg.EvalProblems, cfg.TestProblems = 4, 4
	cfg.Parts = []string{eapo.PartConsultation}
	cfg.Sections.Set(&eapo.ConsultationConfig{Experts: []expert.Config{{Name: "oracle", Kind: expert.KindReference}}})
	return cfg
}

// TestSolutionsRefusedWithoutThem: what reads the training examples'
// reference solutions (a reference expert, MEL's reference_positive) on a
// file read without a solution field is refused before the run directory
// is made, naming the setting, the dataset and the field; with the field
// named, the same data serve it.
func TestSolutionsRefusedWithoutThem(t *testing.T) {
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf(`{"q": "%d+1?", "a": "%d", "work": "%d+1 = %d"}`, i, i+1, i, i+1))
	}
	path := filepath.Join(t.TempDir(), "plain.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pool, err := task.LoadColumns(path, task.Columns{Dataset: "plain", Prompt: "q", Answer: "a", Solution: "work"})
	if err != nil {
		t.Fatal(err)
	}
	melRun := func(t *testing.T, path string, fields *FieldsConfig) RLConfig {
		cfg := referenceRun(t, path, fields)
		cfg.Parts, cfg.Sections = []string{mel.PartMetaExperience}, nil
		cfg.Sections.Set(&mel.MetaExperienceConfig{ReferencePositive: true})
		return cfg
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, string, *FieldsConfig) RLConfig
		want []string
	}{
		{"reference expert", referenceRun, []string{"consultation.experts[0]", "oracle", `"solution"`}},
		{"reference_positive", melRun, []string{"meta_experience.reference_positive"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := filepath.Join(t.TempDir(), "run")
			err := Run(context.Background(), c.run(t, path, &FieldsConfig{Question: "q", Answer: "a"}), run, Options{})
			for _, want := range append(c.want, "plain ("+path+")", "data.fields.solution") {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Run: %v, want it to say %q", err, want)
				}
			}
			if _, err := os.Stat(run); !os.IsNotExist(err) {
				t.Errorf("the refused run made its directory: %v", err)
			}
			cfg := c.run(t, path, &FieldsConfig{Question: "q", Answer: "a", Solution: "work"})
			if _, err := cfg.Resolve(); err != nil {
				t.Fatal(err)
			}
			if err := checkExperts(&cfg, &source{pool: pool}); err != nil {
				t.Errorf("with solutions: %v", err)
			}
			if err := checkExperts(&cfg, &source{levels: []int{0}}); err != nil {
				t.Errorf("the world: %v", err)
			}
		})
	}
}
