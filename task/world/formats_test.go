package world

import (
	"strings"
	"testing"
)

func TestParseQuestionRoundTrip(t *testing.T) {
	for _, p := range Mix(5, 500, []int{0, 1, 2, 3, 4, 5}) {
		q, err := ParseQuestion(p.Prompt())
		if err != nil {
			t.Fatal(err)
		}
		if q.Answer != p.Answer || q.Question != p.Question || len(q.Ops) != len(p.Ops) {
			t.Fatalf("%q parsed to %+v", p.Question, q)
		}
		for k := 1; k <= len(p.Ops); k++ {
			pre := p.Prefix(k)
			back, err := ParseQuestion(pre.Question)
			if err != nil || back.Answer != pre.Answer {
				t.Fatalf("prefix %d of %q: %q = %d, parsed %v (%v)", k, p.Question, pre.Question, pre.Answer, back.Answer, err)
			}
		}
	}
	for _, bad := range []string{"", "Q:", "12", "12+", "12+x", "1+2)3", strings.Repeat("1+", 200) + "1"} {
		if _, err := ParseQuestion(bad); err == nil {
			t.Errorf("ParseQuestion(%q): no error", bad)
		}
	}
}

func TestConsultRoundTrip(t *testing.T) {
	qs := []Query{{1, "19*3"}, {3, "(12+7)*3"}}
	line := FormatConsult(qs)
	if line != "?E1:19*3;E3:(12+7)*3?\n" {
		t.Fatalf("line %q", line)
	}
	got, err := ParseConsult("Q:1+2\n12+7=19\n" + line)
	if err != nil || len(got) != 2 || got[1] != qs[1] {
		t.Fatalf("parsed %v (%v)", got, err)
	}
	for _, bad := range []string{"?E1:3?x", "E1:3?", "?X1:3?", "?E:3?", "?E1 3?", "?"} {
		if _, err := ParseConsult(bad); err == nil {
			t.Errorf("ParseConsult(%q): no error", bad)
		}
	}
	if r := FormatReplies([]Reply{{1, "57", true}, {3, "", false}}); r != "!E1:57\n!E3:-\n" {
		t.Fatalf("replies %q", r)
	}
}

func TestReflectOnStyleSlips(t *testing.T) {
	found := 0
	for _, p := range Mix(8, 400, []int{3, 4, 5}) {
		correct, _ := Solve(p, 0)
		for s := 1; s < len(Styles); s++ {
			wrongText, ans := Solve(p, s)
			if ans == p.Answer {
				continue
			}
			// The wrong trajectory in the reference format: re-solve the
			// style's numbers step by step.
			r, ok := Reflect(p, correct, referenceFormat(p, s))
			if !ok {
				t.Fatalf("no bifurcation between %q and %q", correct, wrongText)
			}
			back, err := ParseReflection(r.Format())
			if err != nil || back != r {
				t.Fatalf("reflection %+v parsed back as %+v (%v)", r, back, err)
			}
			found++
		}
	}
	if found == 0 {
		t.Fatal("no slips to reflect on")
	}
	if _, err := ParseReflection("S:1+1=2\nH:x\n"); err == nil || !strings.Contains(err.Error(), `"C:"`) {
		t.Fatalf("missing critique: %v", err)
	}
}

func FuzzParsers(f *testing.F) {
	f.Add("?E1:19*3;E3:12+7?\n")
	f.Add("S:a\nC:b\nH:c\n")
	f.Add("Q:(12+7)*3-5\n")
	f.Fuzz(func(t *testing.T, s string) {
		ParseConsult(s)
		ParseReflection(s)
		if p, err := ParseQuestion(s); err == nil {
			if q, err := ParseQuestion(p.Prefix(len(p.Ops)).Question); err != nil || q.Answer != p.Answer {
				t.Fatalf("%q: prefix round trip %v %v", s, q.Answer, err)
			}
		}
	})
}

// TestParseQuestionNegativeFirst reads a step whose accumulator went below
// zero after a slip, as version 2's policy asks it.
func TestParseQuestionNegativeFirst(t *testing.T) {
	p, err := ParseQuestion("-57+542")
	if err != nil || p.First != -57 || p.Answer != 485 {
		t.Fatalf("got %+v, %v", p, err)
	}
	for _, bad := range []string{"--57+1", "-", "-+3", "5+-3"} {
		if _, err := ParseQuestion(bad); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}
