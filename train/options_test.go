package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/rundir"
)

// TestRLCommandConfig checks where RLCommand's config comes from: the
// flags' config alone, or a file (a resumed run's own) with the flags
// given set over it, resolved once with train's defaults filled in.
func TestRLCommandConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("steps: 7\nseed: 3\ntemperature: 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := DefaultRL()
	flags.Steps = 2
	override := func(c *RLConfig) error { c.Seed = 5; return nil }
	for _, c := range []struct {
		name        string
		o           RLCommand
		steps       int
		seed        uint64
		runDir      string
		temperature float32
	}{
		{"flags", RLCommand{Config: flags, Override: override}, 2, 1, filepath.Join("runs", "grpo-seed1"), 1},
		{"file", RLCommand{Config: flags, ConfigFile: file, Override: override}, 7, 5, filepath.Join("runs", "grpo-seed5"), 0.5},
		{"preset", RLCommand{Config: flags, Preset: "sft"}, 100, 1, filepath.Join("runs", "sft-seed1"), 1},
		{"resumed", RLCommand{Config: flags, RunDir: dir, Resume: true}, 7, 3, dir, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "resumed" {
				if err := os.Rename(file, filepath.Join(dir, rundir.ConfigFile)); err != nil {
					t.Fatal(err)
				}
			}
			r, runDir, err := c.o.plan()
			if err != nil {
				t.Fatal(err)
			}
			cfg := r.Config()
			if cfg.Steps != c.steps || cfg.Seed != c.seed || runDir != c.runDir {
				t.Errorf("steps %d, seed %d, run %s; want %d, %d, %s", cfg.Steps, cfg.Seed, runDir, c.steps, c.seed, c.runDir)
			}
			if cfg.EvalTemperature != c.temperature {
				t.Errorf("eval_temperature %v, want the resolved default %v", cfg.EvalTemperature, c.temperature)
			}
		})
	}
}

// TestCommandsValidate checks that the commands' options report every
// problem at once, each naming its flag.
func TestCommandsValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := DefaultRL()
	bad.Steps = 0
	rl := RLCommand{Config: bad, Out: file}
	if err := rl.Validate(); err == nil || !strings.Contains(err.Error(), "steps = 0") {
		t.Errorf("RLCommand: %v", err)
	}
	rl.Config.Steps = 1
	if err := rl.Validate(); err == nil || !strings.Contains(err.Error(), "--out "+file+" is a file") {
		t.Errorf("RLCommand: %v", err)
	}
	pre := PretrainCommand{Config: DefaultPretrain(), World: 9, Given: func(f string) bool { return f == "warmup" }}
	pre.Config.BatchTokens, pre.Config.Schedule.WarmupSteps = 0, -1
	err := pre.Validate()
	for _, want := range []string{"--world 9: no such world version", "--batch-tokens 0", "--warmup -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PretrainCommand: %v, want %q in it", err, want)
		}
	}
	if DefaultWarmup(3) != 0 || DefaultWarmup(4000) != DefaultPretrain().Schedule.WarmupSteps {
		t.Errorf("DefaultWarmup: %d, %d", DefaultWarmup(3), DefaultWarmup(4000))
	}
}
