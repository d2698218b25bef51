package serve_test

import (
	"strings"
	"testing"

	"rlvr/format/tokenizer"
	"rlvr/serve"
)

// TestModelUnder serves a model under an expert prompt: a system message
// before chats that have none, a suffix after completion prompts.
func TestModelUnder(t *testing.T) {
	var rendered []tokenizer.Message
	m := serve.Model{Chat: func(msgs []tokenizer.Message) (string, error) { rendered = msgs; return "x", nil },
		Encode: func(text string) []int32 { return []int32{int32(len(text))} }}
	u := m.Under("You are Expert 2, please provide an answer to the above question.", "@E2\n")
	u.Chat([]tokenizer.Message{{Role: "user", Content: "2+2?"}})
	if len(rendered) != 2 || rendered[0].Role != "system" || !strings.Contains(rendered[0].Content, "Expert 2") {
		t.Fatalf("rendered %+v", rendered)
	}
	u.Chat([]tokenizer.Message{{Role: "system", Content: "mine"}, {Role: "user", Content: "2+2?"}})
	if len(rendered) != 2 || rendered[0].Content != "mine" {
		t.Fatalf("a chat's own system message was replaced: %+v", rendered)
	}
	if got := u.Encode("Q:1+1\n"); got[0] != int32(len("Q:1+1\n@E2\n")) {
		t.Fatalf("encoded length %d", got[0])
	}
}
