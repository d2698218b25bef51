package collect

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// handDME is a D_ME written by hand: seven questions, the reference and
// experts A (1), B (2) and C (3), lines in no particular order. 1 is a
// right answer, 0 a wrong one, T a timeout, - no line:
//
//	    A B C
//	q1  1 1 1
//	q2  0 1 1
//	q3  0 0 1
//	q4  0 0 0
//	q5  1 0 0
//	q6  T 0 1
//	q7  1 - 0
func handDME(t *testing.T) string {
	t.Helper()
	verdicts := map[string]string{"q1": "111", "q2": "011", "q3": "001", "q4": "000", "q5": "100", "q6": "T01", "q7": "1-0"}
	var b strings.Builder
	line := func(q string, i int, name, verdict string) {
		api, ref := `"api":"completion",`, ""
		if i == 0 {
			api, ref = "", `"reference":true,`
		}
		tail := fmt.Sprintf(`"response":"#### 7","correct":%v`, verdict == "1")
		if verdict == "T" {
			tail = `"response":"","correct":false,"failure":"timeout","error":"no answer"`
		}
		fmt.Fprintf(&b, `{"id":%q,"source":"","question":"What is %s?","answer":"7","expert":%d,"expert_name":%q,%s%s"prompt":"P%d",%s}`+"\n",
			q, q, i, name, ref, api, i, tail)
	}
	for _, q := range []string{"q1", "q2", "q3", "q4", "q5", "q6", "q7"} {
		v := verdicts[q]
		line(q, 3, "C", v[2:3]) // C first: experts are ordered by index
		line(q, 0, ReferenceName, "1")
		for x, name := range []string{"A", "B"} {
			if v[x] != '-' {
				line(q, x+1, name, v[x:x+1])
			}
		}
	}
	path := filepath.Join(t.TempDir(), "dme.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAnalyzeHandComputed reproduces the hand-computed Table 1 of
// handDME, with and without the timeout counted as an error and the
// reference counted as an expert.
func TestAnalyzeHandComputed(t *testing.T) {
	path := handDME(t)
	type row struct {
		name              string
		errors, corrected int
	}
	for _, tc := range []struct {
		opt               AnalyzeOptions
		problems, leftOut int
		rows              []row
		allWrong          int
		shared            [][]int
	}{
		// q1–q5: q6 has a failure, q7 lacks B.
		{AnalyzeOptions{}, 5, 2, []row{{"A", 3, 2}, {"B", 3, 2}, {"C", 2, 1}}, 1,
			[][]int{{3, 2, 1}, {2, 3, 2}, {1, 2, 2}}},
		// q1–q6, A wrong on q6.
		{AnalyzeOptions{FailedAsWrong: true}, 6, 1, []row{{"A", 4, 3}, {"B", 4, 3}, {"C", 2, 1}}, 1,
			[][]int{{4, 3, 1}, {3, 4, 2}, {1, 2, 2}}},
		// The reference corrects every error.
		{AnalyzeOptions{Reference: true}, 5, 2, []row{{ReferenceName, 0, 0}, {"A", 3, 3}, {"B", 3, 3}, {"C", 2, 2}}, 0,
			[][]int{{0, 0, 0, 0}, {0, 3, 2, 1}, {0, 2, 3, 2}, {0, 1, 2, 2}}},
	} {
		t.Run(fmt.Sprintf("%+v", tc.opt), func(t *testing.T) {
			tab, err := AnalyzeFile(path, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if tab.Questions != 7 || tab.Problems != tc.problems || tab.LeftOut != tc.leftOut || tab.AllWrong != tc.allWrong {
				t.Errorf("questions %d problems %d left out %d all wrong %d", tab.Questions, tab.Problems, tab.LeftOut, tab.AllWrong)
			}
			if !reflect.DeepEqual(tab.Shared, tc.shared) {
				t.Errorf("shared %v, want %v", tab.Shared, tc.shared)
			}
			if len(tab.Experts) != len(tc.rows) {
				t.Fatalf("%d experts", len(tab.Experts))
			}
			for i, want := range tc.rows {
				e := tab.Experts[i]
				if e.Name != want.name || e.Errors != want.errors || e.CorrectedByOthers != want.corrected {
					t.Errorf("row %d: %+v, want %+v", i, e, want)
				}
				if rate := float64(want.errors) / float64(tc.problems); e.ErrorRate.Mean != rate {
					t.Errorf("%s: error rate %v, want %v", e.Name, e.ErrorRate.Mean, rate)
				}
				if (e.CorrectedRate == nil) != (want.errors == 0) ||
					e.CorrectedRate != nil && *e.CorrectedRate != float64(want.corrected)/float64(want.errors) {
					t.Errorf("%s: corrected rate %v", e.Name, e.CorrectedRate)
				}
			}
		})
	}

	// A's 3 errors in 5: the Wilson interval by hand (z = 1.96) is
	// [0.2307, 0.8824].
	tab, err := AnalyzeFile(path, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ci := tab.Experts[0].ErrorRate; math.Abs(ci.Low-0.2307) > 1e-3 || math.Abs(ci.High-0.8824) > 1e-3 {
		t.Errorf("A's interval %+v", ci)
	}
	// Kept for MEF: each expert's correct answers of all its lines, the
	// questions left out of the table and the failed answer included.
	for i, want := range [][2]int{{3, 7}, {2, 6}, {4, 7}} {
		if e := tab.Experts[i]; e.Kept != want[0] || e.Answers != want[1] || e.KeepRate.N != want[1] {
			t.Errorf("%s: kept %d of %d (rate over %d), want %d of %d", e.Name, e.Kept, e.Answers, e.KeepRate.N, want[0], want[1])
		}
	}
	text := tab.Table()
	for _, re := range []string{
		`D_ME: 7 questions, 3 experts; 2 questions left out .*, 5 tabulated`,
		`(?m)^A +3 +60\.0% +\[23\.1%, 88\.2%\] +2 \(66\.7%\) +3 of 7 \(42\.9%\)$`,
		`(?m)^C +2 +40\.0% .* 1 \(50\.0%\) +4 of 7 \(57\.1%\)$`,
		`errors shared by all experts: 1 \(20\.0%\)`,
		`(?m)^B +2 +3 +2$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("the table does not match %s:\n%s", re, text)
		}
	}
}

// TestAnalyzeRefuses: nothing to tabulate, or a malformed line, is an
// error naming the file (and the line and field).
func TestAnalyzeRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, data, want string }{
		{"reference only", refLine + "\n", "no expert's answer beyond the reference"},
		{"no common question", goodLine + "\n" + strings.Replace(strings.Replace(failLine, `,"failure":"timeout","error":"no answer within 10m0s"`, ``, 1), `"gsm8k/3"`, `"gsm8k/9"`, 1) + "\n",
			"none of the 2 questions has an answer from every one of the 2 experts"},
		{"bad line", goodLine + "\n" + `{"id": 3}` + "\n", ":2: field \"id\": want a string, got 3"},
		{"empty", "", "no expert's answer"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(path, []byte(tc.data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := AnalyzeFile(path, AnalyzeOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want %q and the path", tc.name, err, tc.want)
		}
	}
}
