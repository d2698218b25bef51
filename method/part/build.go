package part

import (
	"errors"
	"fmt"

	"rlvr/eval"
	"rlvr/method"
	"rlvr/rundir"
	"rlvr/task"
)

// Build is the method under construction that the listed parts join. The
// loop fills what a part may read; the parts fill the rest, and the loop
// then assembles method.RL (or method.Supervised, which takes only the
// variants) from it.
type Build struct {
	// What a part may read.

	Run    *Run
	MaxLen int  // the model's context, in tokens
	Chat   bool // the policy is prompted through a chat template
	// Policy is the starting model's directory: an expert pool may hold
	// copies of the policy.
	Policy string
	// Log receives notices for the person running; never nil.
	Log func(format string, args ...any)

	// What the parts add.

	// Variants are the prompts every question is asked under (MEML-GRPO's
	// expert prompts); none asks the plain prompt once.
	Variants []method.Variant
	// Rollout makes the groups; nil samples single-turn answers. One part
	// at most sets it.
	Rollout method.Rollout
	// Shapers adjust the verified rewards, in order.
	Shapers []method.Shaper
	// Filter keeps groups out of the objective's batch; one part at most
	// sets it.
	Filter method.Filter
	// Extras add loss terms from every scored group, in order.
	Extras []method.Extra
	// Grant is added to a chat's system prompt in the training prompts
	// that open an episode (EAPO's consult action); evaluation and
	// single-turn prompts go without it.
	Grant string
	// Evaluators add to every held-out evaluation.
	Evaluators []Evaluator
	// ColdStarts are the protocols a cold start (cold_start:) teaches
	// before RL, one per part that has one.
	ColdStarts []ColdStart

	closers []func() error
}

// OnClose registers what Close releases: a resource a part opened, such as
// an expert pool.
func (b *Build) OnClose(f func() error) { b.closers = append(b.closers, f) }

// Close releases what the parts opened, the last opened first.
func (b *Build) Close() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// Join has every part b.Run lists join b, in registry order, each with its
// section in sections (resolved). On an error it closes what was opened.
func Join(b *Build, sections Sections) error {
	for _, p := range registry {
		if !b.Run.Has(p.Name) {
			continue
		}
		sec, ok := sections[p.Name]
		if !ok {
			b.Close()
			return fmt.Errorf("part %s: the config has no section for it; resolve the config first", p.Name)
		}
		if err := sec.Join(b); err != nil {
			b.Close()
			return err
		}
	}
	return nil
}

// Evaluation is one held-out evaluation of a run under way, which the
// evaluators add to before eval.Run scores it.
type Evaluation struct {
	Split string // "val" or "test"
	Step  int    // steps trained so far
	// Final marks the evaluation that takes the end-of-run statistics:
	// the test split's, or without one the last validation.
	Final    bool
	Examples []task.Example
	// Prompt renders an example as training asks it under a variant,
	// without the grant of a multi-turn action: evaluation is single-turn.
	Prompt func(task.Example, method.Variant) (string, error)
	// Config is what eval.Run measures; evaluators add to it (expert
	// prompts, samples per problem).
	Config *eval.Config
	// ChosenOn, on the test split, names the validation evaluation scored
	// just before it, as a line's chosen_on says it: "validation (200
	// problems held out of the training file)". An evaluator that
	// reports a choice made there (the best expert) sets the line's
	// ChosenOn to it.
	ChosenOn string
}

// Evaluator adds to every held-out evaluation: what it measures to the
// evaluation's config, and what it found to the line written to
// eval.jsonl. A part's evaluator writes a record of its own there
// (rundir.Eval.SetRecord), which the part declares (Part.Records). An
// evaluator may keep what it saw on validation for the test split that
// follows it at the end of the run.
type Evaluator interface {
	Prepare(ev *Evaluation) error
	Record(ev *Evaluation, rep *eval.Report, rec *rundir.Eval) error
}
