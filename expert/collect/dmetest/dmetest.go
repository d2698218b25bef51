// Package dmetest writes MEML-GRPO's multi-expert dataset (D_ME) for
// tests: for the built-in world, the reference solution (E0) and each
// scripted style's answer (E1, E2, …) to every question, each verified;
// for a dataset's questions, the reference solution as every expert's
// answer.
package dmetest

import (
	"fmt"
	"path/filepath"
	"testing"

	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/task"
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
				Name: task.ExpertName(s), Reference: s == 0, Prompt: world.ExpertPrompt(s), Response: text,
				Correct: got == p.Answer}
			if s > 0 {
				r.API, r.Model = expert.APICompletion, r.Name
			} else {
				r.Name = collect.ReferenceName
			}
			recs = append(recs, r)
		}
	}
	return write(t, recs), recs
}

// Dataset writes a D_ME of the examples (a dataset's questions, as a run
// loads them) to a file in a temporary directory and returns its path: the
// reference solution (E0), and the same text as the answer of each of
// experts chat experts E1…EN, asked through the chat API.
func Dataset(t testing.TB, examples []task.Example, experts int) string {
	t.Helper()
	var recs []collect.Record
	for _, e := range examples {
		for i := range experts + 1 {
			r := collect.Record{ID: e.ID, Source: e.Source, Question: e.Prompt, Answer: e.Answer, Expert: i,
				Name: task.ExpertName(i), Reference: i == 0, Response: e.Solution, Correct: true}
			if i > 0 {
				r.API, r.Model, r.Prompt = expert.APIChat, r.Name, fmt.Sprintf("You are Expert %d.", i)
			} else {
				r.Name = collect.ReferenceName
			}
			recs = append(recs, r)
		}
	}
	return write(t, recs)
}

// write writes the records as a D_ME file in a temporary directory and
// returns its path.
func write(t testing.TB, recs []collect.Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dme.jsonl")
	if err := collect.WriteDME(path, recs); err != nil {
		t.Fatal(err)
	}
	return path
}
