package eval_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/format/tokenizer"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task"
	"rlvr/task/world"
)

// TestChatPrompt renders examples through a recording chat template: a
// system prompt goes first and replaces the example's own; without one,
// the example's own stays; an expert's persona (and a grant) follow
// either in one system message; an example without messages is one user
// message holding its prompt.
func TestChatPrompt(t *testing.T) {
	var got []tokenizer.Message
	chat := func(msgs []tokenizer.Message) (string, error) { got = msgs; return "rendered", nil }
	own := task.Example{Prompt: "q", Messages: []task.Message{{Role: "system", Content: "own"}, {Role: "user", Content: "q"}}}
	plain := task.Example{Prompt: "Q:1+1\n"}
	for _, tc := range []struct {
		name   string
		e      task.Example
		system string
		more   []string
		want   []tokenizer.Message
	}{
		{"system replaces the example's", own, "S", nil, []tokenizer.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "q"}}},
		{"the example's own stays", own, "", nil, []tokenizer.Message{{Role: "system", Content: "own"}, {Role: "user", Content: "q"}}},
		{"plain prompt with system", plain, "S", nil, []tokenizer.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q:1+1\n"}}},
		{"plain prompt alone", plain, "", nil, []tokenizer.Message{{Role: "user", Content: "Q:1+1\n"}}},
		{"persona after system", plain, "S", []string{"You are Expert 1.", "", "You may consult."},
			[]tokenizer.Message{{Role: "system", Content: "S\n\nYou are Expert 1.\n\nYou may consult."}, {Role: "user", Content: "Q:1+1\n"}}},
		{"persona after the example's own", own, "", []string{"You are Expert 1."},
			[]tokenizer.Message{{Role: "system", Content: "own\n\nYou are Expert 1."}, {Role: "user", Content: "q"}}},
		{"persona alone", plain, "", []string{"You are Expert 1."},
			[]tokenizer.Message{{Role: "system", Content: "You are Expert 1."}, {Role: "user", Content: "Q:1+1\n"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			text, err := eval.ChatPrompt(chat, tc.e, tc.system, tc.more...)
			if err != nil || text != "rendered" {
				t.Fatalf("%q, %v", text, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rendered %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRemoteChat evaluates the world's reference expert through
// /v1/chat/completions with a system message: the endpoint sees the system
// message, then the question, and answers every problem right.
func TestRemoteChat(t *testing.T) {
	models := expert.WorldModels()
	counted := servetest.Count(models, 0)
	base := servetest.Start(t, serve.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, models...)
	examples := world.Examples(5, 6, []int{0, 2})
	gen := &eval.Remote{Client: client.New(client.Config{BaseURL: base, Model: "E0"}), Chat: true, System: "You are Expert 0."}
	rep, err := eval.Run(context.Background(), gen, examples, eval.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Greedy.Mean != 1 {
		t.Errorf("greedy %v, want 1", rep.Greedy.Mean)
	}
	// The world experts' chat template joins the messages, one per line.
	var want []string
	for _, e := range examples {
		want = append(want, "You are Expert 0.\n"+e.Prompt)
	}
	if got := slices.Sorted(maps.Keys(counted["E0"].Counts())); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("the endpoint saw %q, want %q", got, want)
	}
}
