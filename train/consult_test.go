package train

import (
	"context"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/checkpoint/modeltest"
	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/format/tokenizer"
	"rlvr/internal/shareddata"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/sample"
	"rlvr/task"
)

// qwen3Model is a random model of Qwen3's tokenizer and chat template.
func qwen3Model(t *testing.T) *checkpoint.Loaded {
	t.Helper()
	l, err := checkpoint.Open(modeltest.Random(t, shareddata.Path(t, "tokenizers/qwen3"), "qwen3-tiny"), "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEnvTurnThroughChatTemplate: a consultation's replies inside a chat
// policy's response are the tokens the model's template writes for a user
// turn after the assistant's: the prompt, the policy's consult action and
// the environment's turn decode to exactly the template's rendering of
// that conversation, and the training prompt carries the grant while the
// evaluation prompt does not.
func TestEnvTurnThroughChatTemplate(t *testing.T) {
	l := qwen3Model(t)
	r, err := newRenderer(l, ChatConfig{Template: "on", System: "Solve it."}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	r.grant = "You may consult experts."
	e := task.Example{ID: "q", Prompt: "What is (12+7)*3?"}
	prompt, err := r.Prompt(e, method.Variant{})
	if err != nil {
		t.Fatal(err)
	}
	action := `Let me ask. <consult>[{"expert": "E1", "question": "12+7?"}]</consult>`
	replies := eapo.Chat{}.Replies([]eapo.Reply{{Expert: "E1", Answer: "19", OK: true}, {Expert: "E2"}})
	turn, err := r.EnvTurn(replies)
	if err != nil {
		t.Fatal(err)
	}
	seq := append(append(append([]int32(nil), prompt...), r.Encode(action)...), turn...)
	got := l.Tokenizer.Decode(seq)
	want, err := l.Chat([]tokenizer.Message{{Role: "system", Content: "Solve it.\n\nYou may consult experts."},
		{Role: "user", Content: e.Prompt}, {Role: "assistant", Content: action}, {Role: "user", Content: replies}})
	if err != nil {
		t.Fatal(err)
	}
	if bos, ok := l.Tokenizer.BOS(); ok && l.AddBOS {
		want = l.Tokenizer.Decode([]int32{bos}) + want
	}
	if got != want {
		t.Fatalf("prompt + action + environment turn:\n%q\nthe template's conversation:\n%q", got, want)
	}
	if !strings.Contains(replies, `<expert name="E2">unavailable</expert>`) {
		t.Fatalf("replies %q", replies)
	}
	eval, err := r.Text(e, method.Variant{})
	if err != nil || strings.Contains(eval, "consult") || !strings.Contains(eval, "Solve it.") {
		t.Fatalf("evaluation prompt %q, %v", eval, err)
	}
}

// TestConsultationChatEpisode runs a chat policy's consultation end to
// end on Qwen3's template: a policy that consults in its first turn and
// answers after the replies, an expert served over HTTP on loopback
// answering through the chat API. The expert's tokens are the template's
// user turn and carry no weight.
func TestConsultationChatEpisode(t *testing.T) {
	l := qwen3Model(t)
	r, err := newRenderer(l, ChatConfig{Template: "on"}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	experts := []expert.Config{{Name: "E1", Reply: "The answer is 19."}}
	if err := experts[0].Check("experts", 0, true); err != nil {
		t.Fatal(err)
	}
	pool, err := expert.Open(experts, expert.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := &eapo.Consultation{Format: eapo.Chat{}, Pool: pool, Accept: eapo.Schedule{Kind: optim.Constant, Start: 1},
		Turns: eapo.Schedule{Kind: optim.Constant, Start: 2}, RunSteps: 1, MaxQueries: 3, MaxTokens: 400}
	prompt, err := r.Prompt(task.Example{ID: "q", Prompt: "What is 12+7?"}, method.Variant{})
	if err != nil {
		t.Fatal(err)
	}
	pol := &chatPolicy{r: r, turns: []string{`<consult>{"question": "What is 12+7?"}</consult>`, "The expert says 19. #### 19"}}
	groups, _, err := c.Episodes(context.Background(), pol, r, [][]int32{prompt}, nil, 1, sampleParams(), 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := groups[0].Trajectories[0]
	if tr.Turns != 2 || tr.Counts["accepted"] != 1 || !strings.Contains(tr.Text, `<expert name="E1">The answer is 19.</expert>`) ||
		strings.Contains(tr.PolicyText, "The answer is 19.") || !strings.HasSuffix(tr.PolicyText, "#### 19") {
		t.Fatalf("%d turns, env %v\ntext %q\npolicy %q", tr.Turns, tr.Counts, tr.Text, tr.PolicyText)
	}
	var env []int32
	for i, p := range tr.Policy {
		if !p {
			env = append(env, tr.Tokens[i])
		}
	}
	want, _ := r.EnvTurn(`<expert name="E1">The answer is 19.</expert>`)
	if got := l.Tokenizer.Decode(env); got != l.Tokenizer.Decode(want) || !strings.Contains(got, "<|im_start|>user") {
		t.Fatalf("environment tokens %q, want the template's user turn %q", got, l.Tokenizer.Decode(want))
	}
}

// chatPolicy writes its turns in order, one per call, as token ids of
// the renderer, ending each consult turn on the format's stop string.
type chatPolicy struct {
	r       method.Renderer
	turns   []string
	calls   int
	prompts [][]int32 // every request's prompt, in order
}

func (p *chatPolicy) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	for i := range reqs {
		p.prompts = append(p.prompts, reqs[i].Prompt)
		text := p.turns[min(p.calls, len(p.turns)-1)]
		c := sample.Completion{Text: text, Tokens: p.r.Encode(text), Finish: sample.FinishStop}
		if strings.HasSuffix(text, "</consult>") {
			c.StopString = "</consult>"
		}
		c.Logprobs = make([]float32, len(c.Tokens))
		out[i] = []sample.Completion{c}
	}
	p.calls++
	return out, nil
}

func sampleParams() sample.Params { return sample.Params{MaxTokens: 100, Temperature: 1} }
