package expert

import (
	"context"
	"fmt"
	"sync"
	"time"

	"rlvr/task"
)

// Member is one expert of a pool.
type Member struct {
	Name string // what consult actions and D_ME name
	// API is how the member is asked: APIChat puts the question as a
	// chat's user message, APICompletion as a completion prompt.
	API string
	// System is the persona the member is asked under ("" for none): the
	// system message of a chat, or a line after the question of a
	// completion (Concat).
	System string
	// Template is the completion prompt with {question} and {system}
	// (Config.Template); "" for Concat.
	Template string
	// Model names what answers, for the record: the model asked at a
	// URL, a checkpoint's path, or Name for the world's and fixed experts.
	Model    string
	Answerer Answerer
}

// Pool is a set of experts to ask, in order (see Open).
type Pool struct {
	Members []Member
	stop    func() // shuts the loopback server down; nil for none
}

// Close stops what the pool runs in this process (the server of its
// world, fixed and checkpoint experts). The pool must not be asked after.
func (p *Pool) Close() {
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

// Names lists the members' names.
func (p *Pool) Names() []string {
	out := make([]string, len(p.Members))
	for i, m := range p.Members {
		out[i] = m.Name
	}
	return out
}

// Ask is one question put to one member (an index into Members).
type Ask struct {
	Member   int
	Question string
	Seed     uint64 // Request.Seed
	// Example is the example being worked on (Request.Example): what a
	// reference expert answers from; nil for none.
	Example *task.Example
}

// Answer is a member's answer to an Ask: its text, or the kind of failure
// (one of FailureKinds) and the error. Latency runs from the call to
// Answers until this answer came.
type Answer struct {
	Text    string
	Failure string
	Err     error
	Latency time.Duration
}

// Resolve names the member a question goes to: the one named expert, or,
// with expert "", the members in turn by n (the question's position among
// those asked together), so that routing is deterministic. It fails on a
// name not in the pool.
func (p *Pool) Resolve(expert string, n int) (int, error) {
	if expert == "" {
		if len(p.Members) == 0 {
			return 0, fmt.Errorf("expert: the pool has no expert")
		}
		return n % len(p.Members), nil
	}
	for i, m := range p.Members {
		if m.Name == expert {
			return i, nil
		}
	}
	return 0, fmt.Errorf("expert: no expert %q in the pool %v", expert, p.Names())
}

// Answers asks every question at once, each member's through its own
// Answerer (whose concurrency limit, retries and deadline apply), and
// returns one Answer per Ask, in order, once all have come. Failures are
// answers, not errors: an expert that times out or answers garbage costs
// its answer, never the caller's work.
func (p *Pool) Answers(ctx context.Context, asks []Ask) []Answer {
	out := make([]Answer, len(asks))
	byMember := map[int][]int{}
	for i, a := range asks {
		if a.Member < 0 || a.Member >= len(p.Members) {
			out[i] = Answer{Failure: FailOther, Err: fmt.Errorf("expert: no member %d in a pool of %d", a.Member, len(p.Members))}
			continue
		}
		byMember[a.Member] = append(byMember[a.Member], i)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for m, idx := range byMember {
		member := p.Members[m]
		reqs := make([]Request, len(idx))
		for k, i := range idx {
			reqs[k] = member.request(asks[i])
		}
		wg.Go(func() {
			member.Answerer.Answer(ctx, reqs, func(k int, text string, err error) {
				a := Answer{Text: text, Err: err, Latency: time.Since(start)}
				switch {
				case err != nil:
					a.Failure = Classify(err)
				case text == "":
					a.Failure = FailEmpty
				}
				out[idx[k]] = a // each k is answered once: no two writes meet
			})
		})
	}
	wg.Wait()
	return out
}

// request is an ask as the member's API puts it, under the member's
// persona.
func (m *Member) request(a Ask) Request {
	if m.API == APIChat {
		var msgs []task.Message
		if m.System != "" {
			msgs = append(msgs, task.Message{Role: "system", Content: m.System})
		}
		return Request{Messages: append(msgs, task.Message{Role: "user", Content: a.Question}), Seed: a.Seed, Example: a.Example}
	}
	return Request{Prompt: CompletionPrompt(a.Question, m.System, m.Template), Seed: a.Seed, Example: a.Example}
}
