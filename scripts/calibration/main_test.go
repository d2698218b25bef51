package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRowKey(t *testing.T) {
	for path, want := range map[string]string{
		"runs/M.Q4_1.gsm8k.samples.jsonl":         "M.Q4_1.gsm8k",
		"runs/M.Q4_1.gsm8k.100-200.samples.jsonl": "M.Q4_1.gsm8k",
		"M.world-line.0-10.samples.jsonl":         "M.world-line",
	} {
		if got, err := rowKey(path); err != nil || got != want {
			t.Errorf("rowKey(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := rowKey("gsm8k.0-100.samples.jsonl"); err == nil {
		t.Error("a name without a model: no error")
	}
}

func TestStated(t *testing.T) {
	for text, want := range map[string]bool{
		"1 + 1 = 2\n#### 2":               true,
		"so \\boxed{2}":                   true,
		"The answer is 2.":                true,
		" 18":                             true,
		" $12.50":                         true,
		"1 + 1 = 2":                       false,
		"She has 3 apples, so 3 + 4 is 7": false,
		"":                                false,
	} {
		if got := stated(text); got != want {
			t.Errorf("stated(%q) = %v, want %v", text, got, want)
		}
	}
}

// TestReadByPosition checks that problems are told apart by their place in
// the file: two problems with one ID (a world question drawn twice) stay
// two problems with k samples each.
func TestReadByPosition(t *testing.T) {
	lines := []string{
		`{"ID":"w/1+1","Pass":"greedy","Index":0,"Reward":1}`,
		`{"ID":"w/2+2","Pass":"greedy","Index":0,"Reward":0}`,
		`{"ID":"w/1+1","Pass":"greedy","Index":0,"Reward":0}`,
		`{"ID":"w/1+1","Pass":"sampled","Index":0,"Reward":1,"Text":"1 + 1 = 2\n#### 2"}`,
		`{"ID":"w/1+1","Pass":"sampled","Index":1,"Reward":1,"Text":"1 + 1 = 2"}`,
		`{"ID":"w/2+2","Pass":"sampled","Index":0,"Reward":0}`,
		`{"ID":"w/2+2","Pass":"sampled","Index":1,"Reward":1}`,
		`{"ID":"w/1+1","Pass":"sampled","Index":0,"Reward":0}`,
		`{"ID":"w/1+1","Pass":"sampled","Index":1,"Reward":0}`,
	}
	path := filepath.Join(t.TempDir(), "M.world.samples.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []problem{{"w/1+1", true, 2, 2, 1}, {"w/2+2", false, 2, 1, 0}, {"w/1+1", false, 2, 0, 0}}
	if len(ps) != len(want) {
		t.Fatalf("%d problems, want %d", len(ps), len(want))
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("problem %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	// The same file compressed, as scripts/calibrate.sh keeps it.
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(strings.Join(lines, "\n") + "\n"))
	zw.Close()
	gz := path + ".gz"
	if err := os.WriteFile(gz, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := read(gz); err != nil || fmt.Sprint(got) != fmt.Sprint(ps) {
		t.Errorf("compressed: %+v, %v; want %+v", got, err, ps)
	}
	if key, err := rowKey(gz); err != nil || key != "M.world" {
		t.Errorf("rowKey(%q) = %q, %v", gz, key, err)
	}
	// A sample out of the greedy pass's order is an error, naming the line.
	bad := append(append([]string{}, lines[:3]...), lines[5])
	if err := os.WriteFile(path, []byte(strings.Join(bad, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := read(path); err == nil || !strings.Contains(err.Error(), ":4:") {
		t.Errorf("a sample out of order: %v", err)
	}
}
