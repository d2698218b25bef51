package collect

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"rlvr/eval"
	"rlvr/internal/stats"
)

// AnalyzeOptions choose what Analyze counts.
type AnalyzeOptions struct {
	// Reference counts Expert0, the reference solution, as an expert; by
	// default the table covers the experts asked, as the paper's does.
	Reference bool
	// FailedAsWrong counts a failed answer as an error; by default a
	// question with a failed answer is left out, since no answer is not a
	// wrong one.
	FailedAsWrong bool
}

// Table1 is MEML-GRPO's Table 1 for a D_ME: each expert's errors with
// their rate, how many of them another expert gets right, the errors all
// experts share, and the errors each pair shares.
type Table1 struct {
	Questions int `json:"questions"` // distinct questions in D_ME
	// Problems counts the questions tabulated: those every expert
	// answered (without failing, unless FailedAsWrong).
	Problems int            `json:"problems"`
	LeftOut  int            `json:"left_out"` // Questions − Problems
	Experts  []ExpertErrors `json:"experts"`
	// AllWrong counts the problems every expert gets wrong (the paper's
	// "error overlap"), with its rate among Problems.
	AllWrong     int            `json:"all_wrong"`
	AllWrongRate stats.Interval `json:"all_wrong_rate"`
	// Shared[i][j] counts the problems experts i and j (in the order of
	// Experts) both get wrong; the diagonal holds each expert's errors.
	Shared [][]int `json:"shared"`
}

// ExpertErrors is one expert's column of Table 1.
type ExpertErrors struct {
	Index     int            `json:"index"`
	Name      string         `json:"name"`
	Errors    int            `json:"errors"`
	ErrorRate stats.Interval `json:"error_rate"` // Errors / Problems, with a 95% Wilson interval
	// CorrectedByOthers counts its errors some other expert gets right,
	// and CorrectedRate is their share of its errors (nil without
	// errors).
	CorrectedByOthers int      `json:"corrected_by_others"`
	CorrectedRate     *float64 `json:"corrected_rate"`
	// Kept of Answers are the expert's D_ME lines MEF trains on (the
	// verified-correct answers, data.dme_answers "correct") of all its
	// lines, failed ones included, over every question of D_ME, not only
	// the tabulated ones; KeepRate is their share.
	Answers  int            `json:"answers"`
	Kept     int            `json:"kept"`
	KeepRate stats.Interval `json:"keep_rate"`
}

// AnalyzeFile reads the D_ME file at path (see ReadDME) and tabulates it.
func AnalyzeFile(path string, opt AnalyzeOptions) (*Table1, error) {
	records, err := ReadDME(path)
	if err != nil {
		return nil, err
	}
	t, err := Analyze(records, opt)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// Analyze tabulates D_ME records as Table 1. It fails when two records
// give the same expert's answer to the same question, when an expert's
// index and name disagree between records, when no expert is left to
// tabulate, or when no question has an answer from every expert.
func Analyze(records []Record, opt AnalyzeOptions) (*Table1, error) {
	if err := consistent(records, func(j int) string { return fmt.Sprintf("record %d", j+1) }, func(i int, field string, err error) error {
		return fmt.Errorf("collect: record %d: field %q: %w", i+1, field, err)
	}); err != nil {
		return nil, err
	}
	type expertID struct {
		index int
		name  string
	}
	var experts []expertID
	seenExpert := map[string]bool{}
	var questions []string
	seenQuestion := map[string]bool{}
	verdict := map[key]Record{}
	answers, kept := map[string]int{}, map[string]int{}
	for _, r := range records {
		if !seenQuestion[r.ID] {
			seenQuestion[r.ID] = true
			questions = append(questions, r.ID)
		}
		if r.Reference && !opt.Reference {
			continue
		}
		if !seenExpert[r.Name] {
			seenExpert[r.Name] = true
			experts = append(experts, expertID{r.Expert, r.Name})
		}
		verdict[keyOf(r)] = r
		answers[r.Name]++
		if r.Correct && r.Failure == "" {
			kept[r.Name]++
		}
	}
	if len(experts) == 0 {
		return nil, errors.New("collect: D_ME has no expert's answer beyond the reference solutions")
	}
	slices.SortFunc(experts, func(a, b expertID) int { return a.index - b.index })
	t := &Table1{Questions: len(questions)}
	right := make([][]bool, len(experts))
	for _, q := range questions {
		row := make([]bool, len(experts))
		usable := true
		for x, ex := range experts {
			r, ok := verdict[key{q, ex.name}]
			if !ok || (r.Failure != "" && !opt.FailedAsWrong) {
				usable = false
				break
			}
			row[x] = r.Correct
		}
		if !usable {
			t.LeftOut++
			continue
		}
		for x := range experts {
			right[x] = append(right[x], row[x])
		}
	}
	t.Problems = t.Questions - t.LeftOut
	if t.Problems == 0 {
		return nil, fmt.Errorf("collect: none of the %d questions has an answer from every one of the %d experts", t.Questions, len(experts))
	}
	names := make([]eval.ExpertResult, len(experts))
	for x, ex := range experts {
		names[x] = eval.ExpertResult{Name: ex.name}
	}
	ov := eval.NewOverlap(names, right)
	for x, row := range ov.Rows {
		e := ExpertErrors{Index: experts[x].index, Name: row.Name, Errors: row.Errors,
			ErrorRate: stats.WilsonInterval(row.Errors, t.Problems), CorrectedByOthers: row.CorrectedByOthers,
			Answers: answers[row.Name], Kept: kept[row.Name], KeepRate: stats.WilsonInterval(kept[row.Name], answers[row.Name])}
		if row.Errors > 0 {
			rate := float64(row.CorrectedByOthers) / float64(row.Errors)
			e.CorrectedRate = &rate
		}
		t.Experts = append(t.Experts, e)
	}
	t.AllWrong, t.Shared = ov.AllWrong, ov.Shared
	t.AllWrongRate = stats.WilsonInterval(ov.AllWrong, t.Problems)
	return t, nil
}

// consistent checks that records give at most one answer per question
// and expert, the same question and gold answer for an id, and one index
// per expert name and one name per index. where names record j in
// messages; bad builds the error for record i's field.
func consistent(records []Record, where func(j int) string, bad func(i int, field string, err error) error) error {
	first := map[key]int{}
	question := map[string]int{}
	byName := map[string]int{}
	byIndex := map[int]int{}
	for i, r := range records {
		if j, ok := first[keyOf(r)]; ok {
			return bad(i, "expert_name", fmt.Errorf("a second answer of %s to %s (the first is at %s)", r.Name, r.ID, where(j)))
		}
		first[keyOf(r)] = i
		if j, ok := question[r.ID]; !ok {
			question[r.ID] = i
		} else if records[j].Question != r.Question {
			return bad(i, "question", fmt.Errorf("the question of %s differs from the one at %s", r.ID, where(j)))
		} else if records[j].Answer != r.Answer {
			return bad(i, "answer", fmt.Errorf("%q: the gold answer of %s is %q at %s", r.Answer, r.ID, records[j].Answer, where(j)))
		}
		if j, ok := byName[r.Name]; !ok {
			byName[r.Name] = i
		} else if records[j].Expert != r.Expert {
			return bad(i, "expert", fmt.Errorf("%d: %s is expert %d at %s", r.Expert, r.Name, records[j].Expert, where(j)))
		}
		if j, ok := byIndex[r.Expert]; !ok {
			byIndex[r.Expert] = i
		} else if records[j].Name != r.Name {
			return bad(i, "expert_name", fmt.Errorf("%q: expert %d is %q at %s", r.Name, r.Expert, records[j].Name, where(j)))
		}
	}
	return nil
}

// Table renders Table 1 for a person.
func (t *Table1) Table() string {
	var b strings.Builder
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	fmt.Fprintf(&b, "D_ME: %d questions, %d experts", t.Questions, len(t.Experts))
	if t.LeftOut > 0 {
		fmt.Fprintf(&b, "; %d questions left out (an expert's answer missing or failed), %d tabulated", t.LeftOut, t.Problems)
	}
	fmt.Fprintf(&b, "\n\n%-16s %7s %10s  %-18s %-20s %s\n", "expert", "errors", "error rate", "95% interval", "corrected by others", "kept for MEF")
	for _, e := range t.Experts {
		corr := "-"
		if e.CorrectedRate != nil {
			corr = fmt.Sprintf("%d (%s)", e.CorrectedByOthers, pct(*e.CorrectedRate))
		}
		fmt.Fprintf(&b, "%-16s %7d %10s  %-18s %-20s %d of %d (%s)\n", e.Name, e.Errors, pct(e.ErrorRate.Mean),
			"["+pct(e.ErrorRate.Low)+", "+pct(e.ErrorRate.High)+"]", corr, e.Kept, e.Answers, pct(e.KeepRate.Mean))
	}
	fmt.Fprintf(&b, "errors shared by all experts: %d (%s) [%s, %s]\n", t.AllWrong, pct(t.AllWrongRate.Mean),
		pct(t.AllWrongRate.Low), pct(t.AllWrongRate.High))
	names := make([]string, len(t.Experts))
	for i, e := range t.Experts {
		names[i] = e.Name
	}
	b.WriteString("\n" + eval.SharedTable(names, t.Shared))
	return b.String()
}
