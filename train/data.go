package train

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"rlvr/eval"
	"rlvr/expert/collect"
	"rlvr/method"
	"rlvr/rundir"
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
	drawn  int                     // examples handed out so far
	held   map[string]bool         // held-out prompts, never trained on
	side   func(task.Example) bool // the warm-up/RL side the run trains on; nil: every question
	epoch  int                     // the epoch order holds
	order  []task.Example
	chunk  int // the world chunk cached in order
	// inFileOrder draws a dataset's pool as it is, every epoch, instead
	// of shuffling each epoch (DataConfig.Order "file").
	inFileOrder bool
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
		if s.pool == nil && (s.held[e.Prompt] || s.side != nil && !s.side(e)) {
			continue // a world problem held out, or on the other side of the split
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
	if s.inFileOrder {
		return s.pool[i%len(s.pool)], nil
	}
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
	Train, HeldOut, Test int
	// ValFrom and TestFrom say where the validation and test problems
	// come from (FromTrainFile, …).
	ValFrom, TestFrom string
	// NoAnswer counts examples whose gold answer cannot be read, and
	// LongPrompts those whose prompt leaves no room in the context: both are
	// skipped, not scored 0.
	NoAnswer, LongPrompts int
	// OtherSide counts training questions on the other side of the
	// warm-up/RL split. Of a D_ME file's answers, NotExpert counts those
	// the run does not train (other experts' answers, failed ones and,
	// with dme_answers correct, wrong ones), and NotQuestion those to
	// questions the run does not train on.
	OtherSide, NotExpert, NotQuestion int
	// Skipped names where each set-aside example was read (file:line) and
	// why.
	Skipped []string
}

// heldOut are a run's held-out problems: Val scored during training (and
// used to choose among expert prompts), Test only at the end.
type heldOut struct {
	Val, Test []task.Example
}

// sideOf is the warm-up/RL split a config asks for, nil when it asks for
// none.
func sideOf(d *DataConfig) func(task.Example) bool {
	if d.WarmupFraction <= 0 {
		return nil
	}
	warm, f := d.Part == "warmup", d.WarmupFraction
	return func(e task.Example) bool { return task.InWarmup(e, f) == warm }
}

// worldHeldOut draws a world run's held-out problems, validation then test
// problems not among them, and the prompts of both, which training never
// draws.
func worldHeldOut(c *RLConfig) (heldOut, map[string]bool) {
	var held heldOut
	d := &c.Data
	held.Val = world.Examples(c.Seed+1_000_000, c.EvalProblems*len(d.Levels), d.Levels)
	seen := map[string]bool{}
	for _, e := range held.Val {
		seen[e.Prompt] = true
	}
	for _, e := range world.Examples(c.Seed+3_000_000, c.TestProblems*len(d.Levels), d.Levels) {
		if !seen[e.Prompt] {
			held.Test = append(held.Test, e)
		}
	}
	for _, e := range held.Test {
		seen[e.Prompt] = true
	}
	return held, seen
}

// TestSplit returns the test problems that the training run in runDir
// scores after its last step, read from its config.yaml, and that config.
// Only a world run's can be drawn again without its model and files: a
// dataset run's depend on its tokenizer and data files.
func TestSplit(runDir string) ([]task.Example, *RLConfig, error) {
	path := filepath.Join(runDir, rundir.ConfigFile)
	c, err := LoadRLConfig(path, "")
	if err != nil {
		return nil, nil, err
	}
	if _, err := c.Resolve(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case !c.Data.IsWorld():
		return nil, nil, fmt.Errorf("%s: the run trains on %s: only a world run's test split can be drawn again", path, c.Data.Name)
	case c.TestProblems == 0:
		return nil, nil, fmt.Errorf("%s: the run holds out no test problems (test_problems is 0)", path)
	}
	held, _ := worldHeldOut(&c)
	return held.Test, &c, nil
}

// loadData opens the training source and the held-out examples a config
// names, setting aside examples that cannot be verified or prompted. The
// method's prompt variants say what a D_ME file's answers are trained
// behind (dmeExamples).
func loadData(c *RLConfig, r *renderer, variants []method.Variant) (*source, heldOut, DataSummary, error) {
	var sum DataSummary
	var held heldOut
	d := &c.Data
	sum.ValFrom, sum.TestFrom = splitSources(d)
	side := sideOf(d)
	if d.IsWorld() {
		var seen map[string]bool
		held, seen = worldHeldOut(c)
		sum.HeldOut, sum.Test = len(held.Val), len(held.Test)
		if d.DME == "" {
			return &source{levels: d.Levels, seed: c.Seed, held: seen, side: side}, held, sum, nil
		}
		pool, err := dmeExamples(c, variants, nil, seen, side, &sum)
		if err != nil {
			return nil, held, sum, err
		}
		sum.Train = len(pool)
		return &source{pool: pool, seed: c.Seed}, held, sum, nil
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
		return nil, held, sum, err
	}
	pool := usable(all)
	readUsable := func(path string) ([]task.Example, error) {
		e, err := read(path)
		return usable(e), err
	}
	if d.Validation != "" {
		pool, held, err = validationApart(c, pool, readUsable)
	} else {
		err = heldFromOneFile(c, &pool, &held, readUsable)
	}
	if err != nil {
		return nil, held, sum, err
	}
	if side != nil {
		kept := pool[:0]
		for _, e := range pool {
			if side(e) {
				kept = append(kept, e)
			} else {
				sum.OtherSide++
			}
		}
		pool = kept
	}
	if d.DME != "" {
		if pool, err = dmeExamples(c, variants, pool, nil, nil, &sum); err != nil {
			return nil, held, sum, err
		}
	}
	if len(pool) == 0 {
		return nil, held, sum, fmt.Errorf("train: %s: no usable training example (%d without a readable gold answer, %d with prompts longer than the context, %d on the other side of the warm-up split)", d.Train, sum.NoAnswer, sum.LongPrompts, sum.OtherSide)
	}
	if len(held.Val) == 0 {
		return nil, held, sum, fmt.Errorf("train: %s: no usable validation example", firstOf(d.ValidationFile(), d.Test, d.Train))
	}
	if d.Validation != "" && len(held.Test) == 0 {
		return nil, held, sum, fmt.Errorf("train: data.test %s: no usable test example", d.Test)
	}
	sum.Train, sum.HeldOut, sum.Test = len(pool), len(held.Val), len(held.Test)
	return &source{pool: pool, seed: c.Seed, inFileOrder: d.Order == OrderFile}, held, sum, nil
}

// heldFromOneFile draws the held-out problems as data.validation "" asks:
// validation then test problems from data.test or, without it, from the
// training pool, which keeps the rest. read reads a file's usable
// examples.
func heldFromOneFile(c *RLConfig, pool *[]task.Example, held *heldOut, read func(string) ([]task.Example, error)) error {
	d := &c.Data
	var rest []task.Example // held-out candidates beyond validation
	if d.Test != "" {
		test, err := read(d.Test)
		if err != nil {
			return err
		}
		rest = test
		task.Shuffle(rest, c.Seed+1_000_000)
	} else {
		// No test file: the held-out problems come from the training
		// file, which training then never draws.
		n := c.EvalProblems + c.TestProblems
		if c.EvalProblems == 0 || n >= len(*pool) {
			return fmt.Errorf("train: %s: holding out %d of %d usable examples leaves none to train on; name data.test or lower eval_problems", d.Train, n, len(*pool))
		}
		rest = holdOut(pool, n, c.Seed)
	}
	nVal := len(rest)
	if c.EvalProblems > 0 {
		nVal = min(nVal, c.EvalProblems)
	} else if c.TestProblems > 0 {
		nVal = max(0, nVal-c.TestProblems)
	}
	held.Val, rest = rest[:nVal:nVal], rest[nVal:]
	if c.TestProblems > 0 {
		if len(rest) == 0 {
			return fmt.Errorf("train: test_problems = %d, but the held-out examples all went to validation (eval_problems = %d); name more or lower eval_problems", c.TestProblems, c.EvalProblems)
		}
		held.Test = rest[:min(len(rest), c.TestProblems)]
	}
	return nil
}

// validationApart draws the held-out problems as a set data.validation
// asks: the test split is data.test, all of it or the first test_problems
// of its seeded shuffle; the validation problems are held out of the
// training pool (ValidationTrain), which it returns without them, or read
// from a validation file. read reads a file's usable examples.
func validationApart(c *RLConfig, pool []task.Example, read func(string) ([]task.Example, error)) ([]task.Example, heldOut, error) {
	d := &c.Data
	var held heldOut
	test, err := read(d.Test)
	if err != nil {
		return nil, held, err
	}
	if c.TestProblems > 0 {
		task.Shuffle(test, c.Seed+1_000_000)
		test = test[:min(len(test), c.TestProblems)]
	}
	held.Test = test
	if d.Validation == ValidationTrain {
		if c.EvalProblems >= len(pool) {
			return nil, held, fmt.Errorf("train: data.validation train: holding out %d of the %d usable examples of %s leaves none to train on; lower eval_problems", c.EvalProblems, len(pool), d.Train)
		}
		held.Val = holdOut(&pool, c.EvalProblems, c.Seed)
		return pool, held, nil
	}
	val, err := read(d.Validation)
	if err != nil {
		return nil, held, fmt.Errorf("train: data.validation: %w", err)
	}
	task.Shuffle(val, c.Seed+1_000_000)
	if c.EvalProblems > 0 {
		val = val[:min(len(val), c.EvalProblems)]
	}
	held.Val = val
	return pool, held, nil
}

// The places a run's held-out problems come from (rundir.Eval.Source), each
// said as it follows a count: "200 problems held out of the training file".
const (
	FromTrainFile      = "held out of the training file"
	FromTestFile       = "from the test file"
	FromValidationFile = "from the validation file"
	FromWorld          = "generated by the world, apart from training"
)

// splitSources says where a run's validation and test problems come from
// (rundir.Eval.Source).
func splitSources(d *DataConfig) (val, test string) {
	switch {
	case d.IsWorld():
		return FromWorld, FromWorld + " and validation"
	case d.Validation == ValidationTrain:
		return FromTrainFile, FromTestFile
	case d.Validation != "":
		return FromValidationFile, FromTestFile
	case d.Test != "":
		return FromTestFile, FromTestFile + ", apart from validation"
	}
	return FromTrainFile, FromTrainFile + ", apart from validation"
}

// holdOut takes n examples out of a training pool, the first n of its
// seeded shuffle, and returns them; the pool keeps the rest, in that
// shuffled order. The same seed and pool hold out the same examples, so
// runs on the two sides of a warm-up split hold out the same ones.
func holdOut(pool *[]task.Example, n int, seed uint64) []task.Example {
	p := *pool
	task.Shuffle(p, seed+1_000_000)
	*pool = p[n:]
	return p[:n:n]
}

// firstOf is the first of its strings that is not empty.
func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// dmeExamples turns a D_ME file into SFT examples: one per kept answer,
// the answer as its solution. When the method asks under prompt variants
// (MEML-GRPO's expert prompts: MEF), the answers of expert i are kept for
// the variant named E<i> and trained behind it only (method.VariantKey);
// without variants, the answers of data.dme_experts, or of every expert
// but the reference, are trained behind the plain prompt (SFT
// distillation). On a dataset, an answer is kept only when its question is
// one of the run's training examples (questions), whose answer kind and
// chat messages it takes. On the world (questions nil), answers to
// held-out questions and to questions on the other side of the split are
// skipped.
func dmeExamples(c *RLConfig, variants []method.Variant, questions []task.Example, held map[string]bool, side func(task.Example) bool, sum *DataSummary) ([]task.Example, error) {
	path := c.Data.DME
	recs, lines, err := collect.ReadDMELines(path)
	if err != nil {
		return nil, fmt.Errorf("train: data.dme: %w", err)
	}
	byID := map[string]task.Example{}
	for _, e := range questions {
		byID[e.ID] = e
	}
	prompted := len(variants) > 0
	var chosen []string // the variants trained, by name
	for _, v := range variants {
		chosen = append(chosen, v.Name)
	}
	if !prompted {
		experts := slices.Clone(c.Data.DMEExperts)
		if len(experts) == 0 {
			for _, r := range recs {
				if r.Expert > 0 && !slices.Contains(experts, r.Expert) {
					experts = append(experts, r.Expert)
				}
			}
			slices.Sort(experts)
		}
		for _, i := range experts {
			chosen = append(chosen, task.ExpertName(i))
		}
	}
	trained := map[string]int{}
	var out []task.Example
	for j, r := range recs {
		where := fmt.Sprintf("%s:%d", path, lines[j])
		if !slices.Contains(chosen, task.ExpertName(r.Expert)) || r.Response == "" || !r.Correct && c.Data.DMEAnswers != "all" {
			sum.NotExpert++
			continue
		}
		e := task.Example{ID: r.ID, Prompt: r.Question, Answer: r.Answer, Kind: task.Math}
		if questions != nil {
			q, ok := byID[r.ID]
			if !ok {
				sum.NotQuestion++
				sum.Skipped = append(sum.Skipped, where+": "+r.ID+" is not a training question of this run (held out, on the other side of the warm-up split, or not in "+c.Data.Train+")")
				continue
			}
			e = q
		} else if held[e.Prompt] || side != nil && !side(e) {
			sum.NotQuestion++
			continue
		}
		e.Solution, e.Source = r.Response, where
		if prompted {
			e.Meta = maps.Clone(e.Meta)
			if e.Meta == nil {
				e.Meta = map[string]string{}
			}
			e.Meta[method.VariantKey] = task.ExpertName(r.Expert)
		}
		trained[task.ExpertName(r.Expert)]++
		out = append(out, e)
	}
	for _, name := range chosen {
		if trained[name] == 0 {
			return nil, fmt.Errorf("train: data.dme: %s has no usable answer of expert %s (experts trained: %v)", path, name, chosen)
		}
	}
	return out, nil
}

// log writes the summary and up to 20 of the examples set aside, for a
// dataset or D_ME: the world's generated problems need no account.
func (s DataSummary) log(c *RLConfig, logf func(string, ...any)) {
	if c.Data.IsWorld() && c.Data.DME == "" {
		return
	}
	logf("data: %v", s)
	for i, where := range s.Skipped {
		if i == 20 {
			logf("data: … and %d more set aside", len(s.Skipped)-i)
			break
		}
		logf("data: set aside %s", where)
	}
}

// String is the summary as one line.
func (s DataSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d training examples, %d for validation", s.Train, s.HeldOut)
	if s.ValFrom != "" {
		fmt.Fprintf(&b, " (%s)", s.ValFrom)
	}
	if s.Test > 0 {
		fmt.Fprintf(&b, " + %d for test", s.Test)
		if s.TestFrom != "" {
			fmt.Fprintf(&b, " (%s)", s.TestFrom)
		}
	}
	if s.NoAnswer > 0 || s.LongPrompts > 0 {
		fmt.Fprintf(&b, " (skipped: %d without a readable gold answer, %d with prompts longer than the context)", s.NoAnswer, s.LongPrompts)
	}
	if s.OtherSide > 0 {
		fmt.Fprintf(&b, "; %d on the other side of the warm-up split", s.OtherSide)
	}
	if s.NotExpert > 0 || s.NotQuestion > 0 {
		fmt.Fprintf(&b, "; D_ME answers not trained: %d of other experts, failed or wrong, %d to questions not trained on", s.NotExpert, s.NotQuestion)
	}
	return b.String()
}
