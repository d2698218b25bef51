package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/sample"
	"rlvr/task"
)

// TestDrawParts checks that a draw's parts are the whole draw's problems,
// in order, each part with the seed its first problem has in the whole,
// from a dataset and from the world; and that words replace the world's
// line format on plain text when asked.
func TestDrawParts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gsm8k.jsonl")
	var lines []string
	for i := range 9 {
		lines = append(lines, fmt.Sprintf(`{"question": "What is %d + 1?", "answer": "%d + 1 = %d\n#### %d"}`, i, i, i+1, i+1))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := func(es []task.Example) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.ID+" "+e.Prompt)
		}
		return out
	}
	for _, base := range []Draw{{Task: "gsm8k", Path: path, Seed: 3}, {Levels: []int{0, 4}, Seed: 3}} {
		whole := base
		whole.Problems = 7
		all, seed, err := whole.Examples()
		if err != nil {
			t.Fatal(err)
		}
		if seed != 3 {
			t.Errorf("whole draw's seed %d, want 3", seed)
		}
		per := max(len(base.Levels), 1)
		if len(all) != 7*per {
			t.Fatalf("%d problems, want %d", len(all), 7*per)
		}
		var joined []task.Example
		for _, part := range [][2]int{{0, 2}, {2, 5}, {5, 7}} {
			d := base
			d.Skip, d.Problems = part[0], part[1]-part[0]
			es, seed, err := d.Examples()
			if err != nil {
				t.Fatal(err)
			}
			if want := sample.PromptSeed(3, part[0]*per); seed != want {
				t.Errorf("part %v: seed %d, want %d", part, seed, want)
			}
			joined = append(joined, es...)
		}
		if !slices.Equal(ids(joined), ids(all)) {
			t.Errorf("the parts drew\n%q\nthe whole\n%q", ids(joined), ids(all))
		}
	}
	// Words on plain text.
	words, _, err := Draw{Levels: []int{2}, Problems: 2, WorldWords: true}.Examples()
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := Draw{Levels: []int{2}, Problems: 2}.Examples()
	if words[0].Prompt != words[0].Messages[0].Content+"\n" || line[0].Prompt == words[0].Prompt {
		t.Errorf("in words %q, in the line format %q", words[0].Prompt, line[0].Prompt)
	}
	// Refusals.
	for _, tc := range []struct {
		d    Draw
		want string
	}{
		{Draw{Task: "gsm8k", Path: path, Problems: 1, Skip: 9}, "skip 9: " + path + " has 9 problems"},
		{Draw{Levels: []int{0}}, "draw of 0 problems"},
		{Draw{Problems: 1}, "at least one level"},
		{Draw{Task: "gsm8k", Path: path + ".missing", Problems: 1}, "gsm8k.jsonl.missing"},
	} {
		if _, _, err := tc.d.Examples(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.d, err, tc.want)
		}
	}
}
