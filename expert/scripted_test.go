package expert

import (
	"context"
	"strings"
	"testing"

	api "rlvr/api/openai"
	client "rlvr/client/openai"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task/world"
)

// TestWorldExpertsOverHTTP serves the scripted experts and asks each one
// the same questions over real HTTP: every answer is its style's solution.
func TestWorldExpertsOverHTTP(t *testing.T) {
	base := servetest.Start(t, serve.Config{}, WorldModels()...)
	problems := world.Mix(4, 20, []int{3, 4})
	for s := range world.Styles {
		c := client.New(client.Config{BaseURL: base, Model: "E" + string(rune('0'+s))})
		for _, p := range problems {
			want, _ := world.Solve(p, s)
			res, err := c.Chat(context.Background(), &api.ChatCompletionRequest{Messages: []api.Message{{Role: "user", Content: p.Prompt() + world.ExpertPrompt(s)}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Choices[0].Message.Content; got != want {
				t.Fatalf("E%d on %q: %q, want %q", s, p.Question, got, want)
			}
		}
	}
	// A prompt with no question gets an answer that says so.
	c := client.New(client.Config{BaseURL: base, Model: "E1"})
	res, err := c.Chat(context.Background(), &api.ChatCompletionRequest{Messages: []api.Message{{Role: "user", Content: "hello"}}})
	if err != nil || !strings.Contains(res.Choices[0].Message.Content, "no question") {
		t.Fatalf("%v %v", res, err)
	}
}
