package expert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"rlvr/eval"
	"rlvr/format/tokenizer"
	"rlvr/sample"
	"rlvr/task"
)

// fakeGen answers each prompt with "A:" and the prompt; it refuses prompts
// containing "refuse" and fails a batch with a prompt containing "boom".
// Prompts of 20 bytes or more do not fit its context.
type fakeGen struct {
	batches []int
}

func (g *fakeGen) Fits(prompt string, maxTokens int) bool {
	return len(prompt)+maxTokens < 20+maxTokens
}

func (g *fakeGen) Generate(ctx context.Context, prompts []string, p sample.Params) ([][]string, error) {
	g.batches = append(g.batches, len(prompts))
	out := make([][]string, len(prompts))
	refused := &eval.RefusedError{}
	for i, s := range prompts {
		switch {
		case strings.Contains(s, "boom"):
			return nil, errors.New("the model blew up")
		case strings.Contains(s, "refuse"):
			refused.Prompts = append(refused.Prompts, &eval.PromptError{Index: i, Err: errors.New("no")})
		default:
			out[i] = []string{"A:" + s}
		}
	}
	if len(refused.Prompts) > 0 {
		return out, refused
	}
	return out, nil
}

// TestBatched answers through a generator in batches, rendering chats,
// refusing what does not fit or cannot be rendered, and failing a whole
// batch with its generator's error.
func TestBatched(t *testing.T) {
	chat := func(msgs []tokenizer.Message) (string, error) {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(m.Role[:1] + ":" + m.Content + ";")
		}
		return b.String(), nil
	}
	reqs := []Request{
		{Prompt: "q1"}, {Prompt: "q2"}, {Prompt: "refuse"}, // batch 1
		{Prompt: "a prompt far too long"}, // refused before
		{Messages: []task.Message{{Role: "system", Content: "P"}, {Role: "user", Content: "q"}}}, // batch 2
		{Prompt: "q4"}, {Prompt: "boom"}, // batch 2
		{Prompt: "q5"}, // batch 3
	}
	for _, tc := range []struct {
		name    string
		chat    func([]tokenizer.Message) (string, error)
		want    []string // text, or "error: …"
		batches []int
	}{
		{"with a chat template", chat,
			[]string{"A:q1", "A:q2", "error: refused: no", "error: refused: the prompt does not fit", "error: the model blew up",
				"error: the model blew up", "error: the model blew up", "A:q5"}, []int{3, 3, 1}},
		{"without", nil,
			[]string{"A:q1", "A:q2", "error: refused: no", "error: refused: the prompt does not fit", "error: refused: the model has no chat template",
				"error: the model blew up", "error: the model blew up", "error: the model blew up"}, []int{3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGen{}
			b := &Batched{Gen: g, Chat: tc.chat, Batch: 3, Params: sample.Params{MaxTokens: 5}}
			got := make([]string, len(reqs))
			calls := 0
			b.Answer(context.Background(), reqs, func(i int, text string, err error) {
				calls++
				got[i] = text
				if err != nil {
					got[i] = "error: " + err.Error()
				}
			})
			if calls != len(reqs) {
				t.Errorf("%d calls of done for %d requests", calls, len(reqs))
			}
			for i := range reqs {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("request %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
			if fmt.Sprint(g.batches) != fmt.Sprint(tc.batches) {
				t.Errorf("batches %v, want %v", g.batches, tc.batches)
			}
		})
	}
}
