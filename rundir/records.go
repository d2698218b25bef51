package rundir

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
	// Experts is each expert prompt's greedy accuracy when the run asks
	// under expert prompts (MEML-GRPO's inference per expert); and
	// ExpertMajority the accuracy of their majority vote.
	Experts        map[string]float64 `json:"experts,omitempty"`
	ExpertMajority *float64           `json:"expert_majority,omitempty"`
	// On the test split: its size; the expert best on the final
	// validation evaluation, its test accuracy with a 95% interval, and
	// Delta, the majority vote's accuracy minus it (MEML-GRPO's Table 6).
	Problems int `json:"problems,omitempty"`
	// ProblemSet fingerprints the test problems (their IDs, in order), so
	// that runs compared problem by problem are known to share them.
	ProblemSet string   `json:"problem_set,omitempty"`
	BestExpert string   `json:"best_expert,omitempty"`
	Best       *float64 `json:"best,omitempty"`
	BestLow    *float64 `json:"best_low,omitempty"`
	BestHigh   *float64 `json:"best_high,omitempty"`
	Delta      *float64 `json:"delta,omitempty"`
	// ChosenOn, on the test split, says where the choices reported on it
	// were made (the best expert): the final validation evaluation, its
	// size and source, "validation (200 problems held out of the training
	// file)"; "" when the line reports no choice.
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
