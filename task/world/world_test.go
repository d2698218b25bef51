package world

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// eval checks a step line "a op b=c" and returns c.
func evalStep(t *testing.T, line string) int64 {
	t.Helper()
	lhs, rhs, ok := strings.Cut(line, "=")
	if !ok {
		t.Fatalf("step %q has no =", line)
	}
	i := strings.IndexAny(lhs[1:], "+-*") + 1
	a, _ := strconv.ParseInt(lhs[:i], 10, 64)
	b, _ := strconv.ParseInt(lhs[i+1:], 10, 64)
	c, _ := strconv.ParseInt(rhs, 10, 64)
	want := map[byte]int64{'+': a + b, '-': a - b, '*': a * b}[lhs[i]]
	if c != want {
		t.Fatalf("step %q is wrong: %d", line, want)
	}
	return c
}

func TestSolutionsAreCorrectChains(t *testing.T) {
	for level := range Levels {
		for _, p := range Mix(uint64(level), 300, []int{level}) {
			lv := Levels[level]
			if len(p.Ops) < lv.Ops || len(p.Ops) > max(lv.Ops, lv.MaxOps) {
				t.Fatalf("%s: %d steps", p.Question, len(p.Ops))
			}
			steps := strings.Split(strings.TrimSuffix(p.Solution(), "\n"), "\n")
			steps = steps[:len(steps)-1] // the answer line
			var last int64
			for i, s := range steps {
				v := evalStep(t, s)
				if v < 0 {
					t.Fatalf("%s: negative intermediate in %q", p.Question, s)
				}
				if i > 0 && !strings.HasPrefix(s, strconv.FormatInt(last, 10)) {
					t.Fatalf("%s: step %q does not continue from %d", p.Question, s, last)
				}
				last = v
			}
			if last != p.Answer || !strings.HasSuffix(p.Solution(), fmt.Sprintf("####%d\n", p.Answer)) {
				t.Fatalf("%s: answer %d, last step %d", p.Question, p.Answer, last)
			}
		}
	}
}

func TestMixIsReproducible(t *testing.T) {
	a, b := Mix(7, 50, []int{0, 3, 5}), Mix(7, 50, []int{0, 3, 5})
	for i := range a {
		if a[i].Question != b[i].Question {
			t.Fatalf("problem %d differs: %q vs %q", i, a[i].Question, b[i].Question)
		}
	}
}

func ExampleProblem_Solution() {
	p := Problem{Question: "(12+7)*3-5", First: 12, Ops: []Step{{'+', 7}, {'*', 3}, {'-', 5}}, Answer: 52}
	fmt.Print(p.Prompt(), p.Solution())
	// Output:
	// Q:(12+7)*3-5
	// 12+7=19
	// 19*3=57
	// 57-5=52
	// ####52
}

func TestChatExamplesAskInWords(t *testing.T) {
	plain := Examples(3, 50, []int{0, 3, 6})
	chat := ChatExamples(3, 50, []int{0, 3, 6})
	for i, e := range chat {
		if e.Prompt != plain[i].Prompt || e.Answer != plain[i].Answer {
			t.Fatalf("example %d: chat %q/%q, plain %q/%q", i, e.Prompt, e.Answer, plain[i].Prompt, plain[i].Answer)
		}
		m := e.Chat()
		if len(m) != 1 || m[0].Role != "user" || !strings.HasPrefix(m[0].Content, "Calculate ") || !strings.Contains(m[0].Content, "####") {
			t.Fatalf("example %d: chat %+v", i, m)
		}
		p, err := ParseQuestion(e.Prompt)
		if err != nil {
			t.Fatal(err)
		}
		// The expression in words is the question with its operators spaced.
		words := strings.NewReplacer(" + ", "+", " - ", "-", " × ", "*").Replace(m[0].Content)
		if !strings.Contains(words, p.Question+".") {
			t.Errorf("example %d: %q does not ask %q", i, m[0].Content, p.Question)
		}
	}
}
