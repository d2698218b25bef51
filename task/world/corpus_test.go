package world

import (
	"strings"
	"testing"
)

// TestCorpusDocuments draws documents of every kind and checks each parses
// with the format's own parser and trains only on the model's turns.
func TestCorpusDocuments(t *testing.T) {
	c := NewCorpus(DefaultCorpus([]int{0, 1, 2, 3, 4, 5}), 3)
	kinds := map[string]int{}
	for range 2000 {
		d := c.Next()
		kinds[d.Kind]++
		text := d.Text()
		if !strings.HasPrefix(text, "Q:") && !strings.HasPrefix(text, "R:") && !strings.HasPrefix(text, "M:") {
			t.Fatalf("%s document starts %q", d.Kind, text[:min(10, len(text))])
		}
		if d.Spans[0].Train || !d.Spans[len(d.Spans)-1].Train {
			t.Fatalf("%s: the prompt must be read and the last turn trained on", d.Kind)
		}
		switch d.Kind {
		case "consult":
			if _, err := ParseConsult(d.Spans[1].Text); err != nil {
				t.Fatal(err)
			}
			if d.Spans[2].Train || !strings.HasPrefix(d.Spans[2].Text, "!E") {
				t.Fatalf("replies %q must be read only", d.Spans[2].Text)
			}
		case "reflect":
			if _, err := ParseReflection(d.Spans[1].Text); err != nil {
				t.Fatal(err)
			}
		case "solve", "expert", "memory":
			if !strings.Contains(d.Spans[len(d.Spans)-1].Text, "####") {
				t.Fatalf("%s: no answer in %q", d.Kind, text)
			}
		}
	}
	for _, k := range []string{"solve", "expert", "consult", "reflect", "memory"} {
		if kinds[k] == 0 {
			t.Errorf("no %s documents in 2000", k)
		}
	}
	// Reproducible.
	a, b := NewCorpus(DefaultCorpus([]int{3}), 9), NewCorpus(DefaultCorpus([]int{3}), 9)
	for range 50 {
		if a.Next().Text() != b.Next().Text() {
			t.Fatal("same seed, different documents")
		}
	}
}
