package train

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"rlvr/method/dapo"
	"rlvr/method/meml"
	"rlvr/method/part"
)

// writeYAML writes a config file and returns its path.
func writeYAML(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigSectionsLoad: a part's section is a top-level key of its
// name, read into that part's config; unknown keys, at the top and inside
// a section, are errors naming the key and its line.
func TestConfigSectionsLoad(t *testing.T) {
	cfg, err := LoadRLConfig(writeYAML(t, "algorithm: grpo\nparts: [expert_prompts, hard_buffer]\nhard_buffer:\n  k: 3\nexpert_prompts: {experts: [0, 2]}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if h, e := part.Get[*meml.HardBufferConfig](cfg.Sections), part.Get[*meml.ExpertPromptsConfig](cfg.Sections); h == nil || h.K != 3 || e == nil || !slices.Equal(e.Experts, []int{0, 2}) {
		t.Fatalf("sections %+v", cfg.Sections)
	}
	for _, tc := range []struct{ text, want string }{
		{"steps: 3\ntelepathy:\n  on: true\n", "line 2: field telepathy not found in type train.RLConfig"},
		{"parts: [hard_buffer]\nhard_buffer:\n  k: 3\n  kk: 4\n", "line 4: field kk not found in type meml.HardBufferConfig"},
		{"data:\n  nme: world\n", "line 2: field nme not found in type train.DataConfig"},
		{"hard_buffer:\n  k: three\n", "line 2: cannot unmarshal !!str `three` into int"},
	} {
		if _, err := LoadRLConfig(writeYAML(t, tc.text), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
	// A section of a part not listed.
	cfg, err = LoadRLConfig(writeYAML(t, "parts: [expert_prompts]\nhard_buffer: {k: 3}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Resolve(); err == nil || !strings.Contains(err.Error(), "section hard_buffer is set but hard_buffer is not in parts") {
		t.Errorf("resolve: %v", err)
	}
}

// TestConfigSectionsWritten: a config is recorded with its parts'
// sections right after parts, in registry order, and reads back the same,
// as --resume compares it.
func TestConfigSectionsWritten(t *testing.T) {
	cfg := DefaultRL()
	if err := cfg.ApplyPreset("meml-grpo"); err != nil {
		t.Fatal(err)
	}
	cfg.Parts = append(cfg.Parts, dapo.PartOverlongPenalty)
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.recorded(r)
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for line := range strings.Lines(string(b)) {
		if k, _, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "-") {
			keys = append(keys, k)
		}
	}
	at := slices.Index(keys, "parts")
	if want := []string{"parts", "expert_prompts", "overlong_penalty", "mutual_learning", "hard_buffer", "eval_every"}; at < 0 || !slices.Equal(keys[at:at+len(want)], want) {
		t.Errorf("keys %v, want %v in a row", keys, want)
	}
	again, err := LoadRLConfig(writeYAML(t, string(b)), "")
	if err != nil {
		t.Fatal(err)
	}
	if r, err = again.Resolve(); err != nil {
		t.Fatal(err)
	}
	again = again.recorded(r)
	was, _ := configMap(&cfg)
	is, _ := configMap(&again)
	if !reflect.DeepEqual(was, is) {
		t.Errorf("the written config reads back as\n%v\nnot\n%v", is, was)
	}
	dir := t.TempDir()
	if err := writeConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	if err := checkResumeConfig(dir, &again); err != nil {
		t.Errorf("resume refuses the config it wrote: %v", err)
	}
	part.Get[*meml.HardBufferConfig](again.Sections).K = 5
	if err := checkResumeConfig(dir, &again); err == nil || !strings.Contains(err.Error(), "hard_buffer.k 6 -> 5") {
		t.Errorf("resume with another hard_buffer.k: %v", err)
	}
}

// TestPresetOverConfig: a preset's sections are the defaults a config
// file then changes, key by key, as a preset of fields was.
func TestPresetOverConfig(t *testing.T) {
	cfg, err := LoadRLConfig(writeYAML(t, "preset: dapo\noverlong_penalty: {buffer: 8}\ndynamic_sampling: {}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	if d, o := part.Get[*dapo.DynamicSamplingConfig](cfg.Sections), part.Get[*dapo.OverlongPenaltyConfig](cfg.Sections); d.MaxRounds != 3 || o.Buffer != 8 {
		t.Errorf("max_rounds %d, buffer %d; want the preset's 3 and the file's 8", d.MaxRounds, o.Buffer)
	}
}

// TestSetKeys: --set replaces a section's list, a top-level scalar and a
// nested map's key, adds keys and the maps on their path, and applies to
// no file at all; a bad override, and a key the config does not know, are
// errors naming them.
func TestSetKeys(t *testing.T) {
	path := writeYAML(t, `algorithm: grpo
parts: [expert_prompts]
expert_prompts:
  experts: [0]
data: {name: world, levels: [5, 6]}
steps: 200
`)
	c, err := LoadRLConfig(path, "", "expert_prompts.experts=[1, 2]", "steps=7", "data.levels=[3]", "eval_samples=4")
	if err != nil {
		t.Fatal(err)
	}
	e := part.Get[*meml.ExpertPromptsConfig](c.Sections)
	if e == nil || !slices.Equal(e.Experts, []int{1, 2}) || c.Steps != 7 || !slices.Equal(c.Data.Levels, []int{3}) || c.Data.Name != "world" || c.EvalSamples != 4 {
		t.Errorf("after --set: experts %v, steps %d, data %+v, eval_samples %d", e, c.Steps, c.Data, c.EvalSamples)
	}
	c, err = LoadRLConfig("", "", "algorithm=dr_grpo", "meta_experience.weight=0.5", "parts=[meta_experience]")
	if err != nil {
		t.Fatal(err)
	}
	if c.Algorithm != "dr_grpo" || len(c.Parts) != 1 || len(c.Sections) != 1 {
		t.Errorf("from no file: algorithm %s, parts %v, sections %v", c.Algorithm, c.Parts, c.Sections)
	}
	for set, want := range map[string]string{
		"steps":                          "want KEY=VALUE",
		"=3":                             "want KEY=VALUE",
		"steps.every=1":                  "steps is not a map",
		"data..levels=[1]":               "an empty key",
		"steps=[1":                       "the value",
		"expert_prompts.expertz=[1]":     "expertz",
		"no_such_key=1":                  "no_such_key",
		"expert_prompts.experts=nothing": "expert_prompts",
	} {
		_, err := LoadRLConfig(path, "", set)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "c.yaml") {
			t.Errorf("--set %s: err = %v, want it to name %q and the file", set, err, want)
		}
	}
}
