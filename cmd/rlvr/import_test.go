package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/internal/shareddata"
)

// startRLVR starts rlvr with args in a child process (see TestMain),
// writing its output to out.
func startRLVR(t *testing.T, out *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "RLVR_MAIN_ARGS="+strings.Join(args, "\x1f"))
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	return child
}

// TestConcurrentImports runs two imports of one GGUF into one --out at
// once, with and without --force: both succeed, one publishing and the
// other keeping its result, which loads, and no staging directory is
// left behind.
func TestConcurrentImports(t *testing.T) {
	gguf := shareddata.Path(t, "ollama-llama2-tiny-random/llama-2-tiny-random.gguf")
	dir := t.TempDir()
	var outs []string
	for _, force := range []bool{false, true} {
		out := filepath.Join(dir, fmt.Sprintf("model-force-%v", force))
		outs = append(outs, filepath.Base(out))
		args := []string{"import", gguf, "--out", out}
		if force {
			args = append(args, "--force")
		}
		var logs [2]bytes.Buffer
		a, b := startRLVR(t, &logs[0], args...), startRLVR(t, &logs[1], args...)
		for i, child := range []*exec.Cmd{a, b} {
			if err := child.Wait(); err != nil {
				t.Fatalf("import %d of two at once (--force %v): %v\n%s", i+1, force, err, logs[i].String())
			}
		}
		l, err := checkpoint.Open(out, "")
		if err != nil {
			t.Fatalf("the import does not load: %v", err)
		}
		if l.Model.NumParams() == 0 {
			t.Fatalf("the import holds no parameters")
		}
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != strings.Join(outs, " ") {
		t.Fatalf("the directory holds %v, want only %v", left, outs)
	}
}
