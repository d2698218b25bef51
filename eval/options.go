package eval

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"rlvr/checkpoint"
	client "rlvr/client/openai"
	"rlvr/engine/model"
	"rlvr/internal/atomicfile"
	"rlvr/internal/flagcheck"
	"rlvr/rundir"
	"rlvr/task"
	"rlvr/task/world"
)

// Options are rlvr eval's settings, a field for each of its flags (the
// command binds them and prints the report): which model, which problems,
// how they are prompted and what is measured. Validate reports every
// problem with them at once, naming the flags; Run validates and
// evaluates. The options are read, never written: what the flags leave
// to other settings (a --test-of run's, a --world version's model) is
// worked out in Run.
//
// The hooks at the end are what an evaluation needs of the layers above
// eval (the world's pretrained models, training runs, EAPO's workflow):
// the command fills them.
type Options struct {
	Model, Tokenizer string // --model, --tokenizer
	World            int    // --world: the world version whose model to score, when given
	// Endpoint, with EndpointModel and APIKey, is an OpenAI-compatible
	// server scored instead of a local model.
	Endpoint, EndpointModel, APIKey string
	Data                            string // --data: world, or NAME=PATH
	Levels                          []int  // --levels, of --data world
	Problems, Skip                  int    // --problems, --skip
	WorldWords                      bool   // --world-words
	// Config is what is measured: --k, --temperature, --top-p,
	// --max-tokens, --batch, --seed and --stop.
	Config Config
	// Experts is --experts N, Expert --expert I (read only when given).
	Experts, Expert int
	// Chat, System, Prefix and Suffix are --chat, --system,
	// --prompt-prefix and --prompt-suffix (see Prompting); \n in them is
	// a newline.
	Chat, System, Prefix, Suffix string
	Samples                      string // --samples: a JSON Lines file of every scored completion
	Consult                      string // --consult: a training config with the consultation part
	ConsultOpen                  bool   // --consult-open
	TestOf                       string // --test-of: a world training run's directory
	Precision                    string // --precision
	RunDir                       string // --run: record the evaluation there

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
	// Models opens the local model and names the world's models.
	Models checkpoint.Models
	// TestSplit draws the test problems of the world training run in a
	// directory, with the settings of its config the evaluation takes
	// (for TestOf).
	TestSplit func(run string) ([]task.Example, TestRun, error)
	// Workflow opens EAPO's test-time workflow of the training config at
	// path over the local model l (at modelPath), with each expert asked
	// the whole question first when open (for Consult); examples are the
	// problems as drawn and prompted as l is asked them. done writes the
	// workflow's summary to w and closes its pool.
	Workflow func(path, modelPath string, l *checkpoint.Loaded, open bool, examples, prompted []task.Example) (gen Generator, done func(w io.Writer), err error)
	// Record writes the evaluation as a run without training into dir
	// (for RunDir): the model, the seed the run pairs by, the precision a
	// local model sampled in, and the problems scored.
	Record func(dir, modelPath string, seed uint64, precision model.Precision, examples []task.Example, rep *Report) error
}

// TestRun is what an evaluation takes from the world training run whose
// test problems it scores (Options.TestOf): the settings its config
// evaluates under, each unless its flag is given.
type TestRun struct {
	Model       string // the run's starting model; "" for its world version's
	World       int    // the run's world version
	MaxTokens   int    // max_tokens
	Samples     int    // eval_samples: --k
	Temperature float32
	Batch       int    // sample_batch; 0 for none
	Precision   string // sampler_precision; "" for none
	Seed        uint64
}

// plan is an evaluation as the options resolve it.
type plan struct {
	model     string
	cfg       Config
	precision model.Precision
	prompting Prompting
	draw      Draw
	test      *TestRun
	tested    []task.Example
}

// Validate reports every problem with the options at once, each naming
// its flag, as far as they can be checked before the model is opened.
func (o *Options) Validate() error {
	_, err := o.plan()
	return err
}

// plan checks the options and resolves them.
func (o *Options) plan() (*plan, error) {
	var c flagcheck.Check
	p := &plan{model: o.Model, cfg: o.Config}
	p.cfg.Stop = slices.Clone(o.Config.Stop)
	if o.Given.Has("world") {
		if path := o.Models.Path(o.World); path == "" {
			c.Add("world", "%d: no such world version (%v)", o.World, world.Versions)
		} else {
			p.model = path
		}
	}
	precision := o.Precision
	if o.TestOf != "" {
		precision = o.takeTestRun(&c, p, precision)
	}
	prec, err := model.ParsePrecision(precision)
	if err != nil {
		c.Add("precision", "%s", strings.TrimPrefix(err.Error(), "precision "))
	}
	p.precision = prec
	if o.Endpoint != "" {
		c.URL("endpoint", o.Endpoint)
		if o.Given.Has("precision") {
			c.Add("precision", "sets rlvr's own engine; an --endpoint computes in its own")
		}
	} else {
		c.Error("model", o.Models.Check(p.model))
		if o.Tokenizer != "" {
			c.File("tokenizer", o.Tokenizer)
		}
	}
	o.checkProblems(&c)
	c.IntIn("k", p.cfg.K, 0, flagcheck.MaxSamples)
	c.Sampling(p.cfg.Temperature, p.cfg.TopP, 0, nil, "the --k samples are drawn at it; greedy pass@1 is always scored")
	c.IntIn("max-tokens", p.cfg.MaxTokens, 1, flagcheck.MaxNewTokens)
	c.IntIn("batch", p.cfg.Batch, 1, flagcheck.MaxSamples)
	c.IntIn("experts", o.Experts, 0, len(world.Styles))
	for i, s := range p.cfg.Stop {
		if s == "" {
			c.Add("stop", "an empty string would end every completion at once")
		}
		p.cfg.Stop[i] = flagcheck.Newlines(s)
	}
	p.prompting = Prompting{Chat: o.Chat, System: flagcheck.Newlines(o.System), Prefix: flagcheck.Newlines(o.Prefix),
		Suffix: flagcheck.Newlines(o.Suffix), Expert: o.checkPrompting(&c), Experts: o.Experts}
	switch {
	case o.Consult != "":
		c.File("consult", o.Consult)
	case o.ConsultOpen:
		c.Add("consult-open", "needs --consult, the config of the pool")
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	p.draw = Draw{Levels: o.Levels, Problems: o.Problems, Skip: o.Skip, WorldWords: o.WorldWords, Seed: o.Config.Seed}
	if o.Data != "world" {
		p.draw.Task, p.draw.Path, _ = strings.Cut(o.Data, "=")
	}
	return p, nil
}

// takeTestRun draws the problems of the --test-of run into p and takes
// its settings for the flags not given, returning the precision.
func (o *Options) takeTestRun(c *flagcheck.Check, p *plan, precision string) string {
	for _, name := range []string{"data", "levels", "problems", "skip", "world-words"} {
		if o.Given.Has(name) {
			c.Add(name, "--test-of draws the problems")
		}
	}
	tested, run, err := o.TestSplit(o.TestOf)
	if err != nil {
		c.Add("test-of", "%v", err)
		return precision
	}
	p.test, p.tested = &run, tested
	// The run's own starting model, unless another is named.
	if !o.Given.Has("model") && !o.Given.Has("world") && o.Endpoint == "" {
		if p.model = run.Model; p.model == "" {
			p.model = o.Models.Path(max(run.World, 1))
		}
	}
	flagcheck.Default(o.Given.Has("max-tokens"), &p.cfg.MaxTokens, run.MaxTokens)
	flagcheck.Default(o.Given.Has("k"), &p.cfg.K, run.Samples)
	flagcheck.Default(o.Given.Has("temperature"), &p.cfg.Temperature, run.Temperature)
	flagcheck.Default(o.Given.Has("batch") || run.Batch <= 0, &p.cfg.Batch, run.Batch)
	flagcheck.Default(o.Given.Has("precision") || run.Precision == "", &precision, run.Precision)
	return precision
}

// checkProblems checks the flags that draw the problems.
func (o *Options) checkProblems(c *flagcheck.Check) {
	name, path, isFile := strings.Cut(o.Data, "=")
	switch {
	case o.Data == "world":
		c.Levels(o.Levels, len(world.Levels))
	case !isFile || !slices.Contains(task.Names(), name):
		c.Add("data", "%q: want world or NAME=PATH, NAME one of %s", o.Data, strings.Join(task.Names(), ", "))
	default:
		c.File("data", path)
		if o.Given.Has("levels") {
			c.Add("levels", "is for --data world")
		}
	}
	if o.RunDir != "" {
		if _, err := os.Stat(filepath.Join(o.RunDir, rundir.EvalFile)); err == nil {
			c.Add("run", "%s already holds an evaluation (%s)", o.RunDir, rundir.EvalFile)
		}
	}
	c.IntIn("problems", o.Problems, 1, flagcheck.MaxProblems)
	c.IntIn("skip", o.Skip, 0, flagcheck.MaxProblems)
	if o.WorldWords && o.Data != "world" {
		c.Add("world-words", "is for --data world")
	}
	if o.Data == "world" {
		c.LevelsTotal(o.Levels, o.Problems+o.Skip)
	}
}

// checkPrompting checks the flags that say how examples are prompted, as
// far as they can be checked before the model is opened, and returns the
// --expert index (NoExpert when it is not given).
func (o *Options) checkPrompting(c *flagcheck.Check) int {
	switch o.Chat {
	case "auto", "on", "off":
	default:
		c.Add("chat", "%q: want auto, on or off", o.Chat)
	}
	expert := NoExpert
	if o.Given.Has("expert") {
		expert = o.Expert
		c.IntIn("expert", expert, 0, math.MaxInt)
	}
	endpoint := o.Endpoint != ""
	switch {
	case o.Chat == "off" && o.Given.Has("system"):
		c.Add("system", "is the system prompt of a chat, and --chat off sends plain text")
	case endpoint && o.Chat == "auto" && o.Given.Has("system"):
		c.Add("system", "needs --chat on with --endpoint, which is otherwise sent plain-text completions")
	}
	if o.Chat == "on" {
		if o.Given.Has("prompt-suffix") {
			c.Add("prompt-suffix", "is for plain-text prompts, not --chat on: give a chat's expert prompt with --system")
		}
		if o.Given.Has("prompt-prefix") {
			c.Add("prompt-prefix", "is for plain-text prompts, not --chat on")
		}
		if o.Experts > 0 && endpoint {
			c.Add("experts", "%d: an --endpoint's chats carry one system prompt: give one --expert I at a time", o.Experts)
		}
	}
	return expert
}

// Run validates the options and evaluates: it draws the problems,
// prompts them for the model or endpoint, scores them, writes the
// samples file and records the run when asked, and returns the report.
// w hears how the model is prompted and, with Consult, the
// consultation's summary.
func (o *Options) Run(ctx context.Context, w io.Writer) (*Report, error) {
	p, err := o.plan()
	if err != nil {
		return nil, err
	}
	examples := p.tested
	if p.test != nil {
		// Sampled as the run's own test evaluation is seeded unless
		// --seed says otherwise.
		if !o.Given.Has("seed") {
			p.cfg.Seed = p.test.Seed
		}
	} else if examples, p.cfg.Seed, err = p.draw.Examples(); err != nil {
		return nil, err
	}
	drawn := examples
	gen, prompted, done, err := o.generator(p, w, examples)
	if err != nil {
		return nil, err
	}
	if done != nil {
		defer done(w)
	}
	rep, err := o.score(ctx, gen, prompted, p.cfg)
	if err != nil {
		return nil, err
	}
	if o.RunDir != "" {
		pairSeed := p.cfg.Seed
		if p.test != nil {
			pairSeed = p.test.Seed
		}
		if err := o.Record(o.RunDir, p.model, pairSeed, p.precision, drawn, rep); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// generator opens what answers, the endpoint or the local model (inside
// EAPO's workflow with Consult), and prompts the examples for it, setting
// the expert prompts p.cfg scores; done, when not nil, ends the workflow.
func (o *Options) generator(p *plan, w io.Writer, examples []task.Example) (gen Generator, prompted []task.Example, done func(io.Writer), err error) {
	if o.Endpoint != "" {
		name := o.Endpoint
		if o.EndpointModel != "" {
			name = o.EndpointModel + " at " + o.Endpoint
		}
		remote := &Remote{Client: client.New(client.Config{BaseURL: o.Endpoint, Model: o.EndpointModel, APIKey: o.APIKey}),
			Chat: o.Chat == "on"}
		prompted, remote.System, p.cfg.Experts = p.prompting.Endpoint(w, name, examples)
		return remote, prompted, nil, nil
	}
	l, err := o.Models.Open(p.model, o.Tokenizer)
	if err != nil {
		return nil, nil, nil, err
	}
	l.Model.Precision = p.precision
	if prompted, p.cfg.Experts, err = p.prompting.Local(w, l, examples); err != nil {
		return nil, nil, nil, err
	}
	if o.Consult == "" {
		return NewLocal(l), prompted, nil, nil
	}
	gen, done, err = o.Workflow(o.Consult, p.model, l, o.ConsultOpen, examples, prompted)
	return gen, prompted, done, err
}

// score runs the evaluation, writing every scored completion to the
// samples file when one is asked for: whole, or not at all.
func (o *Options) score(ctx context.Context, gen Generator, examples []task.Example, cfg Config) (rep *Report, err error) {
	if o.Samples == "" {
		return Run(ctx, gen, examples, cfg)
	}
	err = atomicfile.Write(o.Samples, func(w io.Writer) (err error) {
		enc := json.NewEncoder(w)
		cfg.OnSample = func(s Sample) error { return enc.Encode(s) }
		rep, err = Run(ctx, gen, examples, cfg)
		return err
	})
	return rep, err
}
