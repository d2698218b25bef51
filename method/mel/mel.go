package mel

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/rollout"
	"rlvr/task"
)

// MetaExperience is MEL's meta-experience learning, an extra loss term of
// the RL method:
//
//  1. From each group with both verified-correct and wrong answers it
//     forms contrastive pairs (y+, y−): every pair, or Pairs of them drawn
//     without replacement.
//  2. The current policy, given the instruction I with the question and
//     the pair (Format.Request), writes a meta-experience M = (s*, C, H)
//     for every pair in one batched generation pass. A reply that does not
//     parse is counted and dropped.
//  3. Replay validation (eq. 6): the question is asked again with M before
//     it as working memory (Format.Replay), one sample per M, all in one
//     batch; M is kept only if that answer verifies.
//  4. Internalization (eq. 7): the NLL of each kept M, as the policy wrote
//     it, given the retrospective context [I, x, y+, y−], a token mean per
//     M, averaged over each question's Ms and then over the step's
//     questions (eq. 10: R_MEL sits inside the expectation over x, and a
//     question without a kept M adds 0), or with Pooled over all the
//     step's Ms alike, and weighted by Weight, joins the base objective's
//     gradient: J = J_base + J_MEL.
//
// Only M's tokens carry weight; the context's are 0. Answers are paired
// within a group, so under several prompt variants (expert prompts) a pair
// never mixes two prompts; the replay asks the question under the plain
// prompt. With multi-turn episodes (consultation), a trajectory is shown
// as it happened, expert replies included, but the reflection request and
// the replay are single-turn: no consult action in them is ever answered,
// so their prompts do not grant one.
type MetaExperience struct {
	Format Format
	// Pairs bounds the pairs drawn per group; 0 takes every pair, up to
	// |Y+|·|Y−| = G²/4.
	Pairs  int
	Weight float32 // λ of the NLL term
	// Pooled averages the step's kept Ms alike instead of per question.
	Pooled bool
	// Temperature and MaxTokens are the reflection pass's sampling; 0
	// takes the rollouts'. Replays sample as rollouts do.
	Temperature float32
	MaxTokens   int
	// ReferencePositive pairs the wrong answers of a group with no right
	// one against the example's reference solution as y+, as the cold
	// start does. It departs from the paper, whose y+ is always the
	// policy's own: it is for a policy too weak to answer right at all
	// (SmolLM2 on GSM8K, docs/mel.md), where the paper's MEL forms no pair.
	ReferencePositive bool

	// last is the latest validated meta-experience, shown at each
	// evaluation (and kept in the state so a resumed run shows the same).
	last *metaExample
}

// The ways the kept Ms' NLLs make MEL's term (MetaExperienceConfig.Aggregation).
const (
	PromptMean = "prompt-mean" // eq. 10: per question, then over the step's questions
	Pooled     = "pooled"      // every kept M of the step alike
)

// singleTurn is the variant of MEL's own prompts, the reflection request
// and the replay: the plain prompt, without the consult grant.
var singleTurn = method.Variant{SingleTurn: true}

// The counts of a step's meta-experiences, from pairs to validated.
const (
	MetricMELPairs     = "mel/pairs"     // contrastive pairs drawn
	MetricMELParsed    = "mel/parsed"    // reflections that parsed as a meta-experience
	MetricMELValidated = "mel/validated" // meta-experiences whose replay verified
	// MetricMELReferencePairs counts the pairs whose y+ is the reference
	// solution (MetaExperience.ReferencePositive).
	MetricMELReferencePairs = "mel/reference_pairs"
)

// metaExample is one validated meta-experience with what produced it.
type metaExample struct {
	Step       int    `json:"step"` // 1-based training step
	Question   string `json:"question"`
	Correct    string `json:"correct"` // y+
	Wrong      string `json:"wrong"`   // y−
	Reflection string `json:"reflection"`
	Replay     string `json:"replay"` // the verified answer given M
}

// metaPair is one contrastive pair on its way through the passes.
type metaPair struct {
	group          *method.Scored
	correct, wrong string  // y+ and y−, as the request shows them
	request        []int32 // the rendered [I, x, y+, y−]
	reflection     *rollout.Trajectory
	reflectionText string // the reply as parsed, without its stop token
	experience     Experience
}

// Terms implements method.Extra: the pairs, then MEL's three stages, each
// a pass of its own (reflect, replay, internalize).
func (me *MetaExperience) Terms(ctx context.Context, sc *method.StepContext, groups []method.Scored) ([]method.Term, error) {
	t0 := time.Now()
	defer func() { sc.Metrics.Set("time_mel_s", time.Since(t0).Seconds()) }()
	pairs, err := me.pairs(sc, groups)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{MetricMELParsed, "mel/parse_failures", MetricMELValidated} {
		sc.Metrics.Set(k, 0)
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	parsed, err := me.reflect(ctx, sc, pairs)
	if err != nil {
		return nil, err
	}
	kept, err := me.replay(ctx, sc, parsed)
	if err != nil || len(kept) == 0 {
		return nil, err
	}
	return []method.Term{me.internalize(sc, kept, len(groups))}, nil
}

// reflect is the reflection pass: one M per pair, all pairs in one batch.
// It returns the pairs whose reply parsed as a meta-experience.
func (me *MetaExperience) reflect(ctx context.Context, sc *method.StepContext, pairs []metaPair) ([]*metaPair, error) {
	p := sc.Sampling
	if me.Temperature > 0 {
		p.Temperature = me.Temperature
	}
	if me.MaxTokens > 0 {
		p.MaxTokens = me.MaxTokens
	}
	p.Seed = sc.Seed ^ 0x6d656c2d72656631 // "mel-ref1": apart from the rollouts' seeds
	prompts := make([][]int32, len(pairs))
	for i := range pairs {
		prompts[i] = pairs[i].request
	}
	refl, err := rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, 1, p)
	if err != nil {
		return nil, err
	}
	var parsed []*metaPair
	for i := range pairs {
		mp := &pairs[i]
		mp.reflection = &refl[i].Trajectories[0]
		mp.reflectionText = shownText(sc, mp.reflection)
		if mp.experience, err = me.Format.Parse(mp.reflectionText); err != nil {
			sc.Metrics["mel/parse_failures"]++
			continue
		}
		parsed = append(parsed, mp)
	}
	sc.Metrics.Set(MetricMELParsed, float64(len(parsed)))
	return parsed, nil
}

// replay is replay validation: the question again, M before it, one
// answer each, all in one batch. It returns the pairs whose replay
// verified, and keeps the first as the example evaluations show.
func (me *MetaExperience) replay(ctx context.Context, sc *method.StepContext, parsed []*metaPair) ([]*metaPair, error) {
	var replayed []*metaPair
	var prompts [][]int32
	for _, mp := range parsed {
		e := withQuestion(mp.group.Example, me.Format.Replay(mp.group.Example.Prompt, mp.experience))
		pr, err := sc.Prompt(e, singleTurn)
		if err != nil {
			return nil, err
		} else if pr == nil {
			sc.Metrics["mel/skipped_long"]++
			continue
		}
		prompts = append(prompts, pr)
		replayed = append(replayed, mp)
	}
	var kept []*metaPair
	if len(replayed) > 0 {
		p := sc.Sampling
		p.Seed = sc.Seed ^ 0x6d656c2d72706c31 // "mel-rpl1"
		replays, err := rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, 1, p)
		if err != nil {
			return nil, err
		}
		// Whether M helps in context: the replays' accuracy against the
		// accuracy the same policy had on those questions without M (their
		// groups'), over the same replayed pairs.
		var without float64
		for i, mp := range replayed {
			right := 0
			for _, ok := range mp.group.Correct {
				if ok {
					right++
				}
			}
			without += float64(right) / float64(len(mp.group.Correct))
			y := &replays[i].Trajectories[0]
			if r, _ := sc.Reward(mp.group.Example, y.PolicyText); r <= 0 {
				continue
			}
			kept = append(kept, mp)
			if len(kept) == 1 {
				me.last = &metaExample{Step: sc.Step + 1, Question: mp.group.Example.Prompt, Correct: mp.correct,
					Wrong: mp.wrong, Reflection: mp.reflectionText, Replay: shownText(sc, y)}
			}
		}
		sc.Metrics.Set("mel/replay_accuracy", float64(len(kept))/float64(len(replayed)))
		sc.Metrics.Set("mel/group_accuracy", without/float64(len(replayed)))
	}
	sc.Metrics.Set(MetricMELValidated, float64(len(kept)))
	if len(parsed) > 0 {
		sc.Metrics.Set("mel/retention", float64(len(kept))/float64(len(parsed)))
	}
	return kept, nil
}

// internalize is the NLL term of the kept Ms, each given the
// retrospective context it was written in, over the step's questions
// questions.
func (me *MetaExperience) internalize(sc *method.StepContext, kept []*metaPair, questions int) method.Term {
	data := make([]backend.Datum, len(kept))
	groupOf := make([]*method.Scored, len(kept)) // the group of each datum's M
	var nll float64
	for i, mp := range kept {
		data[i] = method.ResponseDatum(mp.request, mp.reflection.Tokens)
		groupOf[i] = mp.group
		nll += tokenNLL(mp.reflection.Logprobs)
	}
	// The sampler's NLL of the kept Ms under the policy that wrote them
	// (at the reflection temperature), before this step's update.
	sc.Metrics.Set("mel/nll", nll/float64(len(data)))
	if !me.Pooled {
		perQuestion(data, groupOf, questions)
	}
	return method.Term{Name: "mel", Data: data, Loss: backend.Loss{NLL: me.Weight}, Aggregation: backend.SeqMeanTokenMean}
}

// perQuestion scales each datum's token weights so that the term's
// seq-mean-token-mean aggregate over the len(data) kept Ms becomes eq. 10's
// nesting: a token mean per M, a mean over its question's Ms, and a mean
// over the step's questions, of which one without a kept M adds 0. The
// aggregate gives M 1/(len(data)·|M|); times len(data)/(questions·n_x) it
// is 1/(questions·n_x·|M|), with n_x the Ms kept from M's question.
func perQuestion(data []backend.Datum, group []*method.Scored, questions int) {
	n := map[*method.Scored]int{}
	for _, g := range group {
		n[g]++
	}
	for i := range data {
		f := float32(len(data)) / float32(questions*n[group[i]])
		for j := range data[i].Weights {
			data[i].Weights[j] *= f
		}
	}
}

// pairs forms the step's contrastive pairs (mel/pairs) and renders their
// reflection requests; a request too long for the context is skipped and
// counted (mel/skipped_long).
func (me *MetaExperience) pairs(sc *method.StepContext, groups []method.Scored) ([]metaPair, error) {
	var out []metaPair
	sc.Metrics.Set(MetricMELPairs, 0)
	if me.ReferencePositive {
		sc.Metrics.Set(MetricMELReferencePairs, 0)
	}
	for gi := range groups {
		g := &groups[gi]
		var pos, neg []int
		for i, ok := range g.Correct {
			if ok {
				pos = append(pos, i)
			} else {
				neg = append(neg, i)
			}
		}
		// An all-wrong group's y+ is its reference solution, where the
		// run asks for that (ReferencePositive) and the example has one.
		reference, positives := "", len(pos)
		if positives == 0 && me.ReferencePositive {
			if reference = referenceAnswer(g.Example); reference != "" {
				positives = 1
			}
		}
		n := positives * len(neg)
		if n == 0 {
			continue
		}
		var picks []int
		if me.Pairs > 0 && n > me.Pairs {
			rng := rand.New(rand.NewPCG(sc.Seed, 0x6d656c2d70616972+uint64(gi))) // "mel-pair"
			picks = rng.Perm(n)[:me.Pairs]
		} else {
			picks = make([]int, n)
			for i := range picks {
				picks[i] = i
			}
		}
		sc.Metrics[MetricMELPairs] += float64(len(picks))
		if reference != "" {
			sc.Metrics[MetricMELReferencePairs] += float64(len(picks))
		}
		// Each answer decoded once, however many pairs it is in.
		shown := make([]string, len(g.Trajectories))
		for i := range g.Trajectories {
			shown[i] = shownText(sc, &g.Trajectories[i])
		}
		for _, k := range picks {
			c, w := reference, shown[neg[k%len(neg)]]
			if reference == "" {
				c = shown[pos[k/len(neg)]]
			}
			req := task.Example{ID: g.Example.ID + "/reflection", Prompt: me.Format.Request(g.Example.Prompt, c, w)}
			pr, err := sc.Prompt(req, singleTurn)
			if err != nil {
				return nil, err
			} else if pr == nil {
				sc.Metrics["mel/skipped_long"]++
				continue
			}
			out = append(out, metaPair{group: g, correct: c, wrong: w, request: pr})
		}
	}
	return out, nil
}

// shownText is a trajectory as MEL reads and shows it: its tokens decoded
// without the stop token that ended it (the sampler's Text keeps the stop
// token's text, which a chat model's parsed reply must not carry into the
// replay prompt).
func shownText(sc *method.StepContext, t *rollout.Trajectory) string {
	toks := t.Tokens
	if n := len(toks); n > 0 && slices.Contains(sc.Sampling.StopTokens, toks[n-1]) {
		toks = toks[:n-1]
	}
	return sc.Render.Decode(toks)
}

// referenceAnswer is the example's reference solution as MEL shows it for
// y+ (the cold start's pairs, and reference_positive's); "" without one.
func referenceAnswer(e task.Example) string {
	return strings.TrimSpace(task.ReferenceResponse(e))
}

// tokenNLL is the mean negative logprob of a sample's tokens.
func tokenNLL(lps []float32) float64 {
	if len(lps) == 0 {
		return 0
	}
	var s float64
	for _, lp := range lps {
		s -= float64(lp)
	}
	return s / float64(len(lps))
}

// withQuestion is e with its question replaced by text: the prompt, and
// the last user message of a chat (which the prompt copies).
func withQuestion(e task.Example, text string) task.Example {
	e.Prompt = text
	if len(e.Messages) == 0 {
		return e
	}
	e.Messages = append([]task.Message(nil), e.Messages...)
	for i := len(e.Messages) - 1; i >= 0; i-- {
		if e.Messages[i].Role == "user" {
			e.Messages[i].Content = text
			return e
		}
	}
	return e
}

// Exhibits implements method.Exhibitor: the latest validated meta-experience.
func (me *MetaExperience) Exhibits() []method.Exhibit {
	if me.last == nil {
		return nil
	}
	return []method.Exhibit{{Title: "meta-experience", Text: me.last.String()}}
}

// String writes the example for reading: the question, the pair, M and
// the replay that validated it.
func (x metaExample) String() string {
	return fmt.Sprintf("step %d\nquestion:\n%s\n\ncorrect answer (y+):\n%s\n\nwrong answer (y−):\n%s\n\nmeta-experience M:\n%s\n\nreplay with M (verified):\n%s",
		x.Step, strings.TrimSpace(x.Question), strings.TrimSpace(x.Correct), strings.TrimSpace(x.Wrong), strings.TrimSpace(x.Reflection), strings.TrimSpace(x.Replay))
}

// StateName implements method.StateNamer: the name its state has had in
// checkpoints since it was written.
func (me *MetaExperience) StateName() string { return "*method.MetaExperience" }

// State implements method.Stateful.
func (me *MetaExperience) State() (json.RawMessage, error) { return json.Marshal(me.last) }

// Restore implements method.Stateful.
func (me *MetaExperience) Restore(b json.RawMessage) error {
	me.last = nil
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, &me.last)
}
