package expert

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"rlvr/task"
)

// Reference is the reference-solution expert (Kind KindReference): it
// answers a question with the dataset's own worked solution of the
// example being worked on (Request.Example) — GSM8K's reasoning, MATH's
// solution — ending with the gold answer as task.ReferenceResponse states
// it. It reads neither the question nor a persona.
//
// It is an oracle, not a model: it knows the training split's answers,
// so a pool with it measures an upper bound on what consulting can give
// (on a CPU machine, the strongest expert there is), never
// what another model would say. An example without a solution fails with
// ErrNoSolution (FailNoSolution), as does a request without an example.
// It is safe for concurrent use.
type Reference struct{}

// Answer implements Answerer.
func (Reference) Answer(ctx context.Context, reqs []Request, done func(int, string, error)) {
	for i, r := range reqs {
		switch {
		case ctx.Err() != nil:
			done(i, "", ctx.Err())
		case r.Example == nil:
			done(i, "", fmt.Errorf("%w: the question came without the example it is about", ErrNoSolution))
		case strings.TrimSpace(r.Example.Solution) == "":
			done(i, "", fmt.Errorf("%w: example %s has none", ErrNoSolution, r.Example.ID))
		default:
			done(i, task.ReferenceResponse(*r.Example), nil)
		}
	}
}

// CheckSolutions reports the reference experts among experts (the list
// named field) when examples, the dataset named dataset, give them nothing
// to answer from: not one example has a reference solution (a file read
// without a solution field). Examples of which only some lack one are
// answered as FailNoSolution when asked; nil examples check nothing.
func CheckSolutions(field string, experts []Config, dataset string, examples []task.Example) error {
	if len(examples) == 0 || task.AnySolution(examples) {
		return nil
	}
	var errs []string
	for i, e := range experts {
		if e.IsReference() {
			errs = append(errs, fmt.Sprintf("%s[%d]: expert %s (kind %s) answers from the dataset's reference solutions, "+
				"but none of the %d examples of %s has one (no \"solution\" field)", field, i, e.Name, KindReference, len(examples), dataset))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
