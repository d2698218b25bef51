package eval

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	Seed        uint64
	// Experts are expert-prompt suffixes appended to each prompt
	// (MEML-GRPO's P_i); each is evaluated greedily, with the error-overlap
	// table across them and their majority vote.
	Experts []string
	// ExpertNames label Experts in reports; empty means E0, E1, …
	ExpertNames []string
	// Batch is how many prompts go to the generator at once; 0 means 64.
	Batch int
}

// Report is an evaluation's result.
type Report struct {
	Problems int
	Skipped  int // examples whose gold answer could not be read
	Greedy   Interval
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
	ExpertMajority *Interval
	Overlap        *Overlap
}

// ExpertResult is one expert prompt's greedy accuracy.
type ExpertResult struct {
	Name     string
	Accuracy Interval
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

// Run evaluates gen on examples.
func Run(ctx context.Context, gen Generator, examples []task.Example, cfg Config) (*Report, error) {
	var usable []task.Example
	rep := &Report{K: cfg.K}
	for _, e := range examples {
		if _, ok := Reward(e, ""); ok {
			usable = append(usable, e)
		} else {
			rep.Skipped++
		}
	}
	rep.Problems = len(usable)
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
	greedy := sample.Params{MaxTokens: maxTokens, Stop: cfg.Stop, Seed: cfg.Seed}
	// score runs prompts (one suffix for all) and returns, per problem, the
	// number of correct samples and their answers.
	score := func(suffix string, p sample.Params) ([]int, [][]string, error) {
		correct := make([]int, len(usable))
		answers := make([][]string, len(usable))
		for lo := 0; lo < len(usable); lo += batch {
			hi := min(lo+batch, len(usable))
			prompts := make([]string, 0, hi-lo)
			for _, e := range usable[lo:hi] {
				prompts = append(prompts, e.Prompt+suffix)
			}
			out, err := gen.Generate(ctx, prompts, p)
			if err != nil {
				return nil, nil, err
			}
			for i, texts := range out {
				e := usable[lo+i]
				for _, t := range texts {
					if r, _ := Reward(e, t); r > 0 {
						correct[lo+i]++
					}
					answers[lo+i] = append(answers[lo+i], Answer(e, t))
				}
			}
		}
		return correct, answers, nil
	}
	c, _, err := score("", greedy)
	if err != nil {
		return nil, err
	}
	rep.Greedy = WilsonInterval(sum(c), len(c))
	if cfg.K > 0 {
		p := greedy
		p.N, p.Temperature, p.TopP = cfg.K, cfg.Temperature, cfg.TopP
		if p.Temperature == 0 {
			p.Temperature = 1
		}
		rep.Temperature = p.Temperature
		c, answers, err := score("", p)
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
		for x, suffix := range cfg.Experts {
			c, answers, err := score(suffix, greedy)
			if err != nil {
				return nil, err
			}
			right[x] = make([]bool, len(c))
			for i := range c {
				right[x][i] = c[i] > 0
				votes[i] = append(votes[i], answers[i][0])
			}
			name := fmt.Sprintf("E%d", x)
			if x < len(cfg.ExpertNames) {
				name = cfg.ExpertNames[x]
			}
			rep.Experts = append(rep.Experts, ExpertResult{Name: name, Accuracy: WilsonInterval(sum(c), len(c))})
		}
		rep.Overlap = overlap(rep.Experts, right)
		majRight := 0
		for i, v := range votes {
			if a, _ := Majority(v); a != "" {
				if r, _ := Reward(usable[i], majorityText(usable[i], a)); r > 0 {
					majRight++
				}
			}
		}
		w := WilsonInterval(majRight, len(usable))
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

func overlap(experts []ExpertResult, right [][]bool) *Overlap {
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
		b.WriteString("errors shared by each pair:\n          ")
		for _, e := range r.Experts {
			fmt.Fprintf(&b, "%7s", e.Name)
		}
		b.WriteByte('\n')
		for i, e := range r.Experts {
			fmt.Fprintf(&b, "%-10s", e.Name)
			for j := range r.Experts {
				fmt.Fprintf(&b, "%7d", r.Overlap.Shared[i][j])
			}
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "majority vote of the experts: %s\n", pct(r.ExpertMajority.Mean))
	}
	return b.String()
}
