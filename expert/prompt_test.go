package expert

import (
	"testing"

	"rlvr/task/world"
)

func TestRenderPrompt(t *testing.T) {
	if got := RenderPrompt(DefaultPrompt, 2, "r1"); got != "You are Expert 2, please provide an answer to the above question." {
		t.Errorf("RenderPrompt: %q", got)
	}
	if got := RenderPrompt("You are Expert {name} ({i}).", 3, "DeepSeek"); got != "You are Expert DeepSeek (3)." {
		t.Errorf("RenderPrompt: %q", got)
	}
	for i := range world.Styles {
		if got, want := RenderPrompt(WorldPrompt, i, ""), world.ExpertPrompt(i); got != want {
			t.Errorf("RenderPrompt(WorldPrompt, %d) = %q, want world.ExpertPrompt's %q", i, got, want)
		}
	}
}
