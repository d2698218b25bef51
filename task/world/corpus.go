package world

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// Span is a stretch of a training document; Train says whether the model
// is trained to produce it (its own turns) or only reads it (questions,
// expert replies, trajectories to reflect on).
type Span struct {
	Text  string
	Train bool
}

// Document is one training example of the corpus.
type Document struct {
	Kind  string // "solve", "expert", "consult", "reflect" or "memory"
	Spans []Span
}

// Text is the whole document.
func (d Document) Text() string {
	var b strings.Builder
	for _, s := range d.Spans {
		b.WriteString(s.Text)
	}
	return b.String()
}

// CorpusConfig sets what a corpus mixes. Weights are relative; a zero
// weight leaves that kind out.
type CorpusConfig struct {
	Levels []int // problem levels drawn from
	// Solve: a question and its reference solution.
	Solve float64
	// Expert: a question, an expert prompt @E<i> and expert i's solution
	// in its style, slips included (MEML-GRPO's multi-expert data).
	Expert float64
	// Consult: a question, a consultation of one or two experts about a
	// prefix of the chain, their replies (read, not trained on; some are
	// missing) and the rest of the solution continuing from the first
	// reply (EAPO's format).
	Consult float64
	// Reflect: a question with a correct and a wrong trajectory, and the
	// reflection on them (MEL's format).
	Reflect float64
	// Memory: a meta-experience line, then a question and its reference
	// solution (MEL's replay with working memory).
	Memory float64
	// Unavailable is the probability that an expert reply is missing.
	Unavailable float64
}

// DefaultCorpus mixes every format, weighted toward plain solutions.
func DefaultCorpus(levels []int) CorpusConfig {
	return CorpusConfig{Levels: levels, Solve: 4, Expert: 2, Consult: 1, Reflect: 1, Memory: 0.5, Unavailable: 0.2}
}

// Corpus is an endless, reproducible stream of documents.
type Corpus struct {
	cfg CorpusConfig
	r   *rand.Rand
}

// NewCorpus starts a corpus stream at seed.
func NewCorpus(cfg CorpusConfig, seed uint64) *Corpus {
	return &Corpus{cfg: cfg, r: rand.New(rand.NewPCG(seed, 0x636f72707573))}
}

// Next draws the next document.
func (c *Corpus) Next() Document {
	cfg := c.cfg
	weights := []float64{cfg.Solve, cfg.Expert, cfg.Consult, cfg.Reflect, cfg.Memory}
	var total float64
	for _, w := range weights {
		total += w
	}
	u := c.r.Float64() * total
	kind := 0
	for kind < len(weights)-1 && u >= weights[kind] {
		u -= weights[kind]
		kind++
	}
	switch kind {
	case 1:
		return c.expert()
	case 2:
		return c.consult()
	case 3:
		if d, ok := c.reflect(); ok {
			return d
		}
	case 4:
		if d, ok := c.memory(); ok {
			return d
		}
	}
	p := c.problem()
	return Document{Kind: "solve", Spans: []Span{{p.Prompt(), false}, {p.Solution(), true}}}
}

func (c *Corpus) problem() Problem {
	return Generate(c.r, c.cfg.Levels[c.r.IntN(len(c.cfg.Levels))])
}

func (c *Corpus) expert() Document {
	p := c.problem()
	s := c.r.IntN(len(Styles))
	text, _ := Solve(p, s)
	return Document{Kind: "expert", Spans: []Span{{p.Prompt() + ExpertPrompt(s), false}, {text, true}}}
}

func (c *Corpus) consult() Document {
	p := c.problem()
	k := 1 + c.r.IntN(len(p.Ops)) // ask about the first k operations
	sub := p.Prefix(k)
	qs := []Query{{Expert: 1 + c.r.IntN(len(Styles)-1), Question: sub.Question}}
	if c.r.IntN(3) == 0 { // sometimes a second opinion
		qs = append(qs, Query{Expert: 1 + c.r.IntN(len(Styles)-1), Question: sub.Question})
	}
	var replies []Reply
	from, have := int64(0), false
	for _, q := range qs {
		if c.r.Float64() < c.cfg.Unavailable {
			replies = append(replies, Reply{Expert: q.Expert})
			continue
		}
		_, ans := Solve(sub, q.Expert)
		replies = append(replies, Reply{Expert: q.Expert, Answer: strconv.FormatInt(ans, 10), OK: true})
		if !have {
			from, have = ans, true
		}
	}
	// Continue from the first reply, or solve from scratch without one.
	rest := Problem{First: p.First, Ops: p.Ops}
	if have {
		rest = Problem{First: from, Ops: p.Ops[k:]}
	}
	var sol string
	if len(rest.Ops) == 0 {
		sol = "####" + strconv.FormatInt(rest.First, 10) + "\n"
	} else {
		sol, _ = Solve(rest, 0)
	}
	return Document{Kind: "consult", Spans: []Span{
		{p.Prompt(), false}, {FormatConsult(qs), true}, {FormatReplies(replies), false}, {sol, true}}}
}

// slipped finds a problem some style gets wrong and returns it with the
// reference solution and that style's numbers in the reference format.
func (c *Corpus) slipped() (Problem, string, string, bool) {
	for range 20 {
		p := c.problem()
		s := 1 + c.r.IntN(len(Styles)-1)
		if _, ans := Solve(p, s); ans != p.Answer {
			correct, _ := Solve(p, 0)
			return p, correct, referenceFormat(p, s), true
		}
	}
	return Problem{}, "", "", false
}

func (c *Corpus) reflect() (Document, bool) {
	p, correct, wrong, ok := c.slipped()
	if !ok {
		return Document{}, false
	}
	r, ok := Reflect(p, correct, wrong)
	if !ok {
		return Document{}, false
	}
	return Document{Kind: "reflect", Spans: []Span{{ReflectionPrompt(p.Question, correct, wrong), false}, {r.Format(), true}}}, true
}

func (c *Corpus) memory() (Document, bool) {
	p, correct, wrong, ok := c.slipped()
	if !ok {
		return Document{}, false
	}
	r, ok := Reflect(p, correct, wrong)
	if !ok {
		return Document{}, false
	}
	return Document{Kind: "memory", Spans: []Span{{r.Memory() + p.Prompt(), false}, {correct, true}}}, true
}

// referenceFormat writes style s's numbers, slips included, in the
// reference format: what a policy trained on reference solutions writes
// when it makes that style's mistakes.
func referenceFormat(p Problem, s int) string {
	var b strings.Builder
	acc := p.First
	for _, st := range p.Ops {
		r := apply(acc, st.Op, st.Arg)
		if w, slipped := Styles[s].slip(s, acc, st.Op, st.Arg); slipped {
			r = w
		}
		b.WriteString(Styles[0].line(acc, st.Op, st.Arg, r) + "\n")
		acc = r
	}
	b.WriteString("####" + strconv.FormatInt(acc, 10) + "\n")
	return b.String()
}
