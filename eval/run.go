package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"rlvr/internal/stats"
	"rlvr/sample"
	"rlvr/task"
)

// Config is what an evaluation measures. The zero value measures greedy
// pass@1 on plain prompts only.
type Config struct {
	// K is the number of samples per problem at Temperature, for pass@k,
	// avg@k, maj@k and the per-problem variance; 0 samples nothing.
	K int
	// PassK lists the k of pass@k (each at most K); empty means 1 and K.
	PassK       []int
	Temperature float32 // for the K samples; 0 means 1
	TopP        float32 // nucleus mass for the K samples; 0 keeps all
	MaxTokens   int     // per completion; 0 means 256
	Stop        []string
	// Seed is the sampling seed: the i-th example scored (those skipped
	// as unreadable or too long not counted) is sampled with
	// sample.PromptSeed(Seed, i), however the examples are batched.
	Seed uint64
	// Experts are expert prompts (MEML-GRPO's P_i); each is evaluated
	// greedily, with the error-overlap table across them and their
	// majority vote.
	Experts []Expert
	// Batch is how many sequences (prompts × samples per prompt) go to the
	// generator at once, or, for a Streamer, are in flight at once; it
	// bounds the KV cache. 0 means 64.
	Batch int
	// OnSample, when set, receives every completion as it is scored, so
	// that a run's outputs can be kept and results paired by problem.
	OnSample func(Sample) error
	// Scored, when set, gives the completions an earlier evaluation of the
	// same prompts and settings scored for a problem in a pass (nil for
	// none), which this one scores again instead of sampling: an
	// evaluation stopped part way resumes. They are not passed to
	// OnSample again. The rest keep their seeds, whatever was resumed.
	Scored func(pass, id string) []string
	// Chunk bounds the problems a streaming generator is given at once
	// (0: a whole pass), so that OnSample hears of each chunk's
	// completions when it ends rather than when the pass does.
	Chunk int
}

// Expert is one expert prompt of an evaluation: every problem is also
// answered greedily under it.
type Expert struct {
	Name string // in reports; "" means E0, E1, … by its position
	// Suffix follows each example's prompt, as the world's "@E1\n" follows
	// a plain-text prompt.
	Suffix string
	// Prompts, when set, are the prompts under this expert in place of the
	// suffixed ones, one per example given to Run and in its order: a chat
	// model's expert prompt is a system message inside its chat template,
	// which no suffix can add.
	Prompts []string
}

// Sample is one scored completion of an evaluation.
type Sample struct {
	ID     string // the example's task.Example.ID
	Pass   string // "greedy", "sampled" or an expert's name
	Index  int    // the completion's index within its problem and pass
	Prompt string `json:",omitempty"` // the prompt as sent, suffix included; set on Index 0 only
	Gold   string // the gold answer as the dataset writes it
	Text   string // the completion
	Answer string // the answer read from Text ("" for none)
	Reward float64
}

// Report is an evaluation's result.
type Report struct {
	// Problems counts the examples evaluated, Failed ones included.
	Problems int
	Skipped  int // examples whose gold answer could not be read
	// SkippedLong counts the examples skipped because a prompt of theirs
	// (under an expert prompt, if any) does not fit the model's context
	// with room for MaxTokens, and LongSources names them (see
	// task.Example.Where). Only a PromptFitter generator is asked.
	SkippedLong int
	LongSources []string `json:",omitempty"`
	// Failed lists the examples whose prompts the generator refused (a
	// remote endpoint's 400), scored as wrong wherever refused.
	Failed []Failure `json:",omitempty"`
	Greedy stats.Interval
	// Outcomes is each example's greedy outcome, one byte per example
	// given to Run and in its order: '1' right, '0' wrong, '-' not scored
	// (an unreadable gold answer or a prompt too long). Two evaluations
	// of the same examples are compared with it problem by problem.
	Outcomes string
	// Sampled results, when K > 0.
	K           int
	Temperature float32
	PassAtK     map[int]float64
	AvgAtK      float64
	MajAtK      float64
	Variance    float64 // EAPO's mean per-problem variance
	Experts     []ExpertResult
	// ExpertMajority is the accuracy of the majority vote of the experts'
	// greedy answers (MEML-GRPO's inference across experts).
	ExpertMajority *stats.Interval
	Overlap        *Overlap
	// Seconds is the wall time Run took: what a budget is measured by
	// (of an evaluation resumed from kept samples, the part left).
	Seconds float64
}

// Failure is an example whose prompt a generator refused.
type Failure struct {
	Source string // the example's task.Example.Where
	Error  string // the generator's reason, as it gave it
}

// ExpertResult is one expert prompt's greedy accuracy, and its outcome on
// each example as Report.Outcomes writes them.
type ExpertResult struct {
	Name     string
	Accuracy stats.Interval
	Outcomes string
}

// Overlap is MEML-GRPO's Table 1: for each expert, the problems it gets
// wrong and how many of those another expert gets right; and the problems
// every expert gets wrong.
type Overlap struct {
	Rows []OverlapRow
	// Shared[i][j] counts the problems experts i and j both get wrong (the
	// diagonal is each expert's errors).
	Shared   [][]int
	AllWrong int
	Problems int
}

// OverlapRow is one expert's line of the overlap table.
type OverlapRow struct {
	Name              string
	Errors            int
	CorrectedByOthers int
}

// Run evaluates gen on examples. It skips, and counts in the Report, the
// examples whose gold answer cannot be read and, when gen is a
// PromptFitter, those whose prompts do not fit its model's context; it
// scores as wrong the prompts gen refuses (see RefusedError). It fails
// when no example is left to evaluate, or gen fails otherwise.
func Run(ctx context.Context, gen Generator, examples []task.Example, cfg Config) (*Report, error) {
	start := time.Now()
	rep := &Report{K: cfg.K}
	defer func() { rep.Seconds = time.Since(start).Seconds() }()
	if len(examples) == 0 {
		return rep, errors.New("eval: no examples")
	}
	names := make([]string, len(cfg.Experts))
	for x, ex := range cfg.Experts {
		names[x] = ex.Name
		if names[x] == "" {
			names[x] = task.ExpertName(x)
		}
		if ex.Prompts != nil && len(ex.Prompts) != len(examples) {
			return rep, fmt.Errorf("eval: expert %s has %d prompts for %d examples", names[x], len(ex.Prompts), len(examples))
		}
	}
	var usable []task.Example
	var index []int // usable[i] is examples[index[i]]
	for i, e := range examples {
		if _, ok := Reward(e, ""); ok {
			usable = append(usable, e)
			index = append(index, i)
		} else {
			rep.Skipped++
		}
	}
	// expertPrompt is usable example i's prompt under expert x.
	expertPrompt := func(x, i int) string {
		if ps := cfg.Experts[x].Prompts; ps != nil {
			return ps[index[i]]
		}
		return usable[i].Prompt + cfg.Experts[x].Suffix
	}
	if len(usable) == 0 {
		return rep, fmt.Errorf("eval: no example has a readable gold answer (%d skipped)", rep.Skipped)
	}
	batch := cfg.Batch
	if batch <= 0 {
		batch = 64
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 256
	}
	if f, ok := gen.(PromptFitter); ok {
		var fit []task.Example
		var fitIndex []int
		for i, e := range usable {
			fits := f.Fits(e.Prompt, maxTokens)
			for x := range cfg.Experts {
				fits = fits && f.Fits(expertPrompt(x, i), maxTokens)
			}
			if fits {
				fit, fitIndex = append(fit, e), append(fitIndex, index[i])
			} else {
				rep.SkippedLong++
				rep.LongSources = append(rep.LongSources, e.Where())
			}
		}
		usable, index = fit, fitIndex
		if len(usable) == 0 {
			return rep, fmt.Errorf("eval: no example's prompt fits the model's context with room for %d tokens (%d skipped, such as %s)",
				maxTokens, rep.SkippedLong, rep.LongSources[0])
		}
	}
	rep.Problems = len(usable)
	failed := make([]bool, len(usable))
	greedy := sample.Params{MaxTokens: maxTokens, Stop: cfg.Stop, Seed: cfg.Seed}
	plain := func(i int) string { return usable[i].Prompt }
	// score runs the prompts of the usable examples (prompt(i) is example
	// i's) and returns, per problem, the number of correct samples and
	// their answers (at least one, "" for none). A pass of which the
	// generator refuses every prompt fails: what it refuses is then more
	// likely the request than the prompts.
	score := func(pass string, prompt func(i int) string, p sample.Params) ([]int, [][]string, error) {
		correct := make([]int, len(usable))
		answers := make([][]string, len(usable))
		var refusals int
		var first Failure
		// Each prompt is sampled p.N times: fewer prompts per call keep
		// the sequences in flight, and the memory they hold, at batch,
		// unless the generator bounds them itself.
		perCall, passGen := max(1, batch/max(1, p.N)), gen
		if s, ok := gen.(Streamer); ok {
			if bounded, ok := s.Streaming(batch); ok {
				perCall, passGen = len(usable), bounded
				if cfg.Chunk > 0 {
					perCall = cfg.Chunk
				}
			}
		}
		// scored is problem i's completions in this pass from an earlier
		// evaluation, when it has them all.
		scored := func(i int) []string {
			if cfg.Scored == nil {
				return nil
			}
			if texts := cfg.Scored(pass, usable[i].ID); len(texts) == max(1, p.N) {
				return texts
			}
			return nil
		}
		// take scores problem i's completions.
		take := func(i int, texts []string, prompt string, emit bool) error {
			e := usable[i]
			for j, t := range texts {
				r, _ := Reward(e, t)
				if r > 0 {
					correct[i]++
				}
				a := Answer(e, t)
				answers[i] = append(answers[i], a)
				if emit && cfg.OnSample != nil {
					s := Sample{ID: e.ID, Pass: pass, Index: j, Gold: e.Answer, Text: t, Answer: a, Reward: r}
					if j == 0 {
						s.Prompt = prompt
					}
					if err := cfg.OnSample(s); err != nil {
						return err
					}
				}
			}
			if len(answers[i]) == 0 {
				answers[i] = []string{""}
			}
			return nil
		}
		// The problems left go to the generator in runs of consecutive
		// ones, each seeded by its first problem's index.
		for lo := 0; lo < len(usable); {
			if texts := scored(lo); texts != nil {
				if err := take(lo, texts, "", false); err != nil {
					return nil, nil, err
				}
				lo++
				continue
			}
			hi := lo + 1
			for hi < len(usable) && hi-lo < perCall && scored(hi) == nil {
				hi++
			}
			prompts := make([]string, 0, hi-lo)
			for i := lo; i < hi; i++ {
				prompts = append(prompts, prompt(i))
			}
			call := p
			call.Seed = sample.PromptSeed(p.Seed, lo)
			out, err := passGen.Generate(ctx, prompts, call)
			var refused *RefusedError
			switch {
			case errors.As(err, &refused):
				for _, pe := range refused.Prompts {
					if pe.Index < 0 || pe.Index >= len(prompts) {
						return nil, nil, fmt.Errorf("eval: the generator refused prompt %d of a batch of %d", pe.Index, len(prompts))
					}
					i := lo + pe.Index
					if refusals++; refusals == 1 {
						first = Failure{Source: usable[i].Where(), Error: pe.Err.Error()}
					}
					if !failed[i] {
						failed[i] = true
						rep.Failed = append(rep.Failed, Failure{Source: usable[i].Where(), Error: pe.Err.Error()})
					}
				}
			case err != nil:
				var pe *PromptError
				if errors.As(err, &pe) && pe.Index >= 0 && pe.Index < len(prompts) {
					return nil, nil, fmt.Errorf("eval: %s: %w", usable[lo+pe.Index].Where(), pe.Err)
				}
				return nil, nil, err
			}
			if len(out) != len(prompts) {
				return nil, nil, fmt.Errorf("eval: the generator answered %d prompts of %d", len(out), len(prompts))
			}
			for i, texts := range out {
				if err := take(lo+i, texts, prompts[i], true); err != nil {
					return nil, nil, err
				}
			}
			lo = hi
		}
		if refusals == len(usable) {
			return nil, nil, fmt.Errorf("eval: the generator refused every prompt (first %s: %s)", first.Source, first.Error)
		}
		return correct, answers, nil
	}
	c, _, err := score("greedy", plain, greedy)
	if err != nil {
		return nil, err
	}
	rep.Greedy = stats.WilsonInterval(sum(c), len(c))
	// outcomesOf writes correct, one count per usable example, as
	// Report.Outcomes does: in the order of the examples given to Run.
	outcomesOf := func(correct []int) string {
		outcomes := bytes.Repeat([]byte{'-'}, len(examples))
		for i, ci := range correct {
			outcomes[index[i]] = '0'
			if ci > 0 {
				outcomes[index[i]] = '1'
			}
		}
		return string(outcomes)
	}
	rep.Outcomes = outcomesOf(c)
	if cfg.K > 0 {
		p := greedy
		p.N, p.Temperature, p.TopP = cfg.K, cfg.Temperature, cfg.TopP
		if p.Temperature == 0 {
			p.Temperature = 1
		}
		rep.Temperature = p.Temperature
		c, answers, err := score("sampled", plain, p)
		if err != nil {
			return nil, err
		}
		ks := cfg.PassK
		if len(ks) == 0 {
			ks = []int{1, cfg.K}
		}
		rep.PassAtK = map[int]float64{}
		for _, k := range ks {
			if k < 1 || k > cfg.K {
				return nil, fmt.Errorf("eval: pass@%d needs 1 ≤ k ≤ K = %d", k, cfg.K)
			}
			var s float64
			for _, ci := range c {
				s += PassAtK(cfg.K, ci, k)
			}
			rep.PassAtK[k] = s / float64(len(c))
		}
		var avg, variance, maj float64
		for i, ci := range c {
			avg += float64(ci) / float64(cfg.K)
			variance += Variance(cfg.K, ci)
			if a, _ := Majority(answers[i]); a != "" {
				if r, _ := Reward(usable[i], majorityText(usable[i], a)); r > 0 {
					maj++
				}
			}
		}
		n := float64(len(c))
		rep.AvgAtK, rep.Variance, rep.MajAtK = avg/n, variance/n, maj/n
	}
	if len(cfg.Experts) > 0 {
		right := make([][]bool, len(cfg.Experts)) // [expert][problem]
		votes := make([][]string, len(usable))
		for x, name := range names {
			c, answers, err := score(name, func(i int) string { return expertPrompt(x, i) }, greedy)
			if err != nil {
				return nil, err
			}
			right[x] = make([]bool, len(c))
			for i := range c {
				right[x][i] = c[i] > 0
				votes[i] = append(votes[i], answers[i][0])
			}
			rep.Experts = append(rep.Experts, ExpertResult{Name: name, Accuracy: stats.WilsonInterval(sum(c), len(c)), Outcomes: outcomesOf(c)})
		}
		rep.Overlap = NewOverlap(rep.Experts, right)
		majRight := 0
		for i, v := range votes {
			if a, _ := Majority(v); a != "" {
				if r, _ := Reward(usable[i], majorityText(usable[i], a)); r > 0 {
					majRight++
				}
			}
		}
		w := stats.WilsonInterval(majRight, len(usable))
		rep.ExpertMajority = &w
	}
	return rep, nil
}

// majorityText turns a voted answer back into a response the verifier
// reads, in the form of the example's kind.
func majorityText(e task.Example, answer string) string {
	if e.Kind == task.Math {
		return "#### " + answer
	}
	return answer
}

// NewOverlap tabulates the errors of experts (only their names are read)
// from right[x][i], whether expert x answered problem i correctly. Every
// right[x] must have the same length, and there must be at least one
// expert.
func NewOverlap(experts []ExpertResult, right [][]bool) *Overlap {
	o := &Overlap{Problems: len(right[0])}
	for x := range right {
		row := OverlapRow{Name: experts[x].Name}
		for i := range right[x] {
			if right[x][i] {
				continue
			}
			row.Errors++
			for y := range right {
				if y != x && right[y][i] {
					row.CorrectedByOthers++
					break
				}
			}
		}
		o.Rows = append(o.Rows, row)
	}
	o.Shared = make([][]int, len(right))
	for x := range right {
		o.Shared[x] = make([]int, len(right))
		for y := range right {
			for i := range right[x] {
				if !right[x][i] && !right[y][i] {
					o.Shared[x][y]++
				}
			}
		}
	}
	for i := 0; i < o.Problems; i++ {
		all := true
		for x := range right {
			all = all && !right[x][i]
		}
		if all {
			o.AllWrong++
		}
	}
	return o
}

// list joins up to 5 names, and counts the others.
func list(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// Table renders the report for a person.
func (r *Report) Table() string {
	var b strings.Builder
	pct := func(x float64) string { return fmt.Sprintf("%5.1f%%", 100*x) }
	fmt.Fprintf(&b, "problems: %d", r.Problems)
	if r.Skipped > 0 {
		fmt.Fprintf(&b, " (%d skipped: unreadable gold answer)", r.Skipped)
	}
	if r.SkippedLong > 0 {
		fmt.Fprintf(&b, "\nskipped %d too long for the model's context: %s", r.SkippedLong, list(r.LongSources))
	}
	if len(r.Failed) > 0 {
		sources := make([]string, len(r.Failed))
		for i, f := range r.Failed {
			sources[i] = f.Source
		}
		fmt.Fprintf(&b, "\nfailed %d, refused by the generator and scored wrong: %s (first: %s)", len(r.Failed), list(sources), r.Failed[0].Error)
	}
	fmt.Fprintf(&b, "\ngreedy pass@1   %s  [%s, %s]\n", pct(r.Greedy.Mean), pct(r.Greedy.Low), pct(r.Greedy.High))
	if r.K > 0 {
		fmt.Fprintf(&b, "at temperature %.2g with %d samples:\n", r.Temperature, r.K)
		for _, k := range slices.Sorted(maps.Keys(r.PassAtK)) {
			fmt.Fprintf(&b, "  pass@%-3d      %s\n", k, pct(r.PassAtK[k]))
		}
		fmt.Fprintf(&b, "  avg@%-3d       %s\n  maj@%-3d       %s\n  variance      %.4f\n", r.K, pct(r.AvgAtK), r.K, pct(r.MajAtK), r.Variance)
	}
	if len(r.Experts) > 0 {
		fmt.Fprintf(&b, "\n%-10s %9s %8s %20s\n", "expert", "accuracy", "errors", "corrected by others")
		for i, e := range r.Experts {
			row := r.Overlap.Rows[i]
			corr := "-"
			if row.Errors > 0 {
				corr = fmt.Sprintf("%d (%.0f%%)", row.CorrectedByOthers, 100*float64(row.CorrectedByOthers)/float64(row.Errors))
			}
			fmt.Fprintf(&b, "%-10s %9s %8d %20s\n", e.Name, pct(e.Accuracy.Mean), row.Errors, corr)
		}
		fmt.Fprintf(&b, "wrong for every expert: %d (%s)\n", r.Overlap.AllWrong, pct(float64(r.Overlap.AllWrong)/float64(r.Overlap.Problems)))
		names := make([]string, len(r.Experts))
		for i, e := range r.Experts {
			names[i] = e.Name
		}
		b.WriteString(SharedTable(names, r.Overlap.Shared))
		fmt.Fprintf(&b, "majority vote of the experts: %s\n", pct(r.ExpertMajority.Mean))
	}
	return b.String()
}

// SharedTable renders the pairwise shared-error counts of experts (Table 1's
// overlap: shared[i][j] problems both i and j get wrong) as aligned text
// under the heading "errors shared by each pair:".
func SharedTable(names []string, shared [][]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "errors shared by each pair:\n%-16s", "")
	for _, n := range names {
		fmt.Fprintf(&b, " %8s", n)
	}
	b.WriteByte('\n')
	for i, n := range names {
		fmt.Fprintf(&b, "%-16s", n)
		for j := range names {
			fmt.Fprintf(&b, " %8d", shared[i][j])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
