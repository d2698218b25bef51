package verify

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExtract(t *testing.T) {
	tests := []struct {
		name, text string
		want       string
		rule       Rule
	}{
		{"gsm8k", "She makes 9 * 2 = $<<9*2=18>>18.\n#### 18", "18", RuleHashes},
		{"gsm8k no space", "12+7=19\n####52\n", "52", RuleHashes},
		{"gsm8k separators", "so\n#### 1,450,000", "1,450,000", RuleHashes},
		{"gsm8k last", "#### 5\nwait\n#### 7", "7", RuleHashes},
		{"gsm8k heading skipped", "#### Step 1\nadd\n#### Answer\nThe answer is 3.", "3", RuleAnswerPhrase},
		{"hashes before box", "#### 5\nthen \\boxed{6}", "5", RuleHashes},
		{"boxed", `so $\boxed{\frac{1}{2}}$.`, `\frac{1}{2}`, RuleBoxed},
		{"last boxed", `first \boxed{1} then \boxed{2}`, "2", RuleBoxed},
		{"nested braces", `\boxed{\{1, \frac{2}{3}\}}`, `\{1, \frac{2}{3}\}`, RuleBoxed},
		{"unclosed last box", `\boxed{3} and \boxed{4`, "3", RuleBoxed},
		{"boxed space", `is $\boxed 5$`, "5", RuleBoxed},
		{"fbox", `thus \fbox{7}`, "7", RuleBoxed},
		{"framebox", `thus \framebox[2cm]{8} minutes`, "8", RuleBoxed},
		{"not a box", `\boxedfoo{3} and 4`, "4", RuleLastNumber},
		{"empty box", `\boxed{} so 5`, "5", RuleLastNumber},
		{"box beats phrase", `The answer is 4. \boxed{5}`, "5", RuleBoxed},
		{"phrase math", `The answer is $\frac{3}{4}$.`, `\frac{3}{4}`, RuleAnswerPhrase},
		{"phrase colon", "Final Answer: 42", "42", RuleAnswerPhrase},
		{"phrase markdown", "**Answer:** 42", "42", RuleAnswerPhrase},
		{"phrase sentence", "So the answer is 3.5. Next we check.", "3.5", RuleAnswerPhrase},
		{"phrase last", "The answer is 1.\nNo, the answer is 2.", "2", RuleAnswerPhrase},
		{"phrase filler", "the answer is therefore 3", "3", RuleAnswerPhrase},
		{"phrase connective", "The answer is 5 because 2+3=5.", "5", RuleAnswerPhrase},
		{"phrase should be", "hence answer should be d", "d", RuleAnswerPhrase},
		{"last number", "I have 3 apples and -4.5 pears", "-4.5", RuleLastNumber},
		{"last number separators", "It costs $1,234.50.", "1,234.50", RuleLastNumber},
		{"last number list", "pick 1,2", "2", RuleLastNumber},
		{"last number fraction", "the ratio is 3/4.", "3/4", RuleLastNumber},
		{"last number latex fraction", `so $x = -\frac{3}{4}$`, `-\frac{3}{4}`, RuleLastNumber},
		{"binary minus", "x-5", "5", RuleLastNumber},
		{"decimal point", "about .5 of it", ".5", RuleLastNumber},
		// Found comparing with Math-Verify (docs/peers.md): thousands
		// separated by spaces, clock times, numbers that are names.
		{"spaced thousands", "so he paid $400 000 - $282 000 = $118 000.", "118 000", RuleLastNumber},
		{"spaced thousands groups", "650 000/2 = 5 325 000 cars each", "5 325 000", RuleLastNumber},
		{"spaced thousands decimal", "each pays 3 400.50 a year", "3 400.50", RuleLastNumber},
		{"spaced not thousands", "rows 1234 567", "567", RuleLastNumber},
		{"spaced list", "pick 1 2", "2", RuleLastNumber},
		{"clock on the hour", "so the latest she can start is 5-3 = 2:00 pm", "2", RuleLastNumber},
		{"clock 24h", "18:00 minus 8 hours is 10:00", "10", RuleLastNumber},
		{"clock time", "she leaves at 2:30 pm", "2:30", RuleLastNumber},
		{"ratio", "the ratio is 3:4", "4", RuleLastNumber},
		{"glued to a word", "180/30=6 bottles of vitamin D3.", "6", RuleLastNumber},
		{"glued to a word lower", "3000 - 50 = 2950 songs on her mp3 player", "2950", RuleLastNumber},
		{"number sign", "16 people think horse #12 will win", "16", RuleLastNumber},
		{"latex command digit", `so $x = \sqrt2$`, "2", RuleLastNumber},
		{"exponent", "about 1e5", "5", RuleLastNumber},
		{"phrase prose", "So, 63 + 97 = 160.\nThe final answer is given as a number after \"####\".", "160", RuleLastNumber},
		{"phrase prose earlier phrase", "The answer is 7. Note that the answer is the sum of the numbers.", "7", RuleAnswerPhrase},
		{"phrase words", "The answer is the blue one.", "the blue one", RuleAnswerPhrase},
		{"phrase about the answer", "The answer is $\\textbf{(B)}$\n\nThis answer is the correct answer.", `\textbf{(B)}`, RuleAnswerPhrase},
		{"last number percent", "which is 25%.", "25%", RuleLastNumber},
		{"last number latex percent", `so $40\%$ of them`, `40\%`, RuleLastNumber},
		{"last number cfrac", `we have $b = 1 + \cfrac{1}{3}.$`, `\cfrac{1}{3}`, RuleLastNumber},
		{"last number sqrt", `which results in $\sqrt{53}$. Done`, `\sqrt{53}`, RuleLastNumber},
		{"last number sqrt coefficient", `so the side is $-2\sqrt{3}$`, `-2\sqrt{3}`, RuleLastNumber},
		{"none", "no numbers here", "", RuleNone},
		{"empty", "", "", RuleNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, rule := Extract(tt.text)
			if got != tt.want || rule != tt.rule {
				t.Errorf("Extract(%q) = %q, %v; want %q, %v", tt.text, got, rule, tt.want, tt.rule)
			}
		})
	}
}

func TestExtractWithoutLastNumber(t *testing.T) {
	if got, rule := ExtractWith("I have 3", ExtractOptions{}); got != "" || rule != RuleNone {
		t.Errorf("ExtractWith without fallback = %q, %v; want none", got, rule)
	}
	if got, rule := ExtractWith(`\boxed{3}`, ExtractOptions{}); got != "3" || rule != RuleBoxed {
		t.Errorf("ExtractWith = %q, %v; want 3, boxed", got, rule)
	}
}

func TestExtractLongInput(t *testing.T) {
	// Only the tail is considered: an answer beyond MaxInput from the end is
	// not seen, one at the end is.
	long := `\boxed{1}` + strings.Repeat("x", MaxInput) + " 7"
	if got, rule := Extract(long); got != "7" || rule != RuleLastNumber {
		t.Errorf("Extract(long) = %q, %v; want 7, last-number", got, rule)
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		pred, gold string
		want       bool
	}{
		// Integers, decimals, leading zeros, separators.
		{"025", "25", true},
		{"27", "27.0", true},
		{"1,000", "1000", true},
		{"1,450,000", "1450000", true},
		{`10,\!080`, "10080", true},
		{`11,\! 111,\! 111,\! 100`, "11111111100", true},
		{"1450001", "1450000", false},
		{"-3", "3", false},
		{".0000672", "0.0000672", true},
		// Fractions.
		{`\frac34`, "0.75", true},
		{`\dfrac{3}{4}`, "3/4", true},
		{`\tfrac{3}{4}`, `\frac{6}{8}`, true},
		{`\frac 59`, `\frac{5}{9}`, true},
		{`\frac9{19}`, `\frac{9}{19}`, true},
		{`\frac{3}{4}`, `\frac{3}{5}`, false},
		{`137 \frac{1}{2}`, "137.5", true},
		{`1\frac{4}{5}`, `\frac{9}{5}`, true},
		{`-1\frac{4}{5}`, "-1.8", true},
		{`\frac{1}{3}`, "0.3333333", true},
		{`\frac{1}{3}`, "0.33", false},
		// Percent, currency, units, degrees.
		{`50\%`, "50", true},
		{"50%", "0.5", true},
		{"0.5", "50%", true},
		{"50", "0.5", false},
		{`\$5.00`, "5", true},
		{"$5", `\$5`, true},
		{"5 cm", "5", true},
		{"5cm", "5", true},
		{`5 \text{ dollars}`, "5", true},
		{`15\mbox{ cm}^2`, "15", true},
		{`864 \mbox{ inches}^2`, "864", true},
		{`\frac{270}7\text{ degrees}`, `\frac{270}{7}`, true},
		{`30^\circ`, "30", true},
		{`30^{\circ}`, "30°", true},
		{"Rs. 500", "500", true},
		// Roots, pi, powers, products.
		{`\sqrt2`, `\sqrt{2}`, true},
		{`2\sqrt{5}`, `\sqrt{20}`, true},
		{`\frac{\sqrt{3}}{3}`, `\frac{1}{\sqrt3}`, true},
		{`\sqrt[3]{8}`, "2", true},
		{`2^{10}`, "1024", true},
		{`12\pi`, `12 \pi`, true},
		{`\pi`, "3.1415927", true},
		{`\pi`, "3.14", false},
		{`3 \cdot 4`, `3 \times 4`, true},
		{`2 \times 10^{3}`, "2000", true},
		{`\dbinom{8}{3}`, "56", true},
		{`\binom{8}{3}`, "57", false},
		{`30^{ \circ }`, "30", true},
		// Delimiters and spacing.
		{`\left( 3, \frac{\pi}{2} \right)`, `(3,\frac{\pi}{2})`, true},
		{`\!1\,000`, "1000", true},
		{`$\displaystyle 5$`, "5", true},
		{`\(5\)`, "5", true},
		// Tuples, intervals, sets, lists.
		{"(1, 2)", "(1,2)", true},
		{"(1,2)", "(2,1)", false},
		{"(1,2)", "1,2", false},
		{"[0,1)", "[0, 1)", true},
		{"[0,1]", "[0,1)", false},
		{`(-\infty, 2) \cup (3, \infty)`, `(3,\infty)\cup(-\infty,2)`, true},
		{`(-\infty, 2) \cup (3, \infty)`, `(-\infty, 2] \cup (3, \infty)`, false},
		{`\{1,2\}`, "2, 1", true},
		{"1, 2", "2, 1", true},
		{`\{1,2\}`, `\{1,2,3\}`, false},
		{"3, 5, 7", "7,3,5", true},
		{`1 \pm \sqrt{19}`, `1-\sqrt{19}, 1+\sqrt{19}`, true},
		{`\{1\pm\sqrt{5},-2\}`, `-2, 1+\sqrt5, 1-\sqrt5`, true},
		{"2 and 3", "3, 2", true},
		{`\begin{pmatrix} -1/3 \\ 2/3 \end{pmatrix}`, `\begin{pmatrix}-\frac13\\\frac23\end{pmatrix}`, true},
		{`\begin{pmatrix} 1 \\ 2 \end{pmatrix}`, "(1, 2)", true},
		{`\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}`, `\begin{bmatrix} 1 & 2 \\ 3 & 5 \end{bmatrix}`, false},
		// Equations, expressions, text.
		{"x = 5", "5", true},
		{"x=5", "y = 5", false},
		{"x_1 = 5", "x_{1}=5", true},
		{"a = 3, b = 5", "b = 5, a = 3", true},
		{"a = 3, b = 5", "a = 5, b = 3", false},
		{"x = 1 or x = 2", "2, 1", true},
		{`x \in [-2,7]`, "[-2,7]", true},
		{"(x, y) = (1, 2)", "(1,2)", true},
		{"y = 2x + 3", "2x+3", true},
		// A worked equation is its result (found comparing with Math-Verify).
		{"1440 / 1440 = 1", "1", true},
		{`50 \times 8 + 36 = 436`, "436", true},
		{"400 + 36 = 76", "436", false},
		{"x = 400 + 36 = 436", "436", true},
		{`\frac{1}{3} \approx 0.333`, "0.333", true},
		{"x^2 + y^2 = 25", "25", false},
		{"2x = 4", "4", false},
		{"x^3+3x-6", "3x + x^3 - 6", true},
		{"(a+5)(b+2)", "ab + 2a + 5b + 10", false}, // "ab" is a word, not a*b
		{"(a+5)(b+2)", "(b+2)(a+5)", true},
		{"2k+2", "2(k+1)", true},
		{"x+1", "y+1", false},
		{"2k", "2", false},
		{"3R^2", "3r^2", false},
		{"-2 + 7i", "7i-2", true},
		{"6+9i", "6-9i", false},
		{"204_5", "204_{5}", true},
		{"204_5", "204", false},
		{`\text{Evelyn}`, "evelyn", true},
		{`\text{east}`, `\text{west}`, false},
		{`\text{(B)}`, "B", true},
		{`\text{(B)}`, "(C)", false},
		{`5x - 7y + 11z + 4 = 0`, `5x-7y+11z+4=0`, true},
		{`\cot x`, `\cot x`, true},
		{`\infty`, `\infty`, true},
		{`\sqrt{x^2}`, "x", true}, // documented: sample points are positive
		{"1 000", "1000", true},
		{"1,5", "5, 1", true},
		{"5 cm", "5 m", true},
		{"ab", "a*b", false},
		{"", "", false},
		{"5", "", false},
		{"", "5", false},
		{"$$", "$$", false},
	}
	for _, tt := range tests {
		if got := Equal(tt.pred, tt.gold); got != tt.want {
			r := Check(tt.pred, tt.gold, DefaultOptions())
			t.Errorf("Equal(%q, %q) = %v, want %v (normalized %q vs %q, %v)", tt.pred, tt.gold, got, tt.want, r.Pred, r.Gold, r.Method)
		}
		if got := Equal(tt.gold, tt.pred); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v (swapped)", tt.gold, tt.pred, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		pred, gold string
		want       Result
	}{
		{`\dfrac{1}{2}`, "0.5", Result{true, `\frac{1}{2}`, "0.5", MethodNumeric}},
		{"x^2+1", "1+x^2", Result{true, "x^2+1", "1+x^2", MethodExpression}},
		{`\text{ Navin }`, "navin", Result{true, "navin", "navin", MethodString}},
		{"[1, 2)", "[1,2]", Result{false, "[1,2)", "[1,2]", MethodStructure}},
		{`\$1,000`, "1000", Result{true, "1000", "1000", MethodNumeric}},
		{"", "3", Result{false, "", "3", MethodNone}},
	}
	for _, tt := range tests {
		if got := Check(tt.pred, tt.gold, DefaultOptions()); got != tt.want {
			t.Errorf("Check(%q, %q) = %+v, want %+v", tt.pred, tt.gold, got, tt.want)
		}
	}
}

func TestOptions(t *testing.T) {
	exact := Options{}
	tests := []struct {
		pred, gold string
		opts       Options
		want       bool
	}{
		{`\sqrt{2}^2`, "2", DefaultOptions(), true},
		{`\sqrt{2}^2`, "2", exact, false},
		{"0.1+0.2", "0.3", exact, true}, // decimals are exact rationals
		{"3.14", `\pi`, Options{RelTol: 1e-3}, true},
		{"3.14", `\pi`, DefaultOptions(), false},
		{"1e-12", "0", DefaultOptions(), false}, // "1e-12" is not a number here
		{"0.0000000001", "0", DefaultOptions(), true},
		{"0.0000000001", "0", exact, false},
		{"50%", "0.5", Options{RelTol: DefaultRelTol}, false},
		{"50%", "50", Options{RelTol: DefaultRelTol}, true},
		{"1000000", "1000001", Options{RelTol: 1e-3}, false}, // integers are exact
		{"1000000.5", "1000001", Options{RelTol: 1e-3}, true},
	}
	for _, tt := range tests {
		if got := Check(tt.pred, tt.gold, tt.opts).Equal; got != tt.want {
			t.Errorf("Check(%q, %q, %+v) = %v, want %v", tt.pred, tt.gold, tt.opts, got, tt.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{`\left( \frac34, \sqrt2 \right)`, `(\frac{3}{4},\sqrt{2})`},
		{`\$1,000.00`, "1000.00"},
		{`\{1, 2\}`, `\{1,2\}`},
		{`\text{Evelyn}`, "evelyn"},
		{`x = 5\%`, "x=5%"},
		{`\boxed{\textbf{(113) }}`, "113"},
		{"  ", ""},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	tests := []struct {
		in   string
		want []Option
		err  error
	}{
		{"a ) 12 , b ) 15 , c ) 18", []Option{{"a", "12"}, {"b", "15"}, {"c", "18"}}, nil},
		{"['a ) 462 cm ²', 'b ) 530 cm ²']", []Option{{"a", "462 cm ²"}, {"b", "530 cm ²"}}, nil},
		{"a ) a ) 4 inches , b ) b ) 6 inches", []Option{{"a", "4 inches"}, {"b", "6 inches"}}, nil},
		{"a ) ( a + b ) , b ) 2 b", []Option{{"a", "( a + b )"}, {"b", "2 b"}}, nil},
		{"(A) 1 (B) 2 (C) 3", []Option{{"a", "1"}, {"b", "2"}, {"c", "3"}}, nil},
		{"a ) 19,104 , b ) 19 , 956.732", []Option{{"a", "19,104"}, {"b", "19 , 956.732"}}, nil},
		{"no options", nil, ErrNoOptions},
		{"", nil, ErrNoOptions},
	}
	for _, tt := range tests {
		got, err := ParseOptions(tt.in)
		if !errors.Is(err, tt.err) || len(got) != len(tt.want) {
			t.Errorf("ParseOptions(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParseOptions(%q)[%d] = %q, want %q", tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func TestChoice(t *testing.T) {
	opts, err := ParseOptions("a ) 12 , b ) 15 , c ) 18 , d ) 24 , e ) 26")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		resp string
		want string // "" for no choice
	}{
		{"c", "c"},
		{"C", "c"},
		{"(c)", "c"},
		{"(C).", "c"},
		{"c )", "c"},
		{"c ) 18", "c"},
		{"The answer is c.", "c"},
		{"the answer is (D)", "d"},
		{"answer : option b", "b"},
		{`$\boxed{\text{(E)}}$`, "e"},
		{"so we get 18", "c"},
		{"The answer is 18.", "c"},
		{"18", "c"},
		{"Option A is correct", "a"},
		{"d is the answer .", "d"},
		{"total = 1200 e", "e"},
		{"we get 13", ""},
		{"The answer is a number.", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := Choice(tt.resp, opts)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Choice(%q) = %q, %v; want %q", tt.resp, got, ok, tt.want)
		}
	}
	if !CheckChoice("(C)", "c", opts) || CheckChoice("(C)", "d", opts) || CheckChoice("(C)", "?", opts) {
		t.Error("CheckChoice is wrong")
	}
	if got, ok := Choice("f", nil); ok {
		t.Errorf("Choice(f, nil) = %q: f is not among a to e", got)
	}
}

func TestYesNo(t *testing.T) {
	tests := []struct {
		resp     string
		want, ok bool
	}{
		{"yes", true, true},
		{"No.", false, true},
		{"TRUE", true, true},
		{"false", false, true},
		{"Yes, because penguins cannot fly.", true, true},
		{"Penguins cannot fly. So the answer is no.", false, true},
		{"Answer: yes", true, true},
		{`$\boxed{\text{No}}$`, false, true},
		{"There is no way. Thus, yes.", true, true},
		{"Nobody knows", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		got, ok := YesNo(tt.resp)
		if got != tt.want || ok != tt.ok {
			t.Errorf("YesNo(%q) = %v, %v; want %v, %v", tt.resp, got, ok, tt.want, tt.ok)
		}
	}
	for in, want := range map[string]bool{"yes": true, " No ": false, "True": true, `\text{false}`: false} {
		if got, ok := ParseBool(in); !ok || got != want {
			t.Errorf("ParseBool(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "maybe", "yes no", "1"} {
		if _, ok := ParseBool(in); ok {
			t.Errorf("ParseBool(%q) is ok", in)
		}
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		resp, gold string
		kind       Kind
		reward     float64
		ok         bool
	}{
		{`so $\boxed{18}$`, "18", KindMath, 1, true},
		{`so $\boxed{19}$`, "18", KindMath, 0, true},
		{"no answer at all", "18", KindMath, 0, true},
		{"The answer is 18.", "Janet sells 9 eggs.\n#### 18", KindMath, 1, true},
		{"The answer is 3/4.", `solution ... $\boxed{\frac34}$`, KindMath, 1, true},
		{"18", "", KindMath, 0, false},
		{"18", "  $ $ ", KindMath, 0, false},
		{"The answer is (C).", "c", KindChoice, 1, true},
		{"The answer is (C).", "d", KindChoice, 0, true},
		{"The answer is (C).", "18", KindChoice, 0, false},
		{"Yes.", "yes", KindYesNo, 1, true},
		{"Yes.", "false", KindYesNo, 0, true},
		{"I cannot tell.", "no", KindYesNo, 0, true},
		{"Yes.", "maybe", KindYesNo, 0, false},
		{"Yes.", "yes", Kind(99), 0, false},
	}
	for _, tt := range tests {
		r, ok := Score(tt.resp, tt.gold, tt.kind)
		if r != tt.reward || ok != tt.ok {
			t.Errorf("Score(%q, %q, %v) = %v, %v; want %v, %v", tt.resp, tt.gold, tt.kind, r, ok, tt.reward, tt.ok)
		}
	}
	opts, _ := ParseOptions("a ) 12 , b ) 15")
	if r, ok := ScoreChoice("It is 15.", "b", opts); r != 1 || !ok {
		t.Errorf("ScoreChoice by value = %v, %v; want 1, true", r, ok)
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{RuleNone.String(), "none"}, {RuleHashes.String(), "hashes"}, {RuleBoxed.String(), "boxed"},
		{RuleAnswerPhrase.String(), "answer-phrase"}, {RuleLastNumber.String(), "last-number"}, {Rule(-1).String(), "unknown"},
		{MethodNone.String(), "none"}, {MethodNumeric.String(), "numeric"}, {MethodExpression.String(), "expression"},
		{MethodString.String(), "string"}, {MethodStructure.String(), "structure"}, {Method(-1).String(), "unknown"},
		{KindMath.String(), "math"}, {KindChoice.String(), "choice"}, {KindYesNo.String(), "yes-no"}, {Kind(-1).String(), "unknown"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}

// TestBounded feeds adversarial inputs and checks that every call returns
// quickly.
func TestBounded(t *testing.T) {
	big := func(s string, n int) string { return strings.Repeat(s, n) }
	inputs := []string{
		big(`\boxed{`, 100000),
		big("{", 200000) + big("}", 200000),
		big("(", 50000) + "1" + big(")", 50000),
		big("2^", 5000) + "2",
		"2^{2^{2^{2^{2^{2^{2^{2}}}}}}}",
		"9" + big("9", 5000) + "^{99999}",
		big("1+", 3000) + "1",
		big(`\frac{1}{`, 2000) + "2" + big("}", 2000),
		big(`\sqrt{`, 3000) + "2" + big("}", 3000),
		big("####", 30000) + " 5",
		big("#### Step\n", 20000),
		big("The answer is ", 10000),
		big("1,", 100000) + "000",
		big(`\{1,`, 3000) + big(`\}`, 3000),
		big("[1,", 3000) + big("]", 3000),
		big("1, ", 10000),
		big("x", 4000),
		big("a ) 1 , ", 5000),
		big("yes no ", 20000),
		big(`\left(`, 10000),
		big("\xff\xfe", 1000),
		big(`\pm `, 1000),
		big(`\cup (1,2)`, 500),
		big(`\begin{pmatrix}`, 300) + "1" + big(`\end{pmatrix}`, 300),
		big("1&", 2000) + big(`\\`, 2000),
	}
	for i, in := range inputs {
		start := time.Now()
		a, _ := Extract(in)
		Check(in, in, DefaultOptions())
		Check(a, a, DefaultOptions())
		Check(tail(in, MaxAnswer), tail(in, MaxAnswer), DefaultOptions())
		Choice(in, nil)
		ParseOptions(in)
		YesNo(in)
		Score(in, in, KindMath)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("input %d (%.40q…, %d bytes) took %v", i, in, len(in), d)
		}
	}
}
