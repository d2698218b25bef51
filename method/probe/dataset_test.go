package probe

import (
	"context"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/internal/datatest"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/sample"
	"rlvr/task"
)

// additions writes a GSM8K-format file of the 35 questions a+b? with a in
// 1..7 and b in 1..5, each with its worked solution, and returns its path.
func additions(t *testing.T, dir, name string, offset int) string {
	return datatest.Additions(t, filepath.Join(dir, name), 35, offset)
}

// byteRender prompts as plain text, a byte per token; an environment turn
// is its text on lines of its own.
type byteRender struct{}

func (byteRender) Prompt(e task.Example, v method.Variant) ([]int32, error) {
	return byteRender{}.Encode(e.Prompt + v.Suffix), nil
}
func (byteRender) Response(text string) []int32 { return byteRender{}.Encode(text) }
func (byteRender) EnvTurn(text string) ([]int32, error) {
	return byteRender{}.Encode("\n" + text + "\n"), nil
}
func (byteRender) Encode(text string) []int32 {
	out := make([]int32, len(text))
	for i := range len(text) {
		out[i] = int32(text[i])
	}
	return out
}
func (byteRender) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

var (
	question    = regexp.MustCompile(`(\d+)\+(\d+)\?`)
	expertReply = regexp.MustCompile(`<expert name="[^"]*">(?s:.*)#### (\d+)</expert>`)
)

// scripted is a policy whose answers the test knows. Asked to reflect, it
// writes a meta-experience in the paper's format; with one in its prompt,
// or under the suffix " [E1]", it answers right; with an expert's reply
// in its history, it answers what the reply says; else it answers sums of
// 7 right, sums of 6 right in its first sample at a positive temperature
// only, and every other question wrong.
type scripted struct{}

func (scripted) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	for i, r := range reqs {
		prompt := byteRender{}.Decode(r.Prompt)
		var a, b int
		if m := question.FindStringSubmatch(prompt); m != nil {
			a, _ = strconv.Atoi(m[1])
			b, _ = strconv.Atoi(m[2])
		}
		for k := range max(r.Params.N, 1) {
			answer := "#### 0"
			switch sum := a + b; {
			case strings.Contains(prompt, "Meta-Cognitive"):
				answer = "1. Failure path\n- Failure Point: the sum\n2. Success factors\nadding\n3. Reflective summary\nI add.\n4. Subject heuristics\n- add the numbers\n"
			case strings.Contains(prompt, "Bifurcation point:"), strings.HasSuffix(prompt, " [E1]"):
				answer = "#### " + strconv.Itoa(sum)
			case expertReply.MatchString(prompt):
				answer = "#### " + expertReply.FindStringSubmatch(prompt)[1]
			case sum == 7, sum == 6 && k == 0 && r.Params.Temperature > 0:
				answer = "#### " + strconv.Itoa(sum)
			}
			toks := byteRender{}.Encode(answer)
			out[i] = append(out[i], sample.Completion{Tokens: toks, Logprobs: make([]float32, len(toks)), Text: answer, Finish: sample.FinishStop})
		}
	}
	return out, nil
}

// fixedReply answers every question with the same text.
type fixedReply string

func (f fixedReply) Answer(_ context.Context, reqs []expert.Request, done func(int, string, error)) {
	for i := range reqs {
		done(i, string(f), nil)
	}
}

// TestRunDataset probes a scripted policy on 35 additions with a fixed
// reply "#### 5" (right on the 4 sums of 5) and the reference solution
// (always right), MEL's replay and two expert prompts, and checks every
// count and paired difference against what the script implies.
func TestRunDataset(t *testing.T) {
	dir := t.TempDir()
	split := Split{Name: SplitTrain, Train: additions(t, dir, "train.jsonl", 0), Test: additions(t, dir, "test.jsonl", 1000),
		EvalProblems: 10, Seed: 1, Read: func(path string) ([]task.Example, error) { return task.Load("gsm8k", path) }}
	examples, from, err := split.Draw(100, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) != 35 || !strings.Contains(from, "35 problems of the train split") {
		t.Fatalf("%d problems, %q", len(examples), from)
	}
	sums := map[int]int{}
	for _, e := range examples {
		n, _ := strconv.Atoi(e.Answer)
		sums[n]++
	}
	pool := &expert.Pool{Members: []expert.Member{{Name: "E1", Model: "fixed", Answerer: fixedReply("#### 5")},
		{Name: "E2", Model: expert.KindReference, Answerer: expert.Reference{}}}}
	one := eapo.Schedule{Kind: optim.Constant, Start: 1}
	d := Dataset{Model: "scripted", Data: "additions", Split: SplitTrain, From: from, Examples: examples,
		Policy: scripted{}, Render: byteRender{},
		Consultation: &eapo.Consultation{Format: eapo.Chat{}, Pool: pool, Accept: one, Turns: one, RunSteps: 1, MaxQueries: 3, MaxTokens: 64},
		Meta:         &mel.MetaExperience{Format: mel.Chat{}},
		Variants:     []method.Variant{{Name: "E1", Suffix: " [E1]"}, {Name: "E2", Suffix: " [E2]"}}}
	defer func(n int) { Chunk = n }(Chunk)
	Chunk = 8 // chunks that must join up
	const k = 4
	rep, err := RunDataset(context.Background(), io.Discard, d, DatasetConfig{K: k, Temperature: 1, MaxTokens: 32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	count := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", what, got, want)
		}
	}
	n := float64(len(examples))
	// The policy alone: sums of 7 always right, sums of 6 once in k.
	near("greedy", rep.Greedy.Mean, float64(sums[7])/n)
	near("sampled", rep.Sampled.Mean, float64(k*sums[7]+sums[6])/(n*k))
	near("zero variance", rep.ZeroVariance.Mean, float64(35-sums[6])/n)

	// EAPO: the fixed reply is right on the sums of 5, and the policy
	// answers what it says; the reference is always right.
	if len(rep.EAPO.Experts) != 2 {
		t.Fatalf("%d experts", len(rep.EAPO.Experts))
	}
	fixed, ref := rep.EAPO.Experts[0], rep.EAPO.Experts[1]
	near("E1 right", fixed.Right.Mean, float64(sums[5])/n)
	count("E1 right over", fixed.Right.N, 35)
	near("E1 with", fixed.With.Mean, float64(sums[5])/n)
	// Per problem: +1 on the sums of 5, −1 on the sums of 7, −1/k on the
	// sums of 6, 0 elsewhere.
	near("E1 gain", fixed.Gain.Mean, (float64(sums[5])-float64(sums[7])-float64(sums[6])/k)/n)
	near("E1 gain when right", fixed.GainRight.Mean, 1)
	count("E1 problems right", fixed.GainRight.N, sums[5])
	near("E1 gain when wrong", fixed.GainWrong.Mean, (-float64(sums[7])-float64(sums[6])/k)/(n-float64(sums[5])))
	count("E1 problems wrong", fixed.GainWrong.N, 35-sums[5])
	near("E2 right", ref.Right.Mean, 1)
	near("E2 with", ref.With.Mean, 1)
	near("E2 gain", ref.Gain.Mean, (n-float64(sums[7])-float64(sums[6])/k)/n)
	count("E2 no reply", ref.NoReply, 0)
	count("E2 problems wrong", ref.GainWrong.N, 0)

	// MEL: every question but the sums of 7 failed; the sums of 6 have the
	// policy's own right answer, the rest the reference solution. Every M
	// parses and its replay is right; without M, the sums of 6 are right
	// once in k.
	m := rep.MEL
	count("failed", m.Failed, 35-sums[7])
	count("from the policy", m.FromPolicy, sums[6])
	count("from the reference", m.FromReference, 35-sums[7]-sums[6])
	near("parsed", m.Parsed.Mean, 1)
	count("validated", m.Validated, m.Pairs)
	near("with", m.With.Mean, 1)
	near("without", m.Without.Mean, float64(sums[6])/float64(k*m.Pairs))
	near("replay gain", m.Gain.Mean, (float64(m.Pairs)-float64(sums[6])/k)/float64(m.Pairs))
	count("replay gain over", m.Gain.N, m.Pairs)

	// MEML: E1 always right, E2 as the plain prompt.
	near("E1 greedy", rep.MEML.Prompts[0].Greedy.Mean, 1)
	near("E2 greedy", rep.MEML.Prompts[1].Greedy.Mean, float64(sums[7])/n)
	near("mixed", rep.MEML.Mixed.Mean, float64(35-sums[7])/n)
	count("all right", rep.MEML.AllRight, sums[7])

	var out strings.Builder
	rep.Print(&out)
	t.Log(out.String())
	for _, want := range []string{"| E1 (fixed) | 11.4% [", "| E2 (reference) | 100.0% [", "| E1 | 100.0% [", "| pairs: right answer the policy's own / the reference solution | 5 / 25 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, out.String())
		}
	}
}

// TestDatasetNoSample: a policy that writes no meta-experience leaves
// MEL's replay without a sample, which the table says and the JSON
// writes as null.
func TestDatasetNoSample(t *testing.T) {
	dir := t.TempDir()
	split := Split{Name: SplitTrain, Train: additions(t, dir, "train.jsonl", 0), EvalProblems: 5, Seed: 1,
		Read: func(path string) ([]task.Example, error) { return task.Load("gsm8k", path) }}
	examples, from, err := split.Draw(6, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := Dataset{Model: "scripted", Data: "additions", Split: SplitTrain, From: from, Examples: examples, Policy: scripted{}, Render: byteRender{},
		Meta: &mel.MetaExperience{Format: mel.World{}}, Skipped: []string{"EAPO: no consultation part"}}
	rep, err := RunDataset(context.Background(), io.Discard, d, DatasetConfig{K: 2, Temperature: 1, MaxTokens: 16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MEL.Pairs == 0 || rep.MEL.Parsed.Mean != 0 || rep.MEL.Gain.N != 0 {
		t.Errorf("MEL: %+v", rep.MEL)
	}
	var out strings.Builder
	rep.Print(&out)
	for _, want := range []string{"| replay with M − without, paired by question | no sample |", "no meta-experience parsed", "skipped: EAPO: no consultation part"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, out.String())
		}
	}
	b, err := JSON(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"gain": {
      "Mean": null,`) || !strings.Contains(string(b), `"eapo": null`) {
		t.Errorf("JSON:\n%s", b)
	}
}

// TestSplitDraw draws the splits a training run holds out, and never the
// test split.
func TestSplitDraw(t *testing.T) {
	dir := t.TempDir()
	read := func(path string) ([]task.Example, error) { return task.Load("gsm8k", path) }
	train, test := additions(t, dir, "train.jsonl", 0), additions(t, dir, "test.jsonl", 1000)
	ids := func(es []task.Example) map[string]bool {
		out := map[string]bool{}
		for _, e := range es {
			out[e.ID] = true
		}
		return out
	}
	// validation: train holds 10 out of the training file.
	s := Split{Name: SplitTrain, Train: train, Test: test, Validation: "train", EvalProblems: 10, Seed: 7, Read: read}
	tr, _, err := s.Draw(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Name = SplitValidation
	val, from, err := s.Draw(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 25 || len(val) != 10 || !strings.Contains(from, "validation problems held out of") {
		t.Errorf("train %d, validation %d (%s)", len(tr), len(val), from)
	}
	for id := range ids(val) {
		if ids(tr)[id] {
			t.Errorf("%s is in both splits", id)
		}
	}
	// No test file: validation and test problems both held out.
	s = Split{Name: SplitTrain, Train: train, EvalProblems: 5, TestProblems: 5, Seed: 7, Read: read}
	if tr, _, err = s.Draw(100, 1); err != nil || len(tr) != 25 {
		t.Errorf("train split of a file holding out 10: %d, %v", len(tr), err)
	}
	// Validation problems that come from data.test are refused, and so is
	// the test split.
	s = Split{Name: SplitValidation, Train: train, Test: test, EvalProblems: 5, Read: read}
	if _, _, err := s.Draw(5, 1); err == nil || !strings.Contains(err.Error(), "data.test") {
		t.Errorf("validation from data.test: %v", err)
	}
	s.Name = "test"
	if _, _, err := s.Draw(5, 1); err == nil || !strings.Contains(err.Error(), "never probed") {
		t.Errorf("test split: %v", err)
	}
}
