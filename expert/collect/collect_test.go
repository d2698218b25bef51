package collect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	client "rlvr/client/openai"
	"rlvr/expert"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task"
	"rlvr/task/world"
)

// serveWorld serves the world's scripted experts E0–E3 on loopback, each
// call counted and taking delay.
func serveWorld(t *testing.T, delay time.Duration) (string, map[string]*servetest.Counting) {
	models := expert.WorldModels()
	byName := servetest.Count(models, delay)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	return servetest.Start(t, serve.Config{Logger: quiet}, models...), byName
}

// worldExperts are experts E1..E3 of the world at base, asked through api.
func worldExperts(base, api string, cl *client.Client) []Expert {
	var xs []Expert
	for s := 1; s < len(world.Styles); s++ {
		name := fmt.Sprintf("E%d", s)
		xs = append(xs, Expert{Name: name, Index: s, Prompt: world.ExpertPrompt(s), API: api, Model: name,
			Answerer: &expert.Endpoint{Client: cl, Model: name, Params: sample.Params{MaxTokens: 256}, Concurrency: 4}})
	}
	return xs
}

// problems maps the ids of world.Examples(seed, n, levels) to their
// problems.
func problems(seed uint64, n int, levels []int) map[string]world.Problem {
	m := map[string]world.Problem{}
	for _, p := range world.Mix(seed, n, levels) {
		m[p.Example().ID] = p
	}
	return m
}

// TestCollectWorldExperts collects from the world's scripted experts over
// HTTP, by completion and by chat: the reference (Expert0) is always
// right, and each expert i answers in style i, right exactly when its
// style's solution reaches the answer.
func TestCollectWorldExperts(t *testing.T) {
	base, _ := serveWorld(t, 0)
	const seed, n = 5, 40
	levels := []int{3, 4, 5, 6}
	examples := world.Examples(seed, n, levels)
	byID := problems(seed, n, levels)
	for _, api := range []string{expert.APICompletion, expert.APIChat} {
		t.Run(api, func(t *testing.T) {
			cl := client.New(client.Config{BaseURL: base})
			res, err := Collect(context.Background(), examples, Config{Experts: worldExperts(base, api, cl),
				ReferencePrompt: world.ExpertPrompt(0), Cache: filepath.Join(t.TempDir(), "cache")})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(res.Records), len(byID)*len(world.Styles); got != want {
				t.Fatalf("%d records, want %d", got, want)
			}
			right := make([]int, len(world.Styles))
			wantRight := make([]int, len(world.Styles))
			for _, r := range res.Records {
				p := byID[r.ID]
				text, ans := world.Solve(p, r.Expert)
				if r.Response != text || r.Correct != (ans == p.Answer) || r.Failure != "" {
					t.Fatalf("%s on %s: %+v, want %q (correct %v)", r.Name, r.ID, r, text, ans == p.Answer)
				}
				if r.Reference != (r.Expert == 0) || r.Question != p.Prompt() || r.Answer != fmt.Sprint(p.Answer) {
					t.Fatalf("record %+v", r)
				}
				if r.Correct {
					right[r.Expert]++
				}
				if ans == p.Answer {
					wantRight[r.Expert]++
				}
			}
			if right[0] != len(byID) {
				t.Errorf("the reference is right on %d of %d", right[0], len(byID))
			}
			for s := 1; s < len(world.Styles); s++ {
				e := res.Summary.Experts[s]
				if e.Name != fmt.Sprintf("E%d", s) || e.Correct != wantRight[s] || e.Accuracy.Mean != float64(wantRight[s])/float64(len(byID)) {
					t.Errorf("summary of E%d: %+v, want %d right", s, e, wantRight[s])
				}
				if wantRight[s] == len(byID) {
					t.Errorf("E%d is never wrong here: the test cannot tell its style from the reference", s)
				}
			}
		})
	}
}

// faultFailure is the failure each fault of servetest.Faults ends in,
// for a client that gives up on an attempt before Faults.Hold.
var faultFailure = map[string]string{
	servetest.FaultTimeout:     expert.FailTimeout,
	servetest.FaultConnection:  expert.FailConnection,
	servetest.FaultServer:      expert.FailServer,
	servetest.FaultRateLimited: expert.FailRateLimited,
	servetest.FaultMalformed:   expert.FailMalformed,
	servetest.FaultEmpty:       expert.FailEmpty,
	servetest.FaultEndless:     expert.FailTimeout,
}

// TestCollectSurvivesFaults collects from the world's reference expert
// behind an endpoint that, on a deterministic 35% of questions and on
// every attempt, times out, resets connections, answers 500, 429 with
// Retry-After, malformed JSON, empty text, or a body that never ends, and
// on another 5% fails once with 502: collection finishes within its
// deadlines, every such question is a failure of its kind after the
// attempts its kind allows, and every other answer is correct, a failure
// cured by a retry included.
func TestCollectSurvivesFaults(t *testing.T) {
	faults := &servetest.Faults{Rate: 0.4, Kinds: append(slices.Clone(servetest.FaultKinds), servetest.FaultFlaky)}
	base := servetest.StartFaults(t, faults, serve.Config{}, expert.WorldModels()...)
	examples := world.Examples(3, 80, []int{3, 4})
	const timeout = 300 * time.Millisecond
	cl := client.New(client.Config{BaseURL: base, Timeout: timeout, MaxRetries: 1, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 50 * time.Millisecond, MaxConcurrent: 8})
	ex := Expert{Name: "flaky", Index: 1, Prompt: world.ExpertPrompt(1), API: expert.APICompletion, Model: "E0",
		Answerer: &expert.Endpoint{Client: cl, Model: "E0", Params: sample.Params{MaxTokens: 256}, Concurrency: 8, Deadline: 2 * time.Second}}
	start := time.Now()
	res, err := Collect(context.Background(), examples, Config{Experts: []Expert{ex}, Cache: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	// Each timeout costs two attempts; 8 in flight at once.
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("collection took %v", el)
	}
	want := map[string]int{}  // failures by kind
	drawn := map[string]int{} // questions by fault
	for _, r := range res.Records {
		if r.Reference {
			continue
		}
		fault := faults.KindOf(Concat(r.Question, r.Prompt))
		drawn[fault]++
		switch fault {
		case "", servetest.FaultFlaky:
			if r.Failure != "" || !r.Correct {
				t.Errorf("%s (%q): %s %s, want a correct answer", r.ID, fault, r.Failure, r.Error)
			}
		default:
			kind := faultFailure[fault]
			want[kind]++
			if r.Failure != kind || r.Correct || r.Response != "" && kind != expert.FailEmpty {
				t.Errorf("%s (%s): failure %q (%s), want %q", r.ID, fault, r.Failure, r.Error, kind)
			}
		}
	}
	for _, fault := range faults.Kinds {
		if drawn[fault] == 0 {
			t.Errorf("no question draws %s: the test does not cover it", fault)
		}
	}
	for _, k := range []string{expert.FailTimeout, expert.FailConnection, expert.FailServer, expert.FailRateLimited, expert.FailMalformed, expert.FailEmpty} {
		if res.Summary.Failures[k] != want[k] {
			t.Errorf("%d failures %s counted, want %d", res.Summary.Failures[k], k, want[k])
		}
	}
	// Retried faults took 1 + MaxRetries attempts; a malformed or empty
	// body, one.
	injected := map[string]int{}
	for prompt, n := range faults.Attempts() {
		fault := faults.KindOf(prompt)
		wantN := 1
		switch fault {
		case servetest.FaultConnection, servetest.FaultServer, servetest.FaultRateLimited, servetest.FaultTimeout, servetest.FaultEndless, servetest.FaultFlaky:
			wantN = 2
		}
		if n != wantN {
			t.Errorf("%q (%s): %d attempts, want %d", prompt, fault, n, wantN)
		}
		switch fault {
		case "":
		case servetest.FaultFlaky:
			injected[fault]++
		default:
			injected[fault] += n
		}
	}
	if got := faults.Injected(); !maps.Equal(got, injected) {
		t.Errorf("faults injected %v, want %v", got, injected)
	}
	if s := res.Summary.Experts[1]; s.Failures != res.Summary.Answers/2-s.Correct {
		t.Errorf("summary %+v", s)
	}
	// Every held request was let go when its client gave up.
	closed := time.Now()
	faults.Close()
	if el := time.Since(closed); el > time.Second {
		t.Errorf("requests still held %v after the collection", el)
	}
}

// TestCollectResumes interrupts a collection after some answers, then
// runs it again: the second run asks for exactly the answers the cache
// lacks, once each; a third asks for nothing; a changed prompt makes the
// cached answers stale; cached failures are asked again only with
// RetryFailures.
func TestCollectResumes(t *testing.T) {
	// The run after the interruption asks another server, which the
	// interrupted run's last requests never reach.
	base, _ := serveWorld(t, 2*time.Millisecond)
	examples := world.Examples(9, 30, []int{3, 4})
	cache := filepath.Join(t.TempDir(), "cache")
	experts := worldExperts(base, expert.APICompletion, client.New(client.Config{BaseURL: base}))
	total := len(problems(9, 30, []int{3, 4})) * len(experts)
	ctx, cancel := context.WithCancel(context.Background())
	done := 0
	_, err := Collect(ctx, examples, Config{Experts: experts, Cache: cache, Progress: func(Record) {
		if done++; done == 20 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v", err)
	}
	before := map[string]bool{} // prompts answered in the cache
	recs := readCache(t, cache)
	for _, r := range recs {
		before[Concat(r.Question, r.Prompt)] = true
	}
	if len(recs) < 20 || len(recs) >= total {
		t.Fatalf("%d answers cached of %d", len(recs), total)
	}
	base, served := serveWorld(t, 0)
	experts = worldExperts(base, expert.APICompletion, client.New(client.Config{BaseURL: base}))
	res, err := Collect(context.Background(), examples, Config{Experts: experts, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, g := range served {
		for prompt, n := range g.Counts() {
			asked += n
			if before[prompt] || n != 1 {
				t.Errorf("%q asked %d times; cached before: %v", prompt, n, before[prompt])
			}
		}
	}
	if s := res.Summary; asked != total-len(recs) || s.Asked != asked || s.Cached != len(recs) {
		t.Errorf("asked %d, summary %+v; want %d asked, %d cached", asked, s, total-len(recs), len(recs))
	}
	if got := readCache(t, cache); len(got) != total {
		t.Errorf("the cache holds %d answers, want each of %d once", len(got), total)
	}

	// Nothing left to ask.
	res, err = Collect(context.Background(), examples, Config{Experts: experts, Cache: cache})
	if err != nil || res.Summary.Asked != 0 || res.Summary.Cached != total {
		t.Fatalf("third run: %v %+v", err, res.Summary)
	}

	// Another prompt for E1: its answers are stale.
	changed := append([]Expert(nil), experts...)
	changed[0].Prompt = "@E1 \n"
	res, err = Collect(context.Background(), examples, Config{Experts: changed, Cache: cache})
	if err != nil || res.Summary.Stale != total/3 || res.Summary.Asked != total/3 {
		t.Fatalf("changed prompt: %v %+v", err, res.Summary)
	}
}

// readCache reads a cache file whose every line is complete and unique.
func readCache(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := ReadRecords(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestCachedFailuresRetried: a cached failure is asked for again with
// RetryFailures, and kept otherwise.
func TestCachedFailuresRetried(t *testing.T) {
	examples := world.Examples(1, 4, []int{3})
	var calls int
	var mu sync.Mutex
	ans := answerFunc(func(r expert.Request) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 4 {
			return "", fmt.Errorf("openai: POST x: %w", syscall.ECONNRESET)
		}
		return "####1\n", nil
	})
	cache := filepath.Join(t.TempDir(), "cache")
	cfg := Config{Experts: []Expert{{Name: "x", Index: 1, API: expert.APICompletion, Answerer: ans}}, Cache: cache}
	for _, tc := range []struct {
		retry           bool
		failures, asked int
	}{{false, 4, 4}, {false, 4, 0}, {true, 0, 4}} {
		cfg.RetryFailures = tc.retry
		res, err := Collect(context.Background(), examples, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Summary.Failures[expert.FailConnection] != tc.failures || res.Summary.Asked != tc.asked {
			t.Errorf("retry %v: %+v, want %d failures, %d asked", tc.retry, res.Summary, tc.failures, tc.asked)
		}
	}
}

// answerFunc is an expert.Answerer from a function of one request.
type answerFunc func(expert.Request) (string, error)

func (f answerFunc) Answer(ctx context.Context, reqs []expert.Request, done func(int, string, error)) {
	for i, r := range reqs {
		text, err := f(r)
		done(i, text, err)
	}
}

// TestTruncatedCacheLine: a last cache line cut short by a kill is
// ignored with a warning and cut off, and its answer asked again; a
// malformed line before it is an error naming the line and field.
func TestTruncatedCacheLine(t *testing.T) {
	examples := world.Examples(2, 3, []int{3})
	ans := answerFunc(func(r expert.Request) (string, error) { return "####0\n", nil })
	cfg := Config{Experts: []Expert{{Name: "x", Index: 1, API: expert.APICompletion, Answerer: ans}}, Cache: filepath.Join(t.TempDir(), "cache")}
	if _, err := Collect(context.Background(), examples, cfg); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cfg.Cache)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d cache lines", len(lines))
	}
	cut := strings.Join(lines[:2], "") + lines[2][:len(lines[2])/2]
	if err := os.WriteFile(cfg.Cache, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	cfg.Warn = func(m string) { warnings = append(warnings, m) }
	res, err := Collect(context.Background(), examples, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], cfg.Cache+":3: ignoring the last line") {
		t.Errorf("warnings %q", warnings)
	}
	if res.Summary.Cached != 2 || res.Summary.Asked != 1 {
		t.Errorf("summary %+v", res.Summary)
	}
	if got := readCache(t, cfg.Cache); len(got) != 3 {
		t.Errorf("cache of %d answers after the resume", len(got))
	}

	// A complete but malformed line is no interrupted write: an error.
	bad := strings.Replace(string(data), `"correct":false`, `"correct":"no"`, 1)
	if err := os.WriteFile(cfg.Cache, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Collect(context.Background(), examples, cfg)
	var e *Error
	if !errors.As(err, &e) || e.Line != 1 || e.Field != "correct" || !strings.Contains(err.Error(), cfg.Cache+":1: field \"correct\"") {
		t.Errorf("error %v", err)
	}
}

// TestCacheLocked: two collections cannot share a cache at once.
func TestCacheLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache")
	c, _, err := openCache(path, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, _, err := openCache(path, func(string) {}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second open: %v", err)
	}
}

// TestCollectConfig: a bad config is refused with every problem named,
// and examples without a readable gold answer or with a repeated id are
// left out and counted.
func TestCollectConfig(t *testing.T) {
	ans := answerFunc(func(expert.Request) (string, error) { return "####1", nil })
	_, err := Collect(context.Background(), world.Examples(1, 2, []int{0}), Config{Experts: []Expert{
		{Name: "", Index: 1, API: expert.APICompletion, Answerer: ans},
		{Name: ReferenceName, Index: 0, API: "smoke", Answerer: ans},
		{Name: "a", Index: 2, API: expert.APIChat},
		{Name: "a", Index: 2, API: expert.APIChat, Answerer: ans},
	}})
	for _, want := range []string{"has no name", `"reference" is Expert0's`, "index 0", `API "smoke"`, "has no Answerer", "name is taken", `index 2 is taken by "a"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	examples := world.Examples(1, 3, []int{0})
	examples = append(examples, examples[0], task.Example{ID: "x", Prompt: "?", Answer: "", Kind: task.Math})
	res, err := Collect(context.Background(), examples, Config{Experts: []Expert{{Name: "a", Index: 1, API: expert.APICompletion, Answerer: ans}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Summary; s.Questions != 3 || s.Duplicates != 1 || s.Skipped != 1 || s.Answers != 6 {
		t.Errorf("summary %+v", s)
	}
	if _, err := Collect(context.Background(), examples[4:], Config{Experts: []Expert{{Name: "a", Index: 1, API: expert.APICompletion, Answerer: ans}}}); err == nil {
		t.Error("no error without questions")
	}
}

// TestReferenceWithoutSolution: Expert0 on a question without a reference
// solution is a failure of its own kind.
func TestReferenceWithoutSolution(t *testing.T) {
	r := reference(task.Example{ID: "aime/1", Prompt: "?", Answer: "25", Kind: task.Math}, "P")
	if r.Failure != expert.FailNoSolution || r.Correct || !r.Reference || r.Expert != 0 {
		t.Errorf("%+v", r)
	}
	if err := r.check(); err != nil {
		t.Error(err)
	}
}

// TestReferenceStatesItsAnswer: a GSM8K solution, whose "#### <answer>"
// line the loader strips, gets it back in Expert0's D_ME answer: MEF trains
// the line the verifier reads, and a solution whose last number is not the
// answer (a unit price, a cents figure) is still verified correct.
func TestReferenceStatesItsAnswer(t *testing.T) {
	q := task.Example{ID: "gsm8k/9", Prompt: "How much more per can?", Answer: "25", Kind: task.Math,
		Solution: "The store is .50-.25 = $0.25 more expensive per can"}
	r := reference(q, "P")
	if !strings.HasSuffix(r.Response, "\n#### 25\n") || !r.Correct || r.Failure != "" {
		t.Errorf("response %q, correct %v, failure %q", r.Response, r.Correct, r.Failure)
	}
}

// TestPrompts checks Concat and ChatMessages.
func TestPrompts(t *testing.T) {
	for _, tc := range []struct{ q, p, want string }{
		{"Q:1+2\n", "@E1\n", "Q:1+2\n@E1\n"},
		{"What is 1+2?", "You are Expert 1.", "What is 1+2?\nYou are Expert 1."},
		{"", "P", "P"},
	} {
		if got := Concat(tc.q, tc.p); got != tc.want {
			t.Errorf("Concat(%q, %q) = %q, want %q", tc.q, tc.p, got, tc.want)
		}
	}
	if got, want := expert.CompletionPrompt("What is 1+2?", "Be brief.", "{system}\nQuestion: {question}\nAnswer:"),
		"Be brief.\nQuestion: What is 1+2?\nAnswer:"; got != want {
		t.Errorf("CompletionPrompt = %q, want %q", got, want)
	}
	if got := expert.CompletionPrompt("What is 1+2?", "P", ""); got != "What is 1+2?\nP" {
		t.Errorf("CompletionPrompt without a template = %q", got)
	}
	got := ChatMessages(task.Example{Prompt: "What?"}, "P")
	if len(got) != 2 || got[0] != (task.Message{Role: "system", Content: "P"}) || got[1] != (task.Message{Role: "user", Content: "What?"}) {
		t.Errorf("ChatMessages: %+v", got)
	}
	e := task.Example{Messages: []task.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What?"}}}
	got = ChatMessages(e, "P")
	if len(got) != 2 || got[0].Content != "P\n\nBe brief." || e.Messages[0].Content != "Be brief." {
		t.Errorf("ChatMessages with a system message: %+v (example now %+v)", got, e.Messages)
	}
}

// TestPoolExperts numbers a pool's members from 1 and renders each one's
// prompt, keeping how each is asked and what answers.
func TestPoolExperts(t *testing.T) {
	ans := answerFunc(func(expert.Request) (string, error) { return "", nil })
	pool := &expert.Pool{Members: []expert.Member{
		{Name: "E1", API: expert.APICompletion, Model: "E1", Answerer: ans},
		{Name: "qwen", API: expert.APIChat, Model: "Qwen/Qwen3-8B", Answerer: ans},
	}}
	got := PoolExperts(pool, "You are Expert {i} ({name}).")
	want := []Expert{
		{Name: "E1", Index: 1, Prompt: "You are Expert 1 (E1).", API: expert.APICompletion, Model: "E1"},
		{Name: "qwen", Index: 2, Prompt: "You are Expert 2 (qwen).", API: expert.APIChat, Model: "Qwen/Qwen3-8B"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d experts", len(got))
	}
	for i := range got {
		if got[i].Answerer == nil {
			t.Errorf("expert %d has no Answerer", i+1)
		}
		got[i].Answerer = nil
		if got[i] != want[i] {
			t.Errorf("expert %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

// TestTemplateReachesTheExpert: an expert with a completion template is
// asked with it, the record keeps it, and a cached answer asked without it
// is stale.
func TestTemplateReachesTheExpert(t *testing.T) {
	q := []task.Example{{ID: "gsm8k/0", Prompt: "What is 1+2?", Answer: "3", Solution: "1+2 = 3", Kind: task.Math}}
	var asked []string
	ans := answerFunc(func(r expert.Request) (string, error) { asked = append(asked, r.Prompt); return "#### 3", nil })
	ex := Expert{Name: "base", Index: 1, Prompt: "P1", System: "Be brief.", Template: "{system}\nQuestion: {question}\nAnswer:",
		API: expert.APICompletion, Answerer: ans}
	cache := filepath.Join(t.TempDir(), "dme.jsonl.cache")
	res, err := Collect(context.Background(), q, Config{Experts: []Expert{ex}, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Be brief.\nQuestion: What is 1+2?\nAnswer:"; len(asked) != 1 || asked[0] != want {
		t.Fatalf("asked %q, want %q", asked, want)
	}
	var rec Record
	for _, r := range res.Records {
		if r.Expert == 1 {
			rec = r
		}
	}
	if rec.Template != ex.Template || !rec.Correct {
		t.Errorf("record %+v", rec)
	}
	line, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseRecord(line)
	if err != nil || back.Template != ex.Template {
		t.Errorf("read back %+v, %v", back, err)
	}
	ex.Template = ""
	res, err = Collect(context.Background(), q, Config{Experts: []Expert{ex}, Cache: cache})
	if err != nil || res.Summary.Stale != 1 || len(asked) != 2 {
		t.Errorf("without the template: summary %+v, asked %q, %v", res.Summary, asked, err)
	}
}
