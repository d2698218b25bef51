package part

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"rlvr/method"
)

// testSection is a section that records how it was resolved.
type testSection struct {
	Level    int `yaml:"level"`
	resolved bool
}

func (s *testSection) Resolve(run *Run, add func(string, ...any)) {
	s.resolved = true
	if s.Level < 0 {
		add("test_part.level = %d is negative", s.Level)
	}
}

func (s *testSection) Join(b *Build) error { return nil }

// otherSection is the section of a second part.
type otherSection struct{ testSection }

// withRegistry makes the registry hold parts alone until the test ends.
func withRegistry(t *testing.T, parts ...Part) {
	t.Helper()
	saved := registry
	registry = nil
	t.Cleanup(func() { registry = saved })
	for _, p := range parts {
		Register(p)
	}
}

func TestRegistryOrderAndDefaults(t *testing.T) {
	withRegistry(t,
		Part{Name: "late", Order: 20, New: func() Section { return &testSection{} }, DefaultFor: []method.Algorithm{method.DAPO}},
		Part{Name: "early", Order: 10, New: func() Section { return &otherSection{} }, DefaultFor: []method.Algorithm{method.DAPO},
			AdvantageNorm: func(method.AdvantageNorm) method.AdvantageNorm { return method.NormNone }},
	)
	if got := Names(); !slices.Equal(got, []string{"early", "late"}) {
		t.Errorf("registry order %v, want by Order, not by registration", got)
	}
	if got := Defaults(method.DAPO); !slices.Equal(got, []string{"early", "late"}) || Defaults(method.GRPO) != nil {
		t.Errorf("defaults %v for dapo, %v for grpo", got, Defaults(method.GRPO))
	}
	if n := DefaultAdvantageNorm([]string{"late"}, method.NormGroupStd); n != method.NormGroupStd {
		t.Errorf("a part not listed changed the norm to %s", n)
	}
	if n := DefaultAdvantageNorm([]string{"early"}, method.NormGroupStd); n != method.NormNone {
		t.Errorf("norm %s, want the listed part's none", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of a name did not panic")
		}
	}()
	Register(Part{Name: "late", New: func() Section { return &testSection{} }})
}

// fillSection fills its defaults through a slice's element and a
// pointer, as a section's Resolve may (an expert list's names, a schedule).
type fillSection struct {
	Levels []int `yaml:"levels"`
	Max    *int  `yaml:"max"`
}

func (s *fillSection) Resolve(run *Run, add func(string, ...any)) {
	if len(s.Levels) > 0 {
		s.Levels[0] = run.GroupSize
	}
	if s.Max == nil {
		s.Max = new(int)
	}
	*s.Max = run.MaxTokens
}

func (s *fillSection) Join(b *Build) error { return nil }

// TestResolveLeavesTheConfigsSections: the sections resolve as copies; the
// config's keep what was written.
func TestResolveLeavesTheConfigsSections(t *testing.T) {
	withRegistry(t, Part{Name: "fill", New: func() Section { return &fillSection{} }})
	written := 1
	given := &fillSection{Levels: []int{1, 2}, Max: &written}
	out := Resolve(&Run{Parts: []string{"fill"}, GroupSize: 8, MaxTokens: 64}, Sections{"fill": given}, func(string, ...any) {})
	if got := Get[*fillSection](out); got == given || got.Levels[0] != 8 || *got.Max != 64 {
		t.Errorf("resolved %+v", got)
	}
	if given.Levels[0] != 1 || written != 1 || given.Max != &written {
		t.Errorf("resolving wrote into the config's section: %+v", given)
	}
}

func TestResolveSections(t *testing.T) {
	withRegistry(t,
		Part{Name: "test_part", Order: 10, Rollouts: true, New: func() Section { return &testSection{} }},
		Part{Name: "other_part", Order: 20, New: func() Section { return &otherSection{} }},
	)
	var msgs []string
	add := func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) }
	// A listed part without a section gets its defaults, resolved.
	out := Resolve(&Run{Algorithm: method.GRPO, Parts: []string{"test_part"}}, nil, add)
	if s := Get[*testSection](out); s == nil || !s.resolved || len(msgs) > 0 {
		t.Fatalf("sections %v, errors %v", out, msgs)
	}
	// Every problem at once: an unknown part, a section of a part not
	// listed, a part that needs rollouts in sft, the section's own.
	var in Sections
	in.Set(&testSection{Level: -1})
	in.Set(&otherSection{})
	Resolve(&Run{Algorithm: method.SFT, Parts: []string{"test_part", "telepathy"}}, in, add)
	all := strings.Join(msgs, "; ")
	for _, want := range []string{`parts: "telepathy" is not one of [test_part other_part]`, "section other_part is set but other_part is not in parts",
		"part test_part needs rollouts, which sft does not sample", "test_part.level = -1 is negative"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q do not say %q", all, want)
		}
	}
}

// TestSectionsSetCopies: setting a section in a copy of a config leaves
// the original's sections as they were, as assigning a field would.
func TestSectionsSetCopies(t *testing.T) {
	withRegistry(t, Part{Name: "test_part", New: func() Section { return &testSection{} }})
	var a Sections
	a.Set(&testSection{Level: 1})
	b := a
	b.Set(&testSection{Level: 2})
	if Get[*testSection](a).Level != 1 || Get[*testSection](b).Level != 2 {
		t.Errorf("levels %d and %d, want 1 and 2", Get[*testSection](a).Level, Get[*testSection](b).Level)
	}
	if Get[*otherSection](a) != nil {
		t.Error("a section never set is not nil")
	}
	defer func() {
		if recover() == nil {
			t.Error("setting the section of no registered part did not panic")
		}
	}()
	a.Set(&otherSection{})
}

func TestOneOfAndReal(t *testing.T) {
	var msgs []string
	add := func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) }
	v := ""
	OneOf(add, "x.mode", &v, "joint", "separate")
	w := "later"
	OneOf(add, "x.mode", &w, "joint", "separate")
	Real(add, "x.weight", 0, false)
	Real(add, "x.lr", 0, true)
	Real(add, "x.temperature", -1, true)
	want := []string{`x.mode "later" is not joint or separate`, "x.weight = 0 must be finite and positive", "x.temperature = -1 must be finite and not negative"}
	if v != "joint" || !slices.Equal(msgs, want) {
		t.Errorf("default %q, errors %q, want %q", v, msgs, want)
	}
}
