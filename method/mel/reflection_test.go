package mel

import (
	"fmt"
	"strings"
	"testing"
)

func TestWorldRoundTrip(t *testing.T) {
	var f Format = World{}
	req := f.Request("Q:(12+7)*3-5\n", "12+7=19\n19*3=57\n57-5=52\n####52\n", "12+7=19\n19*3=47\n47-5=42\n####42\n")
	if want := "R:(12+7)*3-5\n+12+7=19|19*3=57|57-5=52|####52\n-12+7=19|19*3=47|47-5=42|####42\n"; req != want {
		t.Fatalf("request %q, want %q", req, want)
	}
	m, err := f.Parse("S:19*3=57\nC:19*3=47 is wrong\nH:check products by 7, 8 and 9\n")
	if err != nil {
		t.Fatal(err)
	}
	if m != (Experience{"19*3=57", "19*3=47 is wrong", "check products by 7, 8 and 9"}) {
		t.Fatalf("parsed %+v", m)
	}
	if got, want := f.Replay("Q:(12+7)*3-5\n", m), "M:S:19*3=57|C:19*3=47 is wrong|H:check products by 7, 8 and 9\nQ:(12+7)*3-5\n"; got != want {
		t.Fatalf("replay %q, want %q", got, want)
	}
	for _, bad := range []string{"", "S:a\nC:b\n", "C:b\nS:a\nH:c\n", "S:\nC:b\nH:c\n"} {
		if _, err := f.Parse(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// paperReply is a reply in the paper's output format, decorated as chat
// models write markdown, with a numbered list inside section 3.
const paperReply = `<think>
Let me compare. 1. the first solution is wrong.
</think>
### 1. Failure Resolution Path & Error Pattern Recognition
- **Failure Point:** Step 2, where 19*3 was computed as 47.
- **Latent Cognitive Pattern:** I trusted a product without checking it.

### 2. Analysis of Success Factors
- **Robustness Factor:** Each product was checked against the operands' last digits.

### 3. First-Person Reflective Summary
I moved too fast. Next time I will:
1. recompute each product;
2. check its last digit.

### 4. Subject Heuristics (Internalized Experience)
- [Product check]: When multiplying, I must verify the last digit of the product.
- [Carry]: If a sum carries, then recheck the next column.
`

func TestChatParsesThePaperFormat(t *testing.T) {
	m, err := Chat{}.Parse(paperReply)
	if err != nil {
		t.Fatal(err)
	}
	if m.Step != "Step 2, where 19*3 was computed as 47." {
		t.Errorf("s* = %q", m.Step)
	}
	if !strings.HasPrefix(m.Critique, "### 1. Failure Resolution Path") || !strings.HasSuffix(m.Critique, "2. check its last digit.") {
		t.Errorf("critique = %q", m.Critique)
	}
	if !strings.HasPrefix(m.Heuristic, "- [Product check]") || !strings.HasSuffix(m.Heuristic, "recheck the next column.") {
		t.Errorf("heuristic = %q", m.Heuristic)
	}
	replay := Chat{}.Replay("What is (12+7)*3-5?", m)
	if !strings.HasPrefix(replay, "Prior study has provided") || !strings.Contains(replay, "Bifurcation point: Step 2") ||
		!strings.Contains(replay, "[Carry]") || !strings.Contains(replay, "produce a complete answer. Note:\n- You must perform full, in-depth reasoning") ||
		!strings.HasSuffix(replay, "information above.\n\nAnswer the following question: What is (12+7)*3-5?") {
		t.Errorf("replay %q", replay)
	}
	custom := Chat{Validation: "Memory: {experience}\nNow solve:"}.Replay("Q?", m)
	if !strings.HasPrefix(custom, "Memory: Bifurcation point:") || !strings.HasSuffix(custom, "Now solve:\n\nQ?") {
		t.Errorf("custom replay %q", custom)
	}
	placed := Chat{Validation: "Q: {question}\nMemory: {experience}"}.Replay("Q?", m)
	if !strings.HasPrefix(placed, "Q: Q?\nMemory: Bifurcation point:") || strings.Count(placed, "Q?") != 1 {
		t.Errorf("replay with {question} placed %q", placed)
	}
}

func TestChatRequestFillsTheInstruction(t *testing.T) {
	req := Chat{}.Request("What is 2+2?", "2+2=4", "2+2=5")
	for _, want := range []string{"Meta-Cognitive Reasoning Analyst", "<question>\nWhat is 2+2?\n</question>",
		"<answer>\n2+2=5\n</answer>\n<judge>\nIncorrect", "<answer>\n2+2=4\n</answer>\n<judge>\nCorrect"} {
		if !strings.Contains(req, want) {
			t.Errorf("request lacks %q", want)
		}
	}
	if strings.Contains(req, "{") && strings.Contains(req, "_ans}") {
		t.Errorf("placeholders left in %q", req)
	}
	if got := (Chat{Instruction: "x={question} +{correct_ans} -{error_ans}"}).Request("q", "a", "b"); got != "x=q +a -b" {
		t.Errorf("custom instruction gave %q", got)
	}
}

func TestChatParseErrorsNameTheSection(t *testing.T) {
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"empty", "", "no section 1"},
		{"no heuristics", strings.Split(paperReply, "### 4.")[0], "no section 4 (subject heuristics)"},
		{"empty heuristics", strings.Split(paperReply, "### 4.")[0] + "### 4. Subject Heuristics\n", "section 4 (subject heuristics) is empty"},
		{"no failure point", strings.Replace(paperReply, "Failure Point", "Failing step", 1), `no "Failure Point:" item`},
		{"out of order", strings.Replace(paperReply, "### 2. Analysis of Success Factors", "", 1) + "\n2. Success factors: none\n", "no section 3"},
		{"thought only", "<think>1. Failure Point: x\n2. success\n3. reflect\n4. heuristic\n- h\n</think>", "no section 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Chat{}.Parse(tc.reply)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func ExampleWorld() {
	f := World{}
	fmt.Print(f.Request("Q:(12+7)*3-5\n", "12+7=19\n19*3=57\n57-5=52\n####52\n", "12+7=19\n19*3=47\n47-5=42\n####42\n"))
	m, _ := f.Parse("S:19*3=57\nC:19*3=47 is wrong\nH:check products by 7, 8 and 9\n")
	fmt.Print(f.Replay("Q:(12+7)*3-5\n", m))
	// Output:
	// R:(12+7)*3-5
	// +12+7=19|19*3=57|57-5=52|####52
	// -12+7=19|19*3=47|47-5=42|####42
	// M:S:19*3=57|C:19*3=47 is wrong|H:check products by 7, 8 and 9
	// Q:(12+7)*3-5
}

func FuzzChatParse(f *testing.F) {
	f.Add(paperReply)
	f.Add("1. failure\nFailure Point: x\n2. success\n3. reflect\n4. heuristic\n- h")
	f.Add("</think>4. heuristic")
	f.Fuzz(func(t *testing.T, reply string) {
		m, err := Chat{}.Parse(reply)
		if err != nil {
			return
		}
		if m.Step == "" || m.Critique == "" || m.Heuristic == "" {
			t.Fatalf("parsed an empty field: %+v", m)
		}
		if !strings.Contains(reply, m.Heuristic) || !strings.Contains(reply, m.Step) {
			t.Fatalf("parsed text not in the reply: %+v", m)
		}
	})
}

func FuzzWorldParse(f *testing.F) {
	f.Add("S:19*3=57\nC:19*3=47 is wrong\nH:check\n")
	f.Add("S:a\nS:\nC:b\nH:c")
	f.Fuzz(func(t *testing.T, reply string) {
		m, err := World{}.Parse(reply)
		if err != nil {
			return
		}
		if m.Step == "" || m.Critique == "" || m.Heuristic == "" {
			t.Fatalf("parsed an empty field: %+v", m)
		}
		// The replay keeps M on one line: the question follows it.
		if r := (World{}).Replay("Q:1+2\n", m); !strings.HasSuffix(r, "\nQ:1+2\n") {
			t.Fatalf("replay %q", r)
		}
	})
}
