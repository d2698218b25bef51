package probe

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"rlvr/eval"
	"rlvr/expert"
	"rlvr/internal/stats"
	"rlvr/method"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
)

// Dataset is what a probe of a chat model on a dataset reads: the
// problems, the policy and how a run prompts it, and the guidance parts
// of the run's config to probe, each nil when the config has none.
type Dataset struct {
	Model string // names the policy in the report
	Data  string // names the dataset
	Split string // SplitTrain or SplitValidation
	From  string // where the problems come from, in words (Split.Draw)

	Examples []task.Example
	Policy   rollout.Sampler
	// Render prompts as the run does: its chat template and system
	// prompt, without the consult grant (evaluation prompts).
	Render method.Renderer
	Stop   []int32 // the tokens that end the policy's turn

	// Consultation is EAPO's consultation as at the first step, every
	// reply accepted (ConsultationConfig.TestTime).
	Consultation *eapo.Consultation
	// Meta gives MEL's reflection format and the reflection pass's
	// sampling (its Format, Temperature and MaxTokens).
	Meta *mel.MetaExperience
	// Variants are MEML-GRPO's expert prompts, as training renders them.
	Variants []method.Variant
	// Skipped says, for each part the config does not have, what is not
	// probed.
	Skipped []string
}

// DatasetConfig is how a probe on a dataset samples.
type DatasetConfig struct {
	K           int     // samples per problem: the group size
	Temperature float64 // the rollouts'
	MaxTokens   int     // per answer
	Seed        uint64  // of the samples
}

// Validate reports every field out of range at once, each by its name.
func (c DatasetConfig) Validate() error {
	var probs []string
	if c.K < 2 || c.K > 64 {
		probs = append(probs, fmt.Sprintf("k %d: must be in [2, 64]", c.K))
	}
	if c.MaxTokens < 1 || c.MaxTokens > 1<<16 {
		probs = append(probs, fmt.Sprintf("max-tokens %d: must be in [1, %d]", c.MaxTokens, 1<<16))
	}
	if !(c.Temperature > 0 && c.Temperature <= 10) {
		probs = append(probs, fmt.Sprintf("temperature %v: must be in (0, 10]", c.Temperature))
	}
	if len(probs) > 0 {
		return fmt.Errorf("probe: %s", strings.Join(probs, "; "))
	}
	return nil
}

// DatasetReport is what a probe on a dataset measures, each rate with its
// 95% interval: Wilson for proportions, Student-t over problems for
// differences paired by problem. A section is nil when the config has no
// part to probe; an interval over no sample is NaN (null in JSON).
type DatasetReport struct {
	Model       string   `json:"model"`
	Data        string   `json:"data"`
	Split       string   `json:"split"`
	From        string   `json:"from"`
	Problems    int      `json:"problems"`
	K           int      `json:"k"`
	Temperature float64  `json:"temperature"`
	MaxTokens   int      `json:"max_tokens"`
	Seed        uint64   `json:"seed"`
	Skipped     []string `json:"skipped,omitempty"`

	// The policy alone, under the run's prompt.
	Greedy       stats.Interval `json:"greedy"`        // greedy accuracy
	Sampled      stats.Interval `json:"sampled"`       // accuracy of the k samples, pooled
	ZeroVariance stats.Interval `json:"zero_variance"` // share of groups all right or all wrong

	EAPO *EAPOReport `json:"eapo"`
	MEL  *MELReport  `json:"mel"`
	MEML *MEMLReport `json:"meml"`
}

// EAPOReport is EAPO's expert-assisted workflow at its first step, one
// expert at a time: every episode opens with the expert asked the whole
// question and its reply in the history, as the consultation's
// environment turn writes it.
type EAPOReport struct {
	Turns   int            `json:"turns"`   // the policy's turn budget in an episode
	Without stats.Interval `json:"without"` // the k samples without consultation (Sampled)
	Experts []ExpertProbe  `json:"experts"`
}

// ExpertProbe is one expert of the pool.
type ExpertProbe struct {
	Name  string `json:"name"`
	Model string `json:"model"` // what answers
	// Right is the expert's own accuracy: the share of problems whose
	// reply gives the gold answer; NoReply are the problems it gave no
	// usable reply to (failed, or unreadable).
	Right   stats.Interval `json:"right"`
	NoReply int            `json:"no_reply"`
	// With is the policy's accuracy with the reply in the history, over
	// the k episodes of every problem; Gain is With − without per
	// problem, paired by problem; GainRight and GainWrong the same over
	// the problems whose reply was right, and wrong.
	With      stats.Interval `json:"with"`
	Gain      stats.Interval `json:"gain"`
	GainRight stats.Interval `json:"gain_right"`
	GainWrong stats.Interval `json:"gain_wrong"`
	// Consulted are the episodes in which the policy consulted again.
	Consulted int `json:"consulted"`
	// Opening is the first problem's opening as the policy reads it after
	// its prompt (the consult action, then the reply), clipped.
	Opening string `json:"opening,omitempty"`
}

// MELReport is MEL's replay on the questions the policy failed (all k
// samples wrong, or the greedy answer wrong): the policy writes a
// meta-experience M on a contrastive pair, and k fresh answers with M are
// compared with k fresh answers without it, paired by question.
type MELReport struct {
	Failed int `json:"failed"` // questions failed
	// The pairs' right answers: the policy's own (one of its k samples)
	// or, when none was right, the reference solution; NoReference are
	// failed questions with neither, and TooLong requests that did not
	// fit the context.
	FromPolicy    int `json:"from_policy"`
	FromReference int `json:"from_reference"`
	NoReference   int `json:"no_reference"`
	TooLong       int `json:"too_long"`
	Pairs         int `json:"pairs"`
	// Parsed is the share of reflections that parse as a
	// meta-experience; Validated those whose validation replay (one
	// answer) was right.
	Parsed    stats.Interval `json:"parsed"`
	Validated int            `json:"validated"`
	// With and Without are the fresh answers' accuracy with M and
	// without, over the parsed Ms' questions; Gain is With − Without per
	// question, paired, and GainValidated the same over the validated Ms.
	With          stats.Interval `json:"with"`
	Without       stats.Interval `json:"without"`
	Gain          stats.Interval `json:"gain"`
	GainValidated stats.Interval `json:"gain_validated"`
	// Reflection is the first reflection the policy wrote, clipped: what
	// the parse rate reads.
	Reflection string `json:"reflection,omitempty"`
}

// MEMLReport is MEML-GRPO's expert prompts at step 0: each prompt's greedy
// accuracy, and how often the prompts disagree on a question.
type MEMLReport struct {
	Prompts []PromptProbe `json:"prompts"`
	// Mixed is the share of questions whose greedy answers across the
	// prompts are some right, some wrong: where mutual learning has a
	// teacher and a student. AllRight and AllWrong count the others.
	Mixed    stats.Interval `json:"mixed"`
	AllRight int            `json:"all_right"`
	AllWrong int            `json:"all_wrong"`
}

// PromptProbe is one expert prompt.
type PromptProbe struct {
	Name   string         `json:"name"`
	Greedy stats.Interval `json:"greedy"`
}

// The seeds of a probe's sampling passes, offsets of its seed.
const (
	seedSampled    = 0
	seedReflection = 1
	seedValidation = 2
	seedFresh      = 3
	seedExperts    = 16 // + the expert's index
)

// RunDataset probes d's policy on d's problems: the policy alone, then
// each part the config has. Progress goes to progress.
func RunDataset(ctx context.Context, progress io.Writer, d Dataset, cfg DatasetConfig) (DatasetReport, error) {
	if err := cfg.Validate(); err != nil {
		return DatasetReport{}, err
	}
	if len(d.Examples) == 0 {
		return DatasetReport{}, fmt.Errorf("probe: no problems")
	}
	rep := DatasetReport{Model: d.Model, Data: d.Data, Split: d.Split, From: d.From, Problems: len(d.Examples), K: cfg.K,
		Temperature: cfg.Temperature, MaxTokens: cfg.MaxTokens, Seed: cfg.Seed, Skipped: d.Skipped}
	prompts := make([][]int32, len(d.Examples))
	for i, e := range d.Examples {
		var err error
		if prompts[i], err = d.Render.Prompt(e, method.Variant{}); err != nil {
			return DatasetReport{}, fmt.Errorf("probe: %s: %w", e.Where(), err)
		}
	}
	p := sample.Params{MaxTokens: cfg.MaxTokens, Temperature: float32(cfg.Temperature), Seed: cfg.Seed + seedSampled, StopTokens: d.Stop}
	greedyP := p
	greedyP.Temperature = 0
	greedy, err := d.answers(ctx, progress, "the policy alone, greedy", prompts, 1, greedyP)
	if err != nil {
		return DatasetReport{}, err
	}
	sampled, err := d.answers(ctx, progress, fmt.Sprintf("the policy alone, %d samples", cfg.K), prompts, cfg.K, p)
	if err != nil {
		return DatasetReport{}, err
	}
	greedyRight, sampledRight := d.rewards(greedy), d.rewards(sampled)
	var right, samples, zero int
	for i := range d.Examples {
		right += countTrue(greedyRight[i])
		n := countTrue(sampledRight[i])
		samples += n
		if n == 0 || n == cfg.K {
			zero++
		}
	}
	rep.Greedy = stats.WilsonInterval(right, len(d.Examples))
	rep.Sampled = stats.WilsonInterval(samples, len(d.Examples)*cfg.K)
	rep.ZeroVariance = stats.WilsonInterval(zero, len(d.Examples))

	if d.Consultation != nil {
		if rep.EAPO, err = d.consult(ctx, progress, prompts, sampledRight, p); err != nil {
			return DatasetReport{}, err
		}
		rep.EAPO.Without = rep.Sampled
	}
	if d.Meta != nil {
		if rep.MEL, err = d.replay(ctx, progress, prompts, greedy, sampled, greedyRight, sampledRight, p); err != nil {
			return DatasetReport{}, err
		}
	}
	if len(d.Variants) > 0 {
		if rep.MEML, err = d.expertPrompts(ctx, progress, greedyP); err != nil {
			return DatasetReport{}, err
		}
	}
	return rep, nil
}

// answers samples n answers to each prompt at p, Chunk prompts at a time,
// each prompt seeded by its index among all (sample.PromptSeed), and
// returns them as the policy wrote them, without the stop token that
// ended each.
func (d *Dataset) answers(ctx context.Context, progress io.Writer, what string, prompts [][]int32, n int, p sample.Params) ([][]string, error) {
	out := make([][]string, 0, len(prompts))
	for i := 0; i < len(prompts); i += Chunk {
		end := min(i+Chunk, len(prompts))
		reqs := make([]sample.Request, end-i)
		for j := range reqs {
			reqs[j] = sample.Request{Prompt: prompts[i+j], Params: p}
			reqs[j].Params.N = n
			reqs[j].Params.Seed = sample.PromptSeed(p.Seed, i+j)
		}
		got, err := d.Policy.Sample(ctx, reqs)
		if err != nil {
			return nil, err
		}
		for _, cs := range got {
			texts := make([]string, len(cs))
			for k, c := range cs {
				texts[k] = d.shown(c.Tokens)
			}
			out = append(out, texts)
		}
		fmt.Fprintf(progress, "probe: %s: %d of %d prompts\n", what, end, len(prompts))
	}
	return out, nil
}

// shown is an answer's tokens as text, without the stop token that ended
// it (as MEL shows an answer in a reflection request).
func (d *Dataset) shown(toks []int32) string {
	if n := len(toks); n > 0 && slices.Contains(d.Stop, toks[n-1]) {
		toks = toks[:n-1]
	}
	return d.Render.Decode(toks)
}

// rewards scores each problem's answers.
func (d *Dataset) rewards(answers [][]string) [][]bool {
	return rewards(d.Examples, answers)
}

// consult runs, for each expert of the pool alone, episodes that open
// with the expert asked the whole question, and compares their accuracy
// with the policy's without consultation (without: each problem's k
// samples, right or not).
func (d *Dataset) consult(ctx context.Context, progress io.Writer, prompts [][]int32, without [][]bool, p sample.Params) (*EAPOReport, error) {
	c := d.Consultation
	rep := &EAPOReport{Turns: c.TurnBudget(0)}
	k := len(without[0])
	for m, member := range c.Pool.Members {
		// The expert alone: a further consultation in an episode goes to
		// it too, so that its measure is its own.
		one := *c
		one.Pool = &expert.Pool{Members: []expert.Member{member}}
		seed := p.Seed + seedExperts + uint64(m)
		ep := ExpertProbe{Name: member.Name, Model: member.Model}
		var replyRight, withRight int
		var gain, gainRight, gainWrong []float64
		for i := 0; i < len(prompts); i += Chunk {
			end := min(i+Chunk, len(prompts))
			examples := d.Examples[i:end]
			queries := make([][]eapo.Query, len(examples))
			for j, e := range examples {
				queries[j] = []eapo.Query{{Expert: member.Name, Question: world.QuestionText(e.Prompt)}}
			}
			opening, err := one.Opening(ctx, d.Render, queries, examples, sample.PromptSeed(seed, i))
			if err != nil {
				return nil, err
			}
			opened := make([][]int32, len(examples))
			replied, right := make([]bool, len(examples)), make([]bool, len(examples))
			for j, e := range examples {
				opened[j] = append(slices.Clone(prompts[i+j]), opening[j]...)
				text := d.Render.Decode(opening[j])
				if i+j == 0 {
					ep.Opening = clip(text, 1200)
				}
				reply, ok := replyIn(one.Format, member.Name, text)
				if !ok {
					ep.NoReply++
					continue
				}
				replied[j] = true
				r, _ := eval.Reward(e, reply)
				right[j] = r > 0
			}
			q := p
			q.Seed = sample.PromptSeed(seed, i)
			groups, _, err := one.Episodes(ctx, d.Policy, d.Render, opened, examples, k, q, 0)
			if err != nil {
				return nil, err
			}
			for j, g := range groups {
				n := 0
				for _, t := range g.Trajectories {
					if r, _ := eval.Reward(examples[j], t.PolicyText); r > 0 {
						n++
					}
					if t.Counts[eapo.EnvCalls]+t.Counts[rollout.EnvUnanswered] > 0 {
						ep.Consulted++
					}
				}
				withRight += n
				diff := float64(n-countTrue(without[i+j])) / float64(k)
				gain = append(gain, diff)
				switch {
				case right[j]:
					replyRight++
					gainRight = append(gainRight, diff)
				case replied[j]:
					gainWrong = append(gainWrong, diff)
				}
			}
			fmt.Fprintf(progress, "probe: EAPO, expert %s: %d of %d problems\n", member.Name, end, len(prompts))
		}
		ep.Right = stats.WilsonInterval(replyRight, len(prompts))
		ep.With = stats.WilsonInterval(withRight, len(prompts)*k)
		ep.Gain, ep.GainRight, ep.GainWrong = stats.MeanInterval(gain), stats.MeanInterval(gainRight), stats.MeanInterval(gainWrong)
		rep.Experts = append(rep.Experts, ep)
	}
	return rep, nil
}

// replyIn reads the one expert's reply out of an opening as the format
// writes it into the history: ok is false when the history shows none
// (declined, failed or unreadable).
func replyIn(f eapo.Format, name, text string) (string, bool) {
	switch f.(type) {
	case eapo.Chat:
		open := fmt.Sprintf("<expert name=%q>", name)
		i := strings.Index(text, open)
		j := strings.LastIndex(text, "</expert>")
		if i < 0 || j < i+len(open) {
			return "", false
		}
		reply := text[i+len(open) : j]
		return reply, reply != eapo.Unavailable
	case eapo.World:
		for _, line := range strings.Split(text, "\n") {
			if _, ans, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(line, "!") && ans != "-" {
				return "####" + ans, true
			}
		}
	}
	return "", false
}

// replay measures MEL's replay on the questions the policy failed, from
// their prompts and the policy's answers to them.
func (d *Dataset) replay(ctx context.Context, progress io.Writer, prompts [][]int32, greedy, sampled [][]string, greedyRight, sampledRight [][]bool, p sample.Params) (*MELReport, error) {
	rep := &MELReport{}
	format := d.Meta.Format
	single := method.Variant{SingleTurn: true}
	var asked []int // the question of each request
	var requests [][]int32
	for i, e := range d.Examples {
		if countTrue(sampledRight[i]) > 0 && greedyRight[i][0] {
			continue
		}
		rep.Failed++
		correct := ""
		if j := slices.Index(sampledRight[i], true); j >= 0 {
			correct = sampled[i][j]
		} else if greedyRight[i][0] {
			correct = greedy[i][0]
		}
		wrong := greedy[i][0]
		if greedyRight[i][0] {
			wrong = sampled[i][slices.Index(sampledRight[i], false)]
		}
		fromPolicy := correct != ""
		if !fromPolicy {
			if correct = strings.TrimRight(task.ReferenceResponse(e), "\n"); correct == "" {
				rep.NoReference++
				continue
			}
		}
		req := task.Example{ID: e.ID + "/reflection", Prompt: format.Request(e.Prompt, correct, wrong)}
		toks, err := d.Render.Prompt(req, single)
		if err != nil {
			rep.TooLong++
			continue
		}
		if fromPolicy {
			rep.FromPolicy++
		} else {
			rep.FromReference++
		}
		asked = append(asked, i)
		requests = append(requests, toks)
	}
	rep.Pairs = len(requests)
	rp := p
	if d.Meta.Temperature > 0 {
		rp.Temperature = d.Meta.Temperature
	}
	if d.Meta.MaxTokens > 0 {
		rp.MaxTokens = d.Meta.MaxTokens
	}
	rp.Seed = p.Seed + seedReflection
	reflections, err := d.answers(ctx, progress, "MEL, reflections on the failed questions", requests, 1, rp)
	if err != nil {
		return nil, err
	}
	var replayed []task.Example
	var replays, plain [][]int32
	for j, i := range asked {
		text := reflections[j][0]
		if j == 0 {
			rep.Reflection = clip(text, 800)
		}
		m, err := format.Parse(text)
		if err != nil {
			continue
		}
		e := withQuestion(d.Examples[i], format.Replay(d.Examples[i].Prompt, m))
		toks, err := d.Render.Prompt(e, single)
		if err != nil {
			rep.TooLong++
			continue
		}
		replayed = append(replayed, d.Examples[i])
		replays = append(replays, toks)
		plain = append(plain, prompts[i])
	}
	rep.Parsed = stats.WilsonInterval(len(replays), rep.Pairs)
	nan := stats.MeanInterval(nil)
	rep.With, rep.Without, rep.Gain, rep.GainValidated = stats.WilsonInterval(0, 0), stats.WilsonInterval(0, 0), nan, nan
	if len(replays) == 0 {
		return rep, nil
	}
	// The validation replay (one answer), then k fresh answers with M and
	// k without it, drawn apart from it, so that validation selects Ms,
	// not the answers measured.
	one := p
	one.Seed = p.Seed + seedValidation
	validation, err := d.answers(ctx, progress, "MEL, validation replays", replays, 1, one)
	if err != nil {
		return nil, err
	}
	fresh := p
	fresh.Seed = p.Seed + seedFresh
	with, err := d.answers(ctx, progress, "MEL, replays with M", replays, len(sampled[0]), fresh)
	if err != nil {
		return nil, err
	}
	without, err := d.answers(ctx, progress, "MEL, the same questions without M", plain, len(sampled[0]), fresh)
	if err != nil {
		return nil, err
	}
	valid, withR, withoutR := rewards(replayed, validation), rewards(replayed, with), rewards(replayed, without)
	k := len(sampled[0])
	var gain, gainValid []float64
	var withN, withoutN int
	for j := range replayed {
		withN += countTrue(withR[j])
		withoutN += countTrue(withoutR[j])
		diff := float64(countTrue(withR[j])-countTrue(withoutR[j])) / float64(k)
		gain = append(gain, diff)
		if valid[j][0] {
			rep.Validated++
			gainValid = append(gainValid, diff)
		}
	}
	rep.With, rep.Without = stats.WilsonInterval(withN, len(replayed)*k), stats.WilsonInterval(withoutN, len(replayed)*k)
	rep.Gain, rep.GainValidated = stats.MeanInterval(gain), stats.MeanInterval(gainValid)
	return rep, nil
}

// withQuestion is e with its question replaced by text: the prompt, and
// the last user message of a chat (as MEL's replay asks it).
func withQuestion(e task.Example, text string) task.Example {
	e.Prompt = text
	if len(e.Messages) == 0 {
		return e
	}
	e.Messages = slices.Clone(e.Messages)
	for i := len(e.Messages) - 1; i >= 0; i-- {
		if e.Messages[i].Role == "user" {
			e.Messages[i].Content = text
			break
		}
	}
	return e
}

// expertPrompts scores each expert prompt's greedy answers.
func (d *Dataset) expertPrompts(ctx context.Context, progress io.Writer, greedyP sample.Params) (*MEMLReport, error) {
	rep := &MEMLReport{}
	right := make([]int, len(d.Examples)) // prompts right, per question
	for _, v := range d.Variants {
		prompts := make([][]int32, len(d.Examples))
		for i, e := range d.Examples {
			var err error
			if prompts[i], err = d.Render.Prompt(e, v); err != nil {
				return nil, fmt.Errorf("probe: %s under expert prompt %s: %w", e.Where(), v.Name, err)
			}
		}
		answers, err := d.answers(ctx, progress, "MEML, expert prompt "+v.Name+", greedy", prompts, 1, greedyP)
		if err != nil {
			return nil, err
		}
		n := 0
		for i, r := range d.rewards(answers) {
			if r[0] {
				n++
				right[i]++
			}
		}
		rep.Prompts = append(rep.Prompts, PromptProbe{Name: v.Name, Greedy: stats.WilsonInterval(n, len(d.Examples))})
	}
	mixed := 0
	for _, n := range right {
		switch n {
		case 0:
			rep.AllWrong++
		case len(d.Variants):
			rep.AllRight++
		default:
			mixed++
		}
	}
	rep.Mixed = stats.WilsonInterval(mixed, len(d.Examples))
	return rep, nil
}

// clip shortens text to about n bytes.
func clip(text string, n int) string {
	if len(text) <= n {
		return text
	}
	return strings.ToValidUTF8(text[:n], "") + " …"
}
