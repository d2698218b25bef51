package prompt

import (
	"testing"

	"rlvr/task"
	"rlvr/task/world"
)

func TestRender(t *testing.T) {
	if got := Render(Paper, 2, "r1"); got != "You are Expert 2, please provide an answer to the above question." {
		t.Errorf("Render: %q", got)
	}
	if got := Render("You are Expert {name} ({i}).", 3, "DeepSeek"); got != "You are Expert DeepSeek (3)." {
		t.Errorf("Render: %q", got)
	}
}

// TestDefault: the default expert prompts are the paper's persona and
// the world's own suffix, under the expert's name.
func TestDefault(t *testing.T) {
	for i := range world.Styles {
		p := Default.Of(i)
		if p.Suffix != world.ExpertPrompt(i) {
			t.Errorf("Default.Of(%d).Suffix = %q, want world.ExpertPrompt's %q", i, p.Suffix, world.ExpertPrompt(i))
		}
		if p.Name != task.ExpertName(i) || p.Suffix != "@"+p.Name+"\n" {
			t.Errorf("Default.Of(%d) = %+v: the suffix and the name disagree", i, p)
		}
	}
	if got := Default.Of(2).System; got != "You are Expert 2, please provide an answer to the above question." {
		t.Errorf("Default.Of(2).System = %q", got)
	}
}
