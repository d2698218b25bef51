package checkpoint_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint"
)

// TestModelsWorld: a world model's path is checked as fine while it is
// missing, and installed by its version when it is ensured; any other
// path is checked as a model and left alone.
func TestModelsWorld(t *testing.T) {
	dir := t.TempDir()
	paths := map[int]string{1: filepath.Join(dir, "v1"), 2: filepath.Join(dir, "v2")}
	var installed []int
	m := checkpoint.Models{World: func(v int) string { return paths[v] }, Versions: []int{1, 2},
		Install: func(_ context.Context, v int) error {
			installed = append(installed, v)
			return errors.New("not pretrained yet")
		}}
	if v := m.Version(paths[2]); v != 2 {
		t.Errorf("Version(%s) = %d, want 2", paths[2], v)
	}
	if m.Path(3) != "" || m.Version(filepath.Join(dir, "other")) != 0 {
		t.Error("a version or path of no world model was named")
	}
	if err := m.Check(paths[1]); err != nil {
		t.Errorf("Check of a missing world model: %v", err)
	}
	if err := m.Check(filepath.Join(dir, "other")); err == nil || strings.HasPrefix(err.Error(), "checkpoint: ") {
		t.Errorf("Check of a missing model: %v", err)
	}
	if err := m.Check(""); err == nil || err.Error() != "is empty" {
		t.Errorf("Check of an empty path: %v", err)
	}
	if err := m.Ensure(context.Background(), filepath.Join(dir, "other")); err != nil || len(installed) != 0 {
		t.Errorf("Ensure of another path: %v, installed %v", err, installed)
	}
	if _, err := m.Open(paths[2], ""); err == nil || err.Error() != "not pretrained yet" || len(installed) != 1 || installed[0] != 2 {
		t.Errorf("Open of a missing world model: %v, installed %v", err, installed)
	}
	var zero checkpoint.Models
	if zero.Version("") != 0 || zero.Path(1) != "" {
		t.Error("the zero Models knows a world model")
	}
}
