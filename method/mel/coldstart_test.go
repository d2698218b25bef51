package mel

import (
	"strings"
	"testing"
)

// TestTemplateReflectionParses: the cold start's reflections are read by
// the chat parser, their failure point is the wrong answer's first line
// that the right one lacks, and their heuristics name none of the
// problem's numbers.
func TestTemplateReflectionParses(t *testing.T) {
	correct := "She has 3*4=12 apples.\nShe gives 5 away: 12-5=7.\n#### 7"
	for _, c := range []struct{ wrong, step string }{
		{"She has 3*4=12 apples.\nShe gives 5 away: 12-5=8.\n#### 8", "She gives 5 away: 12-5=8."},
		{"She has 3*4=12 apples.", "She has 3*4=12 apples."},
		{"", "the incorrect solution gives no reasoning to check"},
	} {
		m, err := Chat{}.Parse(TemplateReflection(correct, c.wrong))
		if err != nil {
			t.Fatalf("wrong %q: %v", c.wrong, err)
		}
		if m.Step != c.step {
			t.Errorf("wrong %q: failure point %q, want %q", c.wrong, m.Step, c.step)
		}
		if strings.ContainsAny(m.Heuristic, "0123456789") {
			t.Errorf("the heuristics name a number: %q", m.Heuristic)
		}
		if !strings.Contains(m.Critique, "3. First-Person Reflective Summary") {
			t.Errorf("critique without sections 1-3: %q", m.Critique)
		}
	}
}
