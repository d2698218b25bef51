package rundir

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
)

// Evaluators' records. An evaluator that a part adds to every held-out
// evaluation (part.Evaluator) records what it measured on the line of
// eval.jsonl under its own name, in "evaluators":
//
//	{"step":200,"split":"test","greedy":0.1,…,"evaluators":{"expert_prompts":
//	 {"experts":{"E0":0.1,"E1":0.12},"expert_majority":0.11,"best_expert":"E1",…}}}
//
// The record's type is its package's, which writes it ([Eval.SetRecord])
// and reads it back ([Eval.Record]). The part declares it here
// (part.Part.Records), so that rlvr report, which compiles no part, reads
// it through the [EvalRecord]'s functions, and so that Load reads the
// lines written before records had "evaluators" ([EvalRecord.Legacy]).

// EvalRecord describes the record an evaluator writes on eval.jsonl's
// lines.
type EvalRecord struct {
	// Name is the record's key in a line's "evaluators".
	Name string
	// Part names the part that declares it; part.Register sets it. The
	// columns a part declares that read the final evaluation (see
	// [ColumnKind]) read its records.
	Part string
	// Choice is what the report's notes call the variant the record
	// reports a run by: "best expert" ("best expert E2 chosen on
	// validation (…)").
	Choice string
	// Legacy lists the top-level fields that held the record before
	// lines had "evaluators", in the order the record writes them: a
	// line that has some of them and no record of this name reads them
	// as its record, so that an old line reads as its new form does.
	Legacy []string
	// Read reads a record for the report. Load calls it on every record
	// of a line it loads: an error makes the line malformed.
	Read func(raw json.RawMessage) (Reading, error)
	// Choose returns the record of a line as if the evaluator had chosen
	// the variant named to report the run by (rlvr report --expert), and
	// false when the record has no such variant. It is nil for a record
	// without variants.
	Choose func(raw json.RawMessage, variant string, line Eval) (json.RawMessage, bool, error)
}

// Reading is what rlvr report reads of an evaluator's record.
type Reading struct {
	// Variants is the greedy accuracy under each prompt variant the
	// evaluator asked every problem under, by the variant's name; nil
	// when it asked none.
	Variants map[string]float64
	// VariantOutcomes is each variant's greedy outcome per problem, in
	// Eval.Outcomes's form, by the variant's name; nil, or without a
	// variant, where the record kept none.
	VariantOutcomes map[string]string
	// Chosen names the variant the line reports the run by (chosen on the
	// validation before it), "" when it names none. Acc is its accuracy;
	// Low and High bound Acc's 95% interval, NaN when unknown.
	Chosen         string
	Acc, Low, High float64
	// Values are the record's other numbers, by the names the columns of
	// its part ([Column.Metrics]) give them.
	Values map[string]float64
}

// evalRecords are the declared records, in the order of their parts'
// names.
var evalRecords []EvalRecord

// DeclareEvalRecords adds a part's records to those Load and rlvr report
// read. It is called from a part's registration, at init, and is not
// safe for concurrent use. It panics on a record without a name or Read,
// or a name declared twice: a programming error, found at start-up.
func DeclareEvalRecords(recs ...EvalRecord) {
	for _, r := range recs {
		if r.Name == "" || r.Read == nil {
			panic("rundir: an EvalRecord needs a name and Read")
		}
		if slices.ContainsFunc(evalRecords, func(d EvalRecord) bool { return d.Name == r.Name }) {
			panic("rundir: the eval record " + r.Name + " is declared twice")
		}
		i, _ := slices.BinarySearchFunc(evalRecords, r, func(a, b EvalRecord) int { return cmp.Compare(a.Part, b.Part) })
		for i < len(evalRecords) && evalRecords[i].Part == r.Part {
			i++ // a part's records keep their order
		}
		evalRecords = slices.Insert(evalRecords, i, r)
	}
}

// EvalRecords returns the declared records in order.
func EvalRecords() []EvalRecord { return slices.Clone(evalRecords) }

// SetRecord stores rec, as JSON, as the line's record of the evaluator
// name, in a fresh map: copies of the line keep theirs.
func (e *Eval) SetRecord(name string, rec any) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("rundir: the %s record: %w", name, err)
	}
	m := make(map[string]json.RawMessage, len(e.Evaluators)+1)
	for k, v := range e.Evaluators {
		m[k] = v
	}
	m[name] = b
	e.Evaluators = m
	return nil
}

// Record decodes the line's record of the evaluator name into rec, and
// reports whether the line has one.
func (e Eval) Record(name string, rec any) (bool, error) {
	raw, ok := e.Evaluators[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, rec); err != nil {
		return true, fmt.Errorf("rundir: the %s record: %w", name, err)
	}
	return true, nil
}

// readRecords completes a line of eval.jsonl, e, parsed from line: each
// declared record it lacks but has legacy fields of becomes the record
// those fields make, and every declared record must read. Records are
// kept compact, so that a record reads the same whatever the spacing of
// its line.
func (e *Eval) readRecords(line []byte) error {
	var top map[string]json.RawMessage
	for _, r := range evalRecords {
		if _, has := e.Evaluators[r.Name]; has || len(r.Legacy) == 0 {
			continue
		}
		if top == nil {
			if err := json.Unmarshal(line, &top); err != nil {
				return err
			}
		}
		var b bytes.Buffer
		for _, k := range r.Legacy {
			v, ok := top[k]
			if !ok {
				continue
			}
			if b.Len() == 0 {
				b.WriteByte('{')
			} else {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k)
			b.Write(key)
			b.WriteByte(':')
			b.Write(v)
		}
		if b.Len() > 0 {
			b.WriteByte('}')
			if e.Evaluators == nil {
				e.Evaluators = map[string]json.RawMessage{}
			}
			e.Evaluators[r.Name] = b.Bytes()
		}
	}
	for name, raw := range e.Evaluators {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return fmt.Errorf("evaluators.%s: %v", name, err)
		}
		e.Evaluators[name] = b.Bytes()
	}
	for _, r := range evalRecords {
		if raw, ok := e.Evaluators[r.Name]; ok {
			if _, err := r.Read(raw); err != nil {
				return fmt.Errorf("evaluators.%s: %v", r.Name, err)
			}
		}
	}
	return nil
}
