package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"rlvr/checkpoint"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/expert/prompt"
	"rlvr/internal/flagcheck"
	"rlvr/task"
	"rlvr/task/world"
)

// APIKeyEnv is the environment variable an endpoint's API key is read
// from when no flag gives it.
const APIKeyEnv = "RLVR_API_KEY"

// Bounds on rlvr experts collect's flags.
const (
	maxConcurrency = 1024
	maxRetries     = 100
	maxExperts     = 64
	maxDeadline    = 24 * time.Hour
)

// Options are rlvr experts collect's settings, a field for each of its
// flags (the command binds them and prints the summary): the questions,
// the experts and how they are asked, and the files written. Validate
// reports every problem with them at once, naming the flags; Run
// validates, collects D_ME and writes it to Out. The options are read,
// never written.
type Options struct {
	Data, DataFile string // --data (world or a task name), --data-file
	Levels         []int  // --levels, of --data world
	// Problems is the questions per level of the world; for a dataset,
	// its first Problems when given.
	Problems int
	Seed     uint64
	Warmup   float64 // --warmup-fraction
	// Expert are the --expert flags, NAME=URL[#MODEL] or NAME=PATH;
	// ExpertsFile is --experts, whose experts come first.
	Expert      []string
	ExpertsFile string
	API         string // --api: of the experts that name none
	// Prompt is the template of expert i's prompt P_i (prompt.Render;
	// default: the world's suffix, or the paper's persona for a dataset),
	// and System the instruction before it; \n in them is a newline.
	Prompt, System string
	Out, Cache     string // D_ME, and the cache (default: Out with .cache appended)
	// The limits and sampling of the experts a file entry leaves unset.
	Concurrency, Retries, MaxTokens, Batch int
	Timeout, Deadline                      time.Duration
	Temperature                            float32
	Stop                                   []string
	APIKey                                 string // the endpoints' (default: $APIKeyEnv)
	RetryFailures                          bool

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
	// Models checks and installs the experts that are local models.
	Models checkpoint.Models
	// Progress, when set, starts a display of the pending answers and
	// returns what marks one answered and what ends the display.
	Progress func(pending int) (tick, finish func())
}

// plan is a collection as the options resolve it.
type plan struct {
	experts  []expert.Config // the file's, then the flags'
	fromFile int             // how many come from ExpertsFile
	prompt   string          // P_i's template, after System
	cache    string
}

// Validate reports every problem with the options at once, each naming
// its flag, and the experts' own problems.
func (o *Options) Validate() error {
	_, err := o.plan()
	return err
}

// plan checks the options and resolves them, with the experts to ask:
// the file's and the --expert flags', or on the world without any, its
// scripted experts.
func (o *Options) plan() (*plan, error) {
	isWorld := o.Data == "world"
	var c flagcheck.Check
	o.checkQuestions(&c)
	if o.API != "" && o.API != expert.APICompletion && o.API != expert.APIChat {
		c.Add("api", "%q: want %s or %s", o.API, expert.APICompletion, expert.APIChat)
	}
	p := &plan{prompt: o.Prompt, cache: o.Cache}
	if p.prompt == "" && !o.Given.Has("prompt") {
		p.prompt = prompt.Default.System
		if isWorld {
			p.prompt = prompt.Default.Suffix
		}
	}
	p.prompt = flagcheck.Newlines(p.prompt)
	if !strings.Contains(p.prompt, "{i}") && !strings.Contains(p.prompt, "{name}") {
		c.Add("prompt", "%q has neither {i} nor {name}: every expert would get the same prompt", p.prompt)
	}
	c.NonEmpty("system", o.System, o.Given.Has("system"))
	// The instruction first, then the persona that tells the experts
	// apart, in one message: eval.SystemPrompt, as training renders them.
	p.prompt = eval.SystemPrompt(flagcheck.Newlines(o.System), p.prompt)
	var fromFile []expert.Config
	if o.ExpertsFile != "" {
		before := c.Len()
		c.File("experts", o.ExpertsFile)
		if c.Len() == before {
			var err error
			if fromFile, err = expert.ReadFile(o.ExpertsFile); err != nil {
				c.Add("experts", "%v", err)
			}
		}
	}
	flagExperts := o.parseExpertFlags(&c)
	if len(fromFile)+len(flagExperts) > maxExperts {
		c.Add("experts", "%s and --expert give %d experts: at most %d", o.ExpertsFile, len(fromFile)+len(flagExperts), maxExperts)
	}
	o.checkAsking(&c)
	c.OutFile("out", o.Out)
	if p.cache == "" && !o.Given.Has("cache") {
		p.cache = o.Out + ".cache"
	}
	c.OutFile("cache", p.cache)
	if o.Out != "" && p.cache != "" && filepath.Clean(o.Out) == filepath.Clean(p.cache) {
		c.Add("cache", "%s is --out too: the cache and D_ME must be different files", p.cache)
	}
	if len(flagExperts) == 0 && o.ExpertsFile == "" && !isWorld {
		c.Add("expert", "is required with --data %s (NAME=URL[#MODEL] or NAME=PATH, or --experts FILE)", o.Data)
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if len(flagExperts) == 0 && len(fromFile) == 0 {
		flagExperts = expert.WorldPool()
	}
	if err := o.settle(fromFile, flagExperts); err != nil {
		return nil, err
	}
	p.experts, p.fromFile = append(fromFile, flagExperts...), len(fromFile)
	return p, nil
}

// checkQuestions checks the flags that choose the questions.
func (o *Options) checkQuestions(c *flagcheck.Check) {
	isWorld := o.Data == "world"
	switch {
	case isWorld:
		if o.Given.Has("data-file") {
			c.Add("data-file", "is for a dataset, not --data world")
		}
		c.Levels(o.Levels, len(world.Levels))
	case !slices.Contains(task.Names(), o.Data):
		c.Add("data", "%q: want world or one of %s", o.Data, strings.Join(task.Names(), ", "))
	default:
		if o.DataFile == "" {
			c.Add("data-file", "is required with --data %s", o.Data)
		} else {
			c.File("data-file", o.DataFile)
		}
		if o.Given.Has("levels") {
			c.Add("levels", "is for --data world")
		}
	}
	if math.IsNaN(o.Warmup) || o.Warmup < 0 || o.Warmup >= 1 {
		c.Add("warmup-fraction", "%v: must be in [0, 1)", o.Warmup)
	}
	if isWorld || o.Given.Has("problems") {
		c.IntIn("problems", o.Problems, 1, flagcheck.MaxProblems)
	}
	if isWorld {
		c.LevelsTotal(o.Levels, o.Problems)
	}
}

// checkAsking checks the limits and sampling the experts are asked with.
func (o *Options) checkAsking(c *flagcheck.Check) {
	c.IntIn("concurrency", o.Concurrency, 1, maxConcurrency)
	c.IntIn("retries", o.Retries, 0, maxRetries)
	c.IntIn("max-tokens", o.MaxTokens, 1, flagcheck.MaxNewTokens)
	c.IntIn("batch", o.Batch, 1, flagcheck.MaxSamples)
	if o.Timeout <= 0 || o.Timeout > maxDeadline {
		c.Add("timeout", "%v: must be in (0, %v]", o.Timeout, maxDeadline)
	}
	if o.Deadline <= 0 || o.Deadline > maxDeadline {
		c.Add("deadline", "%v: must be in (0, %v]", o.Deadline, maxDeadline)
	}
	c.Sampling(o.Temperature, 1, 0, o.Stop, "")
}

// settle gives the experts the flags' limits, sampling and key (those of
// the file only where they leave them unset) and checks them all.
func (o *Options) settle(fromFile, flagExperts []expert.Config) error {
	retries := o.Retries
	if retries == 0 {
		retries = -1 // expert.Config's "none"
	}
	for i := range fromFile {
		o.fillFromFlags(&fromFile[i], retries)
	}
	for i := range flagExperts {
		e := &flagExperts[i]
		e.Concurrency, e.Timeout, e.Retries, e.Deadline = o.Concurrency, o.Timeout, retries, o.Deadline
		e.MaxTokens, e.Temperature, e.Stop = o.MaxTokens, o.Temperature, o.Stop
		if e.URL != "" {
			if e.APIKey = o.APIKey; !o.Given.Has("api-key") {
				e.APIKey, e.APIKeyEnv = "", APIKeyEnv
			}
		}
	}
	// --api is the default of every expert that names no api of its own.
	chat := o.API == expert.APIChat || o.API == "" && o.Data != "world"
	var errs []string
	if err := expert.CheckAll(o.ExpertsFile, fromFile, chat); err != nil {
		errs = append(errs, err.Error())
	}
	if err := expert.CheckAll("--expert", flagExperts, chat); err != nil {
		errs = append(errs, err.Error())
	}
	names := map[string]bool{}
	for i, e := range fromFile {
		if e.Name == ReferenceName {
			errs = append(errs, fmt.Sprintf("%s[%d]: the name %q names Expert0, the dataset's reference solution (give a kind: reference expert another name)", o.ExpertsFile, i, e.Name))
		}
		names[e.Name] = true
	}
	for _, e := range flagExperts {
		if names[e.Name] {
			errs = append(errs, fmt.Sprintf("--expert %s: the name is given in %s too", e.Name, o.ExpertsFile))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// fillFromFlags gives an expert of the experts file the flags' values of
// the settings it leaves unset: its limits, sampling and, for an
// endpoint, the bearer token.
func (o *Options) fillFromFlags(e *expert.Config, retries int) {
	if e.Concurrency == 0 {
		e.Concurrency = o.Concurrency
	}
	if e.Timeout == 0 {
		e.Timeout = o.Timeout
	}
	if e.Retries == 0 {
		e.Retries = retries
	}
	if e.Deadline == 0 {
		e.Deadline = o.Deadline
	}
	if e.MaxTokens == 0 {
		e.MaxTokens = o.MaxTokens
	}
	if e.Temperature == 0 {
		e.Temperature = o.Temperature
	}
	if e.Stop == nil {
		e.Stop = o.Stop
	}
	if e.URL != "" && e.APIKeyEnv == "" {
		if e.APIKey = o.APIKey; !o.Given.Has("api-key") {
			e.APIKey, e.APIKeyEnv = "", APIKeyEnv
		}
	}
}

// parseExpertFlags reads the --expert values, NAME=URL[#MODEL] or
// NAME=PATH, as experts' configs, recording every problem in c. A target
// with a scheme (://) is a URL, checked as one, so that a mistyped URL is
// not taken for a path.
func (o *Options) parseExpertFlags(c *flagcheck.Check) []expert.Config {
	if len(o.Expert) > maxExperts {
		c.Add("expert", "given %d times: at most %d experts", len(o.Expert), maxExperts)
		return nil
	}
	var out []expert.Config
	for _, s := range o.Expert {
		name, target, ok := strings.Cut(s, "=")
		switch {
		case !ok || target == "":
			c.Add("expert", "%q: want NAME=URL[#MODEL] or NAME=PATH", s)
			continue
		case name == "" || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
			c.Add("expert", "%q: the name must be non-empty, without spaces or control characters", s)
			continue
		case name == ReferenceName:
			c.Add("expert", "%q: %q names Expert0, the dataset's reference solution", s, name)
			continue
		}
		e := expert.Config{Name: name}
		if strings.Contains(target, "://") {
			e.URL, e.RemoteModel, _ = strings.Cut(target, "#")
			c.URL("expert", e.URL)
		} else {
			e.Model = target
			c.Error("expert", o.Models.Check(target))
		}
		out = append(out, e)
	}
	return out
}

// Run validates the options, asks the experts for the answers the cache
// lacks, writes D_ME to Out and returns the collection. w hears what is
// asked and the warnings.
func (o *Options) Run(ctx context.Context, w io.Writer) (*Result, error) {
	p, err := o.plan()
	if err != nil {
		return nil, err
	}
	examples, err := o.examples()
	if err != nil {
		return nil, err
	}
	if err := expert.CheckSolutions(o.ExpertsFile, p.experts[:p.fromFile], o.dataset(), examples); err != nil {
		return nil, err
	}
	if len(o.Expert) == 0 && o.ExpertsFile == "" {
		fmt.Fprintf(w, "no --expert: asking the world's scripted experts %s-%s, served on loopback\n", task.ExpertName(1), task.ExpertName(len(p.experts)))
	}
	for _, e := range p.experts {
		if e.Model != "" {
			if err := o.Models.Ensure(ctx, e.Model); err != nil {
				return nil, fmt.Errorf("expert %s: %w", e.Name, err)
			}
		}
	}
	pool, err := expert.Open(p.experts, expert.Options{Seed: o.Seed, Batch: o.Batch, Warn: func(msg string) { fmt.Fprintln(w, msg) }})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var tick, finish func()
	cfg := Config{
		Experts:         o.poolExperts(pool, p.prompt),
		ReferencePrompt: prompt.Render(p.prompt, 0, ReferenceName),
		Cache:           p.cache,
		RetryFailures:   o.RetryFailures,
		Warn:            func(msg string) { fmt.Fprintln(w, "rlvr: warning:", msg) },
		Start: func(cached, pending int) {
			if cached > 0 {
				fmt.Fprintf(w, "%s holds %d answers; asking for %d more\n", p.cache, cached, pending)
			}
			if pending > 0 && o.Progress != nil {
				tick, finish = o.Progress(pending)
			}
		},
		Progress: func(Record) {
			if tick != nil {
				tick()
			}
		},
	}
	res, err := Collect(ctx, examples, cfg)
	if finish != nil {
		finish()
	}
	if err != nil {
		if res != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("%w; run the same command again to continue", err)
		}
		return nil, err
	}
	if err := WriteDME(o.Out, res.Records); err != nil {
		return nil, err
	}
	return res, nil
}

// dataset names the options' dataset for a message.
func (o *Options) dataset() string {
	if o.Data == "world" {
		return "the world"
	}
	return o.Data + " (" + o.DataFile + ")"
}

// poolExperts are the pool's members as the collection's experts: expert
// i prompted with P_i (template), and one with a persona of its own asked
// under it, after System's instruction as P_i is.
func (o *Options) poolExperts(pool *expert.Pool, template string) []Expert {
	xs := PoolExperts(pool, template)
	for i := range xs {
		if xs[i].System != "" {
			xs[i].System = eval.SystemPrompt(flagcheck.Newlines(o.System), xs[i].System)
		}
	}
	return xs
}

// examples are the questions the options ask.
func (o *Options) examples() ([]task.Example, error) {
	switch {
	case o.Data == "world" && o.Warmup > 0:
		return warmupWorld(o.Seed, o.Problems, o.Levels, o.Warmup), nil
	case o.Data == "world":
		return world.Examples(o.Seed, o.Problems*len(o.Levels), o.Levels), nil
	}
	all, err := task.Load(o.Data, o.DataFile)
	if err != nil {
		return nil, err
	}
	if o.Warmup > 0 {
		all = slices.DeleteFunc(all, func(e task.Example) bool { return !task.InWarmup(e, o.Warmup) })
	}
	if o.Given.Has("problems") {
		all = all[:min(o.Problems, len(all))]
	}
	return all, nil
}

// warmupWorld draws problems world questions of each level that lie on the
// warm-up side of a split at fraction f.
func warmupWorld(seed uint64, problems int, levels []int, f float64) []task.Example {
	var out []task.Example
	for _, lv := range levels {
		kept := 0
		for _, e := range world.Examples(seed+uint64(lv)*7919, int(float64(problems)/f)*2+64, []int{lv}) {
			if kept < problems && task.InWarmup(e, f) {
				out = append(out, e)
				kept++
			}
		}
	}
	return out
}
