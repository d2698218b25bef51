// Package collect builds MEML-GRPO's multi-expert dataset D_ME (section
// 3.1 of the paper): it asks N experts (package expert's answerers, such
// as the members of a pool) for an answer to every question of a
// dataset, verifies each answer, and keeps one line per (question,
// expert), Expert0 being the dataset's own reference solution. It also
// tabulates a D_ME file as the paper's Table 1 (see Analyze).
//
// Collection is resumable: every answer is appended to a cache file, one
// synced JSON line at a time, keyed by question id and expert name, and a
// collection started again asks only for the answers the cache lacks.
// Experts fail — time out, answer 5xx, return garbage or nothing — and
// each failure is recorded with its kind (see expert.FailureKinds) while
// collection goes on.
//
// A D_ME line is a Record in JSON; ParseRecord and ReadDME read them
// back, naming the file, line and field of anything malformed.
package collect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"rlvr/eval"
	"rlvr/expert"
	"rlvr/expert/prompt"
	"rlvr/internal/stats"
	"rlvr/task"
)

// ReferenceName names Expert0, the dataset's reference solution.
const ReferenceName = "reference"

// Concat is MEML-GRPO's Concat(Q, P): the question, then the expert
// prompt, on a line of its own (expert.Concat, as a pool puts an
// expert's persona).
func Concat(question, prompt string) string { return expert.Concat(question, prompt) }

// ChatMessages is the question as a chat with the expert prompt as its
// system message: ahead of the question's own system message, if it has
// one, in the same message.
func ChatMessages(e task.Example, prompt string) []task.Message {
	msgs := slices.Clone(e.Chat())
	if len(msgs) > 0 && msgs[0].Role == "system" {
		msgs[0].Content = prompt + "\n\n" + msgs[0].Content
		return msgs
	}
	return append([]task.Message{{Role: "system", Content: prompt}}, msgs...)
}

// Expert is one expert to ask.
type Expert struct {
	Name  string // unique; not ReferenceName
	Index int    // i, at least 1; Expert0 is the reference
	// Prompt is the expert prompt P_i (see prompt.Render): what
	// D_ME records, the prompt the policy is trained behind.
	Prompt string
	// System, when set, is the persona the expert is asked under instead
	// of Prompt (its expert.Config.System); the record keeps Prompt as
	// P_i and System beside it.
	System string
	// Template is the completion prompt (expert.CompletionPrompt) with
	// {question} and {system}, where {system} is System or Prompt; "" for
	// Concat.
	Template string
	// API is expert.APICompletion (the Answerer gets Concat(question,
	// Prompt)) or expert.APIChat (it gets ChatMessages(question, Prompt)),
	// System in Prompt's place when it is set.
	API string
	// Model names what answers, for the record: an endpoint's model, a
	// checkpoint's path.
	Model    string
	Answerer expert.Answerer
}

// PoolExperts are the members of pool as a collection's experts, numbered
// 1, 2, … in order, expert i prompted with template's P_i
// (prompt.Render) and asked under its own persona (Member.System)
// when it has one.
func PoolExperts(pool *expert.Pool, template string) []Expert {
	out := make([]Expert, len(pool.Members))
	for k, m := range pool.Members {
		i := k + 1
		out[k] = Expert{Name: m.Name, Index: i, Prompt: prompt.Render(template, i, m.Name), System: m.System, Template: m.Template, API: m.API,
			Model: m.Model, Answerer: m.Answerer}
	}
	return out
}

// Config is a collection.
type Config struct {
	// Experts are asked in parallel, each through its own Answerer.
	Experts []Expert
	// ReferencePrompt is P_0, recorded with Expert0's answers (the
	// reference solutions), which are never asked for.
	ReferencePrompt string
	// Cache is the path of the cache file, created if missing; "" keeps
	// nothing on disk.
	Cache string
	// RetryFailures asks again for the answers that the cache holds as
	// failures; otherwise they stay failures.
	RetryFailures bool
	// Warn receives warnings, such as a truncated cache line being
	// ignored; nil discards them.
	Warn func(msg string)
	// Start, if set, is called once the cache is read, with the number of
	// experts' answers it holds and the number to ask for.
	Start func(cached, pending int)
	// Progress, if set, is called after each answer is cached, one call
	// at a time.
	Progress func(r Record)
}

// Result is a collection's outcome.
type Result struct {
	// Records is D_ME: per question, in the order of the examples, the
	// reference's line and then each expert's, by index. An interrupted
	// collection leaves out the answers it does not have.
	Records []Record
	Summary Summary
}

// Summary counts a collection's answers.
type Summary struct {
	Questions  int `json:"questions"`  // questions collected for
	Skipped    int `json:"skipped"`    // examples left out: gold answer unreadable
	Duplicates int `json:"duplicates"` // examples left out: an id seen before
	Answers    int `json:"answers"`    // D_ME lines, the reference's included
	Cached     int `json:"cached"`     // experts' answers taken from the cache
	Asked      int `json:"asked"`      // experts' answers asked for in this run
	// Stale counts cached answers asked for again because their question,
	// gold answer, prompt, API or index differ from this run's.
	Stale int `json:"stale"`
	// Retried counts cached failures asked for again (RetryFailures).
	Retried  int             `json:"retried"`
	Failures map[string]int  `json:"failures"` // D_ME lines that failed, by kind
	Experts  []ExpertSummary `json:"experts"`
	Elapsed  time.Duration   `json:"-"`
	Seconds  float64         `json:"elapsed_seconds"`
	missing  int             // expert answers absent after an interruption
}

// ExpertSummary is one expert's line of a Summary.
type ExpertSummary struct {
	Name     string `json:"name"`
	Index    int    `json:"index"`
	Answers  int    `json:"answers"`  // D_ME lines
	Failures int    `json:"failures"` // of which failed
	Correct  int    `json:"correct"`
	// Accuracy is Correct over the answers that did not fail, with a 95%
	// Wilson interval; nil when every answer failed.
	Accuracy *stats.Interval `json:"accuracy"`
}

// Collect asks every expert of cfg for an answer to each example not yet
// in the cache, verifies it with eval.Reward, and returns D_ME. Examples
// whose gold answer cannot be read, and examples whose ID repeats an
// earlier one, are left out and counted. An expert's failure is recorded
// as such; Collect fails only on a bad config, an unreadable cache, a
// cache it cannot write, or ctx ending — then with the answers it has,
// which the cache keeps for the next run.
func Collect(ctx context.Context, examples []task.Example, cfg Config) (*Result, error) {
	start := time.Now()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	warn := cfg.Warn
	if warn == nil {
		warn = func(string) {}
	}
	res := &Result{Summary: Summary{Failures: map[string]int{}}}
	sum := &res.Summary
	seen := map[string]bool{}
	var qs []task.Example
	for _, e := range examples {
		switch _, ok := eval.Reward(e, ""); {
		case !ok:
			sum.Skipped++
		case seen[e.ID]:
			sum.Duplicates++
		default:
			seen[e.ID] = true
			qs = append(qs, e)
		}
	}
	sum.Questions = len(qs)
	if len(qs) == 0 {
		return nil, fmt.Errorf("collect: no question to ask (%d examples: %d with an unreadable gold answer, %d duplicates)",
			len(examples), sum.Skipped, sum.Duplicates)
	}
	c, cached, err := openCache(cfg.Cache, warn)
	if err != nil {
		return nil, err
	}
	defer c.close()

	experts := slices.Clone(cfg.Experts)
	slices.SortFunc(experts, func(a, b Expert) int { return a.Index - b.Index })
	got := map[key]Record{}
	type job struct {
		q   int // index in qs
		req expert.Request
	}
	jobs := make([][]job, len(experts))
	for x, ex := range experts {
		for qi, q := range qs {
			want := base(q, ex)
			k := keyOf(want)
			old, ok := cached[k]
			switch {
			case ok && (old.Question != want.Question || old.Answer != want.Answer || old.Prompt != want.Prompt ||
				old.System != want.System || old.Template != want.Template || old.API != want.API || old.Expert != want.Expert):
				sum.Stale++
			case ok && old.Failure != "" && cfg.RetryFailures:
				sum.Retried++
			case ok:
				want.Model, want.Response, want.Failure, want.Error = old.Model, old.Response, old.Failure, old.Error
				if want.Failure == "" {
					want.Correct = correct(q, want.Response)
				}
				got[k] = want
				sum.Cached++
				continue
			}
			under := ex.Prompt
			if ex.System != "" {
				under = ex.System
			}
			r := expert.Request{Prompt: expert.CompletionPrompt(q.Prompt, under, ex.Template), Example: &qs[qi]}
			if ex.API == expert.APIChat {
				r = expert.Request{Messages: ChatMessages(q, under), Example: &qs[qi]}
			}
			jobs[x] = append(jobs[x], job{q: qi, req: r})
		}
	}

	if cfg.Start != nil {
		pending := 0
		for _, j := range jobs {
			pending += len(j)
		}
		cfg.Start(sum.Cached, pending)
	}
	run, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		fatal error
		wg    sync.WaitGroup
	)
	for x, ex := range experts {
		if len(jobs[x]) == 0 {
			continue
		}
		reqs := make([]expert.Request, len(jobs[x]))
		for i, j := range jobs[x] {
			reqs[i] = j.req
		}
		wg.Go(func() {
			ex.Answerer.Answer(run, reqs, func(i int, text string, err error) {
				if err != nil && run.Err() != nil {
					return // interrupted, not failed: asked again next run
				}
				q := qs[jobs[x][i].q]
				r := base(q, ex)
				r.Model = ex.Model
				switch {
				case err != nil:
					r.Failure, r.Error = expert.Classify(err), err.Error()
				case strings.TrimSpace(text) == "":
					r.Response, r.Failure, r.Error = text, expert.FailEmpty, "the answer has no text"
				default:
					r.Response, r.Correct = text, correct(q, text)
				}
				mu.Lock()
				defer mu.Unlock()
				if fatal != nil {
					return
				}
				if err := c.append(r); err != nil {
					fatal = err
					cancel()
					return
				}
				got[keyOf(r)] = r
				sum.Asked++
				if cfg.Progress != nil {
					cfg.Progress(r)
				}
			})
		})
	}
	wg.Wait()

	byExpert := make([]ExpertSummary, len(experts))
	for x, ex := range experts {
		byExpert[x] = ExpertSummary{Name: ex.Name, Index: ex.Index}
	}
	ref := ExpertSummary{Name: ReferenceName}
	add := func(s *ExpertSummary, r Record) {
		res.Records = append(res.Records, r)
		s.Answers++
		if r.Failure != "" {
			s.Failures++
			sum.Failures[r.Failure]++
		} else if r.Correct {
			s.Correct++
		}
	}
	for _, q := range qs {
		add(&ref, reference(q, cfg.ReferencePrompt))
		for x, ex := range experts {
			if r, ok := got[key{q.ID, ex.Name}]; ok {
				add(&byExpert[x], r)
			} else {
				sum.missing++
			}
		}
	}
	sum.Experts = append([]ExpertSummary{ref}, byExpert...)
	for i := range sum.Experts {
		s := &sum.Experts[i]
		if n := s.Answers - s.Failures; n > 0 {
			w := stats.WilsonInterval(s.Correct, n)
			s.Accuracy = &w
		}
	}
	sum.Answers = len(res.Records)
	sum.Elapsed = time.Since(start)
	sum.Seconds = sum.Elapsed.Seconds()
	switch {
	case fatal != nil:
		return res, fatal
	case ctx.Err() != nil:
		where := "kept nowhere (no cache)"
		if cfg.Cache != "" {
			where = "kept in " + cfg.Cache
		}
		return res, fmt.Errorf("collect: interrupted with %d answers of %d missing, the others %s: %w",
			sum.Missing(), len(qs)*len(experts), where, context.Cause(ctx))
	}
	return res, nil
}

// Missing counts the experts' answers an interrupted collection lacks.
func (s *Summary) Missing() int { return s.missing }

// base is an expert's record for a question, without its answer.
func base(q task.Example, ex Expert) Record {
	return Record{ID: q.ID, Source: q.Source, Question: q.Prompt, Answer: q.Answer, Expert: ex.Index, Name: ex.Name,
		API: ex.API, Prompt: ex.Prompt, System: ex.System, Template: ex.Template}
}

// reference is Expert0's record for a question: its reference solution
// written as an answer (task.ReferenceResponse), so that MEF teaches the
// final-answer line the verifier reads, as the reference expert writes it.
func reference(q task.Example, prompt string) Record {
	r := Record{ID: q.ID, Source: q.Source, Question: q.Prompt, Answer: q.Answer, Name: ReferenceName, Reference: true,
		Prompt: prompt, Response: task.ReferenceResponse(q)}
	if strings.TrimSpace(q.Solution) == "" {
		r.Failure, r.Error = expert.FailNoSolution, "the dataset gives no reference solution"
	} else {
		r.Correct = correct(q, r.Response)
	}
	return r
}

func correct(q task.Example, text string) bool {
	r, _ := eval.Reward(q, text)
	return r > 0
}

// check reports every problem with the config at once.
func (cfg *Config) check() error {
	var problems []string
	names := map[string]bool{}
	indices := map[int]string{}
	for n, ex := range cfg.Experts {
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("expert %d (%q): ", n+1, ex.Name)+fmt.Sprintf(format, args...))
		}
		switch {
		case ex.Name == "":
			bad("has no name")
		case ex.Name == ReferenceName:
			bad("the name %q is Expert0's, the reference solution", ReferenceName)
		case names[ex.Name]:
			bad("the name is taken by another expert")
		}
		names[ex.Name] = true
		switch other, taken := indices[ex.Index]; {
		case ex.Index < 1 || ex.Index > maxExpert:
			bad("index %d: want [1, %d] (0 is the reference solution)", ex.Index, maxExpert)
		case taken:
			bad("index %d is taken by %q", ex.Index, other)
		}
		indices[ex.Index] = ex.Name
		if ex.API != expert.APICompletion && ex.API != expert.APIChat {
			bad("API %q: want %q or %q", ex.API, expert.APICompletion, expert.APIChat)
		}
		if ex.Answerer == nil {
			bad("has no Answerer")
		}
	}
	if len(cfg.Experts) == 0 {
		problems = append(problems, "no experts")
	}
	if len(problems) > 0 {
		return errors.New("collect: " + strings.Join(problems, "; "))
	}
	return nil
}

// Table renders the summary for a person.
func (s *Summary) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "questions: %d", s.Questions)
	if s.Skipped > 0 {
		fmt.Fprintf(&b, " (%d more skipped: unreadable gold answer)", s.Skipped)
	}
	if s.Duplicates > 0 {
		fmt.Fprintf(&b, " (%d duplicates left out)", s.Duplicates)
	}
	fmt.Fprintf(&b, "\nanswers: %d D_ME lines; experts' answers: %d from the cache, %d asked", s.Answers, s.Cached, s.Asked)
	if s.Stale > 0 || s.Retried > 0 {
		fmt.Fprintf(&b, " (%d again because the question or prompt changed, %d failures again)", s.Stale, s.Retried)
	}
	if m := s.Missing(); m > 0 {
		fmt.Fprintf(&b, "; %d missing", m)
	}
	var fails []string
	total := 0
	for _, k := range expert.FailureKinds {
		if n := s.Failures[k]; n > 0 {
			fails = append(fails, fmt.Sprintf("%s %d", k, n))
			total += n
		}
	}
	fmt.Fprintf(&b, "\nfailures: %d", total)
	if total > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(fails, ", "))
	}
	fmt.Fprintf(&b, "\n\n%-3s %-16s %8s %8s %9s  %s\n", "i", "expert", "answers", "failed", "accuracy", "95% interval")
	for _, e := range s.Experts {
		acc, ci := "-", ""
		if e.Accuracy != nil {
			acc = fmt.Sprintf("%.1f%%", 100*e.Accuracy.Mean)
			ci = fmt.Sprintf("[%.1f%%, %.1f%%]", 100*e.Accuracy.Low, 100*e.Accuracy.High)
		}
		fmt.Fprintf(&b, "%-3d %-16s %8d %8d %9s  %s\n", e.Index, e.Name, e.Answers, e.Failures, acc, ci)
	}
	fmt.Fprintf(&b, "\nelapsed: %v\n", s.Elapsed.Round(time.Millisecond))
	return b.String()
}
