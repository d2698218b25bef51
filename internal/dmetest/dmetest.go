// Package dmetest writes MEML-GRPO's multi-expert dataset (D_ME) for the
// built-in world, for tests: the reference solution (E0) and each scripted
// style's answer (E1, E2, …) to every question, each verified.
package dmetest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/task/world"
)

// World writes the D_ME of n world questions of levels (drawn with seed)
// to a file in a temporary directory, and returns its path and records.
func World(t testing.TB, seed uint64, n int, levels []int) (string, []collect.Record) {
	t.Helper()
	var recs []collect.Record
	for _, p := range world.Mix(seed, n, levels) {
		e := p.Example()
		for s := range world.Styles {
			text, got := world.Solve(p, s)
			r := collect.Record{ID: e.ID, Question: e.Prompt, Answer: e.Answer, Expert: s,
				Name: "E" + strconv.Itoa(s), Reference: s == 0, Prompt: fmt.Sprintf("@E%d\n", s), Response: text,
				Correct: got == p.Answer}
			if s > 0 {
				r.API, r.Model = expert.APICompletion, r.Name
			} else {
				r.Name = collect.ReferenceName
			}
			recs = append(recs, r)
		}
	}
	path := filepath.Join(t.TempDir(), "dme.jsonl")
	if err := collect.WriteDME(path, recs); err != nil {
		t.Fatal(err)
	}
	return path, recs
}
