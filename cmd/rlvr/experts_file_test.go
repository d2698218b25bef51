package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/expert/prompt"
)

// askedServer is an OpenAI-compatible endpoint answering "#### 5" to
// everything, keeping each request as the model, the chat's messages or
// the completion's prompt, and max_tokens.
type askedServer struct {
	mu   sync.Mutex
	reqs []askedRequest
}

type askedRequest struct {
	Model     string
	Prompt    string
	Messages  []struct{ Role, Content string }
	MaxTokens int `json:"max_tokens"`
}

func (s *askedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req askedRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if req.Messages != nil {
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"2+3=5\n#### 5"},"finish_reason":"stop"}]}`)
		return
	}
	fmt.Fprint(w, `{"choices":[{"index":0,"text":"#### 5","finish_reason":"stop"}]}`)
}

// asked is the request to model.
func (s *askedServer) asked(t *testing.T, model string) askedRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		if r.Model == model {
			return r
		}
	}
	t.Fatalf("%s was never asked", model)
	return askedRequest{}
}

// TestExpertsCollectFile collects from experts an --experts file lists —
// a reference expert, a chat persona and a completion expert — beside an
// --expert flag: each is asked as its own entry says, the settings it
// leaves unset take the flags', and D_ME records P_i as the prompt with
// the persona beside it.
func TestExpertsCollectFile(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "gsm8k.jsonl")
	if err := os.WriteFile(data, []byte(`{"question":"What is 2+3?","answer":"2+3=5\n#### 5"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := &askedServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	file := filepath.Join(dir, "experts.yaml")
	yaml := fmt.Sprintf(`- {name: oracle, kind: reference}
- {name: teacher, url: %[1]s/v1, api: chat, system: "You are a careful math teacher.", max_tokens: 64}
- {name: base, url: %[1]s/v1, api: completion}
`, hs.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dme.jsonl")
	_, stderr, err := execute(t, context.Background(), "experts", "collect", "--data", "gsm8k", "--data-file", data,
		"--experts", file, "--expert", "extra="+hs.URL+"/v1", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	p := func(i int) string { return prompt.Render(prompt.Paper, i, "") }
	if r := srv.asked(t, "teacher"); len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[0].Content != "You are a careful math teacher." ||
		r.Messages[1].Content != "What is 2+3?" || r.MaxTokens != 64 {
		t.Errorf("teacher asked %+v", r)
	}
	if r := srv.asked(t, "base"); r.Prompt != "What is 2+3?\n"+p(3) || r.MaxTokens != 2048 {
		t.Errorf("base asked %+v", r)
	}
	if r := srv.asked(t, "extra"); len(r.Messages) != 2 || r.Messages[0].Content != p(4) {
		t.Errorf("extra asked %+v", r)
	}
	recs, err := collect.ReadDME(out)
	if err != nil || len(recs) != 5 {
		t.Fatalf("D_ME %+v, %v", recs, err)
	}
	want := []struct {
		name, prompt, system, response string
	}{
		{collect.ReferenceName, p(0), "", "2+3=5\n#### 5\n"},
		{"oracle", p(1), "", "2+3=5\n#### 5\n"},
		{"teacher", p(2), "You are a careful math teacher.", "2+3=5\n#### 5"},
		{"base", p(3), "", "#### 5"},
		{"extra", p(4), "", "2+3=5\n#### 5"},
	}
	for i, w := range want {
		r := recs[i]
		if r.Name != w.name || r.Expert != i || r.Prompt != w.prompt || r.System != w.system || r.Response != w.response || !r.Correct {
			t.Errorf("line %d: %+v, want %+v", i+1, r, w)
		}
	}
}

// TestExpertsFileRefused: an --experts file that cannot be used is refused
// before any question is asked, naming the file and the entry, or the
// expert, the dataset and what it lacks.
func TestExpertsFileRefused(t *testing.T) {
	dir := cliFixture(t)
	write := func(name, text string) string {
		if err := os.WriteFile(filepath.Join(dir, "work", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	amc := write("amc23.jsonl", `{"id": 0, "problem": "What is 2+3?", "answer": 5.0}`+"\n")
	gsm := write("gsm8k.jsonl", `{"question":"What is 2+3?","answer":"2+3=5\n#### 5"}`+"\n")
	c := []string{"experts", "collect"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{append(c, "--experts", "nosuch.yaml"), []string{"--experts nosuch.yaml: no such file"}},
		{append(c, "--experts", write("unknown.yaml", "- {name: a, reply: x, colour: red}\n")), []string{"unknown.yaml", "line 1", "colour"}},
		{append(c, "--experts", write("map.yaml", "name: a\nreply: x\n")), []string{"map.yaml", "want a YAML list of experts"}},
		{append(c, "--experts", write("empty.yaml", "")), []string{"empty.yaml: no experts"}},
		{append(c, "--experts", write("persona.yaml", "- {name: a, world: 1, system: Be brief.}\n- {name: b, reply: x, system: Be brief.}\n")),
			[]string{"persona.yaml[0]: system", "persona.yaml[1]: system"}},
		{append(c, "--experts", write("kind.yaml", "- {name: a, kind: oracle}\n- {kind: reference, url: 'http://x/v1'}\n")),
			[]string{`kind.yaml[0]: kind "oracle"`, "kind.yaml[1]: set exactly one of url, world, reply, model, policy and kind (2 set)"}},
		{append(c, "--experts", write("ref.yaml", "- {name: reference, kind: reference}\n")), []string{`ref.yaml[0]: the name "reference" names Expert0`}},
		{append(c, "--experts", write("twice.yaml", "- {name: a, reply: x}\n"), "--expert", "a=http://x/v1"), []string{"--expert a: the name is given in twice.yaml too"}},
		{append(c, "--data", "amc23", "--data-file", amc, "--experts", write("oracle.yaml", "- {name: oracle, kind: reference}\n")),
			[]string{"oracle.yaml[0]", "expert oracle", "amc23 (" + amc + ")", `no "solution" field`}},
		{append(c, "--data", "gsm8k", "--data-file", gsm, "--experts", write("chat.yaml", "- {name: tiny, model: model, api: chat}\n")),
			[]string{"expert tiny", "api: chat", "the model model has no chat template"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { refused(t, dir, tc.args, tc.want) })
	}
}

// TestShippedExpertPools: every pool file under configs/experts reads as
// an --experts file and passes the experts' checks.
func TestShippedExpertPools(t *testing.T) {
	files, err := filepath.Glob("../../configs/experts/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("pool files %v, %v", files, err)
	}
	for _, f := range files {
		experts, err := expert.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := expert.CheckAll(f, experts, true); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
