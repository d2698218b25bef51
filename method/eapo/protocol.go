package eapo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"rlvr/task"
	"rlvr/task/world"
	"rlvr/verify"
)

// Query is one question of a consult action, to a named expert of the
// pool or, with Expert "", to whichever expert the pool picks.
type Query struct {
	Expert   string
	Question string
}

// Reply is what the history shows for one query: the expert's answer as
// the format keeps it, or, when OK is false, that none came (declined by
// the acceptance schedule, failed, or unreadable).
type Reply struct {
	Expert string
	Answer string
	OK     bool
}

// Format is a consult action's protocol: how the policy writes it, how a
// query is put to an expert, and how replies are written into the
// history.
type Format interface {
	// Stops are the strings that end a consult action: a policy turn
	// stops on one and the environment answers.
	Stops() []string
	// Parse reads the consult action that ends text (the episode so far).
	// The policy wrote it, so a malformed action is an error to count,
	// not a bug.
	Parse(text string) ([]Query, error)
	// Question is the text put to an expert for a query: a completion
	// prompt, or the user message of a chat.
	Question(q Query) string
	// Answer reads an expert's reply into what the history keeps; ok is
	// false when it holds nothing usable.
	Answer(reply string) (answer string, ok bool)
	// Replies writes the environment's turn: one line per query, in order.
	Replies(rs []Reply) string
	// Action writes a consult action of queries, as the policy would.
	Action(qs []Query) string
}

// World is the built-in world's line format: the policy writes
// "?E1:19*3;E3:12+7?" and reads back "!E1:57" and "!E3:-" (no answer).
// An expert is asked "Q:<question>" and its reply's final answer
// ("####57") is kept.
type World struct{}

// Stops implements Format.
func (World) Stops() []string { return []string{world.ConsultEnd} }

// Parse implements Format.
func (World) Parse(text string) ([]Query, error) {
	qs, err := world.ParseConsult(text)
	if err != nil {
		return nil, err
	}
	out := make([]Query, len(qs))
	for i, q := range qs {
		out[i] = Query{Expert: task.ExpertName(q.Expert), Question: q.Question}
	}
	return out, nil
}

// Question implements Format.
func (World) Question(q Query) string { return "Q:" + q.Question + "\n" }

// Answer implements Format: the reply's final answer, which must be
// written as the world writes it ("####57") and be an integer. A number
// elsewhere in a reply is no answer: an expert that cannot read the
// question may quote it.
func (World) Answer(reply string) (string, bool) {
	a, rule := verify.ExtractWith(reply, verify.ExtractOptions{})
	if rule != verify.RuleHashes {
		return "", false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}

// Action implements Format. A query to an expert the world cannot name
// (not E<i>) goes to E0.
func (World) Action(qs []Query) string {
	out := make([]world.Query, len(qs))
	for i, q := range qs {
		e, _ := strconv.Atoi(strings.TrimPrefix(q.Expert, "E"))
		out[i] = world.Query{Expert: e, Question: q.Question}
	}
	return world.FormatConsult(out)
}

// Replies implements Format. A reply to an expert the world cannot name
// (not E<i>) is written as E0's.
func (World) Replies(rs []Reply) string {
	out := make([]world.Reply, len(rs))
	for i, r := range rs {
		e, _ := strconv.Atoi(strings.TrimPrefix(r.Expert, "E"))
		out[i] = world.Reply{Expert: e, Answer: r.Answer, OK: r.OK}
	}
	return world.FormatReplies(out)
}

// Chat is the consult schema for chat models. The policy writes, inside
// its answer,
//
//	<consult>[{"expert": "E1", "question": "What is 19*3?"}, {"question": "…"}]</consult>
//
// (a JSON array of queries, or a single query object; "expert" may be left
// out to let the pool choose), and the environment answers in a user turn
// of the chat template:
//
//	<expert name="E1">57, because …</expert>
//	<expert name="E2">unavailable</expert>
//
// An expert is asked the question as the user message of a chat, and its
// reply is kept whole, up to MaxReply bytes.
type Chat struct {
	// MaxReply caps the bytes of a reply kept in the history; 0 means
	// DefaultMaxReply.
	MaxReply int
}

// DefaultMaxReply is Chat's cap on a reply kept in the history.
const DefaultMaxReply = 2000

// Unavailable is what a chat history shows for a query without a reply.
const Unavailable = "unavailable"

// ChatTrainingPrompt is the system prompt that grants a chat policy the
// consult action during training (EAPO's training prompt, App. G), with
// {k} for the most queries in one action and {experts} for the pool's
// names. The evaluation prompt is the run's own system prompt, without it.
const ChatTrainingPrompt = `You may consult expert models while you reason. To consult, write
<consult>[{"expert": "NAME", "question": "QUESTION"}]</consult>
with at most {k} queries in the array; NAME is one of {experts}, or leave "expert" out to ask any of them. Their replies come back as <expert name="NAME">…</expert>, or "unavailable" when none came. Consult only when it helps: every consultation costs reward. Verify what experts say, and finish with your own final answer.`

// Stops implements Format.
func (Chat) Stops() []string { return []string{"</consult>"} }

// Parse implements Format.
func (Chat) Parse(text string) ([]Query, error) {
	body, ok := strings.CutSuffix(strings.TrimRight(text, " \n"), "</consult>")
	if !ok {
		return nil, errors.New("consult: the action does not end in </consult>")
	}
	i := strings.LastIndex(body, "<consult>")
	if i < 0 {
		return nil, errors.New("consult: </consult> without <consult>")
	}
	raw := strings.TrimSpace(body[i+len("<consult>"):])
	type query struct {
		Expert   string `json:"expert"`
		Question string `json:"question"`
	}
	var qs []query
	if strings.HasPrefix(raw, "{") {
		var q query
		if err := json.Unmarshal([]byte(raw), &q); err != nil {
			return nil, fmt.Errorf("consult: the action %q is not a JSON query: %w", clip(raw), err)
		}
		qs = []query{q}
	} else if err := json.Unmarshal([]byte(raw), &qs); err != nil {
		return nil, fmt.Errorf("consult: the action %q is not a JSON array of queries: %w", clip(raw), err)
	}
	if len(qs) == 0 {
		return nil, errors.New("consult: the action holds no query")
	}
	out := make([]Query, len(qs))
	for k, q := range qs {
		if strings.TrimSpace(q.Question) == "" {
			return nil, fmt.Errorf("consult: query %d has no question", k)
		}
		out[k] = Query{Expert: q.Expert, Question: q.Question}
	}
	return out, nil
}

// Question implements Format.
func (Chat) Question(q Query) string { return q.Question }

// Answer implements Format: the reply, trimmed and capped.
func (c Chat) Answer(reply string) (string, bool) {
	max := c.MaxReply
	if max <= 0 {
		max = DefaultMaxReply
	}
	reply = strings.TrimSpace(reply)
	if len(reply) > max {
		reply = strings.ToValidUTF8(reply[:max], "") + " …"
	}
	return reply, reply != ""
}

// Replies implements Format.
func (Chat) Replies(rs []Reply) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte('\n')
		}
		a := r.Answer
		if !r.OK {
			a = Unavailable
		}
		fmt.Fprintf(&b, "<expert name=%q>%s</expert>", r.Expert, a)
	}
	return b.String()
}

// Action implements Format.
func (Chat) Action(qs []Query) string {
	type query struct {
		Expert   string `json:"expert,omitempty"`
		Question string `json:"question"`
	}
	out := make([]query, len(qs))
	for i, q := range qs {
		out[i] = query{q.Expert, q.Question}
	}
	b, _ := json.Marshal(out) // strings only: cannot fail
	return "<consult>" + string(b) + "</consult>"
}

// clip shortens text for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return strings.ToValidUTF8(s[:80], "") + "…"
	}
	return s
}
