package gonja_test

// Tests of the conditional-expression patch (see README.md): with plain
// testing, so that `go test .` here runs them alone.

import (
	"testing"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

func TestConditionalExpressions(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ 'a' + (b if c else "") }}`, "ab"},
		{`{{ 'a' + (b if not c else "") }}`, "a"},
		{`[{{ ('y' if false) }}]`, "[]"},
		{`{{ (1 if false else 2 if false else 3) }}`, "3"},
		{`{{ ('a' if true else 'b', 'c' if false else 'd') | join(',') }}`, "a,d"},
		{`{{ ['a' if false else 'b', 'c'] | join }}`, "bc"},
		{`{{ {'k': 'v' if true else 'w'}['k'] }}`, "v"},
		{`{{ range(3 if true else 5) | list | length }}`, "3"},
		{`{{ [3, 1, 2] | sort(reverse=true if c else false) | join }}`, "321"},
		{`{{ (missing.x if missing else 'none') }}`, "none"},
		{`{{ 'a' if false else 'b' }}`, "b"},
		{`{% for m in [1, 2, 3] if m > 1 %}{{ m }}{% endfor %}`, "23"},
	} {
		tpl, err := gonja.FromString(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		got, err := tpl.ExecuteToString(exec.NewContext(map[string]any{"b": "b", "c": true}))
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.src, got, err, c.want)
		}
	}
	for _, src := range []string{`{{ (1 if) }}`, `{{ (1 if true else) }}`, `{{ (1 if true 2) }}`} {
		if _, err := gonja.FromString(src); err == nil {
			t.Errorf("%s parsed", src)
		}
	}
}
