package tokenizer

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostileFile is the name hostile templates are parsed under, as a GGUF's
// template is.
const hostileFile = "model.gguf: tokenizer.chat_template"

// hostileTemplates are chat templates that crashed the process, or ran
// or allocated without bound, before rendering was limited: each must
// give an error naming the file and the template's line, at parsing
// (parse) or rendering.
var hostileTemplates = []struct {
	name  string
	src   string
	parse bool // fails to parse, rather than to render
	limit bool // fails to render on a ChatLimits bound
	line  int
	want  string // in the error
}{
	// A macro passed to itself escapes a search of its body for its
	// name: the stack overflowed at the first render.
	{"macro passed as an argument", "{% macro a(f) %}{{ f(f) }}{% endmacro %}{% macro z() %}{% endmacro %}{{ a(a) }}", false, true, 1, "calls nest deeper than 100"},
	{"macro calling itself", "{% macro f(n) %}\n{{ f(n) }}{% endmacro %}{{ f(1) }}", false, true, 2, "calls nest deeper than 100"},
	{"recursive loop", "{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}", false, true, 1, "calls nest deeper than 100"},
	{"block rendering itself", "{% block b %}{{ self.b() }}{% endblock %}", false, true, 1, "calls nest deeper than 100"},
	// The parser recursed once per parenthesis: loading overflowed.
	{"100000 parentheses", "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}", true, false, 1, "nests deeper than 256"},
	{"10000 nested blocks", "\n" + strings.Repeat("{% if true %}", 10000) + strings.Repeat("{% endif %}", 10000), true, false, 2, "nests deeper than 256"},
	{"100000 additions", "{{ 'a'" + strings.Repeat(" + 'a'", 100000) + " }}", true, false, 1, "nests deeper than 256"},
	// A string doubled 60 times ran out of memory.
	{"string doubling", "{% set ns = namespace(s='a') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", false, true, 1, "bytes"},
	{"string repetition", "{{ 'a' * 10**9 }}", false, true, 1, "a value of 1000000000 bytes"},
	{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", false, true, 1, "bytes"},
	{"padding", "{{ '{:>999999999}'.format(1) }}", false, true, 1, "bytes"},
	{"tojson indent", "{{ messages|tojson(indent=999999999) }}", false, false, 1, "too large"},
	{"a template extending itself", "{% extends 'chat_template' %}", true, false, 1, "cannot load other templates"},
}

func TestHostileChatTemplates(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "Hi"}}
	for _, c := range hostileTemplates {
		tpl, err := ParseChatTemplateFile(hostileFile, c.src)
		if !c.parse && err == nil {
			tpl.Limits.Timeout = time.Minute // the limits, not the clock, must stop it
			_, err = RenderChat(tpl, msgs, true)
		}
		prefix := "tokenizer: " + hostileFile + ": line " + strconv.Itoa(c.line) + ": "
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %.300v; want %q... %q", c.name, err, prefix, c.want)
		}
		if !c.parse && c.limit && !errors.Is(err, ErrChatTemplateLimit) {
			t.Errorf("%s: error %.300v does not wrap ErrChatTemplateLimit", c.name, err)
		}
	}
}

// TestRepetitionRefusedBeforeAllocating checks that 'a' * 10**9 fails
// before the gigabyte is built: the render allocates far less.
func TestRepetitionRefusedBeforeAllocating(t *testing.T) {
	tpl, err := ParseChatTemplateFile(hostileFile, "{% set s = 'a' * 10**9 %}{{ s }}")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = RenderChat(tpl, []Message{{Role: "user", Content: "Hi"}}, true)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrChatTemplateLimit) {
		t.Fatalf("error %v, want ErrChatTemplateLimit", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 100<<20 {
		t.Errorf("the refused render allocated %d MB", n>>20)
	}
}

// TestTimedOutRenderStops renders 2.5e9 empty loop iterations, which no
// write or range() call interrupts, under a short timeout: after the
// timeout error, the render's goroutine must end too, instead of running
// until the process does.
func TestTimedOutRenderStops(t *testing.T) {
	tpl, err := ParseChatTemplateFile(hostileFile, "{% set s = 'a' * 50000 %}\n{% for c in s %}{% for d in s %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	tpl.Limits.Timeout = 200 * time.Millisecond
	goroutines := runtime.NumGoroutine()
	_, err = RenderChat(tpl, []Message{{Role: "user", Content: "Hi"}}, true)
	if !errors.Is(err, ErrChatTemplateLimit) || !strings.Contains(err.Error(), hostileFile+": line 2: ") || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("error %v, want a timeout naming the file and line 2", err)
	}
	// The render goroutine is gone once the count is back where it was.
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 30 s after the timeout, %d before the render", runtime.NumGoroutine(), goroutines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FuzzChatTemplateLimits parses and renders arbitrary templates, seeded
// with the hostile ones, under small limits and a short timeout (many
// inputs run until it, and the fuzzer runs each new one many times to
// minimize it): each must end with a render or an error naming the file,
// never a crash, a hang or a panic caught on the way.
func FuzzChatTemplateLimits(f *testing.F) {
	for _, c := range hostileTemplates {
		if len(c.src) <= 4096 { // the fuzzer minimizes new inputs; large ones take it minutes
			f.Add(c.src)
		}
	}
	f.Add("{{ " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + " }}")
	f.Add(strings.Repeat("{% if true %}", 300) + strings.Repeat("{% endif %}", 300))
	f.Add("{{ 'a'" + strings.Repeat(" + 'a'", 300) + " }}")
	f.Add("{% set s = 'a' * 50000 %}{% for c in s %}{% for d in s %}{% endfor %}{% endfor %}")
	f.Add("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}")
	f.Add("{% set l = [1] %}" + strings.Repeat("{% set _ = l.append(l) %}", 30) + "{{ l }}")
	f.Add("{% include 'chat_template' %}{% import 'chat_template' as x %}")
	f.Add(chatMLSource)
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := ParseChatTemplateFile(hostileFile, src)
		if err == nil {
			tpl.Limits = ChatLimits{MaxOutput: 1 << 16, MaxRange: 10000, Timeout: 100 * time.Millisecond,
				MaxCallDepth: 20, MaxValue: 1 << 16, MaxBuilt: 1 << 18}
			var out string
			out, err = RenderChat(tpl, []Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}}, true)
			if err == nil && len(out) > 1<<16 {
				t.Errorf("render of %d bytes passed the %d-byte limit", len(out), 1<<16)
			}
		}
		if err == nil {
			return
		}
		if !strings.HasPrefix(err.Error(), "tokenizer: "+hostileFile+": ") {
			t.Errorf("error %.300q does not name the file", err)
		}
		if strings.Contains(err.Error(), "engine failed") || strings.Contains(err.Error(), "cannot parse the template") {
			t.Errorf("%.200q: a panic: %.300v", src, err)
		}
	})
}
