package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint/modeltest"
	"rlvr/internal/datatest"
	"rlvr/method/probe"
)

// TestProbeWorldModel probes the world's model on a few problems and
// checks the report's counts agree with each other and with the flags.
func TestProbeWorldModel(t *testing.T) {
	configs, err := filepath.Abs(filepath.Join("..", "..", "configs"))
	if err != nil {
		t.Fatal(err)
	}
	cliFixture(t)
	// Chunks smaller than the problems, so that the counts below also
	// check that the chunks join up.
	defer func(n int) { probe.Chunk = n }(probe.Chunk)
	probe.Chunk = 5
	out := filepath.Join(t.TempDir(), "probe.json")
	stdout, stderr, err := execute(t, context.Background(), "probe", "--threads", "1", "--levels", "4", "--problems", "16",
		"--k", "4", "--max-tokens", "96", "--consult", filepath.Join(configs, "world-eapo.yaml"), "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "| queries readable ≥ 95% |") {
		t.Errorf("no preconditions table:\n%s", stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep probe.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Greedy.N != 16 || rep.Sampled.N != 64 || rep.ZeroVariance.N != 16 || rep.Episodes != 64 {
		t.Errorf("counts: greedy %d, sampled %d, groups %d, episodes %d", rep.Greedy.N, rep.Sampled.N, rep.ZeroVariance.N, rep.Episodes)
	}
	if mixed := 16 - int(rep.ZeroVariance.Mean*16+0.5); rep.Pairs != mixed || rep.Parsed > rep.Pairs || rep.Validated > rep.Parsed {
		t.Errorf("%d groups with right and wrong answers, but %d pairs, %d parsed, %d validated", mixed, rep.Pairs, rep.Parsed, rep.Validated)
	}
	// Level 4 has four steps: each of the 64 samples writes about that many.
	if st := rep.Steps; st.Prone+st.Other < 64*3 || st.ProneRight+st.ProneSlip > st.Prone || st.OtherRight > st.Other {
		t.Errorf("steps of 64 four-step samples: %+v", st)
	}
	if !strings.Contains(stdout, "steps of the samples: of ") {
		t.Errorf("no step tally:\n%s", stdout)
	}
	if rep.Readable.N != rep.Queries || rep.Consulting.N != rep.Episodes {
		t.Errorf("readable over %d of %d queries; consulting over %d of %d episodes", rep.Readable.N, rep.Queries, rep.Consulting.N, rep.Episodes)
	}
}

// TestEmbeddedWorldVersionInstalls: a command on world version 2, whose
// model comes with rlvr, installs it into an empty cache instead of asking
// for an hour of pretraining.
func TestEmbeddedWorldVersionInstalls(t *testing.T) {
	cliFixture(t) // an empty cache
	if _, stderr, err := execute(t, context.Background(), "eval", "--world", "2", "--levels", "0", "--problems", "2", "--max-tokens", "16"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(worldModelPath(2), "config.json")); err != nil {
		t.Fatalf("world version 2's model not installed: %v", err)
	}
}

// probeData writes a GSM8K-format training file of the 35 questions a+b?
// (a in 1..7, b in 1..5, so 4 of them sum to 5) and a test file, and a
// tiny random chat model, and returns a config over them whose parts are
// parts (their sections below it).
func probeData(t *testing.T, parts string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, offset int) string {
		return datatest.Additions(t, filepath.Join(dir, name), 35, offset)
	}
	model := filepath.Join(dir, "chat")
	modeltest.ByteChat(t, model, 1024)
	config := fmt.Sprintf(`model: %q
data: {name: gsm8k, train: %q, test: %q}
chat: {template: "on", system: "Answer after ####."}
steps: 1
group_size: 2
max_tokens: 12
eval_problems: 5
%s`, model, write("train.jsonl", 0), write("test.jsonl", 1000), parts)
	path := filepath.Join(dir, "probe.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProbeDataset probes a tiny chat model on 35 additions with a fixed
// reply (right on the 4 sums of 5) and the reference solution, MEL's
// replay and three expert prompts, and checks that each expert's numbers
// are paired by problem, that MEL's replay, with no meta-experience the
// random model could write, has no sample, and that each expert prompt is
// scored.
func TestProbeDataset(t *testing.T) {
	config := probeData(t, `parts: [consultation, meta_experience, expert_prompts]
consultation:
  experts:
    - {name: E1, reply: "#### 5"}
    - {name: E2, kind: reference}
meta_experience: {instruction: "Compare.\n{question}\nRight: {correct_ans}\nWrong: {error_ans}"}
expert_prompts: {experts: [0, 1, 2]}
`)
	cliFixture(t)
	out := filepath.Join(t.TempDir(), "probe.json")
	stdout, stderr, err := execute(t, context.Background(), "probe", "--threads", "1", "--config", config, "--problems", "100", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep probe.DatasetReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	// The training split is the whole training file: the validation
	// problems come from the test file, which is never drawn.
	if rep.Problems != 35 || rep.K != 2 || rep.Split != "train" || !strings.Contains(stdout, "never the test split") {
		t.Errorf("%d problems, k %d, split %s:\n%s", rep.Problems, rep.K, rep.Split, stdout)
	}
	if rep.EAPO == nil || len(rep.EAPO.Experts) != 2 {
		t.Fatalf("EAPO: %+v\n%s", rep.EAPO, stdout)
	}
	for _, x := range rep.EAPO.Experts {
		// Every problem has k episodes with the reply and k samples
		// without: the mean of the differences per problem is the
		// difference of the pooled accuracies.
		if x.With.N != 70 || x.Gain.N != 35 || math.Abs(x.Gain.Mean-(x.With.Mean-rep.Sampled.Mean)) > 1e-9 {
			t.Errorf("expert %s: with %v over %d, gain %v over %d, without %v", x.Name, x.With.Mean, x.With.N, x.Gain.Mean, x.Gain.N, rep.Sampled.Mean)
		}
		if x.NoReply != 0 || x.GainRight.N+x.GainWrong.N != 35 || x.Right.N != 35 || x.GainRight.N != int(math.Round(x.Right.Mean*35)) {
			t.Errorf("expert %s: %d without a reply, %d right and %d wrong replies, right %v", x.Name, x.NoReply, x.GainRight.N, x.GainWrong.N, x.Right.Mean)
		}
	}
	if fixed, ref := rep.EAPO.Experts[0], rep.EAPO.Experts[1]; fixed.GainRight.N != 4 || ref.GainRight.N != 35 {
		t.Errorf("right replies: E1 (#### 5) %d of 35, want 4; E2 (the reference) %d, want 35", fixed.GainRight.N, ref.GainRight.N)
	}
	m := rep.MEL
	if m == nil || m.Pairs == 0 || m.FromPolicy+m.FromReference != m.Pairs || m.Parsed.N != m.Pairs || m.Parsed.Mean != 0 || m.Gain.N != 0 || m.Reflection == "" {
		t.Errorf("MEL: %+v", m)
	}
	if !strings.Contains(stdout, "| replay with M − without, paired by question | no sample |") || !strings.Contains(string(b), `"gain": {
      "Mean": null,`) {
		t.Errorf("MEL's replay gain is not reported as no sample:\n%s\n%s", stdout, b)
	}
	if rep.MEML == nil || len(rep.MEML.Prompts) != 3 || rep.MEML.Mixed.N != 35 {
		t.Fatalf("MEML: %+v", rep.MEML)
	}
	for i, p := range rep.MEML.Prompts {
		if want := fmt.Sprintf("E%d", i); p.Name != want || p.Greedy.N != 35 || !strings.Contains(stdout, "| "+want+" | ") {
			t.Errorf("expert prompt %d: %+v\n%s", i, p, stdout)
		}
	}
	if mixed := int(math.Round(rep.MEML.Mixed.Mean * 35)); mixed+rep.MEML.AllRight+rep.MEML.AllWrong != 35 {
		t.Errorf("mixed %d, all right %d, all wrong %d of 35", mixed, rep.MEML.AllRight, rep.MEML.AllWrong)
	}
}

// TestProbeDatasetBadInput: a config without the parts probed measures
// the policy alone and says what it skipped; the test split is refused,
// and so are validation problems that would come from the test file.
func TestProbeDatasetBadInput(t *testing.T) {
	config := probeData(t, "")
	cliFixture(t)
	stdout, stderr, err := execute(t, context.Background(), "probe", "--threads", "1", "--config", config, "--problems", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"skipped: EAPO: the config lists no consultation part", "skipped: MEL: the config lists no meta_experience part",
		"skipped: MEML: the config lists no expert_prompts part", "| greedy accuracy |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "lists none of the parts probed") {
		t.Errorf("stderr:\n%s", stderr)
	}
	for _, tc := range []struct{ split, want string }{
		{"test", "--data-split test: the test split is never probed"},
		{"validation", "come from data.test"},
		{"dev", `--data-split "dev": want train or validation`},
	} {
		_, _, err := execute(t, context.Background(), "probe", "--config", config, "--data-split", tc.split)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--data-split %s: %v, want %q", tc.split, err, tc.want)
		}
	}
}
