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
	// Version is the world version the corpus writes (see Version2); 0
	// and 1 are the first.
	Version int `json:",omitempty"`
	// Habit, in version 2, is the probability that a step the policy
	// writes slips when it is prone to one of the SlipKinds.
	Habit float64 `json:",omitempty"`
}

// DefaultCorpus mixes every format of world version 1, weighted toward
// plain solutions.
func DefaultCorpus(levels []int) CorpusConfig {
	return CorpusConfig{Levels: levels, Solve: 4, Expert: 2, Consult: 1, Reflect: 1, Memory: 0.5, Unavailable: 0.2}
}

// Version2 is world version 2's corpus: the same mix, written by a
// policy with a habit, so that what is in its context changes what it
// writes. Every solution the corpus trains the model to write slips on
// 60% of the steps prone to a slip kind (Habit 0.6: above one half, so
// that the likelier result of a prone step is the slip and greedy
// decoding stays in the sparse regime), except where its context
// corrects it:
//
//   - memory: after a meta-experience whose heuristic names a kind
//     (M:…|H:…), no step of that kind slips; the others still may;
//   - consult: the policy asks an expert one step of the chain
//     ("?E2:57-29?"), and an expert's reply is the result it writes for
//     that step, right or wrong; with no reply the habit writes it;
//   - expert: expert i's style, with its own slips and the habit's.
//
// Reflections contrast the reference solution with a slipped one, as
// the policy's own wrong answers are, and name the first slipped step's
// kind. The questions, the experts the policy consults (the scripted
// styles, which have no habit) and every format are version 1's.
func Version2(levels []int) CorpusConfig {
	c := DefaultCorpus(levels)
	c.Version, c.Habit = 2, 0.6
	return c
}

// CorpusVersion is the corpus of a world version: DefaultCorpus for 1,
// Version2 for 2; ok is false for any other.
func CorpusVersion(version int, levels []int) (CorpusConfig, bool) {
	switch version {
	case 0, 1:
		return DefaultCorpus(levels), true
	case 2:
		return Version2(levels), true
	}
	return CorpusConfig{}, false
}

// Versions are the world versions there are.
var Versions = []int{1, 2}

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
	if cfg.Version >= 2 {
		return c.next2(kind)
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
	qs, replies, from, have := c.ask(sub)
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

// ask draws a consultation about sub: one expert among E1–E3, sometimes a
// second opinion, and their replies, each missing with probability
// Unavailable. first is the first reply that came, when have.
func (c *Corpus) ask(sub Problem) (qs []Query, replies []Reply, first int64, have bool) {
	qs = []Query{{Expert: 1 + c.r.IntN(len(Styles)-1), Question: sub.Question}}
	if c.r.IntN(3) == 0 { // sometimes a second opinion
		qs = append(qs, Query{Expert: 1 + c.r.IntN(len(Styles)-1), Question: sub.Question})
	}
	for _, q := range qs {
		if c.r.Float64() < c.cfg.Unavailable {
			replies = append(replies, Reply{Expert: q.Expert})
			continue
		}
		_, ans := Solve(sub, q.Expert)
		replies = append(replies, Reply{Expert: q.Expert, Answer: strconv.FormatInt(ans, 10), OK: true})
		if !have {
			first, have = ans, true
		}
	}
	return qs, replies, first, have
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

// next2 draws a version 2 document of the given kind (the index of its
// weight in Next).
func (c *Corpus) next2(kind int) Document {
	switch kind {
	case 1:
		p := c.problem()
		s := c.r.IntN(len(Styles))
		return Document{Kind: "expert", Spans: []Span{{p.Prompt() + ExpertPrompt(s), false}, {c.habitual(p, s, 0), true}}}
	case 2:
		return c.consult2()
	case 3, 4:
		p := c.problem()
		correct := p.Solution()
		for range 20 {
			wrong := c.habitual(p, 0, 0)
			r, ok := Reflect(p, correct, wrong)
			if !ok {
				continue
			}
			if kind == 3 {
				return Document{Kind: "reflect", Spans: []Span{{ReflectionPrompt(p.Question, correct, wrong), false}, {r.Format(), true}}}
			}
			// The kind the heuristic names is that of the first step where
			// the answers part: Reflect's choice of heuristic.
			var named byte
			if i := firstSlip(correct, wrong); i < len(p.Ops) {
				named = p.Ops[i].Op
			}
			return Document{Kind: "memory", Spans: []Span{{r.Memory() + p.Prompt(), false}, {c.habitual(p, 0, named), true}}}
		}
	}
	p := c.problem()
	return Document{Kind: "solve", Spans: []Span{{p.Prompt(), false}, {c.habitual(p, 0, 0), true}}}
}

// firstSlip is the index of the first line where two solutions differ.
func firstSlip(correct, wrong string) int {
	c, w := strings.Split(correct, "\n"), strings.Split(wrong, "\n")
	i := 0
	for i < len(c) && i < len(w) && c[i] == w[i] {
		i++
	}
	return i
}

// habitStep is the result the habit writes for a step: style s's own
// slip, else with probability Habit the slip of the step's kind when the
// step is prone to it, unless that kind is fixed (named by a heuristic in
// the context).
func (c *Corpus) habitStep(s int, a int64, st Step, fixed byte) int64 {
	if w, slipped := Styles[s].slip(s, a, st.Op, st.Arg); slipped {
		return w
	}
	if k := SlipKinds[st.Op]; st.Op != fixed && k.Prone(a, st.Arg) && c.r.Float64() < c.cfg.Habit {
		return k.Wrong(a, st.Arg)
	}
	return apply(a, st.Op, st.Arg)
}

// habitual writes p's solution in style s as the version 2 policy does:
// each step continuing from the previous result, slipped or not
// (habitStep), then the answer.
func (c *Corpus) habitual(p Problem, s int, fixed byte) string {
	var b strings.Builder
	acc := p.First
	for _, st := range p.Ops {
		r := c.habitStep(s, acc, st, fixed)
		b.WriteString(Styles[s].line(acc, st.Op, st.Arg, r) + "\n")
		acc = r
	}
	b.WriteString("####" + strconv.FormatInt(acc, 10) + "\n")
	return b.String()
}

// consult2 is a version 2 consultation: the policy solves step by step
// and, at one step prone to a slip (two, a quarter of the time; any step
// when none is prone), asks an expert that step as a question of its
// own, sometimes a second expert too; the first reply is the step's
// result. The query and the steps are trained on, the replies only read.
func (c *Corpus) consult2() Document {
	p := c.problem()
	var prone []int
	acc := p.First
	for i, st := range p.Ops { // proneness along the reference chain
		if SlipKinds[st.Op].Prone(acc, st.Arg) {
			prone = append(prone, i)
		}
		acc = apply(acc, st.Op, st.Arg)
	}
	if len(prone) == 0 {
		prone = []int{c.r.IntN(len(p.Ops))}
	}
	asked := map[int]bool{prone[c.r.IntN(len(prone))]: true}
	if len(prone) > 1 && c.r.IntN(4) == 0 {
		asked[prone[c.r.IntN(len(prone))]] = true
	}
	spans := []Span{{p.Prompt(), false}}
	var b strings.Builder // the policy's text since the last reply
	acc = p.First
	for i, st := range p.Ops {
		var r int64
		if asked[i] {
			q := Problem{First: acc, Ops: []Step{st}}
			q.Question = strconv.FormatInt(acc, 10) + string(st.Op) + strconv.FormatInt(st.Arg, 10)
			qs, replies, reply, have := c.ask(q)
			b.WriteString(FormatConsult(qs))
			spans = append(spans, Span{b.String(), true})
			b.Reset()
			spans = append(spans, Span{FormatReplies(replies), false})
			r = reply
			if !have {
				r = c.habitStep(0, acc, st, 0)
			}
		} else {
			r = c.habitStep(0, acc, st, 0)
		}
		b.WriteString(Styles[0].line(acc, st.Op, st.Arg, r) + "\n")
		acc = r
	}
	b.WriteString("####" + strconv.FormatInt(acc, 10) + "\n")
	spans = append(spans, Span{b.String(), true})
	return Document{Kind: "consult", Spans: spans}
}
