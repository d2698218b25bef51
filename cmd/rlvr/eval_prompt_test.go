package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/checkpoint/modeltest"
	"rlvr/eval"
	"rlvr/task/world"
)

// evalJSON runs rlvr eval with args and --json, and returns its report and
// what it said on stderr.
func evalJSON(t *testing.T, args ...string) (eval.Report, string) {
	t.Helper()
	stdout, stderr, err := execute(t, context.Background(), append([]string{"eval", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("rlvr eval %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return rep, stderr
}

// TestEvalExpertWorldModel evaluates the built-in world's model under
// one expert prompt at a time: --expert I, and --prompt-suffix '@EI\n'
// with \n written as two characters, score exactly what --experts gives
// expert I, which differs from the plain prompt's score on these problems.
func TestEvalExpertWorldModel(t *testing.T) {
	cliFixture(t)
	// Two threads, so that the scores are the same on every machine.
	common := []string{"--threads", "2", "--levels", "2,4", "--problems", "20", "--max-tokens", "96"}
	all, _ := evalJSON(t, append(common, "--experts", "4")...)
	if len(all.Experts) != 4 {
		t.Fatalf("experts %+v", all.Experts)
	}
	for _, i := range []int{1, 2} {
		want := all.Experts[i].Accuracy.Mean
		if want == all.Greedy.Mean {
			t.Fatalf("E%d scores %v like the plain prompt: these problems cannot tell whether its prompt is used", i, want)
		}
		idx := string(rune('0' + i))
		rep, stderr := evalJSON(t, append(common, "--expert", idx)...)
		if rep.Greedy.Mean != want {
			t.Errorf("--expert %d: greedy %v, want E%d's %v (plain prompt: %v)", i, rep.Greedy.Mean, i, want, all.Greedy.Mean)
		}
		if !strings.Contains(stderr, `with plain text followed by "@E`+idx+`\n"`) {
			t.Errorf("--expert %d: stderr %q", i, stderr)
		}
		rep, _ = evalJSON(t, append(common, "--prompt-suffix", `@E`+idx+`\n`)...)
		if rep.Greedy.Mean != want {
			t.Errorf("--prompt-suffix '@E%d\\n': greedy %v, want E%d's %v", i, rep.Greedy.Mean, i, want)
		}
	}
}

// TestEvalPromptsAtEndpoint evaluates the world's reference expert over
// HTTP and checks the exact prompts it was sent: completions followed by
// the suffix, or chats with the system message.
func TestEvalPromptsAtEndpoint(t *testing.T) {
	cliFixture(t)
	var questions []string
	for _, e := range world.Examples(1000, 4, []int{0, 1}) { // eval's draw for --seed 0
		questions = append(questions, e.Prompt)
	}
	expertSystem := "You are Expert 3, please provide an answer to the above question."
	for _, tc := range []struct {
		name   string
		args   []string
		prompt func(q string) string // what the endpoint sees for question q
		says   string                // on stderr
	}{
		{"plain", nil, func(q string) string { return q }, ""},
		{"expert as suffix", []string{"--expert", "2"}, func(q string) string { return q + "@E2\n" }, `followed by "@E2\n"`},
		{"suffix", []string{"--prompt-suffix", `Answer:\n`}, func(q string) string { return q + "Answer:\n" }, `followed by "Answer:\n"`},
		{"prefix and suffix", []string{"--prompt-prefix", `Question:\n`, "--prompt-suffix", `\nAnswer:`},
			func(q string) string { return "Question:\n" + q + "\nAnswer:" }, `after "Question:\n" and followed by "\nAnswer:"`},
		// The world experts' chat template joins the messages, one per line.
		{"expert in a chat", []string{"--chat", "on", "--expert", "3"}, func(q string) string { return expertSystem + "\n" + q }, "with chats, system prompt"},
		{"system, then the expert, in a chat", []string{"--chat", "on", "--system", "Be brief.", "--expert", "3"},
			func(q string) string { return "Be brief.\n\n" + expertSystem + "\n" + q }, "with chats, system prompt"},
		{"system in a chat", []string{"--chat", "on", "--system", `Be brief.\nShow work.`}, func(q string) string { return "Be brief.\nShow work.\n" + q }, "with chats"},
		{"chat without system", []string{"--chat", "on"}, func(q string) string { return q }, "with chats, no system prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, counts := countedWorld(t, 0)
			rep, stderr := evalJSON(t, append([]string{"--endpoint", base, "--endpoint-model", "E0", "--levels", "0,1", "--problems", "2"}, tc.args...)...)
			if rep.Problems != 4 || rep.Greedy.Mean != 1 {
				t.Errorf("%d problems, greedy %v: the reference expert should answer all 4", rep.Problems, rep.Greedy.Mean)
			}
			var want []string
			for _, q := range questions {
				want = append(want, tc.prompt(q))
			}
			slices.Sort(want)
			if got := slices.Sorted(maps.Keys(counts())); !slices.Equal(got, want) {
				t.Errorf("the endpoint saw\n%q\nwant\n%q", got, want)
			}
			if !strings.Contains(stderr, tc.says) || (tc.says == "") != (stderr == "") {
				t.Errorf("stderr %q, want %q", stderr, tc.says)
			}
		})
	}
}

// TestEvalChatModel evaluates a local model with a chat template: its
// prompts go through the template with the system prompt and the expert's
// persona unless --chat off, and flags that do not fit how it is prompted are
// refused naming the flag.
func TestEvalChatModel(t *testing.T) {
	dir := cliFixture(t)
	const maxSeq, maxTokens = 208, 8
	modeltest.ByteChat(t, "chat", maxSeq)
	l, err := checkpoint.Open("chat", "")
	if err != nil {
		t.Fatal(err)
	}
	if l.Chat == nil {
		t.Fatal("the test model has no chat template")
	}
	examples := world.ChatExamples(1000, 3, []int{0}) // eval's draw for --seed 0
	// A chat asks the question in words; plain text keeps the world's format.
	q, words := examples[0].Prompt, examples[0].Chat()[0].Content
	expertSystem := "You are Expert 2, please provide an answer to the above question."

	// What the model is given, flag by flag.
	for _, tc := range []struct {
		name           string
		chat           string
		expert         int
		system, suffix string
		prefix         string
		want           string
	}{
		{"expert in the template", "auto", 2, "", "", "", "<|im_start|>system\n" + expertSystem + "<|im_end|>\n<|im_start|>user\n" + words + "<|im_end|>\n<|im_start|>assistant\n"},
		{"system, then the expert, in the template", "auto", 2, "Be brief.", "", "", "<|im_start|>system\nBe brief.\n\n" + expertSystem + "<|im_end|>\n<|im_start|>user\n" + words + "<|im_end|>\n<|im_start|>assistant\n"},
		{"system in the template", "on", -1, "Be brief.", "", "", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n" + words + "<|im_end|>\n<|im_start|>assistant\n"},
		{"template alone", "auto", -1, "", "", "", "<|im_start|>user\n" + words + "<|im_end|>\n<|im_start|>assistant\n"},
		{"expert as plain text", "off", 2, "", "", "", q + "@E2\n"},
		{"suffix as plain text", "off", -1, "", "A:", "", q + "A:"},
		{"prefix and suffix as plain text", "off", -1, "", "\nAnswer:", "Question: ", "Question: " + q + "\nAnswer:"},
		{"prefix and an expert as plain text", "off", 2, "", "", "Q: ", "Q: " + q + "@E2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := eval.Prompting{Chat: tc.chat, Expert: tc.expert, System: tc.system, Prefix: tc.prefix, Suffix: tc.suffix}.Local(io.Discard, l, examples)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(examples) || got[0].Prompt != tc.want {
				t.Fatalf("prompt %q, want %q", got[0].Prompt, tc.want)
			}
			if examples[0].Prompt != q {
				t.Fatalf("the caller's example was changed to %q", examples[0].Prompt)
			}
		})
	}

	// Through the command: the expert's system prompt makes every prompt
	// too long for the model's context, while the plain prompt with its
	// suffix, and a short system prompt, fit.
	expertChat, _, _ := eval.Prompting{Chat: "auto", Expert: 2}.Local(io.Discard, l, examples)
	shortChat, _, _ := eval.Prompting{Chat: "auto", Expert: eval.NoExpert, System: "Be brief."}.Local(io.Discard, l, examples)
	for _, e := range examples {
		if n := len(l.Encode(e.Prompt + "@E2\n")); n+maxTokens > maxSeq {
			t.Fatalf("a plain prompt of %d tokens leaves no room for %d tokens in %d", n, maxTokens, maxSeq)
		}
	}
	for i := range examples {
		if n := len(l.Encode(expertChat[i].Prompt)); n+maxTokens <= maxSeq {
			t.Fatalf("the expert's chat prompt %d has %d tokens: it fits %d with room for %d", i, n, maxSeq, maxTokens)
		}
		if n := len(l.Encode(shortChat[i].Prompt)); n+maxTokens > maxSeq {
			t.Fatalf("the short chat prompt %d has %d tokens: no room for %d in %d", i, n, maxTokens, maxSeq)
		}
	}
	run := []string{"eval", "--model", "chat", "--levels", "0", "--problems", "3", "--max-tokens", "8"}
	_, stderr, err := execute(t, context.Background(), append(run, "--expert", "2")...)
	if err == nil || !strings.Contains(err.Error(), "no example's prompt fits the model's context") {
		t.Errorf("--expert 2 through the template: error %v", err)
	}
	if !strings.Contains(stderr, `prompting chat with chats, system prompt "`+expertSystem+`"`) {
		t.Errorf("stderr %q", stderr)
	}
	rep, stderr := evalJSON(t, append(run[1:], "--expert", "2", "--chat", "off")...)
	if rep.Problems != 3 || rep.SkippedLong != 0 || !strings.Contains(stderr, `plain text followed by "@E2\n"`) {
		t.Errorf("--expert 2 --chat off: %+v, stderr %q", rep, stderr)
	}
	rep, stderr = evalJSON(t, append(run[1:], "--system", "Be brief.")...)
	if rep.Problems != 3 || rep.SkippedLong != 0 || !strings.Contains(stderr, `with chats, system prompt "Be brief."`) {
		t.Errorf("--system: %+v, stderr %q", rep, stderr)
	}

	// How the model is prompted is known once it is open.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "chat", "--prompt-suffix", "A:"}, "--prompt-suffix: model chat is prompted through its chat template"},
		{[]string{"--model", "chat", "--prompt-prefix", "Q:"}, "--prompt-prefix: model chat is prompted through its chat template"},
		{[]string{"--model", "model", "--chat", "on"}, "--chat on: model model has no chat template"},
		{[]string{"--model", "model", "--system", "S"}, "--system: model model has no chat template"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			refused(t, dir, append([]string{"eval", "--levels", "0", "--problems", "1"}, tc.args...), []string{tc.want})
		})
	}
}

// TestEvalPromptFlagsRefused runs eval with prompt flags that must be
// refused before any work, each error naming the flag.
func TestEvalPromptFlagsRefused(t *testing.T) {
	dir := cliFixture(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"eval", "--expert", "-1"}, []string{"--expert -1: must not be negative"}},
		{[]string{"eval", "--chat", "yes"}, []string{`--chat "yes": want auto, on or off`}},
		{[]string{"eval", "--expert", "1", "--prompt-suffix", "@E1"}, []string{"[expert prompt-suffix] were all set"}},
		{[]string{"eval", "--expert", "1", "--experts", "4"}, []string{"[expert experts] were all set"}},
		{[]string{"eval", "--world", "2", "--model", "m"}, []string{"[model world] were all set"}},
		{[]string{"probe", "--world", "2", "--model", "m"}, []string{"[model world] were all set"}},
		{[]string{"report", "--table", "--out", "o", "r"}, []string{"[out table] were all set"}},
		{[]string{"eval", "--chat", "off", "--system", "S"}, []string{"--system is the system prompt of a chat, and --chat off sends plain text"}},
		{[]string{"eval", "--chat", "on", "--prompt-suffix", "@E1"}, []string{"--prompt-suffix is for plain-text prompts, not --chat on"}},
		{[]string{"eval", "--chat", "on", "--prompt-prefix", "Q:"}, []string{"--prompt-prefix is for plain-text prompts, not --chat on"}},
		{[]string{"eval", "--stop", "A", "--stop", ""}, []string{"--stop an empty string would end"}},
		{[]string{"eval", "--endpoint", "http://127.0.0.1:1/v1", "--chat", "on", "--experts", "2"}, []string{"--experts 2: an --endpoint's chats carry one system prompt"}},
		{[]string{"eval", "--endpoint", "http://127.0.0.1:1/v1", "--system", "S"}, []string{"--system needs --chat on with --endpoint"}},
		{[]string{"eval", "--expert", "-2", "--chat", "maybe", "--system", "S", "--problems", "0"},
			[]string{"--expert -2", `--chat "maybe"`, "--problems 0"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { refused(t, dir, tc.args, tc.want) })
	}
}

// TestEvalSamplesFile checks that --samples writes every scored completion
// and that their rewards give the report's greedy accuracy and avg@k.
func TestEvalSamplesFile(t *testing.T) {
	cliFixture(t)
	path := filepath.Join(t.TempDir(), "samples.jsonl")
	rep, _ := evalJSON(t, "--threads", "2", "--levels", "1", "--problems", "6", "--max-tokens", "48",
		"--k", "3", "--temperature", "1", "--samples", path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 6*(1+3) {
		t.Fatalf("%d lines, want %d", len(lines), 6*4)
	}
	sum := map[string]float64{}
	for _, l := range lines {
		var s eval.Sample
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		sum[s.Pass] += s.Reward
	}
	if g := sum["greedy"] / 6; math.Abs(g-rep.Greedy.Mean) > 1e-12 {
		t.Errorf("greedy rewards average %v, report %v", g, rep.Greedy.Mean)
	}
	if a := sum["sampled"] / 18; math.Abs(a-rep.AvgAtK) > 1e-12 {
		t.Errorf("sampled rewards average %v, report avg@3 %v", a, rep.AvgAtK)
	}
}

// TestEvalExpertsChatModel evaluates a chat model under several expert
// prompts at once, as MEML-GRPO's inference does (Table 6): each expert's
// greedy accuracy, the error overlap and the majority vote, each expert
// asked with the --system prompt and then its persona in the system
// message.
func TestEvalExpertsChatModel(t *testing.T) {
	cliFixture(t)
	modeltest.ByteChat(t, "chat", 512)
	samples := filepath.Join(t.TempDir(), "samples.jsonl")
	rep, stderr := evalJSON(t, "--model", "chat", "--levels", "0", "--problems", "3", "--max-tokens", "8",
		"--experts", "3", "--system", "Answer after ####.", "--samples", samples)
	if len(rep.Experts) != 3 || rep.Experts[2].Name != "E2" || rep.Overlap == nil || len(rep.Overlap.Rows) != 3 || rep.ExpertMajority == nil {
		t.Fatalf("experts %+v, overlap %+v, majority %v", rep.Experts, rep.Overlap, rep.ExpertMajority)
	}
	if !strings.Contains(stderr, `with chats, system prompt "Answer after ####."`) {
		t.Errorf("stderr %q", stderr)
	}
	b, err := os.ReadFile(samples)
	if err != nil {
		t.Fatal(err)
	}
	words := world.ChatExamples(1000, 3, []int{0})[0].Chat()[0].Content // eval's draw for --seed 0
	prompts := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s eval.Sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		if s.Prompt != "" && strings.Contains(s.Prompt, words) {
			prompts[s.Pass] = s.Prompt
		}
	}
	for pass, system := range map[string]string{"greedy": "Answer after ####.",
		"E1": "Answer after ####.\n\nYou are Expert 1, please provide an answer to the above question."} {
		if want := "<|im_start|>system\n" + system + "<|im_end|>\n<|im_start|>user\n" + words + "<|im_end|>\n<|im_start|>assistant\n"; prompts[pass] != want {
			t.Errorf("%s prompt %q, want %q", pass, prompts[pass], want)
		}
	}
}
