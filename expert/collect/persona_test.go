package collect

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"rlvr/expert"
	"rlvr/expert/prompt"
	"rlvr/task"
)

// recorder answers every request with text and keeps the requests.
type recorder struct {
	text string
	mu   sync.Mutex
	reqs []expert.Request
}

func (r *recorder) Answer(_ context.Context, reqs []expert.Request, done func(int, string, error)) {
	r.mu.Lock()
	r.reqs = append(r.reqs, reqs...)
	r.mu.Unlock()
	for i := range reqs {
		done(i, r.text, nil)
	}
}

// TestCollectPersonaAndReference collects from experts with personas of
// their own, asked under them instead of P_i while D_ME records P_i, and
// from a reference expert, which answers each question with its worked
// solution (and fails as no-solution on a question without one).
func TestCollectPersonaAndReference(t *testing.T) {
	examples := []task.Example{
		{ID: "gsm8k/0", Prompt: "How many clips?", Answer: "72", Solution: "48/2 = 24\n48+24 = 72", Kind: task.Math},
		{ID: "gsm8k/1", Prompt: "How many eggs?", Answer: "9", Kind: task.Math},
	}
	p := func(i int) string { return prompt.Render(prompt.Paper, i, "") }
	teacher, base, plain := &recorder{text: "#### 72"}, &recorder{text: "#### 9"}, &recorder{text: "#### 1"}
	experts := []Expert{
		{Name: "teacher", Index: 1, Prompt: p(1), System: "You are a careful math teacher.", API: expert.APIChat, Answerer: teacher},
		{Name: "base", Index: 2, Prompt: p(2), System: "Be brief.", API: expert.APICompletion, Answerer: base},
		{Name: "plain", Index: 3, Prompt: p(3), API: expert.APICompletion, Answerer: plain},
		{Name: "oracle", Index: 4, Prompt: p(4), API: expert.APICompletion, Model: expert.KindReference, Answerer: expert.Reference{}},
	}
	cache := filepath.Join(t.TempDir(), "cache")
	res, err := Collect(context.Background(), examples, Config{Experts: experts, ReferencePrompt: p(0), Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if got := teacher.reqs[0].Messages; !reflect.DeepEqual(got, []task.Message{{Role: "system", Content: "You are a careful math teacher."},
		{Role: "user", Content: "How many clips?"}}) {
		t.Errorf("teacher asked %+v", got)
	}
	if got := base.reqs[0].Prompt; got != "How many clips?\nBe brief." {
		t.Errorf("base asked %q", got)
	}
	if got := plain.reqs[0].Prompt; got != "How many clips?\n"+p(3) {
		t.Errorf("plain asked %q", got)
	}
	for _, r := range []*recorder{teacher, base, plain} {
		for _, req := range r.reqs {
			if req.Example == nil || (req.Example.ID != "gsm8k/0" && req.Example.ID != "gsm8k/1") {
				t.Errorf("a request without its example: %+v", req)
			}
		}
	}
	byKey := map[key]Record{}
	for _, r := range res.Records {
		byKey[keyOf(r)] = r
	}
	for i, ex := range experts {
		r := byKey[key{"gsm8k/0", ex.Name}]
		if r.Prompt != p(i+1) || r.System != ex.System || r.API != ex.API {
			t.Errorf("%s's record: prompt %q, system %q, api %q", ex.Name, r.Prompt, r.System, r.API)
		}
		line, _ := json.Marshal(r)
		if back, err := ParseRecord(line); err != nil || !reflect.DeepEqual(back, r) {
			t.Errorf("%s's record %s read back as %+v, %v", ex.Name, line, back, err)
		}
	}
	if r := byKey[key{"gsm8k/0", "oracle"}]; r.Response != "48/2 = 24\n48+24 = 72\n#### 72\n" || !r.Correct || r.Failure != "" {
		t.Errorf("the reference expert on a question with a solution: %+v", r)
	}
	if r := byKey[key{"gsm8k/1", "oracle"}]; r.Failure != expert.FailNoSolution || r.Correct {
		t.Errorf("the reference expert on a question without one: %+v", r)
	}

	// Another persona makes the cached answers stale: asked again.
	experts[1].System = "Be very brief."
	res, err = Collect(context.Background(), examples, Config{Experts: experts, ReferencePrompt: p(0), Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Summary; s.Stale != 2 || s.Asked != 2 {
		t.Errorf("after base's persona changed: %d stale, %d asked; want 2, 2", s.Stale, s.Asked)
	}
}

// TestPoolExpertsPersona: a pool member's persona becomes the collection
// expert's, beside its P_i.
func TestPoolExpertsPersona(t *testing.T) {
	pool := &expert.Pool{Members: []expert.Member{{Name: "t", API: expert.APIChat, System: "You are a teacher.", Model: "m"}, {Name: "u", API: expert.APICompletion}}}
	got := PoolExperts(pool, "You are Expert {i}.")
	if got[0].System != "You are a teacher." || got[0].Prompt != "You are Expert 1." || got[1].System != "" || got[1].Prompt != "You are Expert 2." {
		t.Errorf("PoolExperts: %+v", got)
	}
}

// TestRecordSystem: the reference solution is asked under no persona.
func TestRecordSystem(t *testing.T) {
	_, err := ParseRecord([]byte(`{"id":"a","question":"q","answer":"1","expert":0,"expert_name":"reference","reference":true,"prompt":"P","system":"S","response":"1","correct":true}`))
	if FieldOf(err) != "system" {
		t.Errorf("a reference line with a persona: %v", err)
	}
}
