package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"rlvr/method/probe"
	"strings"
	"testing"
)

// TestProbeWorldModel probes the world's model on a few problems and
// checks the report's counts agree with each other and with the flags.
func TestProbeWorldModel(t *testing.T) {
	configs, err := filepath.Abs(filepath.Join("..", "..", "configs"))
	if err != nil {
		t.Fatal(err)
	}
	cliFixture(t)
	// Chunks smaller than the problems, so that the counts below also
	// check that the chunks join up.
	defer func(n int) { probe.Chunk = n }(probe.Chunk)
	probe.Chunk = 5
	out := filepath.Join(t.TempDir(), "probe.json")
	stdout, stderr, err := execute(t, context.Background(), "probe", "--threads", "1", "--levels", "4", "--problems", "16",
		"--k", "4", "--max-tokens", "96", "--consult", filepath.Join(configs, "world-eapo.yaml"), "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "| queries readable ≥ 95% |") {
		t.Errorf("no preconditions table:\n%s", stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep probe.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Greedy.N != 16 || rep.Sampled.N != 64 || rep.ZeroVariance.N != 16 || rep.Episodes != 64 {
		t.Errorf("counts: greedy %d, sampled %d, groups %d, episodes %d", rep.Greedy.N, rep.Sampled.N, rep.ZeroVariance.N, rep.Episodes)
	}
	if mixed := 16 - int(rep.ZeroVariance.Mean*16+0.5); rep.Pairs != mixed || rep.Parsed > rep.Pairs || rep.Validated > rep.Parsed {
		t.Errorf("%d groups with right and wrong answers, but %d pairs, %d parsed, %d validated", mixed, rep.Pairs, rep.Parsed, rep.Validated)
	}
	// Level 4 has four steps: each of the 64 samples writes about that many.
	if st := rep.Steps; st.Prone+st.Other < 64*3 || st.ProneRight+st.ProneSlip > st.Prone || st.OtherRight > st.Other {
		t.Errorf("steps of 64 four-step samples: %+v", st)
	}
	if !strings.Contains(stdout, "steps of the samples: of ") {
		t.Errorf("no step tally:\n%s", stdout)
	}
	if rep.Readable.N != rep.Queries || rep.Consulting.N != rep.Episodes {
		t.Errorf("readable over %d of %d queries; consulting over %d of %d episodes", rep.Readable.N, rep.Queries, rep.Consulting.N, rep.Episodes)
	}
}

// TestEmbeddedWorldVersionInstalls: a command on world version 2, whose
// model comes with rlvr, installs it into an empty cache instead of asking
// for an hour of pretraining.
func TestEmbeddedWorldVersionInstalls(t *testing.T) {
	cliFixture(t) // an empty cache
	if _, stderr, err := execute(t, context.Background(), "eval", "--world", "2", "--levels", "0", "--problems", "2", "--max-tokens", "16"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(worldModelPath(2), "config.json")); err != nil {
		t.Fatalf("world version 2's model not installed: %v", err)
	}
}
