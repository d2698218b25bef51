package train

import (
	"fmt"
	"maps"
	"slices"

	"rlvr/expert"
	"rlvr/task"
)

// solutionReader is a part's section that reads the training examples'
// reference solutions where it is set to (MEL's reference_positive): the
// field that sets it, empty when it is off.
type solutionReader interface {
	SolutionsField() string
}

// expertPool is a part's section that asks a pool of experts (EAPO's
// consultation): the field a config gives the pool at, and its experts.
type expertPool interface {
	ExpertPool() (field string, experts []expert.Config)
}

// checkExperts refuses, before any step runs, experts and sections the
// training data cannot serve: a reference expert (expert.KindReference) on a dataset
// none of whose examples has a reference solution, such as a file read
// through data.fields without a solution field. The world's problems and
// D_ME's lines carry their solutions.
func checkExperts(c *RLConfig, src *source) error {
	if src == nil || len(src.pool) == 0 {
		return nil // the world: every problem comes with its worked solution
	}
	d := &c.Data
	dataset := d.Name
	switch {
	case d.DME != "":
		dataset += " (D_ME " + d.DME + ")"
	case d.Train != "":
		dataset += " (" + d.Train + ")"
	}
	hasSolutions := task.AnySolution(src.pool)
	for _, name := range slices.Sorted(maps.Keys(c.Sections)) {
		if r, ok := c.Sections[name].(solutionReader); ok && !hasSolutions {
			if field := r.SolutionsField(); field != "" {
				return fmt.Errorf("train config: %s reads the reference solutions, but none of the %d training examples of %s has one: drop it or name the file's solution field (data.fields.solution)",
					field, len(src.pool), dataset)
			}
		}
		p, ok := c.Sections[name].(expertPool)
		if !ok {
			continue
		}
		field, experts := p.ExpertPool()
		if err := expert.CheckSolutions(field, experts, dataset, src.pool); err != nil {
			if d.Fields != nil && d.Fields.Solution == "" {
				return fmt.Errorf("train config: %w: name the file's solution field in data.fields.solution", err)
			}
			return fmt.Errorf("train config: %w", err)
		}
	}
	return nil
}
