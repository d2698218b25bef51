package train

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"rlvr/checkpoint"
	"rlvr/checkpoint/modeltest"
	"rlvr/method"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
)

// byteChatModel writes a tiny chat model (the byte tokenizer and a ChatML
// template) to a temporary directory and returns the directory.
func byteChatModel(t *testing.T, maxSeq int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chat")
	modeltest.ByteChat(t, dir, maxSeq)
	return dir
}

// chatExpertsRun is a run of a chat model under two expert prompts and a
// system prompt that states the answer format.
func chatExpertsRun(t *testing.T) RLConfig {
	t.Helper()
	cfg := smallRL(t)
	cfg.Model, cfg.Chat = byteChatModel(t, 512), ChatConfig{Template: "on", System: "Answer after ####."}
	cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens, cfg.CheckpointEvery = 1, 2, 2, 8, 0
	cfg.EvalProblems, cfg.TestProblems = 4, 4
	cfg.Parts = []string{meml.PartExpertPrompts}
	cfg.Sections.Set(&meml.ExpertPromptsConfig{Experts: []int{0, 2}})
	return cfg
}

// chatSystem is the start of a ChatML prompt whose system message is
// system.
func chatSystem(system string) string {
	return "<|im_start|>system\n" + system + "<|im_end|>\n<|im_start|>user\n"
}

// promptRecorder passes requests to a sampler and keeps their prompts.
type promptRecorder struct {
	rollout.Sampler
	mu      sync.Mutex
	prompts [][]int32
}

func (r *promptRecorder) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	r.mu.Lock()
	for _, q := range reqs {
		r.prompts = append(r.prompts, q.Prompt)
	}
	r.mu.Unlock()
	return r.Sampler.Sample(ctx, reqs)
}

// recordedMethod runs a method with its sampler recorded.
type recordedMethod struct {
	inner method.Method
	rec   *promptRecorder
}

func (m recordedMethod) Step(ctx context.Context, sc *method.StepContext, ex []task.Example) (*method.Batch, error) {
	m.rec.Sampler = sc.Policy
	sc.Policy = m.rec
	return m.inner.Step(ctx, sc, ex)
}

// TestChatExpertsEvaluated: a chat model trained under expert prompts is
// evaluated as MEML-GRPO infers (Table 6), like a plain-text one: on
// validation and test, each expert's greedy accuracy and the experts'
// majority vote, and on test the expert best on validation with the
// vote's difference to it. Its training rollouts are asked under the
// run's system prompt, with its answer format, then the expert's persona.
func TestChatExpertsEvaluated(t *testing.T) {
	cfg := chatExpertsRun(t)
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	inner, _ := newMethod(t, &cfg, part.Setup{MaxLen: 512, Chat: true})
	rec := &promptRecorder{}
	run := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), cfg, run, Options{Method: recordedMethod{inner, rec}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(run, "eval.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var splits []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e rundir.Eval
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		x := expertsOf(t, e)
		if _, ok := x.Experts["E2"]; len(x.Experts) != 2 || !ok || x.Majority == nil {
			t.Errorf("%s evaluation without each expert and their majority vote: %s", e.Split, line)
		}
		if e.Split == "test" && (x.BestExpert == "" || x.Delta == nil) {
			t.Errorf("test evaluation without the best expert and the vote's difference to it: %s", line)
		}
		splits = append(splits, e.Split)
	}
	if strings.Join(splits, " ") != "val val test" {
		t.Fatalf("evaluations %v", splits)
	}
	l, err := checkpoint.Open(cfg.Model, "")
	if err != nil {
		t.Fatal(err)
	}
	persona := "You are Expert 2, please provide an answer to the above question."
	var underE2 int
	for _, p := range rec.prompts {
		if text := l.Tokenizer.Decode(p); strings.Contains(text, persona) {
			underE2++
			if !strings.Contains(text, chatSystem("Answer after ####.\n\n"+persona)) {
				t.Errorf("a rollout prompt under E2 lacks the run's system prompt, then the persona:\n%q", text)
			}
		}
	}
	if underE2 != cfg.PromptsPerStep { // one request per group
		t.Fatalf("%d rollout prompts under E2 of %d", underE2, len(rec.prompts))
	}
}

// fixedAnswers answers every prompt with the same text, and keeps the
// prompts.
type fixedAnswers struct {
	l       *checkpoint.Loaded
	answer  string
	prompts []string
}

func (f *fixedAnswers) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	for i, q := range reqs {
		f.prompts = append(f.prompts, f.l.Tokenizer.Decode(q.Prompt))
		toks := f.l.Encode(f.answer)
		for range max(q.Params.N, 1) {
			out[i] = append(out[i], sample.Completion{Text: f.answer, Tokens: toks, Logprobs: make([]float32, len(toks))})
		}
	}
	return out, nil
}

// TestChatExpertsEvaluationPrompts: the evaluation of a chat model under
// expert prompts asks each expert with the run's system prompt, then the
// expert's persona, as training does, and votes across them.
func TestChatExpertsEvaluationPrompts(t *testing.T) {
	cfg := chatExpertsRun(t)
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.Open(cfg.Model, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRenderer(l, cfg.Chat, 512)
	if err != nil {
		t.Fatal(err)
	}
	examples := world.Examples(1, 3, []int{0})
	f := &fixedAnswers{l: l, answer: "#### " + examples[0].Answer}
	_, b := newMethod(t, &cfg, part.Setup{MaxLen: 512, Chat: true})
	lp := &loop{cfg: &cfg, pol: &policy{sampler: f, text: l, maxLen: 512}, render: r, evaluators: b.Evaluators, runDir: t.TempDir()}
	e, err := lp.score(context.Background(), "val", 0, examples, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if m := expertsOf(t, e); len(m.Experts) != 2 || m.Majority == nil || *m.Majority != m.Experts["E2"] || m.Experts["E2"] == 0 {
		t.Errorf("experts %v, majority %v", m.Experts, m.Majority)
	}
	var askedE0, askedE2 bool
	for _, p := range f.prompts {
		if !strings.Contains(p, "<|im_start|>system\nAnswer after ####.") {
			t.Errorf("an evaluation prompt without the run's system prompt first:\n%q", p)
		}
		askedE0 = askedE0 || strings.Contains(p, chatSystem("Answer after ####.\n\nYou are Expert 0, please provide an answer to the above question."))
		askedE2 = askedE2 || strings.Contains(p, chatSystem("Answer after ####.\n\nYou are Expert 2, please provide an answer to the above question."))
	}
	if !askedE0 || !askedE2 {
		t.Errorf("E0 and E2 asked under the run's system prompt, then the persona: %v, %v, in %q", askedE0, askedE2, f.prompts)
	}
}

// expertsOf is an evaluation line's expert_prompts record.
func expertsOf(t *testing.T, e rundir.Eval) meml.ExpertRecord {
	t.Helper()
	x, ok, err := meml.ExpertRecordOf(e)
	if !ok || err != nil {
		t.Fatalf("%s line of step %d without its experts' record: %v", e.Split, e.Step, err)
	}
	return x
}
