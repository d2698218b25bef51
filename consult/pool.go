package consult

import (
	"context"
	"fmt"
	"sync"
	"time"

	"rlvr/expert/collect"
	"rlvr/task"
)

// Member is one expert of a pool: an OpenAI-compatible endpoint
// (collect.Endpoint: the world's scripted experts behind rlvr serve, a
// checkpoint served by rlvr serve, vLLM, Ollama, a hosted API) or a local
// model (collect.Batched).
type Member struct {
	Name string // what consult actions name
	// Chat asks through the chat API (the question as the user message);
	// otherwise the question is a completion prompt.
	Chat     bool
	Answerer collect.Answerer
}

// Pool is the experts a policy may consult.
type Pool struct {
	Members []Member
}

// Names lists the members' names.
func (p *Pool) Names() []string {
	out := make([]string, len(p.Members))
	for i, m := range p.Members {
		out[i] = m.Name
	}
	return out
}

// Ask is one query put to one member (an index into Members).
type Ask struct {
	Member   int
	Question string
}

// Answer is a member's answer to an Ask: its text, or the kind of failure
// (one of collect.FailureKinds) and the error. Latency runs from the call
// to Answers until this answer came.
type Answer struct {
	Text    string
	Failure string
	Err     error
	Latency time.Duration
}

// Resolve names the member a query goes to: the named one, or for a query
// to the pool, the members in turn by n (the query's position in its
// step), so that routing is deterministic. It fails on a name not in the
// pool.
func (p *Pool) Resolve(q Query, n int) (int, error) {
	if q.Expert == "" {
		if len(p.Members) == 0 {
			return 0, fmt.Errorf("consult: the pool has no expert")
		}
		return n % len(p.Members), nil
	}
	for i, m := range p.Members {
		if m.Name == q.Expert {
			return i, nil
		}
	}
	return 0, fmt.Errorf("consult: no expert %q in the pool %v", q.Expert, p.Names())
}

// Answers asks every query at once, each member's through its own
// Answerer (whose concurrency limit, retries and deadline apply), and
// returns one Answer per query, in order, once all have come. Failures are
// answers, not errors: an expert that times out or answers garbage costs
// the policy its reply, never the rollout.
func (p *Pool) Answers(ctx context.Context, asks []Ask) []Answer {
	out := make([]Answer, len(asks))
	byMember := map[int][]int{}
	for i, a := range asks {
		if a.Member < 0 || a.Member >= len(p.Members) {
			out[i] = Answer{Failure: collect.FailOther, Err: fmt.Errorf("consult: no member %d in a pool of %d", a.Member, len(p.Members))}
			continue
		}
		byMember[a.Member] = append(byMember[a.Member], i)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for m, idx := range byMember {
		member := p.Members[m]
		reqs := make([]collect.Request, len(idx))
		for k, i := range idx {
			if member.Chat {
				reqs[k] = collect.Request{Messages: []task.Message{{Role: "user", Content: asks[i].Question}}}
			} else {
				reqs[k] = collect.Request{Prompt: asks[i].Question}
			}
		}
		wg.Go(func() {
			member.Answerer.Answer(ctx, reqs, func(k int, text string, err error) {
				a := Answer{Text: text, Err: err, Latency: time.Since(start)}
				switch {
				case err != nil:
					a.Failure = collect.Classify(err)
				case text == "":
					a.Failure = collect.FailEmpty
				}
				out[idx[k]] = a // each k is answered once: no two writes meet
			})
		})
	}
	wg.Wait()
	return out
}
