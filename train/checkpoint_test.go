package train

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"rlvr/backend"
	"rlvr/rundir"
)

// failingSaver is a learner whose Save writes part of a checkpoint and
// then runs out of disk; whole saves write the part alone.
type failingSaver struct {
	backend.Learner // not called
	fail            bool
	// stateDir puts a directory where the run state goes, so that writing
	// the state fails after a whole save.
	stateDir bool
}

func (f *failingSaver) Save(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("half"), 0o644); err != nil {
		return err
	}
	if f.stateDir {
		if err := os.MkdirAll(filepath.Join(dir, rundir.StateFile, "x"), 0o755); err != nil {
			return err
		}
	}
	if f.fail {
		return &os.PathError{Op: "write", Path: filepath.Join(dir, "model.safetensors"), Err: syscall.ENOSPC}
	}
	return nil
}

// TestFailedCheckpointLeavesNothing: a save that fails while the learner
// writes (a full disk) or while the run state is written leaves no
// ckpt-N.tmp behind, and the checkpoints before it as they were.
func TestFailedCheckpointLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := saveCheckpoint(ctx, &failingSaver{}, dir, runState{Step: 1}, 3, false); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*failingSaver{{fail: true}, {stateDir: true}} {
		err := saveCheckpoint(ctx, l, dir, runState{Step: 2}, 3, false)
		if err == nil {
			t.Fatalf("%+v: the save succeeded", *l)
		}
		if l.fail && !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("error %v, want the disk's", err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 || entries[0].Name() != "ckpt-000001" {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("%+v: the run directory holds %v after a failed save, want ckpt-000001 alone", *l, names)
		}
	}
	if st, err := readState(filepath.Join(dir, "ckpt-000001")); err != nil || st.Step != 1 {
		t.Fatalf("the earlier checkpoint: %+v, %v", st, err)
	}
}
