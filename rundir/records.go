package rundir

import "encoding/json"

// StepField is the key of the training step in a line of metrics.jsonl.
const StepField = "step"

// Eval is one line of eval.jsonl: an evaluation of the model after Step
// training steps (0: the starting model). Read back, a line without
// "step" has Step -1 and one without a greedy field has it NaN.
type Eval struct {
	Step int `json:"step"`
	// Split names the problems: "val" (held out from training, every
	// periodic evaluation) or "test" (scored once, after the last step).
	Split string `json:"split"`
	// Source says where the problems come from, as it follows their
	// count: "held out of the training file" (never trained on), "from
	// the test file", …; "" when the writer does not say.
	Source string `json:"source,omitempty"`
	// Greedy is the greedy accuracy; GreedyLow and GreedyHigh bound its
	// 95% interval.
	Greedy     float64 `json:"greedy"`
	GreedyLow  float64 `json:"greedy_low"`
	GreedyHigh float64 `json:"greedy_high"`
	// On the test split: its size.
	Problems int `json:"problems,omitempty"`
	// ProblemSet fingerprints the test problems (their IDs, in order), so
	// that runs compared problem by problem are known to share them.
	ProblemSet string `json:"problem_set,omitempty"`
	// Outcomes is each problem's greedy outcome, in the problems' order:
	// '1' right, '0' wrong, '-' not scored (eval.Report.Outcomes), so that
	// two runs scored on the same problems are compared problem by
	// problem. Lines written before it was kept have none.
	Outcomes string `json:"outcomes,omitempty"`
	// ChosenOn, on the test split, says where the choice an evaluator
	// reports on it was made (the best expert): the final validation
	// evaluation, its size and source, "validation (200 problems held out
	// of the training file)"; "" when the line reports no choice.
	ChosenOn string `json:"chosen_on,omitempty"`
	// With eval_samples, at the end: n answers per problem at
	// SampleTemperature, their mean accuracy (avg@n), pass@n (keyed by n)
	// and the mean per-problem variance of correctness (EAPO's Pass@32
	// mean and Var).
	Samples           int                `json:"samples,omitempty"`
	SampleTemperature float32            `json:"sample_temperature,omitempty"`
	AvgAtK            *float64           `json:"avg_at_k,omitempty"`
	PassAtK           map[string]float64 `json:"pass_at_k,omitempty"`
	Variance          *float64           `json:"variance,omitempty"`
	// Evaluators holds what each evaluator of the run's parts recorded
	// (part.Evaluator), by the evaluator's name: its own record, as JSON,
	// whose type is its package's ("expert_prompts": MEML-GRPO's experts
	// and their vote). See [EvalRecord].
	Evaluators map[string]json.RawMessage `json:"evaluators,omitempty"`
	// Seconds is the wall time the evaluation took in the process that
	// wrote it (of one resumed after a kill, the part left); 0 in lines
	// written before it was kept.
	Seconds float64 `json:"seconds,omitempty"`
}

// Sample is one line of samples.jsonl: a text that a part of the method
// shows beside an evaluation (MEL's latest validated meta-experience),
// which rlvr report shows under its title. Read back, a line without
// "step" has Step -1.
type Sample struct {
	Step  int    `json:"step"` // the evaluation's step
	Title string `json:"title"`
	Text  string `json:"text"`
}
