package eapo

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"rlvr/task/world"
)

func FuzzChatParse(f *testing.F) {
	for _, s := range []string{
		`<consult>[{"expert": "E1", "question": "What is 19*3?"}, {"question": "And 12+7?"}]</consult>`,
		`<consult>{"question": "q"}</consult>`,
		"reasoning <consult>{\"expert\":\"E2\",\"question\":\"x\"}</consult> \n",
		`<consult>[]</consult>`,
		`<consult>null</consult>`,
		`<consult>[{"question": "  "}]</consult>`,
		`<consult>{"question": "\u00e9"</consult>`,
		`</consult>`,
		"<consult>\xff</consult>",
		"",
	} {
		f.Add(s, 40)
	}
	f.Fuzz(func(t *testing.T, text string, max int) {
		var c Chat
		qs, err := c.Parse(text)
		if err == nil {
			if len(qs) == 0 {
				t.Fatalf("Parse(%q): no query and no error", text)
			}
			for i, q := range qs {
				if strings.TrimSpace(q.Question) == "" {
					t.Fatalf("Parse(%q): query %d has no question", text, i)
				}
			}
			// The action the policy would write for them reads back the same.
			back, err := c.Parse(c.Action(qs))
			if err != nil || !reflect.DeepEqual(back, qs) {
				t.Fatalf("Parse(%q) = %v; written as %q it reads back as %v, %v", text, qs, c.Action(qs), back, err)
			}
		} else if qs != nil {
			t.Fatalf("Parse(%q): %v with queries %v", text, err, qs)
		}
		// Whatever the reply, the kept answer is capped and not blank.
		c.MaxReply = max % 4096
		a, ok := c.Answer(text)
		limit := c.MaxReply
		if limit <= 0 {
			limit = DefaultMaxReply
		}
		if ok != (a != "") || ok != (strings.TrimSpace(text) != "") {
			t.Fatalf("Answer(%q) = %q, %v", text, a, ok)
		}
		if len(a) > limit+len(" …") {
			t.Fatalf("Answer(%q) kept %d bytes over a cap of %d", text, len(a), limit)
		}
		if utf8.ValidString(text) && !utf8.ValidString(a) {
			t.Fatalf("Answer(%q) = %q, not UTF-8", text, a)
		}
	})
}

func FuzzWorldAnswer(f *testing.F) {
	for _, p := range world.Mix(1, 4, []int{1, 3, 5}) {
		for s := range world.Styles {
			text, _ := world.Solve(p, s)
			f.Add(text)
		}
	}
	for _, s := range []string{"", "####", "####-0", "####1.5", "the answer is 7", "\\boxed{12}", "####9223372036854775808", "?E1:1+1?\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		var w World
		a, ok := w.Answer(reply)
		if ok {
			n, err := strconv.ParseInt(a, 10, 64)
			if err != nil || strconv.FormatInt(n, 10) != a {
				t.Fatalf("Answer(%q) = %q, not a canonical integer", reply, a)
			}
			if !strings.Contains(reply, "####") {
				t.Fatalf("Answer(%q) = %q without ####", reply, a)
			}
		} else if a != "" {
			t.Fatalf("Answer(%q) = %q without ok", reply, a)
		}
		// The line format survives any text as a consult action: an error
		// or queries to E0..E99, and their replies write one line each.
		qs, err := w.Parse(reply)
		if err != nil {
			return
		}
		rs := make([]Reply, len(qs))
		for i, q := range qs {
			e, err := strconv.Atoi(strings.TrimPrefix(q.Expert, "E"))
			if !strings.HasPrefix(q.Expert, "E") || err != nil || e < 0 || e > 99 {
				t.Fatalf("Parse(%q): query %d names %q", reply, i, q.Expert)
			}
			if strings.ContainsAny(q.Question, ";\n") {
				t.Fatalf("Parse(%q): query %d's question %q spans a delimiter", reply, i, q.Question)
			}
			rs[i] = Reply{Expert: q.Expert, Answer: "1", OK: i%2 == 0}
		}
		if got := strings.Count(w.Replies(rs), "\n"); got != len(qs) {
			t.Fatalf("Parse(%q): %d replies written for %d queries", reply, got, len(qs))
		}
		if back, err := w.Parse(w.Action(qs)); err != nil || !reflect.DeepEqual(back, qs) {
			t.Fatalf("Parse(%q) = %v; written as %q it reads back as %v, %v", reply, qs, w.Action(qs), back, err)
		}
	})
}
