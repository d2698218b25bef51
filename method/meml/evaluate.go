package meml

import (
	"encoding/json"
	"math"

	"rlvr/eval"
	"rlvr/internal/stats"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
)

// RecordExperts is the name of ExpertEvaluator's record in a line of
// eval.jsonl: "evaluators": {"expert_prompts": {…}}.
const RecordExperts = PartExpertPrompts

// ValueMajority names ExpertRecord's majority vote among the values that
// rlvr report's columns read (rundir.Reading.Values).
const ValueMajority = "expert_majority"

// ExpertRecord is what ExpertEvaluator records of an evaluation
// (MEML-GRPO's Table 6), under RecordExperts.
type ExpertRecord struct {
	// Experts is each expert prompt's greedy accuracy, and Majority the
	// accuracy of their majority vote.
	Experts  map[string]float64 `json:"experts,omitempty"`
	Majority *float64           `json:"expert_majority,omitempty"`
	// On the test split: the expert best on the final validation
	// evaluation, its test accuracy with a 95% interval, and Delta, the
	// majority vote's accuracy minus it.
	BestExpert string   `json:"best_expert,omitempty"`
	Best       *float64 `json:"best,omitempty"`
	BestLow    *float64 `json:"best_low,omitempty"`
	BestHigh   *float64 `json:"best_high,omitempty"`
	Delta      *float64 `json:"delta,omitempty"`
	// Outcomes is each expert prompt's greedy outcome on each problem, as
	// rundir.Eval.Outcomes writes the plain prompt's, on the test split:
	// a run reported by its best expert is compared with another problem
	// by problem on that expert's answers. Lines written before it was
	// kept have none.
	Outcomes map[string]string `json:"outcomes,omitempty"`
}

// legacyFields are the top-level fields of eval.jsonl that held an
// ExpertRecord before lines had "evaluators", in its order.
var legacyFields = []string{"experts", "expert_majority", "best_expert", "best", "best_low", "best_high", "delta"}

// expertRecord is the declaration of ExpertRecord to rundir, which Load
// and rlvr report read it by.
var expertRecord = rundir.EvalRecord{Name: RecordExperts, Choice: "best expert", Legacy: legacyFields,
	Read: readExperts, Choose: chooseExpert}

// ExpertRecordOf reads a line's ExpertRecord, and reports whether it has
// one.
func ExpertRecordOf(e rundir.Eval) (ExpertRecord, bool, error) {
	var x ExpertRecord
	ok, err := e.Record(RecordExperts, &x)
	return x, ok, err
}

// readExperts reads an ExpertRecord for the report: the experts are the
// variants, and the best expert the one chosen.
func readExperts(raw json.RawMessage) (rundir.Reading, error) {
	var x ExpertRecord
	if err := json.Unmarshal(raw, &x); err != nil {
		return rundir.Reading{}, err
	}
	r := rundir.Reading{Variants: x.Experts, VariantOutcomes: x.Outcomes, Acc: math.NaN(), Low: math.NaN(), High: math.NaN()}
	if x.Majority != nil {
		r.Values = map[string]float64{ValueMajority: *x.Majority}
	}
	acc, named := x.Experts[x.BestExpert]
	switch {
	case x.BestExpert == "":
	case x.Best != nil:
		r.Chosen, r.Acc, r.Low, r.High = x.BestExpert, *x.Best, orNaN(x.BestLow), orNaN(x.BestHigh)
	case named:
		r.Chosen, r.Acc = x.BestExpert, acc
	}
	return r, nil
}

// chooseExpert names an expert the best, as rlvr report --expert has
// every run reported under it: on a line that reports a best expert, or
// the test line, with its accuracy there (and a 95% Wilson interval when
// the line counts its problems) and the majority vote's difference to
// it.
func chooseExpert(raw json.RawMessage, name string, line rundir.Eval) (json.RawMessage, bool, error) {
	var x ExpertRecord
	if err := json.Unmarshal(raw, &x); err != nil {
		return nil, false, err
	}
	acc, ok := x.Experts[name]
	if !ok {
		return nil, false, nil
	}
	x.BestExpert = name
	if x.Best != nil || line.Split == "test" {
		x.Best, x.BestLow, x.BestHigh, x.Delta = &acc, nil, nil, nil
		if line.Problems > 0 {
			w := stats.WilsonInterval(int(math.Round(acc*float64(line.Problems))), line.Problems)
			x.BestLow, x.BestHigh = &w.Low, &w.High
		}
		if x.Majority != nil {
			d := *x.Majority - acc
			x.Delta = &d
		}
	}
	b, err := json.Marshal(x)
	return b, true, err
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// ExpertEvaluator scores a run as MEML-GRPO infers (Table 6): on every
// evaluation each expert prompt's greedy accuracy and the experts'
// majority vote; on the test split at the end also the expert best on the
// validation before it, its test accuracy, and Delta, the vote's accuracy
// minus the best expert's. A Delta near 0 says one expert alone does what
// the ensemble does: mutual learning has spread the experts' skills. It
// records them as an ExpertRecord.
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

// Record implements part.Evaluator: the line's ExpertRecord, and on the
// test split where its best expert was chosen.
func (x *ExpertEvaluator) Record(ev *part.Evaluation, rep *eval.Report, rec *rundir.Eval) error {
	out := ExpertRecord{Experts: map[string]float64{}}
	acc := map[string]stats.Interval{}
	for _, r := range rep.Experts {
		acc[r.Name] = r.Accuracy
		out.Experts[r.Name] = r.Accuracy.Mean
		if ev.Split == "test" && r.Outcomes != "" {
			if out.Outcomes == nil {
				out.Outcomes = map[string]string{}
			}
			out.Outcomes[r.Name] = r.Outcomes
		}
	}
	if rep.ExpertMajority != nil {
		out.Majority = &rep.ExpertMajority.Mean
	}
	if ev.Split != "test" {
		x.val = acc
	} else if best := BestExpert(x.Variants, x.val); best != "" {
		b := acc[best]
		out.BestExpert, out.Best, out.BestLow, out.BestHigh = best, &b.Mean, &b.Low, &b.High
		if out.Majority != nil {
			d := *out.Majority - b.Mean
			out.Delta = &d
		}
		rec.ChosenOn = ev.ChosenOn
	}
	return rec.SetRecord(RecordExperts, out)
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
