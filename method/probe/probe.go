// Package probe measures a model before any training: whether MEL's,
// EAPO's and MEML-GRPO's guidance can pay on it (the step-0
// preconditions).
//
// On the built-in world (Run, docs/world.md's preconditions for a test
// bed) it reads the policy alone (greedy, k samples, their groups and the
// steps they write), MEL's replay with a meta-experience against without,
// and EAPO's consultation at its first step with every reply accepted.
//
// On a dataset (RunDataset, docs/probe.md) it reads a chat model as a
// training config prompts it: the policy alone, each expert of the
// consultation's pool asked the whole question with its reply in the
// history against no consultation, MEL's replay on the questions the
// policy failed, and each expert prompt's greedy accuracy.
package probe

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"rlvr/checkpoint"
	"rlvr/eval"
	"rlvr/internal/stats"
	"rlvr/method/eapo"
	"rlvr/method/mel"
	"rlvr/rollout"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
)

// Report is what a probe measures; every rate has its 95%
// interval (Wilson for proportions of independent draws, Student-t over
// problems for paired differences).
type Report struct {
	Model       string  `json:"model"`
	Levels      []int   `json:"levels"`
	Problems    int     `json:"problems"`
	K           int     `json:"k"`
	Temperature float64 `json:"temperature"`
	Seed        uint64  `json:"seed"`

	// The policy alone.
	Greedy       stats.Interval `json:"greedy"`        // greedy accuracy
	Sampled      stats.Interval `json:"sampled"`       // accuracy of the k samples, pooled
	ZeroVariance stats.Interval `json:"zero_variance"` // share of groups all right or all wrong
	// Steps reads the k samples' steps: on prone steps the right result,
	// the slip or another error; elsewhere the right result or not. The
	// other errors are the model's own, which no context corrects.
	Steps world.StepTally `json:"steps"`

	// MEL's replay: meta-experiences the policy wrote on its own
	// contrastive pairs, and k fresh answers to the same question with and
	// without the meta-experience before it.
	Pairs          int            `json:"pairs"`
	Parsed         int            `json:"parsed"`
	Validated      int            `json:"validated"` // the validation replay verified
	ReplayWith     stats.Interval `json:"replay_with"`
	ReplayWithout  stats.Interval `json:"replay_without"`
	ReplayGain     stats.Interval `json:"replay_gain"`      // with − without, over validated ones
	ReplayGainAll  stats.Interval `json:"replay_gain_all"`  // the same over every parsed one
	ReplayGainFail stats.Interval `json:"replay_gain_fail"` // over those the validation rejected

	// EAPO's consultation at its first step, every reply accepted.
	Episodes        int            `json:"episodes"`
	Consulting      stats.Interval `json:"consulting"` // share of episodes that consulted
	Queries         int            `json:"queries"`
	Readable        stats.Interval `json:"readable"`          // queries the experts could read
	RightReply      stats.Interval `json:"right_reply"`       // accuracy of episodes whose accepted replies were all right
	WrongReply      stats.Interval `json:"wrong_reply"`       // of episodes with a wrong accepted reply
	NoConsultation  stats.Interval `json:"no_consultation"`   // of episodes that did not consult
	RightReplyGain  stats.Interval `json:"right_reply_gain"`  // right reply − none, paired by problem
	RightReplyPairs int            `json:"right_reply_pairs"` // problems with both kinds of episode
}

// Config is what a probe draws and samples.
type Config struct {
	Levels      []int // world levels the problems are drawn from
	Problems    int
	K           int     // samples per problem: the group size
	Temperature float64 // the rollouts'
	MaxTokens   int     // per answer
	Seed        uint64  // of the problems and the samples
}

// Validate reports every field out of range at once, each by its name.
func (c Config) Validate() error {
	var probs []string
	if c.Problems < 1 {
		probs = append(probs, fmt.Sprintf("problems %d: must be positive", c.Problems))
	}
	if c.K < 2 || c.K > 64 {
		probs = append(probs, fmt.Sprintf("k %d: must be in [2, 64]", c.K))
	}
	if c.MaxTokens < 1 || c.MaxTokens > 4096 {
		probs = append(probs, fmt.Sprintf("max-tokens %d: must be in [1, 4096]", c.MaxTokens))
	}
	if !(c.Temperature >= 0 && c.Temperature <= 10) {
		probs = append(probs, fmt.Sprintf("temperature %v: must be in [0, 10]", c.Temperature))
	}
	if len(c.Levels) == 0 {
		probs = append(probs, "levels: none given")
	}
	for _, lv := range c.Levels {
		if lv < 0 || lv >= len(world.Levels) {
			probs = append(probs, fmt.Sprintf("levels: no world level %d (0 to %d)", lv, len(world.Levels)-1))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("probe: %s", strings.Join(probs, "; "))
	}
	return nil
}

// Run probes the model l (named model in the report) on cfg's problems:
// the policy alone and MEL's replay on l, then the consultation workflow
// w, whose policy is l, at its first step. Progress goes to progress.
func Run(ctx context.Context, progress io.Writer, model string, l *checkpoint.Loaded, w *eapo.Workflow, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	rep := Report{Model: model, Levels: cfg.Levels, Problems: cfg.Problems, K: cfg.K, Temperature: cfg.Temperature, Seed: cfg.Seed}
	examples := world.Examples(cfg.Seed, cfg.Problems, cfg.Levels)
	p := sample.Params{MaxTokens: cfg.MaxTokens, Temperature: float32(cfg.Temperature), N: cfg.K, Seed: cfg.Seed}
	if err := alone(ctx, progress, l, examples, p, &rep); err != nil {
		return Report{}, err
	}
	if err := consultation(ctx, progress, w, l, examples, p, &rep); err != nil {
		return Report{}, err
	}
	return rep, nil
}

// Chunk is how many prompts are sampled at once: the KV caches of
// their streams are what a probe holds in memory.
var Chunk = 64

// generateChunks samples prompts Chunk at a time, each chunk seeded
// as one call for all of them would be (sample.PromptSeed).
func generateChunks(ctx context.Context, gen eval.Generator, prompts []string, p sample.Params) ([][]string, error) {
	out := make([][]string, 0, len(prompts))
	for i := 0; i < len(prompts); i += Chunk {
		call := p
		call.Seed = sample.PromptSeed(p.Seed, i)
		got, err := gen.Generate(ctx, prompts[i:min(i+Chunk, len(prompts))], call)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// rewards scores each problem's answers.
func rewards(examples []task.Example, answers [][]string) [][]bool {
	out := make([][]bool, len(answers))
	for i, as := range answers {
		for _, a := range as {
			r, _ := eval.Reward(examples[i], a)
			out[i] = append(out[i], r > 0)
		}
	}
	return out
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// alone measures the policy alone and MEL's replay.
func alone(ctx context.Context, progress io.Writer, l *checkpoint.Loaded, examples []task.Example, p sample.Params, rep *Report) error {
	gen := eval.NewLocal(l)
	prompts := make([]string, len(examples))
	for i, e := range examples {
		prompts[i] = e.Prompt
	}
	fmt.Fprintf(progress, "probe: the policy alone, greedy and %d samples of %d problems\n", p.N, len(examples))
	greedy, err := generateChunks(ctx, gen, prompts, sample.Params{MaxTokens: p.MaxTokens, N: 1})
	if err != nil {
		return err
	}
	right := 0
	for _, r := range rewards(examples, greedy) {
		right += countTrue(r)
	}
	rep.Greedy = stats.WilsonInterval(right, len(examples))
	answers, err := generateChunks(ctx, gen, prompts, p)
	if err != nil {
		return err
	}
	scored := rewards(examples, answers)
	for _, as := range answers {
		for _, a := range as {
			rep.Steps.Add(a)
		}
	}
	var sampled, zero int
	type pair struct {
		i              int
		correct, wrong string
	}
	var pairs []pair
	for i, r := range scored {
		n := countTrue(r)
		sampled += n
		if n == 0 || n == len(r) {
			zero++
			continue
		}
		pr := pair{i: i}
		for j, ok := range r {
			if ok && pr.correct == "" {
				pr.correct = answers[i][j]
			} else if !ok && pr.wrong == "" {
				pr.wrong = answers[i][j]
			}
		}
		pairs = append(pairs, pr)
	}
	rep.Sampled = stats.WilsonInterval(sampled, len(examples)*p.N)
	rep.ZeroVariance = stats.WilsonInterval(zero, len(examples))

	// MEL: one meta-experience per pair, as the policy writes it at the
	// rollouts' temperature.
	var format mel.World
	rep.Pairs = len(pairs)
	fmt.Fprintf(progress, "probe: MEL, %d meta-experiences and their replays\n", len(pairs))
	requests := make([]string, len(pairs))
	for j, pr := range pairs {
		requests[j] = format.Request(examples[pr.i].Prompt, pr.correct, pr.wrong)
	}
	one := p
	one.N, one.Seed = 1, p.Seed+1
	replies, err := generateChunks(ctx, gen, requests, one)
	if err != nil {
		return err
	}
	var replayed []task.Example
	var replays []string
	for j, pr := range pairs {
		m, err := format.Parse(replies[j][0])
		if err != nil {
			continue
		}
		replayed = append(replayed, examples[pr.i])
		replays = append(replays, format.Replay(examples[pr.i].Prompt, m))
	}
	rep.Parsed = len(replays)
	if len(replays) == 0 {
		return nil
	}
	// The validation replay (eq. 6), then k fresh answers with M and k
	// without it, drawn apart from it so that validation selects Ms, not
	// the answers measured.
	one.Seed = p.Seed + 2
	validation, err := generateChunks(ctx, gen, replays, one)
	if err != nil {
		return err
	}
	fresh := p
	fresh.Seed = p.Seed + 3
	with, err := generateChunks(ctx, gen, replays, fresh)
	if err != nil {
		return err
	}
	plain := make([]string, len(replayed))
	for j, e := range replayed {
		plain[j] = e.Prompt
	}
	without, err := generateChunks(ctx, gen, plain, fresh)
	if err != nil {
		return err
	}
	valid, withR, withoutR := rewards(replayed, validation), rewards(replayed, with), rewards(replayed, without)
	var gain, gainAll, gainFail []float64
	var withN, withoutN int
	for j := range replayed {
		d := float64(countTrue(withR[j])-countTrue(withoutR[j])) / float64(p.N)
		gainAll = append(gainAll, d)
		if !valid[j][0] {
			gainFail = append(gainFail, d)
			continue
		}
		rep.Validated++
		gain = append(gain, d)
		withN += countTrue(withR[j])
		withoutN += countTrue(withoutR[j])
	}
	rep.ReplayWith = stats.WilsonInterval(withN, rep.Validated*p.N)
	rep.ReplayWithout = stats.WilsonInterval(withoutN, rep.Validated*p.N)
	rep.ReplayGain, rep.ReplayGainAll, rep.ReplayGainFail = stats.MeanInterval(gain), stats.MeanInterval(gainAll), stats.MeanInterval(gainFail)
	return nil
}

// consultation runs the workflow's episodes at its first step, every reply accepted, and reads from each episode's text whether
// the replies it accepted were right.
func consultation(ctx context.Context, progress io.Writer, w *eapo.Workflow, l *checkpoint.Loaded, examples []task.Example, p sample.Params, rep *Report) error {
	fmt.Fprintf(progress, "probe: EAPO, %d episodes of %d problems\n", p.N, len(examples))
	toks := make([][]int32, len(examples))
	for i, e := range examples {
		toks[i] = l.Encode(e.Prompt)
	}
	p.StopTokens = append(append([]int32(nil), p.StopTokens...), l.StopTokens...)
	p.Seed += 4
	var groups []rollout.Group
	for i := 0; i < len(toks); i += Chunk {
		end := min(i+Chunk, len(toks))
		g, _, err := w.Consultation.Episodes(ctx, w.Policy, w.Render, toks[i:end], examples[i:end], p.N, p, 0)
		if err != nil {
			return err
		}
		groups = append(groups, g...)
	}
	var consulted, readable int
	var right, wrong, none tally // episodes by their accepted replies
	var gain []float64
	for i, g := range groups {
		var groupRight, groupNone tally
		for _, t := range g.Trajectories {
			rep.Episodes++
			r, _ := eval.Reward(examples[i], t.PolicyText)
			ok := r > 0
			calls := t.Counts[eapo.EnvCalls] + t.Counts[rollout.EnvUnanswered]
			// A query is readable when the expert it went to could read
			// it; an action that did not parse counts as one unreadable
			// query.
			asked := int(t.Counts[eapo.EnvAsked])
			rep.Queries += asked + int(t.Counts[eapo.EnvMalformed])
			readable += asked - int(t.Counts[eapo.EnvFail+eapo.FailUnreadable])
			if calls == 0 {
				none.add(ok)
				groupNone.add(ok)
				continue
			}
			consulted++
			accepted, allRight := acceptedReplies(t.Text)
			switch {
			case accepted > 0 && allRight:
				right.add(ok)
				groupRight.add(ok)
			case accepted > 0:
				wrong.add(ok)
			}
		}
		if groupRight.n > 0 && groupNone.n > 0 {
			gain = append(gain, groupRight.rate()-groupNone.rate())
		}
	}
	rep.Consulting = stats.WilsonInterval(consulted, rep.Episodes)
	rep.Readable = stats.WilsonInterval(readable, rep.Queries)
	rep.RightReply = stats.WilsonInterval(right.ok, right.n)
	rep.WrongReply = stats.WilsonInterval(wrong.ok, wrong.n)
	rep.NoConsultation = stats.WilsonInterval(none.ok, none.n)
	rep.RightReplyGain, rep.RightReplyPairs = stats.MeanInterval(gain), len(gain)
	return nil
}

// acceptedReplies reads an episode's text: each consultation line, the
// reply lines after it, and for each reply that came, whether it is the
// value of the question asked.
func acceptedReplies(text string) (accepted int, allRight bool) {
	allRight = true
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		qs, err := world.ParseConsult(lines[i] + "\n")
		if err != nil || !strings.HasPrefix(lines[i], "?") {
			continue
		}
		for j, q := range qs {
			if i+1+j >= len(lines) {
				break
			}
			_, ans, ok := strings.Cut(lines[i+1+j], ":")
			if !ok || !strings.HasPrefix(lines[i+1+j], "!") || ans == "-" {
				continue
			}
			accepted++
			pq, err := world.ParseQuestion(q.Question)
			if err != nil || ans != strconv.FormatInt(pq.Answer, 10) {
				allRight = false
			}
		}
	}
	return accepted, allRight
}

// tally counts episodes and the right ones among them.
type tally struct{ n, ok int }

func (t *tally) add(ok bool) {
	t.n++
	if ok {
		t.ok++
	}
}

func (t tally) rate() float64 { return float64(t.ok) / float64(t.n) }

// Print writes the report as the preconditions table of docs/world.md.
func (r Report) Print(w io.Writer) {
	pp := func(iv stats.Interval) string {
		return fmt.Sprintf("%+.1f pp [%+.1f, %+.1f] (n=%d)", 100*iv.Mean, 100*iv.Low, 100*iv.High, iv.N)
	}
	fmt.Fprintf(w, "model %s, levels %v, %d problems, %d samples at T=%g, seed %d\n\n", r.Model, r.Levels, r.Problems, r.K, r.Temperature, r.Seed)
	fmt.Fprintf(w, "| precondition | measured | holds |\n| --- | --- | --- |\n")
	fmt.Fprintf(w, "| greedy accuracy < 20%% | %s | %v |\n", r.Greedy.Percent(), r.Greedy.Mean < 0.2)
	fmt.Fprintf(w, "| groups of zero variance ≥ 50%% | %s | %v |\n", r.ZeroVariance.Percent(), r.ZeroVariance.Mean >= 0.5)
	fmt.Fprintf(w, "| replay with a validated M − without ≥ 10 pp | %s: %s with, %s without | %v |\n", pp(r.ReplayGain), r.ReplayWith.Percent(), r.ReplayWithout.Percent(), r.ReplayGain.Mean >= 0.1)
	fmt.Fprintf(w, "| accepted right reply − no consultation ≥ 15 pp | %s paired; %s against %s | %v |\n", pp(r.RightReplyGain), r.RightReply.Percent(), r.NoConsultation.Percent(), r.RightReplyGain.Mean >= 0.15)
	fmt.Fprintf(w, "| queries readable ≥ 95%% | %s of %d | %v |\n", r.Readable.Percent(), r.Queries, r.Readable.Mean >= 0.95)
	fmt.Fprintf(w, "\nsampled accuracy %s; MEL: %d pairs, %d parsed, %d validated; gain over every parsed M %s, over rejected ones %s\n",
		r.Sampled.Percent(), r.Pairs, r.Parsed, r.Validated, pp(r.ReplayGainAll), pp(r.ReplayGainFail))
	fmt.Fprintf(w, "EAPO: %d episodes, %s consulted; episodes with a wrong accepted reply %s\n", r.Episodes, r.Consulting.Percent(), r.WrongReply.Percent())
	st := r.Steps
	share := func(n, of int) string { return stats.WilsonInterval(n, of).Percent() }
	fmt.Fprintf(w, "steps of the samples: of %d prone to a slip, %s right, %s the slip, %s other errors; of %d others, %s wrong; %d lines unread\n",
		st.Prone, share(st.ProneRight, st.Prone), share(st.ProneSlip, st.Prone), share(st.Prone-st.ProneRight-st.ProneSlip, st.Prone),
		st.Other, share(st.Other-st.OtherRight, st.Other), st.Unread)
}
