package eval

import (
	"fmt"

	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
)

// Draw is the problems an evaluation scores: a seeded draw from the
// built-in world's levels or from a dataset file, or a part of that draw,
// so that a long evaluation can run in parts whose union is one run's.
type Draw struct {
	// Task is a dataset's task name (task.Names) and Path its file; ""
	// draws from the built-in world.
	Task, Path string
	Levels     []int // world levels, each drawn alike
	// Problems is the number drawn per world level, or in all from a
	// dataset (fewer when the file has fewer).
	Problems int
	// Skip is the number of problems of the draw (per world level) before
	// this part.
	Skip int
	// WorldWords asks the world's problems in words in plain text too, as
	// a base model is asked; a chat always asks them in words.
	WorldWords bool
	Seed       uint64 // of the draw, and of the samples: Config.Seed
}

// Examples returns the draw's part, and the seed under which a Run samples
// them as one run without Skip would (sample.PromptSeed of the part's first
// problem in the whole draw).
func (d Draw) Examples() ([]task.Example, uint64, error) {
	if d.Problems < 1 || d.Skip < 0 {
		return nil, 0, fmt.Errorf("eval: draw of %d problems after %d: want at least 1 after 0 or more", d.Problems, d.Skip)
	}
	if d.Task == "" {
		if len(d.Levels) == 0 {
			return nil, 0, fmt.Errorf("eval: a draw from the world needs at least one level")
		}
		// A chat model is asked in words; plain text keeps the world's own
		// format unless WorldWords.
		all := world.ChatExamples(d.Seed+1000, (d.Skip+d.Problems)*len(d.Levels), d.Levels)
		examples := all[d.Skip*len(d.Levels):]
		if d.WorldWords {
			for i := range examples {
				examples[i].Prompt = examples[i].Messages[0].Content + "\n"
			}
		}
		return examples, sample.PromptSeed(d.Seed, d.Skip*len(d.Levels)), nil
	}
	all, err := task.Load(d.Task, d.Path)
	if err != nil {
		return nil, 0, err
	}
	task.Shuffle(all, d.Seed)
	if d.Skip >= len(all) {
		return nil, 0, fmt.Errorf("eval: skip %d: %s has %d problems", d.Skip, d.Path, len(all))
	}
	return all[d.Skip:min(d.Skip+d.Problems, len(all))], sample.PromptSeed(d.Seed, d.Skip), nil
}
