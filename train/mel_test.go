package train

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/eval"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// TestMetaExperienceExhibited runs MEL with the world model and checks a
// validated meta-experience is written beside each evaluation, in the
// world's reflection format, with a replay that verifies.
func TestMetaExperienceExhibited(t *testing.T) {
	cfg := smallRL(t)
	cfg.Model, cfg.Data.Levels, cfg.MaxTokens, cfg.Steps, cfg.EvalEvery = worldModel(t), []int{3}, 96, 4, 2
	cfg.Parts = []string{mel.PartMetaExperience}
	cfg.Sections.Set(&mel.MetaExperienceConfig{})
	run := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	r, err := rundir.Load(run)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, x := range r.Samples {
		if x.Title != "meta-experience" || !strings.Contains(x.Text, "question:\nQ:") || !strings.Contains(x.Text, "replay with M (verified):\n") {
			t.Fatalf("sample %+v", x)
		}
		_, m, _ := strings.Cut(x.Text, "meta-experience M:\n")
		m, _, _ = strings.Cut(m, "\n\n")
		if _, err := (mel.World{}).Parse(m); err != nil {
			t.Fatalf("the shown reflection %q does not parse: %v", m, err)
		}
		steps = append(steps, x.Step)
	}
	if len(steps) == 0 || steps[len(steps)-1] != 4 {
		t.Fatalf("samples at steps %v, want one at the last evaluation (4)", steps)
	}
	ms := stable(t, filepath.Join(run, "metrics.jsonl"))
	for _, m := range ms {
		if m["mel/validated"] > m["mel/parsed"] || m["mel/parsed"]+m["mel/parse_failures"] != m["mel/pairs"] {
			t.Fatalf("yields out of order: %v", m)
		}
		if m["mel/validated"] > 0 && !(m["loss/mel"] > 0 && m["mel/nll"] > 0) {
			t.Fatalf("validated meta-experiences without an NLL term: %v", m)
		}
	}
}

// TestMetaExperienceThroughChatTemplate runs MEL's passes for a chat
// model: the reflection request is the paper's instruction with the
// question and the pair, rendered through Qwen3's template under the run's
// system prompt; the reply is read by the paper's sections; the replay is
// the paper's validation prompt with M, then the question; and only M's
// tokens carry weight.
func TestMetaExperienceThroughChatTemplate(t *testing.T) {
	l := qwen3Model(t)
	r, err := newRenderer(l, ChatConfig{Template: "on", System: "Solve it."}, 8192)
	if err != nil {
		t.Fatal(err)
	}
	q := task.Example{ID: "q", Prompt: "What is 12+7?", Answer: "19"}
	prompt, _ := r.Prompt(q, method.Variant{})
	g := method.Scored{Example: q, Group: rollout.Group{Prompt: prompt}}
	for _, text := range []string{"12+7=19\n#### 19", "12+7=18\n#### 18"} {
		toks := append(r.Encode(text), l.StopTokens[0])
		g.Trajectories = append(g.Trajectories, rollout.Trajectory{Prompt: prompt, Tokens: toks, Policy: make([]bool, len(toks)),
			Logprobs: make([]float32, len(toks)), Text: r.Decode(toks), PolicyText: text})
		g.Correct = append(g.Correct, strings.HasSuffix(text, "19"))
	}
	reply := "1. Failure Resolution Path\n- Failure Point: 12+7 was added as 18.\n2. Analysis of Success Factors\n- Counted on.\n" +
		"3. First-Person Reflective Summary\nI rushed.\n4. Subject Heuristics\n- [Sums]: When adding, I must recount.\n"
	pol := &chatPolicy{r: r, turns: []string{reply, "The sum is 19.\n#### 19"}}
	sc := &method.StepContext{Policy: pol, Render: r, Metrics: method.Metrics{}, Sampling: sample.Params{MaxTokens: 100, Temperature: 1, StopTokens: l.StopTokens},
		Reward: func(e task.Example, response string) (float64, bool) { return eval.Reward(e, response) }}
	terms, err := (&mel.MetaExperience{Format: mel.Chat{}, Weight: 1}).Terms(context.Background(), sc, []method.Scored{g})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Metrics["mel/pairs"] != 1 || sc.Metrics["mel/parsed"] != 1 || sc.Metrics["mel/validated"] != 1 || len(terms) != 1 {
		t.Fatalf("metrics %v, terms %+v", sc.Metrics, terms)
	}
	request, err := r.Prompt(task.Example{Prompt: mel.Chat{}.Request(q.Prompt, "12+7=19\n#### 19", "12+7=18\n#### 18")}, method.Variant{})
	if err != nil {
		t.Fatal(err)
	}
	raw := func(ids []int32) string { return l.Tokenizer.Decode(ids) } // special tokens included
	if got := raw(pol.prompts[0]); got != raw(request) || !strings.HasPrefix(got, "<|im_start|>system\nSolve it.<|im_end|>") ||
		!strings.Contains(got, "<answer>\n12+7=18\n#### 18\n</answer>\n<judge>\nIncorrect") || !strings.HasSuffix(got, "<|im_start|>assistant\n") {
		t.Fatalf("reflection request %q", got)
	}
	replay := raw(pol.prompts[1])
	if !strings.Contains(replay, "<|im_start|>user\nPrior study has provided") || !strings.Contains(replay, "Bifurcation point: 12+7 was added as 18.") ||
		!strings.HasSuffix(replay, "What is 12+7?<|im_end|>\n<|im_start|>assistant\n") {
		t.Fatalf("replay prompt %q", replay)
	}
	d := terms[0].Data[0]
	m := r.Encode(reply)
	for i, w := range d.Weights {
		ofM := i >= len(request)-1
		if ofM && w != 1 || !ofM && w != 0 {
			t.Fatalf("position %d (of M: %v) has weight %v", i, ofM, w)
		}
	}
	if len(d.Tokens) != len(request)+len(m)-1 || r.Decode(d.Targets[len(request)-1:]) != reply {
		t.Fatalf("trained %q after %d context tokens", r.Decode(d.Targets[len(request)-1:]), len(request))
	}
}

// TestThreeMethodsCompose runs the recipe with expert prompts, consultation
// and meta-experience together from the world model, and checks each part
// acted: per-expert groups, consult metrics, mutual learning and the
// buffer, and validated meta-experiences trained.
func TestThreeMethodsCompose(t *testing.T) {
	cfg, err := LoadRLConfig("../configs/world-meml-eapo-mel.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model, cfg.Data.Levels, cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = worldModel(t), []int{3}, 3, 2, 4, 96
	cfg.EvalProblems, cfg.TestProblems, cfg.EvalEvery, cfg.EvalSamples, cfg.CheckpointEvery = 4, 0, 0, 0, 0
	part.Get[*meml.HardBufferConfig](cfg.Sections).K = 1
	run := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(run, "metrics.jsonl"))
	var validated, lossMEL float64
	for _, m := range ms {
		for _, k := range []string{"variant/E0/accuracy", "variant/E2/accuracy", "consult/p", "consult/call_rate", "mel/pairs", "buffer/fill"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("step %v has no %s: %v", m["step"], k, m)
			}
		}
		validated += m["mel/validated"]
		lossMEL += m["loss/mel"]
	}
	if validated == 0 || lossMEL == 0 {
		t.Fatalf("no meta-experience trained in %d steps: %v", len(ms), ms)
	}
}

// TestMetaExperienceWithoutConsultGrant: in a run with consultation and
// meta-experience together (world-meml-eapo-mel.yaml, with a chat model),
// the rollouts' prompts grant the consult action, while MEL's reflection
// request and replay, single-turn passes in which no consult action is
// ever answered, go without it, under the run's system prompt.
func TestMetaExperienceWithoutConsultGrant(t *testing.T) {
	cfg, err := LoadRLConfig("../configs/world-meml-eapo-mel.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	const maxLen = 8192
	cfg.Model, cfg.Chat = byteChatModel(t, maxLen), ChatConfig{Template: "on", System: "Answer after ####."}
	part.Get[*eapo.ConsultationConfig](cfg.Sections).System = eapo.ChatTrainingPrompt
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.Open(cfg.Model, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRenderer(l, cfg.Chat, maxLen)
	if err != nil {
		t.Fatal(err)
	}
	m, b := newMethod(t, &cfg, part.Setup{MaxLen: maxLen, Chat: true, Policy: cfg.Model})
	r.grant = b.Grant // as a run with consultation sets it
	var me *mel.MetaExperience
	for _, x := range m.(*method.RL).Extras {
		if x, ok := x.(*mel.MetaExperience); ok {
			me = x
		}
	}
	q := task.Example{ID: "q", Prompt: "What is 12+7?", Answer: "19"}
	prompt, err := r.Prompt(q, b.Variants[1])
	if err != nil {
		t.Fatal(err)
	}
	raw := func(ids []int32) string { return l.Tokenizer.Decode(ids) }
	if !strings.Contains(raw(prompt), r.grant) {
		t.Fatalf("the rollout prompt does not grant the consult action: %q", raw(prompt))
	}
	g := method.Scored{Example: q, Group: rollout.Group{Prompt: prompt}}
	for _, text := range []string{"12+7=19\n#### 19", "12+7=18\n#### 18"} {
		toks := append(r.Encode(text), l.StopTokens...)
		g.Trajectories = append(g.Trajectories, rollout.Trajectory{Prompt: prompt, Tokens: toks, Policy: make([]bool, len(toks)),
			Logprobs: make([]float32, len(toks)), Text: r.Decode(toks), PolicyText: text})
		g.Correct = append(g.Correct, strings.HasSuffix(text, "19"))
	}
	reply := "1. Failure Resolution Path\n- Failure Point: 12+7 was added as 18.\n2. Analysis of Success Factors\n- Counted on.\n" +
		"3. First-Person Reflective Summary\nI rushed.\n4. Subject Heuristics\n- [Sums]: When adding, I must recount.\n"
	pol := &chatPolicy{r: r, turns: []string{reply, "The sum is 19.\n#### 19"}}
	sc := &method.StepContext{Policy: pol, Render: r, Metrics: method.Metrics{}, Sampling: sample.Params{MaxTokens: 100, Temperature: 1, StopTokens: l.StopTokens},
		Reward: func(e task.Example, response string) (float64, bool) { return eval.Reward(e, response) }}
	if _, err := me.Terms(context.Background(), sc, []method.Scored{g}); err != nil {
		t.Fatal(err)
	}
	if len(pol.prompts) != 2 || sc.Metrics["mel/validated"] != 1 {
		t.Fatalf("%d passes, metrics %v", len(pol.prompts), sc.Metrics)
	}
	for i, pass := range []string{"reflection request", "replay"} {
		text := raw(pol.prompts[i])
		if strings.Contains(text, r.grant) || strings.Contains(text, "<consult>") || !strings.Contains(text, "<|im_start|>system\nAnswer after ####.<|im_end|>") {
			t.Errorf("the %s carries the consult grant, or lacks the run's system prompt:\n%q", pass, text)
		}
	}
}
