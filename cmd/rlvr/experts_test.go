package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task"
	"rlvr/task/world"
)

// countedWorld serves the world's scripted experts on loopback, counting
// requests by prompt text, each model's calls taking delay. It returns
// the base URL and the counts.
func countedWorld(t *testing.T, delay time.Duration) (string, func() map[string]int) {
	models := expert.WorldModels()
	counted := servetest.Count(models, delay)
	base := servetest.Start(t, serve.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, models...)
	return base, func() map[string]int {
		out := map[string]int{}
		for _, c := range counted {
			for k, v := range c.Counts() {
				out[k] += v
			}
		}
		return out
	}
}

// completeRecords parses the complete lines of a cache file.
func completeRecords(t *testing.T, path string) []collect.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []collect.Record
	for i, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.HasSuffix(l, "\n") {
			break // cut short by the kill
		}
		r, err := collect.ParseRecord([]byte(strings.TrimSuffix(l, "\n")))
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestExpertsCollectResumesAfterSIGKILL kills `rlvr experts collect` with
// SIGKILL midway, cuts its cache's last line short as a kill during a
// write would, and runs the command again: it warns about the cut line,
// asks for exactly the answers the cache lacks, once each, and ends with
// every answer exactly once in the cache and in D_ME.
func TestExpertsCollectResumesAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "dme.jsonl")
	cache := out + ".cache"
	args := func(base string) []string {
		a := []string{"experts", "collect", "--levels", "3,4", "--problems", "30", "--seed", "4", "--concurrency", "2", "--out", out}
		for s := 1; s < len(world.Styles); s++ {
			a = append(a, "--expert", task.ExpertName(s)+"="+base+"#"+task.ExpertName(s))
		}
		return a
	}
	questions := map[string]bool{}
	for _, e := range world.Examples(4, 60, []int{3, 4}) {
		questions[e.ID] = true
	}
	total := len(questions) * (len(world.Styles) - 1)

	base, _ := countedWorld(t, 15*time.Millisecond)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "RLVR_MAIN_ARGS="+strings.Join(args(base), "\x1f"))
	var childOut bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); lines(cache) < 30; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatalf("the cache never reached 30 lines:\n%s", childOut.String())
		}
	}
	child.Process.Kill()
	child.Wait()
	before := map[string]bool{}
	for _, r := range completeRecords(t, cache) {
		before[collect.Concat(r.Question, r.Prompt)] = true
	}
	if len(before) >= total {
		t.Fatalf("the collection finished (%d answers) before the kill", len(before))
	}
	t.Logf("killed with %d answers of %d cached", len(before), total)
	f, err := os.OpenFile(cache, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"world/three-ops/1+2","sour`)
	f.Close()

	// Another server, which no request of the killed run can reach late.
	base, counts := countedWorld(t, 0)
	stdout, stderr, err := execute(t, context.Background(), args(base)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "ignoring the last line, cut short") {
		t.Errorf("no warning about the cut line:\n%s", stderr)
	}
	asked := 0
	for prompt, n := range counts() {
		asked += n
		if before[prompt] || n != 1 {
			t.Errorf("%q asked %d times after the kill; in the cache before: %v", prompt, n, before[prompt])
		}
	}
	if asked != total-len(before) {
		t.Errorf("%d answers asked after the kill, want %d", asked, total-len(before))
	}
	if !strings.Contains(stdout, fmt.Sprintf("%d from the cache, %d asked", len(before), asked)) {
		t.Errorf("summary:\n%s", stdout)
	}
	seen := map[string]int{}
	for _, r := range completeRecords(t, cache) {
		seen[r.ID+"|"+r.Name]++
	}
	if len(seen) != total {
		t.Errorf("the cache holds %d answers, want %d", len(seen), total)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("the cache holds %s %d times", k, n)
		}
	}
	recs, err := collect.ReadDME(out) // refuses a repeated answer
	if err != nil || len(recs) != len(questions)*len(world.Styles) {
		t.Errorf("D_ME: %d lines, %v; want %d", len(recs), err, len(questions)*len(world.Styles))
	}
}

// TestExpertsCollectAndAnalyze collects from the world's experts served in
// the process (no --expert), collects again from the cache alone, and
// analyzes the result as a table and as JSON.
func TestExpertsCollectAndAnalyze(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "dme.jsonl")
	stdout, stderr, err := execute(t, context.Background(), "experts", "collect", "--problems", "5", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "no --expert: asking the world's scripted experts E1-E3") ||
		!strings.Contains(stdout, "0 from the cache, 60 asked") || !strings.Contains(stdout, "wrote 80 lines of D_ME to "+out) {
		t.Errorf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	stdout, _, err = execute(t, context.Background(), "experts", "collect", "--problems", "5", "--out", out, "--json")
	var sum collect.Summary
	if err != nil || json.Unmarshal([]byte(stdout), &sum) != nil || sum.Cached != 60 || sum.Asked != 0 || len(sum.Experts) != 4 {
		t.Errorf("second run: %v %+v\n%s", err, sum, stdout)
	}
	stdout, _, err = execute(t, context.Background(), "experts", "analyze", out)
	if err != nil || !strings.Contains(stdout, "D_ME: 20 questions, 3 experts") || !strings.Contains(stdout, "errors shared by each pair") {
		t.Errorf("analyze: %v\n%s", err, stdout)
	}
	stdout, _, err = execute(t, context.Background(), "experts", "analyze", out, "--json", "--reference")
	var tab collect.Table1
	if err != nil || json.Unmarshal([]byte(stdout), &tab) != nil || len(tab.Experts) != 4 || tab.Problems != 20 || tab.AllWrong != 0 {
		t.Errorf("analyze --json: %v %+v\n%s", err, tab, stdout)
	}
}

// TestExpertsCollectLocalModel asks a local model, with --api chat
// though it has no chat template: it continues the question instead.
func TestExpertsCollectLocalModel(t *testing.T) {
	cliFixture(t)
	stdout, stderr, err := execute(t, context.Background(), "experts", "collect", "--levels", "0", "--problems", "3",
		"--expert", "tiny=model", "--max-tokens", "8", "--api", "chat", "--out", "local.jsonl")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "expert tiny: model has no chat template") {
		t.Errorf("stderr:\n%s", stderr)
	}
	recs, err := collect.ReadDME("local.jsonl")
	if err != nil || len(recs) != 6 {
		t.Fatalf("%v: %d lines\n%s", err, len(recs), stdout)
	}
	for _, r := range recs {
		if r.Reference {
			continue
		}
		if r.Name != "tiny" || r.Model != "model" || r.API != expert.APICompletion || r.Prompt != "@E1\n" ||
			(r.Failure != "" && r.Failure != expert.FailEmpty) {
			t.Errorf("%+v", r)
		}
	}
}

// TestExpertsHostileFlags runs experts collect and analyze with flags that
// must be refused before any work: each names every bad flag and writes
// nothing.
func TestExpertsHostileFlags(t *testing.T) {
	dir := cliFixture(t)
	c := []string{"experts", "collect"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{append(c, "--expert", "nonsense"), []string{`--expert "nonsense": want NAME=URL[#MODEL] or NAME=PATH`}},
		{append(c, "--expert", "=http://x/v1"), []string{`--expert "=http://x/v1": the name must be non-empty`}},
		{append(c, "--expert", "a b=http://x/v1"), []string{`the name must be non-empty, without spaces`}},
		{append(c, "--expert", "reference=http://x/v1"), []string{`"reference" names Expert0`}},
		{append(c, "--expert", "a=http://x/v1", "--expert", "a=http://y/v1"), []string{"the name a is given twice"}},
		{append(c, "--expert", "a=http://"), []string{`--expert "http://": want an http:// or https:// URL`}},
		{append(c, "--expert", "a=nosuch"), []string{"--expert nosuch: no such file"}},
		{append(c, "--expert", "a=adir"), []string{"--expert adir has no config.json"}},
		{append(c, "--api", "smoke"), []string{`--api "smoke"`}},
		{append(c, "--prompt", "hello"), []string{`--prompt "hello" has neither {i} nor {name}`}},
		{append(c, "--data", "nosuch"), []string{`--data "nosuch": want world or one of`}},
		{append(c, "--data", "gsm8k"), []string{"--data-file is required with --data gsm8k", "--expert is required with --data gsm8k"}},
		{append(c, "--data", "gsm8k", "--data-file", "adir", "--levels", "1"), []string{"--data-file adir is a directory", "--levels is for --data world"}},
		{append(c, "--data-file", "afile.txt"), []string{"--data-file is for a dataset"}},
		{append(c, "--levels", "99"), []string{"--levels 99"}},
		{append(c, "--problems", "0"), []string{"--problems 0"}},
		{append(c, "--problems", "500000"), []string{"--problems 500000 per level × 4 levels"}},
		{append(c, "--out", "adir"), []string{"--out adir is a directory"}},
		{append(c, "--out", "nosuch/dme.jsonl"), []string{"--out nosuch/dme.jsonl: directory nosuch"}},
		{append(c, "--cache", "dme.jsonl"), []string{"--cache dme.jsonl is --out too"}},
		{append(c, "--concurrency", "0", "--retries", "-1", "--timeout", "0s", "--deadline", "-1s", "--max-tokens", "0",
			"--temperature", "NaN", "--batch", "0", "--stop", ""),
			[]string{"--concurrency 0", "--retries -1", "--timeout 0s", "--deadline -1s", "--max-tokens 0", "--temperature NaN", "--batch 0", "--stop number 1 is empty"}},
		{[]string{"experts", "analyze"}, []string{"accepts 1 arg"}},
		{[]string{"experts", "analyze", "nosuch.jsonl"}, []string{"FILE nosuch.jsonl: no such file"}},
		{[]string{"experts", "analyze", "adir"}, []string{"FILE adir is a directory"}},
		{[]string{"experts", "analyze", "afile.txt"}, []string{"collect: afile.txt:1: not a JSON object"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { refused(t, dir, tc.args, tc.want) })
	}
}

// TestExpertsAnalyzeNamesLine: a malformed D_ME line fails analyze with
// the file, line and field.
func TestExpertsAnalyzeNamesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dme.jsonl")
	good := `{"id":"q","source":"","question":"Q","answer":"1","expert":1,"expert_name":"a","api":"chat","prompt":"P","response":"1","correct":true}`
	data := good + "\n" + strings.Replace(good, `"expert":1`, `"expert":"one"`, 1) + "\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := execute(t, context.Background(), "experts", "analyze", path)
	if want := path + `:2: field "expert": want an integer, got "one"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestExpertsCollectSIGINT interrupts a collection: it stops, fails, and
// says that running it again continues; the answers so far are cached.
func TestExpertsCollectSIGINT(t *testing.T) {
	base, _ := countedWorld(t, 20*time.Millisecond)
	out := filepath.Join(t.TempDir(), "dme.jsonl")
	args := []string{"experts", "collect", "--levels", "3", "--problems", "200", "--concurrency", "1", "--out", out,
		"--expert", "E1=" + base + "#E1"}
	text, err := runUntil(t, args, func() bool { return lines(out+".cache") >= 5 })
	if err == nil || !strings.Contains(text, "interrupted with") || !strings.Contains(text, "run the same command again to continue") {
		t.Fatalf("exit %v:\n%s", err, text)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an interrupted collection wrote D_ME")
	}
	if n := len(completeRecords(t, out+".cache")); n < 5 || n >= 200 {
		t.Errorf("%d answers cached", n)
	}
}

// TestExpertsCollectSystem: --system is written before each expert's P_i
// in the chat's system message, as training writes chat.system before a
// persona, and recorded as the prompt the expert was asked under.
func TestExpertsCollectSystem(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "gsm8k.jsonl")
	if err := os.WriteFile(data, []byte(`{"question":"What is 2+3?","answer":"2+3=5\n#### 5"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var systems []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		if req.Messages[0].Role == "system" {
			systems = append(systems, req.Messages[0].Content)
		}
		mu.Unlock()
		fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"2+3=5\n#### 5"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	const system = "Solve step by step. End with a line '#### <answer>'."
	out := filepath.Join(dir, "dme.jsonl")
	_, stderr, err := execute(t, context.Background(), "experts", "collect", "--data", "gsm8k", "--data-file", data,
		"--expert", "a="+srv.URL+"/v1", "--system", system, "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	want := system + "\n\nYou are Expert 1, please provide an answer to the above question."
	if len(systems) != 1 || systems[0] != want {
		t.Errorf("system messages %q, want [%q]", systems, want)
	}
	recs, err := collect.ReadDME(out)
	if err != nil || len(recs) != 2 || recs[1].Prompt != want || !recs[1].Correct {
		t.Errorf("D_ME %+v, %v", recs, err)
	}

	// A completion expert continues the question, then the instruction,
	// then P_i: the order training writes a persona in completion mode.
	var prompts []string
	completions := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Prompt string }
		if r.URL.Path != "/v1/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		prompts = append(prompts, req.Prompt)
		mu.Unlock()
		fmt.Fprint(w, `{"choices":[{"index":0,"text":" 2+3=5\n#### 5","finish_reason":"stop"}]}`)
	}))
	defer completions.Close()
	out = filepath.Join(dir, "dme-completion.jsonl")
	_, stderr, err = execute(t, context.Background(), "experts", "collect", "--data", "gsm8k", "--data-file", data,
		"--expert", "a="+completions.URL+"/v1", "--api", "completion", "--system", system, "--out", out)
	if err != nil {
		t.Fatalf("--api completion: %v\n%s", err, stderr)
	}
	if len(prompts) != 1 || !strings.HasPrefix(prompts[0], "What is 2+3?") || !strings.HasSuffix(prompts[0], "\n"+want) {
		t.Errorf("completion prompts %q, want the question, then %q", prompts, want)
	}
	if recs, err := collect.ReadDME(out); err != nil || len(recs) != 2 || recs[1].Prompt != want || !recs[1].Correct {
		t.Errorf("completion D_ME %+v, %v", recs, err)
	}
	_, _, err = execute(t, context.Background(), "experts", "collect", "--data", "gsm8k", "--data-file", data,
		"--expert", "a="+srv.URL+"/v1", "--system", " ", "--out", filepath.Join(dir, "x.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "--system is empty") {
		t.Errorf("an empty --system: %v", err)
	}
}
