package train

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/checkpoint/modeltest"
	"rlvr/internal/shareddata"
	"rlvr/method"
	"rlvr/task"
)

// TestSourceWrapsEpochs draws past the end of a finite dataset: every
// epoch is the whole pool in a fresh seeded order, and the stream is the
// same when resumed from a cursor.
func TestSourceWrapsEpochs(t *testing.T) {
	var pool []task.Example
	for i := range 5 {
		pool = append(pool, task.Example{ID: string(rune('a' + i))})
	}
	ids := func(es []task.Example) string {
		var b strings.Builder
		for _, e := range es {
			b.WriteString(e.ID)
		}
		return b.String()
	}
	s := &source{pool: pool, seed: 3}
	first, _ := s.next(5)
	second, _ := s.next(5)
	third, _ := s.next(3)
	for _, ep := range []string{ids(first), ids(second)} {
		if len(ep) != 5 || strings.Count(ep, "a")+strings.Count(ep, "b")+strings.Count(ep, "c")+strings.Count(ep, "d")+strings.Count(ep, "e") != 5 {
			t.Fatalf("epoch %q is not the whole pool", ep)
		}
		for _, c := range "abcde" {
			if !strings.ContainsRune(ep, c) {
				t.Fatalf("epoch %q misses %c", ep, c)
			}
		}
	}
	if ids(first) == ids(second) {
		t.Fatalf("epochs 1 and 2 share the order %q", ids(first))
	}
	if s.epochs() != 13.0/5 {
		t.Fatalf("epochs %v", s.epochs())
	}
	resumed := &source{pool: pool, seed: 3, drawn: 10}
	again, _ := resumed.next(3)
	if !reflect.DeepEqual(again, third) {
		t.Fatalf("resumed stream %q, want %q", ids(again), ids(third))
	}
}

// TestWorldSourceNeverDrawsHeldOut: world problems that are also held out
// are skipped.
func TestWorldSourceNeverDrawsHeldOut(t *testing.T) {
	cfg := DefaultRL()
	cfg.Data.Levels, cfg.EvalProblems = []int{0}, 300 // level 0 is small enough to repeat
	src, held, _, err := loadData(&cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	train, _ := src.next(5000)
	seen := map[string]bool{}
	for _, e := range held.Val {
		seen[e.Prompt] = true
	}
	for _, e := range train {
		if seen[e.Prompt] {
			t.Fatalf("held-out problem %q drawn for training", e.Prompt)
		}
	}
	if src.drawn <= 5000 {
		t.Fatalf("drew %d for 5000: level 0 repeats, so some held-out problems should have been skipped", src.drawn)
	}
}

// TestDatasetSkipsUnusableExamples writes a GSM8K-format file with an
// unreadable answer and an over-long prompt: both are set aside and
// counted; the held-out examples come out of the training file.
func TestDatasetSkipsUnusableExamples(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 12 {
		lines = append(lines, `{"question": "What is `+strings.Repeat("1+", i%3)+`1?", "answer": "It is.\n#### `+string(rune('1'+i%3))+`"}`)
	}
	lines = append(lines, `{"question": "no number", "answer": "#### ."}`)
	lines = append(lines, `{"question": "`+strings.Repeat("long ", 80)+`", "answer": "#### 5"}`)
	path := filepath.Join(dir, "train.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	r := byteRenderer(t)
	cfg := DefaultRL()
	cfg.Data, cfg.EvalProblems = DataConfig{Name: "gsm8k", Train: path}, 4
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	src, held, sum, err := loadData(&cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.NoAnswer != 1 || sum.LongPrompts != 1 || sum.Train != 8 || sum.HeldOut != 4 || len(held.Val) != 4 || len(src.pool) != 8 {
		t.Fatalf("summary %+v", sum)
	}
	if len(sum.Skipped) != 2 || !strings.HasPrefix(sum.Skipped[0], path+":13: no readable gold answer") || !strings.HasPrefix(sum.Skipped[1], path+":14: example") {
		t.Fatalf("set aside %q", sum.Skipped)
	}
	for _, h := range held.Val {
		for _, e := range src.pool {
			if e.ID == h.ID {
				t.Fatalf("held-out %s is also trained on", h.ID)
			}
		}
	}
	cfg.EvalProblems = 20
	if _, _, _, err := loadData(&cfg, r, nil); err == nil || !strings.Contains(err.Error(), "leaves none to train on") {
		t.Fatalf("holding out everything: %v", err)
	}
	cfg.Data.Train = filepath.Join(dir, "missing.jsonl")
	if _, _, _, err := loadData(&cfg, r, nil); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestGSM8KWithAChatModel builds a random Qwen3-shaped model around Qwen3's
// real tokenizer, runs two RL steps on GSM8K through its chat template
// with a system prompt, and reloads the saved checkpoint as a complete
// model directory.
func TestGSM8KWithAChatModel(t *testing.T) {
	tokDir := shareddata.Path(t, "tokenizers/qwen3")
	gsm := shareddata.Path(t, "gsm8k")
	base := modeltest.Random(t, tokDir, "qwen3-tiny")
	cfg := DefaultRL()
	cfg.Model = base
	cfg.Data = DataConfig{Name: "gsm8k", Train: filepath.Join(gsm, "train.jsonl"), Test: filepath.Join(gsm, "test.jsonl")}
	cfg.Chat = ChatConfig{Template: "on", System: "Solve the problem; end with #### and the answer."}
	cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.MaxTokens = 2, 2, 2, 12
	cfg.EvalProblems, cfg.CheckpointEvery, cfg.Entropy = 3, 2, 0.01
	run := filepath.Join(t.TempDir(), "run")
	if err := RL(context.Background(), cfg, run, false, nil); err != nil {
		t.Fatal(err)
	}
	ms := stable(t, filepath.Join(run, "metrics.jsonl"))
	if len(ms) != 2 || ms[1]["grad_norm"] == 0 || ms[1]["data/epoch"] <= 0 {
		t.Fatalf("metrics %v", ms)
	}
	ck, err := checkpoint.Open(filepath.Join(run, "ckpt-000002"), "")
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := checkpoint.Open(base, "")
	if ck.Chat == nil || ck.Tokenizer.VocabSize() != orig.Tokenizer.VocabSize() || !reflect.DeepEqual(ck.StopTokens, orig.StopTokens) {
		t.Fatalf("the checkpoint lost its tokenizer side: chat %v, stop %v vs %v", ck.Chat != nil, ck.StopTokens, orig.StopTokens)
	}
	// The prompts go through the chat template, system prompt first.
	r, _ := newRenderer(ck, cfg.Chat, 2048)
	text, err := r.Text(task.Example{Prompt: "What is 2+2?"}, method.Variant{})
	if err != nil || !strings.HasPrefix(text, "<|im_start|>system\nSolve the problem") || !strings.HasSuffix(text, "<|im_start|>assistant\n") {
		t.Fatalf("rendered prompt %q, %v", text, err)
	}
	expert, _ := r.Text(task.Example{Prompt: "What is 2+2?"}, method.Variant{System: "You are Expert 2, please provide an answer to the above question."})
	if !strings.HasPrefix(expert, "<|im_start|>system\nSolve the problem; end with #### and the answer.\n\nYou are Expert 2") {
		t.Fatalf("an expert prompt is not the system prompt, then the expert's persona: %q", expert)
	}
	// A resumed run continues from it.
	cfg.Steps = 3
	if err := RL(context.Background(), cfg, run, true, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(stable(t, filepath.Join(run, "metrics.jsonl"))); n != 3 {
		t.Fatalf("%d steps after resuming", n)
	}
}

// TestChatTemplateRequired: chat.template on with a model that has none is
// an error before training.
func TestChatTemplateRequired(t *testing.T) {
	cfg := smallRL(t)
	cfg.Chat.Template = "on"
	err := RL(context.Background(), cfg, t.TempDir(), false, nil)
	if err == nil || !strings.Contains(err.Error(), "has no chat template") {
		t.Fatalf("error %v", err)
	}
}

// TestDatasetFieldsAndErrors reads a file whose fields the config names,
// and checks that a record missing its answer is an error naming the file,
// line and field, before any training.
func TestDatasetFieldsAndErrors(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 6 {
		lines = append(lines, `{"q": "What is `+string(rune('1'+i))+`?", "gold": "`+string(rune('1'+i))+`", "work": "it is"}`)
	}
	path := filepath.Join(dir, "mine.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	r := byteRenderer(t)
	cfg := DefaultRL()
	cfg.Data = DataConfig{Name: "mine", Train: path, Fields: &FieldsConfig{Question: "q", Answer: "gold", Solution: "work"}}
	cfg.EvalProblems = 2
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	src, held, _, err := loadData(&cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.pool) != 4 || len(held.Val) != 2 || src.pool[0].Solution != "it is" || !strings.HasPrefix(src.pool[0].Prompt, "What is") {
		t.Fatalf("pool %+v", src.pool)
	}
	os.WriteFile(path, []byte(lines[0]+"\n"+`{"q": "What?", "work": "no gold"}`+"\n"), 0o644)
	if _, _, _, err := loadData(&cfg, r, nil); err == nil || !strings.Contains(err.Error(), "mine.jsonl:2") || !strings.Contains(err.Error(), `"gold"`) {
		t.Fatalf("missing field: %v", err)
	}
}

// TestDataOrderFile: with data.order file, every epoch draws the training
// file as written; the held-out examples must then come from data.test,
// and the world, which has no file, refuses the order.
func TestDataOrderFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		var lines []string
		for i := range n {
			lines = append(lines, fmt.Sprintf(`{"question": "What is %d+1?", "answer": "#### %d"}`, i, i+1))
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	r := byteRenderer(t)
	cfg := DefaultRL()
	cfg.Data = DataConfig{Name: "gsm8k", Train: write("train.jsonl", 5), Test: write("test.jsonl", 3), Order: OrderFile}
	cfg.EvalProblems = 2
	if _, err := cfg.Resolve(); err != nil {
		t.Fatal(err)
	}
	src, _, _, err := loadData(&cfg, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	drawn, err := src.next(12)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range drawn {
		if want := fmt.Sprintf("What is %d+1?", i%5); e.Prompt != want {
			t.Fatalf("draw %d is %q, want %q: the file's order, epoch after epoch", i, e.Prompt, want)
		}
	}

	shuffled := cfg
	shuffled.Data.Order = ""
	if _, err := shuffled.Resolve(); err != nil || shuffled.Data.Order != OrderShuffle {
		t.Fatalf("default order %q (%v), want %s", shuffled.Data.Order, err, OrderShuffle)
	}
	for _, c := range []struct {
		data DataConfig
		want string
	}{
		{DataConfig{Name: "gsm8k", Train: cfg.Data.Train, Order: OrderFile}, "data.order file needs data.test"},
		{DataConfig{Name: "world", Order: OrderFile}, "data.order file is for a dataset"},
		{DataConfig{Name: "gsm8k", Train: cfg.Data.Train, Order: "sorted"}, `data.order "sorted" is not shuffle or file`},
	} {
		bad := DefaultRL()
		bad.Data = c.data
		if _, err := bad.Resolve(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("data %+v: error %v, want one containing %q", c.data, err, c.want)
		}
	}
}
