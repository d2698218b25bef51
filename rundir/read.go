package rundir

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
	"rlvr/internal/jsonl"
	"rlvr/internal/located"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Run is what one training run recorded.
type Run struct {
	// Name is the directory's base name, which labels the run.
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
	// Samples holds samples.jsonl's records in file order.
	Samples []Sample
	// Machines holds machine.jsonl's records in file order: one per start
	// of a process that wrote the run; none for a run written before it
	// was kept.
	Machines []Machine
	// ColdStartSeconds is the wall time of the run's cold start
	// (ColdStartFile), 0 when it had none or its record cannot be read.
	ColdStartSeconds float64

	// Warnings lists what Load tolerated: skipped incomplete lines,
	// repeated steps, malformed samples.
	Warnings []string
}

// Step is one training step's metrics.
type Step struct {
	// Step is the training step.
	Step int
	// Values maps each numeric, non-null field of the record other than
	// StepField to its value; a boolean field is 0 or 1, unless Load was
	// told it must be a number.
	Values map[string]float64
}

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
// eval.jsonl, and -1 when there is none.
func (r *Run) LastStep() int {
	if n := len(r.Steps); n > 0 {
		return r.Steps[n-1].Step
	}
	last := -1
	for _, e := range r.Evals {
		last = max(last, e.Step)
	}
	return last
}

// Load reads the run directory dir. Each file is optional, but dir must
// hold config.yaml, metrics.jsonl or eval.jsonl. A field of metrics.jsonl
// that is neither a number nor a boolean (text, a list) is skipped, unless
// numeric names it: the metrics that must be numbers where present, such
// as those a report charts.
func Load(dir string, numeric ...string) (*Run, error) {
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
	switch ok, err := readLines(path, &r.Warnings, false, func(line []byte) error { return r.addStep(line, numeric) }); {
	case err != nil:
		return nil, err
	case ok:
		found++
		r.sortSteps()
	}

	path = filepath.Join(dir, EvalFile)
	switch ok, err := readLines(path, &r.Warnings, false, func(line []byte) error {
		e, err := parseEval(line)
		if err == nil {
			r.Evals = append(r.Evals, e)
		}
		return err
	}); {
	case err != nil:
		return nil, err
	case ok:
		found++
	}

	// Samples and machines are for reading only: what cannot be read is
	// skipped.
	r.Samples = readLenient(filepath.Join(dir, SamplesFile), &r.Warnings, parseSample)
	r.Machines = readLenient(filepath.Join(dir, MachineFile), &r.Warnings, parseMachine)
	r.ColdStartSeconds = readColdStartSeconds(filepath.Join(dir, ColdStartFile), &r.Warnings)

	if found == 0 {
		return nil, fmt.Errorf("%s: no %s, %s or %s: not a run directory", dir, ConfigFile, MetricsFile, EvalFile)
	}
	if len(r.Steps) == 0 {
		r.Warnings = append(r.Warnings, "no training steps recorded in "+MetricsFile)
	}
	return r, nil
}

// readLines calls parse on each non-blank line of the file at path, or of
// its gzip-compressed copy path+CompressedSuffix when path does not exist,
// reporting whether either exists. A parse error is returned as a
// *located.Error, except on a last line missing its newline, which is
// skipped with a warning; with lenient, every line that does not parse is
// skipped with a warning.
func readLines(path string, warnings *[]string, lenient bool, parse func([]byte) error) (bool, error) {
	var f io.ReadCloser
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A run kept for the record may hold its logs compressed.
		path += CompressedSuffix
		f, err = jsonl.Open(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
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
			return true, fmt.Errorf("%s: %w", path, err)
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
					return true, &located.Error{Pkg: "rundir", File: path, Line: n, Index: -1, Err: perr}
				}
			}
		}
		if !complete {
			return true, nil
		}
	}
}

// readLenient reads the records of a log for reading only: a line that
// does not parse, or a file that cannot be read, is a warning.
func readLenient[T any](path string, warnings *[]string, parse func([]byte) (T, error)) []T {
	var recs []T
	if _, err := readLines(path, warnings, true, func(line []byte) error {
		rec, err := parse(line)
		if err == nil {
			recs = append(recs, rec)
		}
		return err
	}); err != nil {
		*warnings = append(*warnings, err.Error()) // names the file
	}
	return recs
}

// maxSkipWarnings bounds the warnings of one file read leniently.
const maxSkipWarnings = 5

// addStep parses one metrics.jsonl record.
func (r *Run) addStep(line []byte, numeric []string) error {
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
		mustNumber := k == StepField || slices.Contains(numeric, k)
		if b, ok := v.(bool); ok && !mustNumber {
			// Flags (a skipped update, say) plot as 0 or 1.
			s.Values[k] = map[bool]float64{false: 0, true: 1}[b]
			continue
		}
		num, ok := v.(json.Number)
		if !ok {
			if mustNumber {
				return fmt.Errorf("%q: want a number, found %s", k, jsonl.TypeName(v))
			}
			// Text, lists and objects logged beside the numbers are not
			// metrics.
			continue
		}
		f, err := num.Float64()
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%q: number %s out of range", k, num)
		}
		if k == StepField {
			if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
				return fmt.Errorf("%q: want a non-negative integer, found %s", StepField, num)
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
		r.warnOnce(fmt.Sprintf("%s: records without %q are taken to follow the one before", MetricsFile, StepField))
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

// parseEval parses one eval.jsonl record. Step starts at -1 and the greedy
// fields at NaN, which a line without them leaves; the evaluators'
// records are completed and read as readRecords says.
func parseEval(line []byte) (Eval, error) {
	nan := math.NaN()
	e := &Eval{Step: -1, Greedy: nan, GreedyLow: nan, GreedyHigh: nan}
	if err := json.Unmarshal(line, &e); err != nil {
		return Eval{}, fmt.Errorf("invalid JSON: %v", jsonMessage(err))
	}
	if e == nil {
		return Eval{}, errors.New("want a JSON object, found null")
	}
	if err := e.readRecords(line); err != nil {
		return Eval{}, err
	}
	if i := strings.IndexFunc(e.Outcomes, func(r rune) bool { return r != '0' && r != '1' && r != '-' }); i >= 0 {
		return Eval{}, fmt.Errorf(`"outcomes": byte %d is %q; want '1', '0' or '-' per problem`, i+1, e.Outcomes[i])
	}
	if e.Outcomes != "" && e.Problems > 0 && len(e.Outcomes) != e.Problems {
		return Eval{}, fmt.Errorf(`"outcomes" has %d problems, "problems" %d`, len(e.Outcomes), e.Problems)
	}
	return *e, nil
}

// parseSample parses one samples.jsonl record. Step starts at -1, which a
// line without it leaves.
func parseSample(line []byte) (Sample, error) {
	s := &Sample{Step: -1}
	if err := json.Unmarshal(line, &s); err != nil {
		return Sample{}, fmt.Errorf("invalid JSON: %v", jsonMessage(err))
	}
	if s == nil {
		return Sample{}, errors.New("want a JSON object, found null")
	}
	if s.Text == "" {
		return Sample{}, errors.New(`no "text"`)
	}
	return *s, nil
}

// jsonMessage makes the error of input that ends early read well.
func jsonMessage(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of input")
	}
	return err
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

// ColdStartFile is the record of a run's cold start (train.ColdStartRecord),
// in its directory.
const ColdStartFile = "cold_start.json"

// readColdStartSeconds is the "seconds" of the cold start record at path:
// 0 when there is none, and with a warning when it cannot be read.
func readColdStartSeconds(path string, warnings *[]string) float64 {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	var rec struct {
		Seconds float64 `json:"seconds"`
	}
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.Seconds < 0 {
		if err == nil {
			err = fmt.Errorf("seconds %v is not a duration", rec.Seconds)
		}
		*warnings = append(*warnings, fmt.Sprintf("%s: %v; its time is not counted", path, err))
		return 0
	}
	return rec.Seconds
}
