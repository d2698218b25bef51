package train

import (
	"os"
	"path/filepath"
	"testing"

	"rlvr/rundir"
)

// FuzzLoadRLConfig feeds arbitrary files and --set overrides to the config
// loader and to Resolve: they return an error or a config, never panic, and
// a config that resolves writes YAML that loads and resolves again.
func FuzzLoadRLConfig(f *testing.F) {
	for _, name := range []string{"world-grpo.yaml", "world-meml-eapo-mel.yaml", "world-eapo.yaml", "gsm8k-grpo-chat.yaml"} {
		if b, err := os.ReadFile(filepath.Join("..", "configs", name)); err == nil {
			f.Add(b, "steps=3")
		}
	}
	f.Add([]byte("preset: meml-grpo\nhard_buffer: {k: 9}\n"), "hard_buffer.k=[1")
	f.Add([]byte("consultation:\n  turns: {kind: linear, start: 3, end: 1}\n"), "consultation.turns.kind=cosine")
	f.Add([]byte("steps: -1\n"), "lr=x")
	f.Add([]byte("\t- [}"), "=")
	f.Fuzz(func(t *testing.T, doc []byte, set string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		var sets []string
		if set != "" {
			sets = []string{set}
		}
		cfg, err := LoadRLConfig(path, "", sets...)
		if err != nil {
			return
		}
		if _, err := cfg.Resolve(); err != nil {
			return
		}
		// Written as a run writes its config.yaml, it loads and resolves.
		runDir := filepath.Join(dir, "run")
		if err := os.Mkdir(runDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeConfig(runDir, cfg); err != nil {
			t.Fatalf("a resolved config does not write: %v", err)
		}
		written := filepath.Join(runDir, rundir.ConfigFile)
		back, err := LoadRLConfig(written, "")
		if err != nil {
			out, _ := os.ReadFile(written)
			t.Fatalf("the written config does not load: %v\n%s", err, out)
		}
		if _, err := back.Resolve(); err != nil {
			out, _ := os.ReadFile(written)
			t.Fatalf("the written config does not resolve: %v\n%s", err, out)
		}
	})
}
