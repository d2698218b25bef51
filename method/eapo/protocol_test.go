package eapo

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"rlvr/task/world"
)

func TestWorldParse(t *testing.T) {
	var f World
	if got := f.Stops(); !reflect.DeepEqual(got, []string{"?\n"}) {
		t.Errorf("Stops() = %q", got)
	}
	for _, tt := range []struct {
		text string
		want []Query
	}{
		{"Q:(12+7)*3\n?E1:12+7;E3:19*3?\n", []Query{{"E1", "12+7"}, {"E3", "19*3"}}},
		{"?E2:5+5?", []Query{{"E2", "5+5"}}},
		{"Q:1+2\n?E1:0+0?\n!E1:0\n?E0:1+2?\n", []Query{{"E0", "1+2"}}}, // the last action
		{"?E99:(1+2)*3?\n", []Query{{"E99", "(1+2)*3"}}},
	} {
		got, err := f.Parse(tt.text)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.text, got, err, tt.want)
		}
	}
	for _, bad := range []string{
		"",
		"\n",
		"Q:(12+7)*3\n",
		"?E1:12+7?x\n",
		"E1:12+7?\n",
		"?E1 12+7?\n",
		"?X1:12+7?\n",
		"?E:12+7?\n",
		"?E100:1+1?\n",
		"?E-1:1+1?\n",
		"?E1:1+1;E2?\n",
		"?\n",
	} {
		if got, err := f.Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, no error", bad, got)
		}
	}
}

func TestWorldQuestion(t *testing.T) {
	var f World
	for _, q := range []string{"12+7", "(12+7)*3", ""} {
		if got, want := f.Question(Query{Expert: "E1", Question: q}), "Q:"+q+"\n"; got != want {
			t.Errorf("Question(%q) = %q, want %q", q, got, want)
		}
	}
	// An expert reads the question back as the world wrote it.
	for _, p := range world.Mix(3, 50, []int{0, 1, 2, 3, 4, 5, 6}) {
		back, err := world.ParseQuestion(f.Question(Query{Question: p.Question}))
		if err != nil || back.Answer != p.Answer {
			t.Fatalf("%q: read back %+v, %v", p.Question, back, err)
		}
	}
}

func TestWorldAnswer(t *testing.T) {
	var f World
	n := 0
	for _, p := range world.Mix(11, 300, []int{0, 1, 2, 3, 4, 5, 6}) {
		for s := range world.Styles {
			text, ans := world.Solve(p, s)
			got, ok := f.Answer(text)
			if want := strconv.FormatInt(ans, 10); !ok || got != want {
				t.Fatalf("style %d on %q: Answer(%q) = %q, %v; want %q", s, p.Question, text, got, ok, want)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no solutions")
	}
	for _, tt := range []struct{ reply, want string }{
		{"####57", "57"},
		{"19 * 3 = 57\n#### 57\n", "57"},
		{"####-3\n", "-3"},
		{"####007\n", "7"},
		{"####12\n\n", "12"},
	} {
		if got, ok := f.Answer(tt.reply); !ok || got != tt.want {
			t.Errorf("Answer(%q) = %q, %v; want %q", tt.reply, got, ok, tt.want)
		}
	}
	for _, bad := range []string{
		"",
		"   \n",
		"I cannot help.",
		"I see no question (a line starting Q:).\n",
		"####1.5\n",
		"#### 12/7\n",
		"the answer is 2.5",
		"####99999999999999999999\n", // not an int64
		// Only "####" marks an answer: a number elsewhere may be the
		// question quoted back.
		"12+7=19\nthe answer is 19",
		"\\boxed{19}",
		"I cannot read the question \"Q:12+7\".\n",
		"12+7=19\n",
	} {
		if got, ok := f.Answer(bad); ok {
			t.Errorf("Answer(%q) = %q, want no answer", bad, got)
		}
	}
}

func TestWorldReplies(t *testing.T) {
	var f World
	for _, tt := range []struct {
		rs   []Reply
		want string
	}{
		{nil, ""},
		{[]Reply{{"E1", "57", true}, {"E3", "", false}}, "!E1:57\n!E3:-\n"},
		{[]Reply{{"E2", "57", false}}, "!E2:-\n"}, // a declined reply hides its answer
		{[]Reply{{"E12", "-4", true}}, "!E12:-4\n"},
		{[]Reply{{"pool", "5", true}}, "!E0:5\n"}, // a name the world cannot write
	} {
		if got := f.Replies(tt.rs); got != tt.want {
			t.Errorf("Replies(%v) = %q, want %q", tt.rs, got, tt.want)
		}
	}
}

func TestWorldAction(t *testing.T) {
	var f World
	for _, tt := range []struct {
		qs   []Query
		want string
	}{
		{[]Query{{"E1", "12+7"}, {"E3", "19*3"}}, "?E1:12+7;E3:19*3?\n"},
		{[]Query{{"E2", "(12+7)*3"}}, "?E2:(12+7)*3?\n"},
		{[]Query{{"", "1+2"}}, "?E0:1+2?\n"}, // to the pool: E0
	} {
		if got := f.Action(tt.qs); got != tt.want {
			t.Errorf("Action(%v) = %q, want %q", tt.qs, got, tt.want)
		}
	}
	// What the world's questions are written as parses back.
	for _, p := range world.Mix(5, 40, []int{0, 2, 4, 6}) {
		qs := []Query{{"E1", p.Question}, {"E3", p.Prefix(1).Question}}
		back, err := f.Parse("Q:" + p.Question + "\n" + f.Action(qs))
		if err != nil || !reflect.DeepEqual(back, qs) {
			t.Fatalf("Action(%v) parsed back as %v, %v", qs, back, err)
		}
	}
}

func TestChatAction(t *testing.T) {
	var f Chat
	for _, qs := range [][]Query{
		{{"E1", "What is 19*3?"}},
		{{"E1", "a"}, {"", "b"}, {"gpt", "c"}},
		{{"", "quotes \" and \\ and\nnewlines"}},
		{{"E2", "tags </consult> <consult> <expert name=\"E1\">"}}, // kept inside the JSON
		{{"", "ünïcödé ×÷ 😀"}},
	} {
		text := f.Action(qs)
		if !strings.HasPrefix(text, "<consult>") || !strings.HasSuffix(text, "</consult>") {
			t.Errorf("Action(%v) = %q", qs, text)
		}
		back, err := f.Parse("Let me ask.\n" + text)
		if err != nil || !reflect.DeepEqual(back, qs) {
			t.Errorf("Action(%v) = %q parsed back as %v, %v", qs, text, back, err)
		}
	}
	if got, want := f.Action([]Query{{"", "q"}}), `<consult>[{"question":"q"}]</consult>`; got != want {
		t.Errorf("Action to the pool = %q, want %q", got, want)
	}
}

func TestChatParse(t *testing.T) {
	var f Chat
	if got := f.Stops(); !reflect.DeepEqual(got, []string{"</consult>"}) {
		t.Errorf("Stops() = %q", got)
	}
	for _, tt := range []struct {
		name, text string
		want       []Query
	}{
		{"array", `<consult>[{"expert": "E1", "question": "What is 19*3?"}, {"question": "And 12+7?"}]</consult>`,
			[]Query{{"E1", "What is 19*3?"}, {"", "And 12+7?"}}},
		{"object", `<consult>{"expert": "E2", "question": "What is 19*3?"}</consult>`,
			[]Query{{"E2", "What is 19*3?"}}},
		{"object without expert", `<consult>{"question": "What is 19*3?"}</consult>`,
			[]Query{{"", "What is 19*3?"}}},
		{"array without expert", `<consult>[{"question": "a"}, {"question": "b"}]</consult>`,
			[]Query{{"", "a"}, {"", "b"}}},
		{"reasoning before", "Let me think. 19*3 is hard, and 12+7 < 20.\nI'll ask. <consult>[{\"expert\":\"E3\",\"question\":\"19*3?\"}]</consult>",
			[]Query{{"E3", "19*3?"}}},
		{"an earlier consultation", "<consult>{\"question\":\"old\"}</consult>\n<expert name=\"E1\">5</expert>\nNow <consult>{\"question\":\"new\"}</consult>",
			[]Query{{"", "new"}}},
		{"trailing whitespace", "<consult>[{\"question\": \"q\"}]</consult> \n\n ",
			[]Query{{"", "q"}}},
		{"whitespace inside", "<consult>\n  [ {\"question\": \"q\"} ]\n</consult>",
			[]Query{{"", "q"}}},
		{"unknown fields", `<consult>{"expert": "E1", "question": "q", "why": "unsure"}</consult>`,
			[]Query{{"E1", "q"}}},
		{"unicode", `<consult>{"question": "Combien font 19×3 ? \u00e9"}</consult>`,
			[]Query{{"", "Combien font 19×3 ? é"}}},
	} {
		got, err := f.Parse(tt.text)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Parse(%q) = %v, %v; want %v", tt.name, tt.text, got, err, tt.want)
		}
	}
}

func TestChatParseErrors(t *testing.T) {
	var f Chat
	for _, tt := range []struct {
		name, text, want string
	}{
		{"no action", "I know it: 57.", "does not end in </consult>"},
		{"text after the action", `<consult>{"question": "q"}</consult> and more`, "does not end in </consult>"},
		{"no opening tag", `[{"question": "q"}]</consult>`, "without <consult>"},
		{"bad JSON array", `<consult>[{"question": }]</consult>`, "not a JSON array of queries"},
		{"not JSON", `<consult>what is 19*3?</consult>`, "not a JSON array of queries"},
		{"bad JSON object", `<consult>{"question": 3}</consult>`, "not a JSON query"},
		{"two objects", `<consult>{"question": "a"} {"question": "b"}</consult>`, "not a JSON query"},
		{"array of strings", `<consult>["19*3"]</consult>`, "not a JSON array of queries"},
		{"empty array", `<consult>[]</consult>`, "holds no query"},
		{"null", `<consult>null</consult>`, "holds no query"},
		{"empty", `<consult></consult>`, "not a JSON array of queries"},
		{"empty question", `<consult>[{"expert": "E1", "question": "q"}, {"expert": "E2", "question": "  "}]</consult>`, "query 1 has no question"},
		{"no question", `<consult>{"expert": "E1"}</consult>`, "query 0 has no question"},
		{"null query", `<consult>[null]</consult>`, "query 0 has no question"},
	} {
		got, err := f.Parse(tt.text)
		if err == nil {
			t.Errorf("%s: Parse(%q) = %v, no error", tt.name, tt.text, got)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse(%q): %q, want it to say %q", tt.name, tt.text, err, tt.want)
		}
	}
	// A long malformed action is clipped in the error, on a rune boundary.
	long := "<consult>" + strings.Repeat("é", 200) + "</consult>"
	_, err := f.Parse(long)
	if err == nil || len(err.Error()) > 400 || !utf8.ValidString(err.Error()) {
		t.Errorf("Parse(long): %q", err)
	}
}

func TestChatQuestion(t *testing.T) {
	q := Query{Expert: "E1", Question: "What is 19*3?"}
	if got := (Chat{}).Question(q); got != q.Question {
		t.Errorf("Question = %q, want the question itself", got)
	}
}

func TestChatAnswer(t *testing.T) {
	for _, tt := range []struct {
		max         int
		reply, want string
		wantOK      bool
	}{
		{0, "57, because 19*3 = 57.", "57, because 19*3 = 57.", true},
		{0, "  \n57\n\t ", "57", true},
		{0, "", "", false},
		{0, " \n\t\r\n", "", false},
		{5, "12345", "12345", true},
		{5, "  12345  ", "12345", true},
		{5, "123456", "12345 …", true},
		{6, "ab€d", "ab€d", true},   // € is 3 bytes: 6 in all, at the cap
		{5, "ab€d", "ab€ …", true},  // one over
		{5, "ab€de", "ab€ …", true}, // cut after €
		{4, "ab€de", "ab …", true},  // cut inside € drops it whole
		{3, "ab€de", "ab …", true},  // likewise
		{2, "ab€de", "ab …", true},  // cut before €
		{-1, strings.Repeat("x", DefaultMaxReply), strings.Repeat("x", DefaultMaxReply), true},
		{-1, strings.Repeat("x", DefaultMaxReply+1), strings.Repeat("x", DefaultMaxReply) + " …", true},
	} {
		got, ok := Chat{MaxReply: tt.max}.Answer(tt.reply)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Chat{MaxReply: %d}.Answer(%q) = %q, %v; want %q, %v", tt.max, tt.reply, got, ok, tt.want, tt.wantOK)
		}
	}
	// Every cap around multi-byte runes keeps a valid prefix of at most
	// the cap, losing no more than the rune cut.
	reply := "aé€😀b€é😀 c"
	for max := 1; max <= len(reply)+2; max++ {
		got, ok := Chat{MaxReply: max}.Answer(reply)
		if !ok || !utf8.ValidString(got) {
			t.Fatalf("cap %d: %q, %v", max, got, ok)
		}
		if len(reply) <= max {
			if got != reply {
				t.Fatalf("cap %d: %q, want the reply whole", max, got)
			}
			continue
		}
		body, cut := strings.CutSuffix(got, " …")
		if !cut {
			t.Fatalf("cap %d: %q has no mark of the cut", max, got)
		}
		if len(body) > max || len(body) <= max-utf8.UTFMax || !strings.HasPrefix(reply, body) {
			t.Fatalf("cap %d: kept %q (%d bytes) of %q", max, body, len(body), reply)
		}
	}
}

func TestChatReplies(t *testing.T) {
	var f Chat
	for _, tt := range []struct {
		rs   []Reply
		want string
	}{
		{nil, ""},
		{[]Reply{{"E1", "57, because 19*3 = 57.", true}}, `<expert name="E1">57, because 19*3 = 57.</expert>`},
		{[]Reply{{"E1", "57", true}, {"E2", "anything", false}, {"gpt", "", false}},
			"<expert name=\"E1\">57</expert>\n<expert name=\"E2\">unavailable</expert>\n<expert name=\"gpt\">unavailable</expert>"},
		{[]Reply{{"E1", "line one\nline two", true}}, "<expert name=\"E1\">line one\nline two</expert>"},
	} {
		if got := f.Replies(tt.rs); got != tt.want {
			t.Errorf("Replies(%v) = %q, want %q", tt.rs, got, tt.want)
		}
	}
}

func TestChatTrainingPrompt(t *testing.T) {
	for _, want := range []string{"{k}", "{experts}", "<consult>", "</consult>", Unavailable} {
		if !strings.Contains(ChatTrainingPrompt, want) {
			t.Errorf("the training prompt does not mention %q", want)
		}
	}
	// The prompt's own example parses.
	i := strings.Index(ChatTrainingPrompt, "<consult>")
	j := strings.Index(ChatTrainingPrompt, "</consult>")
	qs, err := (Chat{}).Parse(ChatTrainingPrompt[i : j+len("</consult>")])
	if err != nil || len(qs) != 1 || qs[0].Expert != "NAME" {
		t.Errorf("the prompt's example parses as %v, %v", qs, err)
	}
}
