package verify

import "testing"

var fuzzSeeds = []string{
	"#### 18", "####52\n", `\boxed{\frac{1}{2}}`, `\boxed{\{1, \frac{2}{3}\}}`, `\fbox{7}`,
	"The answer is $3$.", "answer: c", "I have 3 apples and -4.5 pears", "1,000", `\$5.00`,
	`50\%`, `\left( 3, \frac{\pi}{2} \right)`, "[0, 1)", `(-\infty, 2) \cup (3, \infty)`,
	`\begin{pmatrix} 1 \\ 2 \end{pmatrix}`, `1 \pm \sqrt{19}`, "x^3+3x-6", "y = 2x + 3",
	`\text{Evelyn}`, "204_5", `137 \frac{1}{2}`, "2^{10}", `\sqrt[3]{8}`, "0.5", "025",
	"a ) 12 , b ) 15 , c ) 18", "Yes, because", `5 \text{ dollars}`, `864 \mbox{ inches}^2`,
	"\\", "{", "}", "(", "$", "%", "^", "_", `\frac`, `\sqrt[`, "\x01", "\xff",
}

// FuzzExtract checks that extraction and the helpers built on it never
// panic, are deterministic, return a piece of the input, and that an
// extracted answer equals itself.
func FuzzExtract(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a, rule := Extract(text)
		a2, rule2 := Extract(text)
		if a != a2 || rule != rule2 {
			t.Fatalf("Extract(%q) not deterministic: %q %v, %q %v", text, a, rule, a2, rule2)
		}
		if (a == "") != (rule == RuleNone) {
			t.Fatalf("Extract(%q) = %q, %v", text, a, rule)
		}
		if len(a) > len(text) {
			t.Fatalf("Extract(%q) = %q is longer than its input", text, a)
		}
		if a != "" && Normalize(a) != "" && !Equal(a, a) {
			t.Fatalf("Equal(%q, itself) is false (normalized %q)", a, Normalize(a))
		}
		if l, ok := Choice(text, nil); ok != (l != "") || len(l) > 1 {
			t.Fatalf("Choice(%q) = %q, %v", text, l, ok)
		}
		YesNo(text)
		ParseBool(text)
		if opts, err := ParseOptions(text); err == nil && len(opts) < 2 {
			t.Fatalf("ParseOptions(%q) = %q with no error", text, opts)
		}
		if r, ok := Score(text, text, KindMath); r != 0 && r != 1 || !ok && r != 0 {
			t.Fatalf("Score(%q) = %v, %v", text, r, ok)
		}
	})
}

// FuzzCheck checks that comparison never panics, is deterministic and
// symmetric, and that every answer that normalizes to something equals
// itself.
func FuzzCheck(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)])
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, pred, gold string) {
		opts := DefaultOptions()
		r := Check(pred, gold, opts)
		if r2 := Check(pred, gold, opts); r != r2 {
			t.Fatalf("Check(%q, %q) not deterministic: %+v, %+v", pred, gold, r, r2)
		}
		if r.Equal && (r.Pred == "" || r.Gold == "") {
			t.Fatalf("Check(%q, %q) = %+v: equal with an empty side", pred, gold, r)
		}
		if s := Check(gold, pred, opts); s.Equal != r.Equal {
			t.Fatalf("Check not symmetric: (%q, %q) = %v, swapped %v", pred, gold, r.Equal, s.Equal)
		}
		for _, x := range []string{pred, gold} {
			if c := Check(x, x, opts); c.Pred != "" && !c.Equal {
				t.Fatalf("Equal(%q, itself) is false (normalized %q, %v)", x, c.Pred, c.Method)
			}
		}
	})
}
