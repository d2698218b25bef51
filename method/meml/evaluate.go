package meml

import (
	"rlvr/eval"
	"rlvr/internal/stats"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
)

// ExpertEvaluator scores a run as MEML-GRPO infers (Table 6): on every
// evaluation each expert prompt's greedy accuracy and the experts'
// majority vote; on the test split at the end also the expert best on the
// validation before it, its test accuracy, and Delta, the vote's accuracy
// minus the best expert's. A Delta near 0 says one expert alone does what
// the ensemble does: mutual learning has spread the experts' skills.
type ExpertEvaluator struct {
	Variants []method.Variant
	// val is each expert's accuracy on the latest validation.
	val map[string]stats.Interval
}

// Prepare implements part.Evaluator: every problem is also asked under
// each expert prompt, rendered as in training.
func (x *ExpertEvaluator) Prepare(ev *part.Evaluation) error {
	for _, v := range x.Variants {
		e := eval.Expert{Name: v.Name, Prompts: make([]string, len(ev.Examples))}
		for i, example := range ev.Examples {
			text, err := ev.Prompt(example, v)
			if err != nil {
				return err
			}
			e.Prompts[i] = text
		}
		ev.Config.Experts = append(ev.Config.Experts, e)
	}
	return nil
}

// Record implements part.Evaluator.
func (x *ExpertEvaluator) Record(ev *part.Evaluation, rep *eval.Report, rec *rundir.Eval) {
	acc := map[string]stats.Interval{}
	rec.Experts = map[string]float64{}
	for _, r := range rep.Experts {
		acc[r.Name] = r.Accuracy
		rec.Experts[r.Name] = r.Accuracy.Mean
	}
	if rep.ExpertMajority != nil {
		rec.ExpertMajority = &rep.ExpertMajority.Mean
	}
	if ev.Split != "test" {
		x.val = acc
		return
	}
	if best := BestExpert(x.Variants, x.val); best != "" {
		b := acc[best]
		rec.BestExpert, rec.Best, rec.BestLow, rec.BestHigh = best, &b.Mean, &b.Low, &b.High
		if rec.ExpertMajority != nil {
			d := *rec.ExpertMajority - b.Mean
			rec.Delta = &d
		}
	}
}

// BestExpert is the variant with the highest accuracy, the first of them
// on a tie; "" without variants.
func BestExpert(variants []method.Variant, acc map[string]stats.Interval) string {
	best := ""
	for _, v := range variants {
		if best == "" || acc[v.Name].Mean > acc[best].Mean {
			best = v.Name
		}
	}
	return best
}
