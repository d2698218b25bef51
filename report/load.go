package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"gopkg.in/yaml.v3"
)

// The files of a run directory.
const (
	ConfigFile  = "config.yaml"
	MetricsFile = "metrics.jsonl"
	EvalFile    = "eval.jsonl"
	ResultFile  = "result.json"
	SamplesFile = "samples.jsonl"
)

// Run is what one training run recorded.
type Run struct {
	// Name labels the run in legends and tables. Load sets it to the
	// directory's base name; Render falls back on the algorithm and seed
	// when two runs share a name.
	Name string
	// Dir is the directory the run was loaded from.
	Dir string

	// Config is config.yaml verbatim, empty when there is none.
	Config string
	// Algorithm, Seed and Model are the top-level scalars of those names in
	// config.yaml, as text; empty when absent.
	Algorithm, Seed, Model string

	// Steps holds metrics.jsonl's records in step order, one per step.
	Steps []Step
	// Evals holds eval.jsonl's records in file order.
	Evals []Eval
	// Result is result.json, nil when there is none.
	Result *Result
	// Samples holds samples.jsonl's records in file order.
	Samples []Sample

	// Warnings lists what Load tolerated: skipped incomplete lines,
	// repeated steps, malformed samples.
	Warnings []string
}

// Sample is a text that a run recorded for reading, such as a generated
// answer or a distilled experience: a line of samples.jsonl.
type Sample struct {
	// Step is the training step the text comes from, -1 when absent.
	Step int
	// Title names the kind of text; samples of one title are shown
	// together. It may be empty.
	Title string
	// Text is the text itself.
	Text string
}

// Step is one optimizer step's metrics.
type Step struct {
	// Step is the optimizer step.
	Step int
	// Values maps each numeric, non-null field of the record other than
	// "step" (reward_mean, kl, step_s, …, and any other key) to its value;
	// a boolean field other than the known metrics is 0 or 1.
	Values map[string]float64
}

// Eval is one evaluation of a model.
type Eval struct {
	// Step is the training step evaluated, -1 when the record has none.
	Step int
	// Split names the evaluation data, such as "val"; it may be empty.
	Split string
	// Greedy is the greedy accuracy in [0, 1], and GreedyLow and GreedyHigh
	// bound its 95% interval. Every float field is NaN when absent.
	Greedy, GreedyLow, GreedyHigh float64
	// PassAtK maps k, as a decimal string, to pass@k; nil when absent.
	PassAtK map[string]float64
	// AvgAtK and MajAtK are avg@k and maj@k. A record that gives them per k,
	// as objects, is read as the value at the largest k.
	AvgAtK, MajAtK float64
	// Variance is the mean per-problem variance of the k samples' rewards.
	Variance float64

	// Problems is how many problems were evaluated, 0 when absent, and
	// ProblemSet their fingerprint ("" when absent): runs with the same
	// fingerprint were scored on the same problems.
	Problems   int
	ProblemSet string
	// Experts maps each expert prompt's name ("E1") to the greedy accuracy
	// under it; nil for a run without expert prompts.
	Experts map[string]float64
	// ExpertMajority is the accuracy of the majority vote across the
	// expert prompts.
	ExpertMajority float64
	// BestExpert names the expert with the highest accuracy on the run's
	// final validation evaluation, empty when absent; Best is that
	// expert's accuracy here, and BestLow and BestHigh bound its 95%
	// interval.
	BestExpert              string
	Best, BestLow, BestHigh float64
	// Delta is ExpertMajority − Best (MEML-GRPO's Table 6).
	Delta float64
}

// Result is the final evaluation of a run.
type Result struct {
	Eval
	// Before is the same evaluation of the starting model, nil when absent.
	Before *Eval
}

// ParseError reports a record of a run's file that could not be read.
type ParseError struct {
	Path string // the file
	Line int    // 1-based line number; 0 when unknown
	Err  error
}

// Error returns "path:line: err".
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// Value returns the value of the metric key and whether the step has it.
func (s Step) Value(key string) (float64, bool) {
	v, ok := s.Values[key]
	return v, ok
}

// Series returns the steps that have the metric key and its values there.
func (r *Run) Series(key string) (steps, values []float64) {
	for _, s := range r.Steps {
		if v, ok := s.Values[key]; ok {
			steps = append(steps, float64(s.Step))
			values = append(values, v)
		}
	}
	return steps, values
}

// Keys returns the metric keys that some step has, sorted.
func (r *Run) Keys() []string {
	seen := map[string]bool{}
	for _, s := range r.Steps {
		for k := range s.Values {
			seen[k] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// LastStep returns the largest step in metrics.jsonl, or failing that in
// eval.jsonl and result.json, and -1 when there is none.
func (r *Run) LastStep() int {
	if n := len(r.Steps); n > 0 {
		return r.Steps[n-1].Step
	}
	last := -1
	for _, e := range r.Evals {
		last = max(last, e.Step)
	}
	if r.Result != nil {
		last = max(last, r.Result.Step)
	}
	return last
}

// Load reads the run directory dir. Each file is optional, but dir must hold
// at least one of them.
func Load(dir string) (*Run, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s: not a run directory", dir)
	}
	name := filepath.Base(filepath.Clean(dir))
	if abs, err := filepath.Abs(dir); err == nil {
		name = filepath.Base(abs)
	}
	r := &Run{Name: name, Dir: dir}
	found := 0

	path := filepath.Join(dir, ConfigFile)
	switch b, err := os.ReadFile(path); {
	case err == nil:
		found++
		r.Config = string(b)
		top, err := topLevelScalars(r.Config)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %v", path, err))
		}
		r.Algorithm, r.Seed, r.Model = top["algorithm"], top["seed"], top["model"]
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}

	path = filepath.Join(dir, MetricsFile)
	switch ok, err := readLines(path, &r.Warnings, false, r.addStep); {
	case err != nil:
		return nil, err
	case ok:
		found++
		r.sortSteps()
	}

	path = filepath.Join(dir, EvalFile)
	switch ok, err := readLines(path, &r.Warnings, false, func(line []byte) error {
		e, err := parseEval(line, false)
		if err != nil {
			return err
		}
		r.Evals = append(r.Evals, e.Eval)
		return nil
	}); {
	case err != nil:
		return nil, err
	case ok:
		found++
	}

	path = filepath.Join(dir, ResultFile)
	switch b, err := os.ReadFile(path); {
	case err == nil:
		found++
		res, err := parseEval(b, true)
		if err != nil {
			return nil, &ParseError{Path: path, Line: errorLine(b, err), Err: err}
		}
		r.Result = res
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}

	// Samples are for reading only: what cannot be read is skipped.
	path = filepath.Join(dir, SamplesFile)
	if _, err := readLines(path, &r.Warnings, true, func(line []byte) error {
		s, err := parseSample(line)
		if err == nil {
			r.Samples = append(r.Samples, s)
		}
		return err
	}); err != nil {
		r.Warnings = append(r.Warnings, err.Error()) // names the file
	}

	if found == 0 {
		return nil, fmt.Errorf("%s: no %s, %s, %s or %s: not a run directory", dir, ConfigFile, MetricsFile, EvalFile, ResultFile)
	}
	if len(r.Steps) == 0 {
		r.Warnings = append(r.Warnings, "no training steps recorded in "+MetricsFile)
	}
	return r, nil
}

// readLines calls parse on each non-blank line of the file at path, reporting
// whether the file exists. A parse error is returned as a *ParseError, except
// on a last line missing its newline, which is skipped with a warning; with
// lenient, every line that does not parse is skipped with a warning.
func readLines(path string, warnings *[]string, lenient bool, parse func([]byte) error) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	skipped := 0
	defer func() {
		if skipped > maxSkipWarnings {
			*warnings = append(*warnings, fmt.Sprintf("%s: skipped %d more lines that do not parse", path, skipped-maxSkipWarnings))
		}
	}()
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return true, err
		}
		complete := err == nil
		if text := bytes.TrimSpace(line); len(text) > 0 {
			if perr := parse(text); perr != nil {
				switch {
				case !complete:
					*warnings = append(*warnings, fmt.Sprintf("%s:%d: skipped the incomplete last line (is the run still writing it?): %v", path, n, perr))
				case lenient:
					if skipped++; skipped <= maxSkipWarnings {
						*warnings = append(*warnings, fmt.Sprintf("%s:%d: skipped: %v", path, n, perr))
					}
				default:
					return true, &ParseError{Path: path, Line: n, Err: perr}
				}
			}
		}
		if !complete {
			return true, nil
		}
	}
}

// maxSkipWarnings bounds the warnings of one file read leniently.
const maxSkipWarnings = 5

// addStep parses one metrics.jsonl record.
func (r *Run) addStep(line []byte) error {
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&rec); err != nil {
		return fmt.Errorf("invalid JSON: %v", jsonMessage(err))
	}
	if dec.More() {
		return errors.New("invalid JSON: more than one value on the line")
	}
	if rec == nil {
		return errors.New("want a JSON object, found null")
	}
	s := Step{Step: -1, Values: make(map[string]float64, len(rec))}
	for k, v := range rec {
		if v == nil {
			continue
		}
		if b, ok := v.(bool); ok && k != "step" && !knownMetrics[k] {
			// Flags (a skipped update, say) plot as 0 or 1.
			s.Values[k] = map[bool]float64{false: 0, true: 1}[b]
			continue
		}
		num, ok := v.(json.Number)
		if !ok {
			if k == "step" || knownMetrics[k] {
				return fmt.Errorf("%q: want a number, found %s", k, jsonKind(v))
			}
			// Text, lists and objects that a method logs beside its
			// numbers are not for charts.
			continue
		}
		f, err := num.Float64()
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%q: number %s out of range", k, num)
		}
		if k == "step" {
			if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
				return fmt.Errorf(`"step": want a non-negative integer, found %s`, num)
			}
			s.Step = int(f)
			continue
		}
		s.Values[k] = f
	}
	if s.Step < 0 {
		// A record without its step follows the one before it.
		s.Step = 0
		if n := len(r.Steps); n > 0 {
			s.Step = r.Steps[n-1].Step + 1
		}
		r.warnOnce(fmt.Sprintf(`%s: records without "step" are taken to follow the one before`, MetricsFile))
	}
	r.Steps = append(r.Steps, s)
	return nil
}

// sortSteps orders the steps, keeping the last record of a step that a
// resumed run logged again.
func (r *Run) sortSteps() {
	if strictlyIncreasing(r.Steps) {
		return
	}
	n := len(r.Steps)
	slices.SortStableFunc(r.Steps, func(a, b Step) int { return a.Step - b.Step })
	out := r.Steps[:0]
	for i, s := range r.Steps {
		if i+1 < len(r.Steps) && r.Steps[i+1].Step == s.Step {
			continue
		}
		out = append(out, s)
	}
	r.Steps = out
	if dropped := n - len(out); dropped > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d records repeat an earlier step (a resumed run?); kept the last of each", MetricsFile, dropped))
	}
}

func strictlyIncreasing(steps []Step) bool {
	for i := 1; i < len(steps); i++ {
		if steps[i].Step <= steps[i-1].Step {
			return false
		}
	}
	return true
}

func (r *Run) warnOnce(w string) {
	if !slices.Contains(r.Warnings, w) {
		r.Warnings = append(r.Warnings, w)
	}
}

// parseSample parses one samples.jsonl record.
func parseSample(line []byte) (Sample, error) {
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		return Sample{}, fmt.Errorf("invalid JSON: %v", jsonMessage(err))
	}
	if rec == nil {
		return Sample{}, errors.New("want a JSON object, found null")
	}
	s := Sample{Step: -1}
	switch v := rec["step"].(type) {
	case nil:
	case float64:
		if v != math.Trunc(v) || v < 0 || v > math.MaxInt32 {
			return s, fmt.Errorf(`"step": want a non-negative integer, found %v`, v)
		}
		s.Step = int(v)
	default:
		return s, fmt.Errorf(`"step": want a number, found %s`, jsonKind(v))
	}
	switch v := rec["title"].(type) {
	case nil:
	case string:
		s.Title = v
	default:
		return s, fmt.Errorf(`"title": want a string, found %s`, jsonKind(v))
	}
	switch v := rec["text"].(type) {
	case string:
		s.Text = v
	case nil:
		return s, errors.New(`no "text"`)
	default:
		return s, fmt.Errorf(`"text": want a string, found %s`, jsonKind(v))
	}
	return s, nil
}

// knownMetrics are the metrics.jsonl fields that must be numbers.
var knownMetrics = map[string]bool{
	"reward_mean": true, "reward_std": true, "accuracy": true, "zero_variance_frac": true,
	"response_len_mean": true, "clip_low_frac": true, "clip_high_frac": true, "kl": true,
	"entropy": true, "grad_norm": true, "lr": true, "tokens_per_sec": true,
	"time_rollout_s": true, "time_verify_s": true, "time_learn_s": true, "step_s": true,
}

// evalRecord is the JSON form of an eval.jsonl line and of result.json.
type evalRecord struct {
	Step       *float64            `json:"step"`
	Split      *string             `json:"split"`
	Greedy     *float64            `json:"greedy"`
	GreedyLow  *float64            `json:"greedy_low"`
	GreedyHigh *float64            `json:"greedy_high"`
	PassAtK    map[string]*float64 `json:"pass_at_k"`
	AvgAtK     json.RawMessage     `json:"avg_at_k"`
	MajAtK     json.RawMessage     `json:"maj_at_k"`
	Variance   *float64            `json:"variance"`
	Before     *evalRecord         `json:"before"`

	Problems       *float64            `json:"problems"`
	ProblemSet     *string             `json:"problem_set"`
	Experts        map[string]*float64 `json:"experts"`
	ExpertMajority *float64            `json:"expert_majority"`
	BestExpert     *string             `json:"best_expert"`
	Best           *float64            `json:"best"`
	BestLow        *float64            `json:"best_low"`
	BestHigh       *float64            `json:"best_high"`
	Delta          *float64            `json:"delta"`
}

// parseEval parses an evaluation record; with before, its "before" object too.
func parseEval(b []byte, before bool) (*Result, error) {
	var rec *evalRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", jsonMessage(err))
	}
	if rec == nil {
		return nil, errors.New("want a JSON object, found null")
	}
	e, err := rec.eval()
	if err != nil {
		return nil, err
	}
	res := &Result{Eval: e}
	if before && rec.Before != nil {
		b, err := rec.Before.eval()
		if err != nil {
			return nil, fmt.Errorf("before: %v", err)
		}
		res.Before = &b
	}
	return res, nil
}

func (rec *evalRecord) eval() (Eval, error) {
	e := Eval{Step: -1, Greedy: opt(rec.Greedy), GreedyLow: opt(rec.GreedyLow), GreedyHigh: opt(rec.GreedyHigh), Variance: opt(rec.Variance),
		ExpertMajority: opt(rec.ExpertMajority), Best: opt(rec.Best), BestLow: opt(rec.BestLow), BestHigh: opt(rec.BestHigh), Delta: opt(rec.Delta)}
	if rec.Step != nil {
		f := *rec.Step
		if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return e, fmt.Errorf(`"step": want a non-negative integer, found %v`, f)
		}
		e.Step = int(f)
	}
	if rec.Problems != nil {
		f := *rec.Problems
		if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
			return e, fmt.Errorf(`"problems": want a non-negative integer, found %v`, f)
		}
		e.Problems = int(f)
	}
	if rec.Split != nil {
		e.Split = *rec.Split
	}
	if rec.ProblemSet != nil {
		e.ProblemSet = *rec.ProblemSet
	}
	if rec.BestExpert != nil {
		e.BestExpert = *rec.BestExpert
	}
	for k, v := range rec.Experts {
		if v == nil {
			continue
		}
		if e.Experts == nil {
			e.Experts = map[string]float64{}
		}
		e.Experts[k] = *v
	}
	for k, v := range rec.PassAtK {
		if v == nil {
			continue
		}
		if e.PassAtK == nil {
			e.PassAtK = map[string]float64{}
		}
		e.PassAtK[k] = *v
	}
	var err error
	if e.AvgAtK, err = atK(rec.AvgAtK); err != nil {
		return e, fmt.Errorf(`"avg_at_k": %v`, err)
	}
	if e.MajAtK, err = atK(rec.MajAtK); err != nil {
		return e, fmt.Errorf(`"maj_at_k": %v`, err)
	}
	return e, nil
}

func opt(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// atK reads a number, or an object of numbers by k, giving the value at the
// largest k.
func atK(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return math.NaN(), nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return f, nil
	}
	var m map[string]*float64
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, errors.New("want a number or an object of numbers by k")
	}
	best, v := math.Inf(-1), math.NaN()
	for k, x := range m {
		kf, err := strconv.ParseFloat(k, 64)
		if err != nil {
			return 0, fmt.Errorf("key %q is not a number", k)
		}
		if x != nil && kf > best {
			best, v = kf, *x
		}
	}
	return v, nil
}

// errorLine returns the line of b that a JSON error points at, or 0.
func errorLine(b []byte, err error) int {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return 0
	}
	off = min(max(off, 0), int64(len(b)))
	return 1 + bytes.Count(b[:off], []byte("\n"))
}

// jsonMessage keeps the wrapped error for errorLine while making the message
// read well.
func jsonMessage(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return wrapped{"unexpected end of input", err}
	}
	return err
}

type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case float64, json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// topLevelScalars returns the scalar values of a YAML document's top-level
// keys, as text.
func topLevelScalars(doc string) (map[string]string, error) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			out[k] = v
		case int, int64, uint64, float64, bool:
			out[k] = fmt.Sprint(v)
		}
	}
	return out, nil
}
