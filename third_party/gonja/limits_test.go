package gonja_test

// Tests of the render-limits patch (see README.md): with plain testing, so
// that `go test .` here runs them alone.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// testLimits are small enough for the tests to hit them quickly.
var testLimits = exec.Limits{MaxCallDepth: 50, MaxValueBytes: 1 << 20, MaxTotalBytes: 4 << 20}

// parseTemplate parses src as the template "/t" of a loader that holds
// nothing else, so that it can include, import and extend only itself.
func parseTemplate(src string) (*exec.Template, error) {
	loader := loaders.MustNewMemoryLoader(map[string]string{"/t": src})
	return exec.NewTemplate("/t", gonja.DefaultConfig, loader, gonja.DefaultEnvironment)
}

// renderLimited parses src and renders it under limits within timeout.
func renderLimited(src string, limits exec.Limits, timeout time.Duration) (string, error) {
	tpl, err := parseTemplate(src)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out strings.Builder
	err = tpl.ExecuteLimited(ctx, &out, exec.NewContext(map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": "Hi"}},
	}), limits)
	return out.String(), err
}

// hostileTemplates each exceed a limit at render time, on the line given.
var hostileTemplates = []struct {
	name, src string
	line      int
	want      string // in the error
}{
	{"macro passed to itself", "{% macro a(f) %}{{ f(f) }}{% endmacro %}{% macro z() %}{% endmacro %}\n{{ a(a) }}", 1, "calls nest deeper than 50"},
	{"macro calling itself", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n\n{{ f(1) }}", 1, "calls nest deeper than 50"},
	{"recursion inside caller()", "{% macro m() %}{{ caller() }}{% endmacro %}{% macro c() %}{{ c() }}{% endmacro %}\n{% call m() %}{{ c() }}{% endcall %}", 1, "calls nest deeper than 50"},
	{"recursive loop", "{% for x in [1] recursive %}\n{{ loop([1]) }}{% endfor %}", 2, "calls nest deeper than 50"},
	{"block rendering itself", "{% block a %}{{ self.a() }}{% endblock %}", 1, "calls nest deeper than 50"},
	{"template including itself", "\n{% include '/t' %}", 2, "calls nest deeper than 50"},
	{"string doubling", "{% set ns = namespace(s='a') %}\n{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", 2, "bytes"},
	{"string doubling with +", "{% set ns = namespace(s='a') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", 1, "bytes"},
	{"string repetition", "\n\n{{ 'a' * 10**9 }}", 3, "a value of 1000000000 bytes"},
	{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", 1, "bytes"},
	{"list of itself twice", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}", 1, "bytes"},
	{"namespace of itself twice", "{% set ns = namespace(p=1) %}{% for i in range(60) %}{% set n = namespace() %}{% set n.x = ns.p %}{% set n.y = ns.p %}{% set ns.p = n %}{% endfor %}{{ ns.p }}", 1, "bytes"},
	{"appending a list to itself", "{% set l = [1] %}" + strings.Repeat("{% set _ = l.append(l) %}", 40) + "{{ l }}", 1, "bytes"},
	{"values kept in a loop", "{% set s = 'a' * 100000 %}{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [s ~ i] %}{% endfor %}", 1, "bytes"},
	{"format width", "{{ '{:>999999999}'.format(1) }}", 1, "bytes"},
	{"format width from an argument", "{{ '{:{}}'.format(1, 999999999) }}", 1, "bytes"},
	{"format precision", "{{ '{:.999999999f}'.format(1.5) }}", 1, "bytes"},
	{"printf widths", "{{ '%999999d%999999d%999999d%999999d%999999d'|format(1, 2, 3, 4, 5) }}", 1, "bytes"},
	{"center method", "{{ 'a'.center(999999999) }}", 1, "bytes"},
	{"center filter", "{{ 'a'|center(999999999) }}", 1, "bytes"},
	{"ljust", "{{ 'a'.ljust(999999999) }}", 1, "bytes"},
	{"zfill", "{{ '1'.zfill(999999999) }}", 1, "bytes"},
	{"expandtabs", "{{ '\t\t'.expandtabs(999999999) }}", 1, "bytes"},
	{"replace method", "{% set s = 'a' * 100000 %}{{ s.replace('', s) }}", 1, "bytes"},
	{"replace filter", "{% set s = 'a' * 100000 %}{{ s|replace('a', s) }}", 1, "bytes"},
	{"join method", "{% set s = 'a' * 100000 %}{{ s.join(s) }}", 1, "bytes"},
	{"join filter", "{% set s = 'a' * 100000 %}{{ s|join(s) }}", 1, "bytes"},
	{"indent", "{% set s = 'a\\n' * 1000 %}{{ s|indent(999999) }}", 1, "bytes"},
	{"batch", "{{ [1]|batch(999999999, fill_with=0)|list }}", 1, "bytes"},
	{"slice", "{{ [1]|slice(999999999)|list }}", 1, "bytes"},
	{"list of characters", "{% set s = 'a' * 1000000 %}{{ s|list|length }}", 1, "bytes"},
	{"split", "{% set s = 'a ' * 500000 %}{{ s.split()|length }}", 1, "bytes"},
	{"range", "{{ range(10**9)|length }}", 1, "bytes"},
	{"lipsum", "{{ lipsum(n=999999999) }}", 1, "bytes"},
	{"tojson indent", "{{ [[[[1]]]]|tojson(indent=999999999) }}", 1, "bytes"},
	{"macro output", "{% macro m() %}{% for i in range(100000) %}{{ 'a' * 1000 }}{% endfor %}{% endmacro %}{{ m()|length }}", 1, "bytes"},
}

func TestLimitsStopHostileTemplates(t *testing.T) {
	for _, c := range hostileTemplates {
		start := time.Now()
		_, err := renderLimited(c.src, testLimits, time.Minute)
		var re *exec.RenderError
		switch {
		case !errors.Is(err, exec.ErrLimit) || !errors.As(err, &re):
			t.Errorf("%s: error %.300v, want a *RenderError wrapping ErrLimit", c.name, err)
		case re.Line != c.line || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %q, want line %d and %q", c.name, err, c.line, c.want)
		}
		// Bounded work ends long before the minute allowed.
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%s: took %v", c.name, d)
		}
	}
}

// TestLimitsLeaveRendersAlone checks that templates within the limits
// render as without them.
func TestLimitsLeaveRendersAlone(t *testing.T) {
	for _, src := range []string{
		"{% for m in messages %}<{{ m.role }}>{{ m.content|trim }}{% if not loop.last %}\n{% endif %}{% endfor %}",
		"{% set ns = namespace(n=0, s='') %}{% for i in range(10) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}",
		"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) }}",
		"{{ [1, [2, 3], {'a': 'b'}] }} {{ 'x' * 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ [1, 2] + [3] }}",
		"{{ '{:>5}|{:.2f}'.format('a', 1.5) }} {{ 'a,b'.split(',') }} {{ 'ab'|list }} {{ range(3)|list }} {{ [1, 2, 3]|batch(2)|list }}",
		"{% for x in [[1, [2]], [3]] recursive %}{% if x is iterable %}{{ loop(x) }}{% else %}{{ x }}{% endif %}{% endfor %}",
	} {
		tpl, err := parseTemplate(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		data := func() *exec.Context {
			return exec.NewContext(map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": " Hi "}, map[string]any{"role": "assistant", "content": "Hello"}}})
		}
		want, err := tpl.ExecuteToString(data())
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var got strings.Builder
		if err := tpl.ExecuteLimited(context.Background(), &got, data(), testLimits); err != nil || got.String() != want {
			t.Errorf("%s: limited render %q, %v; want %q", src, got.String(), err, want)
		}
	}
}

// TestExecuteLimitedStopsWhenCancelled renders a loop of 2.5e9 empty
// iterations, which no write or call interrupts, and cancels it: the
// render must return, with an error saying why, well before it could
// finish.
func TestExecuteLimitedStopsWhenCancelled(t *testing.T) {
	tpl, err := parseTemplate("{% set s = 'a' * 50000 %}\n{% for c in s %}{% for d in s %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var out strings.Builder
		done <- tpl.ExecuteLimited(ctx, &out, nil, exec.Limits{})
	}()
	time.Sleep(50 * time.Millisecond) // let it start; it stops either way
	cancel()
	select {
	case err := <-done:
		var re *exec.RenderError
		if !errors.Is(err, exec.ErrLimit) || !errors.Is(err, context.Canceled) || !errors.As(err, &re) || re.Line != 2 {
			t.Errorf("error %v, want ErrLimit and context.Canceled on line 2", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the render went on 30 s after it was cancelled")
	}
}

func TestLimitsRefuseCycles(t *testing.T) {
	for _, src := range []string{
		"{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}",
		"{% set ns = namespace() %}{% set other = namespace(x=ns) %}{% set ns.y = [other] %}{{ ns }}",
		"{% set d = {} %}{% set d['k'] = {'x': [d]} %}{{ d }}",
	} {
		tpl, err := parseTemplate(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		// Without limits too: a cycle would make printing recurse for ever.
		if out, err := tpl.ExecuteToString(nil); err == nil || !strings.Contains(err.Error(), "holds its own container") {
			t.Errorf("%s: %q, %v; want an error", src, out, err)
		}
	}
}

func TestParserNestingLimit(t *testing.T) {
	deep := 100000
	for _, c := range []struct{ name, src string }{
		{"parentheses", "{{ " + strings.Repeat("(", deep) + "1" + strings.Repeat(")", deep) + " }}"},
		{"lists", "{{ " + strings.Repeat("[", deep) + strings.Repeat("]", deep) + " }}"},
		{"dicts", "{{ " + strings.Repeat("{'a': ", deep) + "1" + strings.Repeat("}", deep) + " }}"},
		{"call arguments", "{{ " + strings.Repeat("f(", deep) + strings.Repeat(")", deep) + " }}"},
		{"additions", "{{ a" + strings.Repeat(" + a", deep) + " }}"},
		{"concatenations", "{{ a" + strings.Repeat(" ~ a", deep) + " }}"},
		{"comparisons", "{{ a" + strings.Repeat(" < a", deep) + " }}"},
		{"conjunctions", "{{ a" + strings.Repeat(" and a", deep) + " }}"},
		{"attributes", "{{ a" + strings.Repeat(".b", deep) + " }}"},
		{"subscripts", "{{ a" + strings.Repeat("[0]", deep) + " }}"},
		{"calls", "{{ a" + strings.Repeat("()", deep) + " }}"},
		{"conditionals", "{{ (a" + strings.Repeat(" if a", deep) + ") }}"},
		{"blocks", strings.Repeat("{% if a %}", deep) + strings.Repeat("{% endif %}", deep)},
		{"template extending itself", "{% extends '/t' %}"},
	} {
		_, err := parseTemplate("\n" + c.src)
		var se *parser.SyntaxError
		if !errors.As(err, &se) || se.Line != 2 || !strings.Contains(se.Message, "nests deeper than 256") {
			t.Errorf("%s: error %.300v, want one on line 2 about nesting", c.name, err)
		}
	}
	// Nesting well within the limit parses.
	for _, src := range []string{
		"{{ " + strings.Repeat("(", 60) + "1" + strings.Repeat(")", 60) + " }}",
		"{{ a" + strings.Repeat(" + a", 60) + " }}",
		strings.Repeat("{% if a %}", 60) + strings.Repeat("{% endif %}", 60),
	} {
		if _, err := parseTemplate(src); err != nil {
			t.Errorf("%.40s...: %v", src, err)
		}
	}
}

// FuzzExecuteLimited parses and renders arbitrary templates, seeded with
// the hostile ones, under small limits and a short timeout (many inputs
// run until it, and the fuzzer runs each new one many times to minimize
// it): each must end, with a render or an error, without a panic, within
// its output bounds.
func FuzzExecuteLimited(f *testing.F) {
	for _, c := range hostileTemplates {
		f.Add(c.src)
	}
	f.Add("{{ " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + " }}")
	f.Add("{% set s = 'a' * 50000 %}{% for c in s %}{% for d in s %}{% endfor %}{% endfor %}")
	f.Add("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}")
	f.Add("{% for m in messages %}{{ m.role ~ ': ' ~ m.content|trim }}{% endfor %}{{ (1 if x else 2) }}{{ 7 % 0 }}")
	limits := exec.Limits{MaxCallDepth: 20, MaxValueBytes: 1 << 16, MaxTotalBytes: 1 << 18}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := parseTemplate(src)
		if err != nil {
			if strings.Contains(err.Error(), "the template engine failed") {
				t.Errorf("%q: %v", src, err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		var out strings.Builder
		err = tpl.ExecuteLimited(ctx, &out, exec.NewContext(map[string]any{
			"messages": []any{map[string]any{"role": "user", "content": "Hi"}},
		}), limits)
		if err != nil && strings.Contains(err.Error(), "the template engine failed") {
			t.Errorf("%q: %v", src, err)
		}
		if out.Len() > limits.MaxTotalBytes {
			t.Errorf("%q: wrote %d bytes, past the %d allowed", src, out.Len(), limits.MaxTotalBytes)
		}
	})
}
