package probe

import (
	"fmt"

	"rlvr/task"
)

// The splits a probe draws a dataset's problems from (Split.Name). The
// test split is not one of them: what a probe measures chooses how a run
// is set up, and no choice is made on the test problems.
const (
	SplitTrain      = "train"
	SplitValidation = "validation"
)

// validationTrain is a config's data.validation holding the validation
// problems out of the training file.
const validationTrain = "train"

// heldSeed is the offset of the seed of a run's held-out draws.
const heldSeed = 1_000_000

// Split is a dataset as a training config splits it (its data section:
// data.train, data.test, data.validation, eval_problems, test_problems and
// the seed), from which a probe draws its problems. It holds out what a
// training run with that config holds out, the same examples: the
// training split is data.train without the validation and test problems
// held out of it, and the validation split is data.validation's problems
// (held out of data.train, or a file of their own).
type Split struct {
	Name                    string // SplitTrain or SplitValidation
	Train, Test, Validation string // the files; Validation "", "train" or a file
	EvalProblems            int    // validation problems (0 with a validation file: all of it)
	TestProblems            int    // test problems held out of data.train when there is no data.test
	Seed                    uint64 // the run's seed, which draws its held-out problems
	// Read reads a file's examples, as the run reads its dataset.
	Read func(path string) ([]task.Example, error)
	// Usable reports whether the run uses an example: its gold answer
	// reads and its prompt fits the context.
	Usable func(task.Example) bool
	// Side, when set, is the side of the warm-up split the run trains on
	// (data.warmup_fraction and data.part); the training split is that
	// side.
	Side func(task.Example) bool
}

// Draw returns n problems of the split, the first of a shuffle seeded by
// seed (all of them when it has fewer), and says where they come from.
func (s Split) Draw(n int, seed uint64) ([]task.Example, string, error) {
	if s.Name != SplitTrain && s.Name != SplitValidation {
		return nil, "", fmt.Errorf("probe: split %q: draw from %s or %s; the test split is never probed", s.Name, SplitTrain, SplitValidation)
	}
	read := func(path string) ([]task.Example, error) {
		all, err := s.Read(path)
		if err != nil {
			return nil, err
		}
		var out []task.Example
		for _, e := range all {
			if s.Usable == nil || s.Usable(e) {
				out = append(out, e)
			}
		}
		return out, nil
	}
	pool, err := read(s.Train)
	if err != nil {
		return nil, "", err
	}
	var val []task.Example
	var from string
	switch {
	case s.Validation == validationTrain:
		if s.EvalProblems >= len(pool) {
			return nil, "", fmt.Errorf("probe: %s: holding out %d validation problems of its %d usable ones leaves none", s.Train, s.EvalProblems, len(pool))
		}
		val = holdOut(&pool, s.EvalProblems, s.Seed)
		from = fmt.Sprintf("%s, without the %d validation problems held out of it", s.Train, len(val))
		if s.Name == SplitValidation {
			from = fmt.Sprintf("the %d validation problems held out of %s", len(val), s.Train)
		}
	case s.Validation != "":
		from = s.Train
		if s.Name == SplitValidation {
			if val, err = read(s.Validation); err != nil {
				return nil, "", fmt.Errorf("probe: data.validation: %w", err)
			}
			task.Shuffle(val, s.Seed+heldSeed)
			if s.EvalProblems > 0 {
				val = val[:min(len(val), s.EvalProblems)]
			}
			from = fmt.Sprintf("the %d validation problems of %s", len(val), s.Validation)
		}
	case s.Test != "":
		if s.Name == SplitValidation {
			return nil, "", fmt.Errorf("probe: the config's validation problems come from data.test (%s), the test split's file: "+
				"set data.validation (train, or a file of its own) to probe validation problems, or probe the training split", s.Test)
		}
		from = s.Train
	default:
		// No test file: the validation and test problems are both held
		// out of the training file.
		held := s.EvalProblems + s.TestProblems
		if s.EvalProblems == 0 || held >= len(pool) {
			return nil, "", fmt.Errorf("probe: %s: holding out %d of its %d usable problems leaves none", s.Train, held, len(pool))
		}
		val = holdOut(&pool, held, s.Seed)[:s.EvalProblems]
		from = fmt.Sprintf("%s, without the %d validation and %d test problems held out of it", s.Train, s.EvalProblems, s.TestProblems)
		if s.Name == SplitValidation {
			from = fmt.Sprintf("the %d validation problems held out of %s", len(val), s.Train)
		}
	}
	drawn := val
	if s.Name == SplitTrain {
		drawn = pool
		if s.Side != nil {
			var kept []task.Example
			for _, e := range pool {
				if s.Side(e) {
					kept = append(kept, e)
				}
			}
			drawn = kept
			from += ", on the side of the warm-up split the run trains on"
		}
	}
	if len(drawn) == 0 {
		return nil, "", fmt.Errorf("probe: the %s split (%s) has no usable problem", s.Name, from)
	}
	drawn = append([]task.Example(nil), drawn...)
	task.Shuffle(drawn, seed)
	drawn = drawn[:min(n, len(drawn))]
	return drawn, fmt.Sprintf("%d problems of the %s split: %s", len(drawn), s.Name, from), nil
}

// holdOut takes n examples out of a pool, the first n of its seeded
// shuffle, as a training run holds them out (train's holdOut), and
// returns them; the pool keeps the rest.
func holdOut(pool *[]task.Example, n int, seed uint64) []task.Example {
	p := *pool
	task.Shuffle(p, seed+heldSeed)
	*pool = p[n:]
	return p[:n:n]
}
