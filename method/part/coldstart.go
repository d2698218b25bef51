package part

import (
	"context"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/task"
)

// ColdStart is a part's cold start: a protocol the papers' models follow
// from the prompt alone (EAPO's consult action, MEL's four-section
// reflection) that a small model does not, taught by a short SFT stage
// before RL on demonstrations written from training examples. It teaches
// the protocol's form; what the demonstrations say is written by a
// template, an expert or the dataset's reference solution, and is not
// what RL is meant to learn.
type ColdStart struct {
	// Part names the part whose protocol is taught.
	Part string
	// Protocol names what is measured: "consult" (well-formed consult
	// actions where the grant is given), "reflection" (reflections that
	// parse).
	Protocol string
	// Demonstrations writes the demonstrations of examples: sequences
	// whose policy tokens carry weight 1 and whose prompt and environment
	// tokens carry 0. An example it cannot write one for (no reference
	// solution, an expert that failed, a prompt too long) is skipped and
	// counted in sc.Metrics under cold_start/skipped/<reason>.
	Demonstrations func(ctx context.Context, sc *method.StepContext, examples []task.Example) ([]backend.Datum, error)
	// Rate samples the protocol on examples as training will ask for it
	// and counts the samples that follow it: well-formed of n.
	Rate func(ctx context.Context, sc *method.StepContext, examples []task.Example) (wellFormed, n int, err error)
	// Unaided, when the protocol can be declined (EAPO's consult action,
	// which the environment may leave unanswered), writes demonstrations
	// of answering alone after it is: answers[i] is the policy's own
	// greedy answer to examples[i] behind the evaluation prompt, sampled
	// before the stage (train.ColdStartConfig.Unaided). nil: the part has
	// none beyond the stage's own, the evaluation prompt and that answer.
	Unaided func(ctx context.Context, sc *method.StepContext, examples []task.Example, answers [][]int32) ([]backend.Datum, error)
	// Unasked says whether an answer to the evaluation prompt, where the
	// protocol is not offered, follows it all the same (EAPO: a consult
	// action with no grant to write it under); nil: not measured.
	Unasked func(text string) bool
	// NeedsSolutions says the demonstrations are written from the
	// examples' reference solutions, which a dataset must then give.
	NeedsSolutions bool
}
