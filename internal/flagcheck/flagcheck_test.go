package flagcheck

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckReportsEveryProblem: the problems come back in one error, in
// the order they were found, each after its flag.
func TestCheckReportsEveryProblem(t *testing.T) {
	var c Check
	if c.Err() != nil {
		t.Fatal("a check without problems is an error")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.IntIn("k", -1, 0, 10)
	c.IntIn("n", 0, 1, 10)
	c.IntIn("batch", 11, 1, 10)
	c.FloatIn("lr", math.NaN(), 0, 1, true)
	c.File("data", dir)
	c.File("tokenizer", filepath.Join(dir, "nosuch"))
	c.Dir("out", file)
	c.Levels([]int{7}, 7)
	c.NonEmpty("name", " ", true)
	c.NonEmpty("system", "", false)
	c.Problem("run directory %s is a file, not a directory", file)
	want := "--k -1: must not be negative; --n 0: must be positive; --batch 11: must be in [1, 10]; --lr NaN: must be a finite number; " +
		"--data " + dir + " is a directory, not a file; --tokenizer " + filepath.Join(dir, "nosuch") + ": no such file or directory; " +
		"--out " + file + " is a file, not a directory; --levels 7: no such level (0 to 6); --name is empty; " +
		"run directory " + file + " is a file, not a directory"
	if err := c.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v\nwant %s", err, want)
	}
	if c.Len() != 10 {
		t.Errorf("Len() = %d, want 10", c.Len())
	}
}

func TestDefault(t *testing.T) {
	k := 4
	Default(true, &k, 8)
	if k != 4 {
		t.Errorf("a kept flag took the default: %d", k)
	}
	Default(false, &k, 8)
	if k != 8 {
		t.Errorf("a flag not given kept %d, want the default 8", k)
	}
	if got := Newlines(`@E2\n`); got != "@E2\n" {
		t.Errorf("Newlines: %q", got)
	}
}
