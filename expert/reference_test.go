package expert

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"rlvr/checkpoint/modeltest"
	"rlvr/eval"
	"rlvr/sample"
	"rlvr/task"
)

// TestReferenceExpert asks a pool's reference expert about examples: it
// answers with each one's worked solution and gold answer, and fails as
// no-solution on an example without a solution or an ask without one.
func TestReferenceExpert(t *testing.T) {
	p := open(t, Config{Name: "oracle", Kind: KindReference}, Config{Name: "E2", Reply: "no idea"})
	if m := p.Members[0]; m.Model != KindReference || m.Answerer == nil {
		t.Fatalf("member %+v", m)
	}
	gsm := task.Example{ID: "gsm8k/0", Prompt: "How many?", Answer: "72", Solution: "48/2 = 24\n48+24 = 72"}
	math := task.Example{ID: "math500/1", Prompt: "Find x.", Answer: "3", Solution: `So $x = \boxed{3}$.`}
	bare := task.Example{ID: "mine/2", Prompt: "Why?", Answer: "5"}
	got := p.Answers(context.Background(), []Ask{
		{Member: 0, Question: "what is 48/2?", Example: &gsm},
		{Member: 0, Question: "anything", Example: &math},
		{Member: 0, Question: "anything", Example: &bare},
		{Member: 0, Question: "anything"},
		{Member: 1, Question: "anything", Example: &gsm},
	})
	want := []struct{ text, failure string }{
		{"48/2 = 24\n48+24 = 72\n#### 72\n", ""},
		{"So $x = \\boxed{3}$.\n", ""},
		{"", FailNoSolution},
		{"", FailNoSolution},
		{"no idea", ""},
	}
	for i, w := range want {
		if got[i].Text != w.text || got[i].Failure != w.failure {
			t.Errorf("answer %d: %q (%s: %v), want %q (%s)", i, got[i].Text, got[i].Failure, got[i].Err, w.text, w.failure)
		}
	}
	if err := got[2].Err; err == nil || !strings.Contains(err.Error(), "mine/2") {
		t.Errorf("no-solution error %v does not name the example", err)
	}
	// The answer is verified right: it states the gold answer.
	for _, k := range []int{0, 1} {
		e := []task.Example{gsm, math}[k]
		if r, ok := eval.Reward(e, got[k].Text); !ok || r <= 0 {
			t.Errorf("%s: the reference answer %q scores %v, %v", e.ID, got[k].Text, r, ok)
		}
	}
}

// TestCheckSolutions refuses a reference expert on a dataset without any
// reference solution, naming the list, the expert, the dataset and the
// missing field, and lets every other case through.
func TestCheckSolutions(t *testing.T) {
	experts := []Config{{Name: "E1", Reply: "x"}, {Name: "oracle", Kind: KindReference}}
	none := []task.Example{{ID: "mine/0", Answer: "1"}, {ID: "mine/1", Answer: "2", Solution: " \n"}}
	saysAll(t, "CheckSolutions", CheckSolutions("consultation.experts", experts, "mine (train.jsonl)", none),
		"consultation.experts[1]", "oracle", "mine (train.jsonl)", `"solution"`, "none of the 2 examples")
	some := append(none, task.Example{ID: "mine/2", Answer: "3", Solution: "1+2 = 3"})
	if err := CheckSolutions("consultation.experts", experts, "mine", some); err != nil {
		t.Errorf("a dataset with some solutions: %v", err)
	}
	if err := CheckSolutions("consultation.experts", experts[:1], "mine", none); err != nil {
		t.Errorf("no reference expert: %v", err)
	}
	if err := CheckSolutions("consultation.experts", experts, "world", nil); err != nil {
		t.Errorf("no examples to check: %v", err)
	}
}

// TestReferenceResponse: the reference expert writes the answer as
// task.ReferenceResponse does.
func TestReferenceResponse(t *testing.T) {
	e := task.Example{ID: "x", Answer: "7", Solution: "3+4 = 7\n\n"}
	var text string
	Reference{}.Answer(context.Background(), []Request{{Prompt: "q", Example: &e}}, func(_ int, s string, err error) {
		if err != nil {
			t.Fatal(err)
		}
		text = s
	})
	if text != task.ReferenceResponse(e) || text != "3+4 = 7\n#### 7\n" {
		t.Errorf("answer %q, ReferenceResponse %q", text, task.ReferenceResponse(e))
	}
}

// TestPersonaRemote asks URL experts under their personas: the system
// message before the question for a chat, a line after it for a
// completion, nothing for an expert without one.
func TestPersonaRemote(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]string{} // model → the chat's messages or the completion's prompt, as JSON
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string          `json:"model"`
			Prompt   json.RawMessage `json:"prompt"`
			Messages json.RawMessage `json:"messages"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &req)
		mu.Lock()
		asked[req.Model] = string(req.Prompt) + string(req.Messages)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			io.WriteString(w, `{"object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"5"},"finish_reason":"stop"}]}`)
			return
		}
		io.WriteString(w, completion)
	}))
	defer srv.Close()
	p := open(t,
		Config{Name: "teacher", URL: srv.URL + "/v1", API: APIChat, System: "You are a careful math teacher."},
		Config{Name: "base", URL: srv.URL + "/v1", API: APICompletion, System: "Answer as a careful math teacher."},
		Config{Name: "plain", URL: srv.URL + "/v1", API: APIChat},
	)
	for _, a := range p.Answers(context.Background(), []Ask{{Member: 0, Question: "What is 2+3?"}, {Member: 1, Question: "What is 2+3?"}, {Member: 2, Question: "What is 2+3?"}}) {
		if a.Failure != "" {
			t.Fatalf("%s: %v", a.Failure, a.Err)
		}
	}
	want := map[string]string{
		"teacher": `[{"role":"system","content":"You are a careful math teacher."},{"role":"user","content":"What is 2+3?"}]`,
		"base":    `"What is 2+3?\nAnswer as a careful math teacher."`,
		"plain":   `[{"role":"user","content":"What is 2+3?"}]`,
	}
	for model, w := range want {
		if got := asked[model]; got != w {
			t.Errorf("%s asked %s, want %s", model, got, w)
		}
	}
}

// promptGen records the prompts it is given and answers each with "5".
type promptGen struct {
	mu      sync.Mutex
	prompts []string
}

func (g *promptGen) Generate(_ context.Context, prompts []string, _ sample.Params) ([][]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([][]string, len(prompts))
	for i, s := range prompts {
		g.prompts = append(g.prompts, s)
		out[i] = []string{"5"}
	}
	return out, nil
}

// TestPersonaLocal asks local experts, a checkpoint and a copy of the
// policy, under their personas: through the model's chat template for a
// chat, after the question for a completion.
func TestPersonaLocal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "chat")
	modeltest.ByteChat(t, dir, 128)
	experts := []Config{
		{Name: "teacher", Model: dir, API: APIChat, System: "You are a careful math teacher."},
		{Name: "copy", Policy: true, API: APICompletion, System: "Answer briefly."},
	}
	for i := range experts {
		if err := experts[i].Check("experts", i, true); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Open(experts, Options{Policy: dir, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	gens := make([]*promptGen, len(p.Members))
	for i, m := range p.Members {
		if m.System != experts[i].System {
			t.Errorf("member %s: persona %q", m.Name, m.System)
		}
		gens[i] = &promptGen{}
		m.Answerer.(*Batched).Gen = gens[i]
	}
	for _, a := range p.Answers(context.Background(), []Ask{{Member: 0, Question: "What is 2+3?"}, {Member: 1, Question: "What is 2+3?"}}) {
		if a.Failure != "" {
			t.Fatalf("%s: %v", a.Failure, a.Err)
		}
	}
	want := []string{
		"<|im_start|>system\nYou are a careful math teacher.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n",
		"What is 2+3?\nAnswer briefly.",
	}
	for i, w := range want {
		if len(gens[i].prompts) != 1 || gens[i].prompts[0] != w {
			t.Errorf("%s prompted %q, want %q", p.Members[i].Name, gens[i].prompts, w)
		}
	}
}

// TestOpenChatWithoutTemplate refuses a checkpoint expert written as
// api: chat whose model has no chat template, naming the expert and the
// model; left to the default, the same expert is asked by completion.
func TestOpenChatWithoutTemplate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	modeltest.Byte(t, dir, 128)
	for _, e := range []Config{{Name: "tiny", Model: dir, API: APIChat}, {Name: "self", Policy: true, API: APIChat}} {
		if err := e.Check("experts", 0, false); err != nil {
			t.Fatal(err)
		}
		p, err := Open([]Config{e}, Options{Policy: dir, Batch: 2})
		if err == nil {
			p.Close()
			t.Errorf("%s: opened", e.Name)
			continue
		}
		saysAll(t, "Open", err, "expert "+e.Name, dir, "no chat template", "api: chat")
	}
}
