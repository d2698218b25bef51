package train

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/expert/collect/dmetest"
	"rlvr/method"
	"rlvr/method/meml"
	"rlvr/method/part"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// writeSums writes n GSM8K-format questions "<label>: what is i+1?" with
// their answers to name in dir, and returns its path.
func writeSums(t *testing.T, dir, name, label string, n int) string {
	t.Helper()
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"question": "%s: what is %d+1?", "answer": "It is.\n#### %d"}`, label, i, i+1))
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// byteRenderer is the renderer of a byte-tokenizer model without a chat
// template, for loadData.
func byteRenderer(t *testing.T) *renderer {
	t.Helper()
	l, err := checkpoint.Open(tinyWorldModel(t), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRenderer(l, ChatConfig{Template: "auto"}, 128)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func ids(es []task.Example) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// TestValidationFromTrainingFile: with data.validation train, the
// validation problems are eval_problems examples held out of the training
// file, never drawn for training, and the test split is the test file:
// all of it with test_problems 0, else the first test_problems of its
// seeded shuffle. A validation file is read instead when one is named.
func TestValidationFromTrainingFile(t *testing.T) {
	dir := t.TempDir()
	r := byteRenderer(t)
	cfg := DefaultRL()
	cfg.Data = DataConfig{Name: "gsm8k", Train: writeSums(t, dir, "train.jsonl", "Train", 30), Test: writeSums(t, dir, "test.jsonl", "Test", 10),
		Validation: ValidationTrain}
	cfg.EvalProblems = 5
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	src, held, sum, err := loadData(&cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(held.Val) != 5 || len(src.pool) != 25 || sum.Train != 25 || sum.HeldOut != 5 || sum.Test != 10 {
		t.Fatalf("validation %d, training %d, summary %v", len(held.Val), len(src.pool), sum)
	}
	for _, e := range held.Val {
		if !strings.HasPrefix(e.Prompt, "Train: ") || slices.Contains(ids(src.pool), e.ID) {
			t.Fatalf("validation problem %s (%q) is not held out of the training file", e.ID, e.Prompt)
		}
	}
	drawn, _ := src.next(100) // four epochs
	for _, e := range drawn {
		if slices.Contains(ids(held.Val), e.ID) {
			t.Fatalf("validation problem %s drawn for training", e.ID)
		}
	}
	for i, e := range held.Test {
		if want := fmt.Sprintf("Test: what is %d+1?", i); e.Prompt != want {
			t.Fatalf("test problem %d is %q, want %q: the whole test file, as written", i, e.Prompt, want)
		}
	}
	if s := sum.String(); !strings.Contains(s, "5 for validation (held out of the training file) + 10 for test (from the test file)") {
		t.Errorf("summary %q does not say where validation and test come from", s)
	}

	// The same seed holds out the same problems; test_problems takes the
	// first of the test file's seeded shuffle.
	some := cfg
	some.TestProblems = 4
	_, again, _, err := loadData(&some, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(again.Val), ids(held.Val)) || len(again.Test) != 4 || slices.Equal(ids(again.Test), ids(held.Test[:4])) {
		t.Fatalf("validation %v (want %v), test %v", ids(again.Val), ids(held.Val), ids(again.Test))
	}
	other := cfg
	other.Seed = 2
	if _, o, _, _ := loadData(&other, r, nil); slices.Equal(ids(o.Val), ids(held.Val)) {
		t.Errorf("seeds 1 and 2 hold out the same problems %v", ids(held.Val))
	}

	// A validation file: the first eval_problems of its seeded shuffle,
	// every training example trained on.
	file := cfg
	file.Data.Validation = writeSums(t, dir, "dev.jsonl", "Dev", 8)
	file.EvalProblems = 3
	src, held, sum, err = loadData(&file, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(held.Val) != 3 || !strings.HasPrefix(held.Val[0].Prompt, "Dev: ") || len(src.pool) != 30 || len(held.Test) != 10 || sum.ValFrom != FromValidationFile {
		t.Fatalf("validation %v, training %d, test %d, summary %v", ids(held.Val), len(src.pool), len(held.Test), sum)
	}
	file.EvalProblems = 0
	if _, held, _, _ = loadData(&file, r, nil); len(held.Val) != 8 {
		t.Fatalf("eval_problems 0: %d validation problems, want the whole file's 8", len(held.Val))
	}

	cfg.EvalProblems = 30
	if _, _, _, err := loadData(&cfg, r, nil); err == nil || !strings.Contains(err.Error(), "data.validation train: holding out 30 of the 30") {
		t.Errorf("holding out every training example: %v", err)
	}
}

// TestValidationConfigErrors: data.validation is checked with the knobs it
// depends on, each error naming the key.
func TestValidationConfigErrors(t *testing.T) {
	for _, c := range []struct {
		data         DataConfig
		evalProblems int
		want         string
	}{
		{DataConfig{Name: "gsm8k", Train: "train.jsonl", Validation: "train"}, 200, `data.validation "train": the test split is then data.test, which is unset`},
		{DataConfig{Name: "gsm8k", Train: "train.jsonl", Test: "test.jsonl", Validation: "train"}, 0, "data.validation train holds eval_problems examples out of data.train"},
		{DataConfig{Name: "gsm8k", Train: "train.jsonl", Test: "test.jsonl", Validation: "train", Order: OrderFile}, 200, "data.validation train with data.order file"},
		{DataConfig{Name: "gsm8k", Train: "train.jsonl", Test: "test.jsonl", Validation: "test.jsonl"}, 200, `data.validation "test.jsonl" is data.test`},
		{DataConfig{Name: "gsm8k", Train: "train.jsonl", Test: "test.jsonl", Validation: "train.jsonl"}, 200, `data.validation "train.jsonl" is data.train`},
		{DataConfig{Name: "world", Validation: "train"}, 200, "train, test, validation and fields are for datasets"},
	} {
		cfg := DefaultRL()
		cfg.Data, cfg.EvalProblems = c.data, c.evalProblems
		if _, err := cfg.Resolve(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("data %+v: error %v, want one containing %q", c.data, err, c.want)
		}
	}
	// A validation file with data.order file keeps the training file's
	// order; a missing one is named before the run starts.
	cfg := DefaultRL()
	cfg.Data = DataConfig{Name: "gsm8k", Train: "train.jsonl", Test: "test.jsonl", Validation: "dev.jsonl", Order: OrderFile}
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	if err := checkPaths(&cfg); err == nil || !strings.Contains(err.Error(), "data.validation: stat dev.jsonl") {
		t.Errorf("missing validation file: %v", err)
	}
}

// TestWarmupAndRLHoldOutTheSameValidation: MEML-GRPO's warm-up run (MEF on
// D_ME behind expert prompts, part warmup) and its RL run (part rl) of the
// same seed hold out the same validation problems of the training file,
// which neither trains on: the warm-up run drops the experts' answers to
// them, and the two sides split the rest.
func TestWarmupAndRLHoldOutTheSameValidation(t *testing.T) {
	dir := t.TempDir()
	r := byteRenderer(t)
	train := writeSums(t, dir, "train.jsonl", "Train", 60)
	all, err := task.Load("gsm8k", train)
	if err != nil {
		t.Fatal(err)
	}
	data := DataConfig{Name: "gsm8k", Train: train, Test: writeSums(t, dir, "test.jsonl", "Test", 10), Validation: ValidationTrain, WarmupFraction: 0.3}
	mef := DefaultRL()
	mef.Algorithm, mef.Parts = method.SFT, []string{meml.PartExpertPrompts}
	mef.Sections.Set(&meml.ExpertPromptsConfig{Experts: []int{0, 1, 2}})
	mef.Data, mef.EvalProblems = data, 8
	mef.Data.Part, mef.Data.DME = "warmup", dmetest.Dataset(t, all, 2) // the experts answered every question
	rl := DefaultRL()
	rl.Data, rl.EvalProblems = data, 8
	rl.Data.Part = "rl"
	for _, c := range []*RLConfig{&mef, &rl} {
		if _, err := c.Resolve(); err != nil {
			t.Fatal(err)
		}
	}
	variants := part.Get[*meml.ExpertPromptsConfig](mef.Sections).Variants()
	warmSrc, warmHeld, warmSum, err := loadData(&mef, r, variants)
	if err != nil {
		t.Fatal(err)
	}
	rlSrc, rlHeld, _, err := loadData(&rl, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warmHeld.Val) != 8 || !slices.Equal(ids(warmHeld.Val), ids(rlHeld.Val)) {
		t.Fatalf("the warm-up run validates on %v, the RL run on %v", ids(warmHeld.Val), ids(rlHeld.Val))
	}
	trained := map[string]bool{}
	for _, e := range warmSrc.pool {
		trained[e.ID] = true
	}
	warmQuestions := len(trained)
	for _, e := range rlSrc.pool {
		if trained[e.ID] {
			t.Fatalf("%s is trained on both sides of the warm-up split", e.ID)
		}
		trained[e.ID] = true
	}
	for _, e := range warmHeld.Val {
		if trained[e.ID] {
			t.Fatalf("validation problem %s is trained on", e.ID)
		}
	}
	if len(trained) != 60-8 || warmQuestions == 0 || len(warmSrc.pool) != 3*warmQuestions {
		t.Fatalf("%d questions trained (%d on the warm-up side, %d D_ME answers), want the 52 not held out", len(trained), warmQuestions, len(warmSrc.pool))
	}
	// Every expert answered the 8 validation questions: 24 answers left
	// out, with those to the RL side's questions.
	if warmSum.NotQuestion != 3*(60-warmQuestions) {
		t.Errorf("%d D_ME answers to questions not trained on, want %d", warmSum.NotQuestion, 3*(60-warmQuestions))
	}
}

// sumsByPersona answers "what is i+1?" right under the persona of expert
// right[split] when the question's label is split ("Train" or "Test"), and
// wrong otherwise: the expert best on validation is then another than the
// one best on test.
type sumsByPersona struct {
	l     *checkpoint.Loaded
	right map[string]string // label → expert answering right
}

var sumQuestion = regexp.MustCompile(`(Train|Test): what is (\d+)\+1\?`)

func (s *sumsByPersona) Sample(_ context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	for i, q := range reqs {
		prompt := s.l.Tokenizer.Decode(q.Prompt)
		answer := "#### -1"
		if m := sumQuestion.FindStringSubmatch(prompt); m != nil && strings.Contains(prompt, "You are Expert "+strings.TrimPrefix(s.right[m[1]], "E")+",") {
			n, _ := strconv.Atoi(m[2])
			answer = "#### " + strconv.Itoa(n+1)
		}
		toks := s.l.Encode(answer)
		for range max(q.Params.N, 1) {
			out[i] = append(out[i], sample.Completion{Text: answer, Tokens: toks, Logprobs: make([]float32, len(toks))})
		}
	}
	return out, nil
}

// TestBestExpertChosenOnValidation: a dataset run under expert prompts
// with validation held out of the training file reports on the test file
// the expert best on the final validation, not the one best on test; its
// lines say where their problems come from, and the test line where the
// choice was made.
func TestBestExpertChosenOnValidation(t *testing.T) {
	dir := t.TempDir()
	cfg := chatExpertsRun(t)
	cfg.Data = DataConfig{Name: "gsm8k", Train: writeSums(t, dir, "train.jsonl", "Train", 20), Test: writeSums(t, dir, "test.jsonl", "Test", 6),
		Validation: ValidationTrain}
	cfg.EvalProblems, cfg.TestProblems = 4, 0
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
	_, held, _, err := loadData(&cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, b := newMethod(t, &cfg, part.Setup{MaxLen: 512, Chat: true})
	run := t.TempDir()
	s := &sumsByPersona{l: l, right: map[string]string{"Train": "E0", "Test": "E2"}}
	lp := &loop{cfg: &cfg, pol: &policy{sampler: s, text: l, maxLen: 512}, render: r, held: held, runDir: run, evaluators: b.Evaluators}
	if err := lp.evaluate(context.Background(), cfg.Steps); err != nil {
		t.Fatal(err)
	}
	got, err := rundir.Load(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Evals) != 2 {
		t.Fatalf("evaluations %+v", got.Evals)
	}
	val, test := got.Evals[0], got.Evals[1]
	v, x := expertsOf(t, val), expertsOf(t, test)
	if val.Split != "val" || v.Experts["E0"] != 1 || v.Experts["E2"] != 0 || val.Source != FromTrainFile {
		t.Errorf("validation line %+v, its record %+v", val, v)
	}
	if test.Split != "test" || test.Problems != 6 || x.Experts["E0"] != 0 || x.Experts["E2"] != 1 || test.Source != FromTestFile {
		t.Errorf("test line %+v, its record %+v", test, x)
	}
	if x.BestExpert != "E0" || x.Best == nil || *x.Best != 0 {
		t.Errorf("best expert %q (%v): want E0, best on validation, though E2 is best on test", x.BestExpert, x.Best)
	}
	if want := "validation (4 problems held out of the training file)"; test.ChosenOn != want {
		t.Errorf("chosen_on %q, want %q", test.ChosenOn, want)
	}
	line, _ := os.ReadFile(filepath.Join(run, rundir.EvalFile))
	var raw map[string]any
	last := strings.TrimSpace(string(line))
	if err := json.Unmarshal([]byte(last[strings.LastIndex(last, "\n")+1:]), &raw); err != nil || raw["chosen_on"] == nil || raw["source"] != FromTestFile {
		t.Errorf("test line %s, %v", last, err)
	}
}

// TestDatasetRunTestSplit runs a chat model on a dataset with validation
// held out of the training file: the run ends with the test line over the
// whole test file, its best expert chosen on validation.
func TestDatasetRunTestSplit(t *testing.T) {
	dir := t.TempDir()
	cfg := chatExpertsRun(t)
	cfg.Data = DataConfig{Name: "gsm8k", Train: writeSums(t, dir, "train.jsonl", "Train", 12), Test: writeSums(t, dir, "test.jsonl", "Test", 5),
		Validation: ValidationTrain}
	cfg.EvalProblems, cfg.TestProblems = 3, 0
	run := filepath.Join(t.TempDir(), "run")
	if err := Run(context.Background(), cfg, run, Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := rundir.Load(run)
	if err != nil {
		t.Fatal(err)
	}
	var splits []string
	for _, e := range got.Evals {
		splits = append(splits, e.Split)
	}
	if strings.Join(splits, " ") != "val val test" {
		t.Fatalf("evaluations %v", splits)
	}
	test := got.Evals[2]
	if test.Problems != 5 || test.Source != FromTestFile || expertsOf(t, test).BestExpert == "" || test.ChosenOn != "validation (3 problems held out of the training file)" {
		t.Errorf("test line %+v", test)
	}
}
