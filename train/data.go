package train

import (
	"fmt"
	"strings"

	"rlvr/eval"
	"rlvr/method"
	"rlvr/task"
	"rlvr/task/world"
)

// source hands out training examples in a seeded order. A dataset is read
// in epochs, each a fresh seeded shuffle, so a finite file is never read
// past its end; the world is an endless seeded stream. Its whole state is
// the number of examples drawn, which checkpoints keep.
type source struct {
	pool   []task.Example // a dataset's usable examples; nil for the world
	levels []int
	seed   uint64
	drawn  int             // examples handed out so far
	held   map[string]bool // held-out prompts, never trained on
	epoch  int             // the epoch order holds
	order  []task.Example
	chunk  int // the world chunk cached in order
}

// worldChunk is how many world problems are generated at a time.
const worldChunk = 4096

// next returns the next n examples.
func (s *source) next(n int) ([]task.Example, error) {
	out := make([]task.Example, 0, n)
	for len(out) < n {
		e, err := s.at(s.drawn)
		if err != nil {
			return nil, err
		}
		s.drawn++
		if s.pool == nil && s.held[e.Prompt] {
			continue // a world problem that is also held out
		}
		out = append(out, e)
	}
	return out, nil
}

// at is the i-th example of the stream.
func (s *source) at(i int) (task.Example, error) {
	if s.pool == nil {
		k := i / worldChunk
		if s.order == nil || s.chunk != k {
			// Chunks come from seeds of their own, far from the held-out
			// problems' seed.
			s.order, s.chunk = world.Examples(s.seed*1_000_003+2_000_000+uint64(k)*7919, worldChunk, s.levels), k
		}
		return s.order[i%worldChunk], nil
	}
	if len(s.pool) == 0 {
		return task.Example{}, fmt.Errorf("train: no training example left")
	}
	e := i / len(s.pool)
	if s.order == nil || s.epoch != e {
		s.order = append(s.order[:0], s.pool...)
		task.Shuffle(s.order, s.seed+uint64(e)*1_000_003)
		s.epoch = e
	}
	return s.order[i%len(s.pool)], nil
}

// epochs is how many passes over a dataset the examples drawn make.
func (s *source) epochs() float64 {
	if len(s.pool) == 0 {
		return 0
	}
	return float64(s.drawn) / float64(len(s.pool))
}

// DataSummary says what a run's data holds after the unusable examples
// were set aside.
type DataSummary struct {
	Train, HeldOut int
	// NoAnswer counts examples whose gold answer cannot be read, and
	// LongPrompts those whose prompt leaves no room in the context: both are
	// skipped, not scored 0.
	NoAnswer, LongPrompts int
	// Skipped names where each set-aside example was read (file:line) and
	// why.
	Skipped []string
}

// loadData opens the training source and the held-out examples a config
// names, setting aside examples that cannot be verified or prompted.
func loadData(c *RLConfig, r *renderer) (*source, []task.Example, DataSummary, error) {
	var sum DataSummary
	d := &c.Data
	if d.IsWorld() {
		held := world.Examples(c.Seed+1_000_000, c.EvalProblems*len(d.Levels), d.Levels)
		src := &source{levels: d.Levels, seed: c.Seed, held: map[string]bool{}}
		for _, e := range held {
			src.held[e.Prompt] = true
		}
		sum.HeldOut = len(held)
		return src, held, sum, nil
	}
	read := func(path string) ([]task.Example, error) {
		if d.Fields != nil {
			f := d.Fields
			return task.LoadColumns(path, task.Columns{Dataset: d.Name, ID: f.ID, Prompt: f.Question, Messages: f.Messages,
				Answer: f.Answer, Solution: f.Solution, Choices: f.Choices, Kind: f.Kind})
		}
		return task.Load(d.Name, path)
	}
	usable := func(all []task.Example) []task.Example {
		var out []task.Example
		for _, e := range all {
			if _, ok := eval.Reward(e, ""); !ok {
				sum.NoAnswer++
				sum.Skipped = append(sum.Skipped, e.Where()+": no readable gold answer")
				continue
			}
			if _, err := r.Prompt(e, method.Variant{}); err != nil {
				sum.LongPrompts++
				sum.Skipped = append(sum.Skipped, e.Where()+": "+err.Error())
				continue
			}
			out = append(out, e)
		}
		return out
	}
	all, err := read(d.Train)
	if err != nil {
		return nil, nil, sum, err
	}
	pool := usable(all)
	var held []task.Example
	if d.Test != "" {
		test, err := read(d.Test)
		if err != nil {
			return nil, nil, sum, err
		}
		held = usable(test)
		if c.EvalProblems > 0 && len(held) > c.EvalProblems {
			task.Shuffle(held, c.Seed+1_000_000)
			held = held[:c.EvalProblems]
		}
	} else {
		// No test file: hold out EvalProblems examples of the training
		// file, which training then never draws.
		n := c.EvalProblems
		if n == 0 || n >= len(pool) {
			return nil, nil, sum, fmt.Errorf("train: %s: holding out %d of %d usable examples leaves none to train on; name data.test or lower eval_problems", d.Train, n, len(pool))
		}
		task.Shuffle(pool, c.Seed+1_000_000)
		held, pool = pool[:n:n], pool[n:]
	}
	if len(pool) == 0 {
		return nil, nil, sum, fmt.Errorf("train: %s: no usable training example (%d without a readable gold answer, %d with prompts longer than the context)", d.Train, sum.NoAnswer, sum.LongPrompts)
	}
	if len(held) == 0 {
		return nil, nil, sum, fmt.Errorf("train: %s: no usable held-out example", d.Test)
	}
	sum.Train, sum.HeldOut = len(pool), len(held)
	return &source{pool: pool, seed: c.Seed}, held, sum, nil
}

// String is the summary as one line.
func (s DataSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d training examples, %d held out", s.Train, s.HeldOut)
	if s.NoAnswer > 0 || s.LongPrompts > 0 {
		fmt.Fprintf(&b, " (skipped: %d without a readable gold answer, %d with prompts longer than the context)", s.NoAnswer, s.LongPrompts)
	}
	return b.String()
}
