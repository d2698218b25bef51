package tokenizer

// The Jinja engine behind ChatTemplate: gonja v2 (third_party/gonja: v2.9.1
// patched to read conditional expressions inside parentheses, literals and
// call arguments, as Gemma 3's template needs, and to render under limits
// of nesting, call depth, value sizes and time), configured as transformers
// configures Jinja2 (trim_blocks, lstrip_blocks, no trailing newline kept),
// with the globals and filters transformers adds (raise_exception,
// strftime_now, tojson) and replacements where gonja's behaviour differs
// from Python's (str.strip and the trim filter, negative indexing of lists).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// jinjaEnvironment is shared by all templates; what varies per render
// (the clock, the range budget) goes into each render's context.
var jinjaEnvironment = func() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
	filters.Update(builtins.Filters)
	filters.Replace("trim", filterTrim)
	filters.Replace("tojson", filterToJSON)
	methods := builtins.Methods
	methods.Str = pythonStrMethods()
	return &exec.Environment{
		Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables),
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           methods,
	}
}()

func jinjaConfig() *config.Config {
	c := config.New()
	c.TrimBlocks, c.LeftStripBlocks = true, true
	return c
}

// rootTemplate is the name the source is loaded under.
const rootTemplate = "chat_template"

// sourceLoader serves the template's own source, once, for parsing it:
// include, import and extends can neither read files nor the template
// again (a template that extends itself would be read without end).
type sourceLoader struct {
	source string
	read   *atomic.Bool
}

func (l sourceLoader) Read(path string) (io.Reader, error) {
	if path != rootTemplate || l.read.Swap(true) {
		return nil, fmt.Errorf("chat templates cannot load other templates (%q)", path)
	}
	return strings.NewReader(l.source), nil
}
func (l sourceLoader) Resolve(path string) (string, error)         { return path, nil }
func (l sourceLoader) Inherit(from string) (loaders.Loader, error) { return l, nil }

// maxTemplateBytes bounds a template's source: the largest published chat
// templates are tens of kilobytes, and parsing holds a token for each few
// bytes of the source.
const maxTemplateBytes = 1 << 20

func newJinjaTemplate(source string) (*exec.Template, error) {
	if len(source) > maxTemplateBytes {
		return nil, fmt.Errorf("the template is %d bytes, more than the %d accepted", len(source), maxTemplateBytes)
	}
	return exec.NewTemplate(rootTemplate, jinjaConfig(), sourceLoader{source, new(atomic.Bool)}, jinjaEnvironment)
}

func (t ChatTemplate) limits() ChatLimits {
	l, d := t.Limits, DefaultChatLimits
	orDefault(&l.MaxOutput, d.MaxOutput)
	orDefault(&l.MaxRange, d.MaxRange)
	orDefault(&l.Timeout, d.Timeout)
	orDefault(&l.MaxCallDepth, d.MaxCallDepth)
	orDefault(&l.MaxValue, d.MaxValue)
	orDefault(&l.MaxBuilt, d.MaxBuilt)
	return l
}

// orDefault sets a limit that is not positive to its default.
func orDefault[T int | time.Duration](limit *T, def T) {
	if *limit <= 0 {
		*limit = def
	}
}

// execute renders the template with data under t's limits. The render
// runs in its own goroutine so that a timeout returns at once; the engine
// checks the deadline at every step, so the render stops soon after.
func (t ChatTemplate) execute(data map[string]any) (string, error) {
	lim := t.limits()
	now := t.Now
	if now == nil {
		now = time.Now
	}
	w := &boundedWriter{max: lim.MaxOutput}
	budget := &rangeBudget{left: lim.MaxRange}
	data["raise_exception"] = raiseException
	data["strftime_now"] = func(e *exec.Evaluator, params *exec.VarArgs) (string, error) {
		if len(params.Args) != 1 {
			return "", errors.New("strftime_now expects a format")
		}
		format := params.Args[0].String()
		// A directive of two bytes writes at most ten (%F: 2006-01-02).
		if err := e.Allow(5 * len(format)); err != nil {
			return "", err
		}
		return strftime(now(), format), nil
	}
	data["range"] = budget.call
	ctx, cancel := context.WithTimeout(context.Background(), lim.Timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- t.template.ExecuteLimited(ctx, w, exec.NewContext(data), exec.Limits{
			MaxCallDepth: lim.MaxCallDepth, MaxValueBytes: lim.MaxValue, MaxTotalBytes: lim.MaxBuilt})
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		timeout := fmt.Errorf("%w: rendering took longer than %v", ErrChatTemplateLimit, lim.Timeout)
		// The render stops at its next step; wait a little for it to
		// say on which line it was.
		select {
		case err := <-done:
			var re *exec.RenderError
			if errors.As(err, &re) && re.Line > 0 {
				return "", &exec.RenderError{Line: re.Line, Err: timeout}
			}
		case <-time.After(time.Second):
		}
		return "", timeout
	}
	if err == nil {
		return w.buf.String(), nil
	}
	// Our own limits show through the engine's wrapping as their own
	// errors, on the line the engine was at.
	var re *exec.RenderError
	if errors.As(err, &re) {
		for _, own := range []error{w.err, budget.err} {
			if own != nil {
				return "", &exec.RenderError{Line: re.Line, Err: own}
			}
		}
	}
	return "", err
}

// boundedWriter collects the render and fails once it would exceed max
// bytes.
type boundedWriter struct {
	buf bytes.Buffer
	max int
	err error
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		w.err = fmt.Errorf("%w: the render exceeds %d bytes", ErrChatTemplateLimit, w.max)
		return 0, w.err
	}
	return w.buf.Write(p)
}

// rangeBudget is the range global of one render: Python's range, with the
// items of all calls counted against one budget, since a loop over range
// that writes nothing is not bounded by the output limit.
type rangeBudget struct {
	left int
	err  error
}

func (b *rangeBudget) call(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	args := make([]int, len(params.Args))
	for i, a := range params.Args {
		if !a.IsInteger() {
			return nil, fmt.Errorf("range: argument %d is not an integer", i+1)
		}
		args[i] = a.Integer()
	}
	start, stop, step := 0, 0, 1
	switch len(args) {
	case 1:
		stop = args[0]
	case 2:
		start, stop = args[0], args[1]
	case 3:
		start, stop, step = args[0], args[1], args[2]
	default:
		return nil, errors.New("range expects 1 to 3 integers")
	}
	if step == 0 {
		return nil, errors.New("range: step must not be zero")
	}
	n := 0
	switch {
	case step > 0 && stop > start:
		n = int((int64(stop) - int64(start) + int64(step) - 1) / int64(step))
	case step < 0 && stop < start:
		n = int((int64(start) - int64(stop) - int64(step) - 1) / -int64(step))
	}
	if n > b.left {
		b.err = fmt.Errorf("%w: range() would produce more than %d items", ErrChatTemplateLimit, b.left)
		return nil, b.err
	}
	b.left -= n
	out := make([]int, n)
	for i := range out {
		out[i] = start + i*step
	}
	return out, nil
}

// templateRaise is the error of raise_exception.
type templateRaise struct{ message string }

func (e *templateRaise) Error() string { return "raise_exception: " + e.message }

func raiseException(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
	msg := ""
	if len(params.Args) > 0 {
		msg = params.Args[0].String()
	}
	return "", &templateRaise{msg}
}

// isPythonSpace reports whether Python's str.strip, and so Jinja's trim
// filter, removes r: White_Space plus the four information separators.
func isPythonSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1C && r <= 0x1F) }

func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	chars := ""
	if len(params.Args) > 0 && !params.Args[0].IsNil() {
		chars = params.Args[0].String()
	} else if v, ok := params.KwArgs["chars"]; ok && !v.IsNil() {
		chars = v.String()
	}
	return exec.AsValue(pythonStrip(in.String(), chars, true, true))
}

// pythonStrip is str.strip, lstrip or rstrip: without chars it removes
// Python whitespace, with chars any of those characters.
func pythonStrip(s, chars string, left, right bool) string {
	cut := isPythonSpace
	if chars != "" {
		cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

// pyList is a list value whose negative indices count from the end, as in
// Python (gonja misses the first element for -len).
type pyList []any

func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.AsValue(l[i]), true
}

// pythonStrMethods are gonja's string methods with Python's strip family
// and split returning a pyList.
func pythonStrMethods() *exec.MethodSet[string] {
	names := []string{"capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
		"format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
		"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
		"partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition",
		"rsplit", "split", "splitlines", "startswith", "swapcase", "title", "translate", "upper", "zfill", "capwords"}
	m := map[string]exec.Method[string]{}
	for _, n := range names {
		if f, ok := builtins.Methods.Str.Get(n); ok {
			m[n] = f
		}
	}
	for _, n := range []string{"split", "rsplit", "splitlines"} {
		if f, ok := m[n]; ok {
			m[n] = func(self string, v *exec.Value, args *exec.VarArgs) (any, error) {
				out, err := f(self, v, args)
				if rv := reflect.ValueOf(out); rv.Kind() == reflect.Slice {
					l := make(pyList, rv.Len())
					for i := range l {
						item := rv.Index(i)
						if item.Kind() == reflect.String {
							l[i] = item.String()
						} else {
							l[i] = item.Interface()
						}
					}
					return l, err
				}
				return out, err
			}
		}
	}
	strip := func(left, right bool) exec.Method[string] {
		return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			chars := ""
			if len(args.Args) > 0 && !args.Args[0].IsNil() {
				if !args.Args[0].IsString() {
					return nil, errors.New("strip arg must be None or str")
				}
				chars = args.Args[0].String()
			}
			return pythonStrip(self, chars, left, right), nil
		}
	}
	m["strip"], m["lstrip"], m["rstrip"] = strip(true, true), strip(true, false), strip(false, true)
	return exec.NewMethodSet(m)
}

// filterToJSON is transformers' tojson: json.dumps with ensure_ascii=False
// and Python's separators; maps are written with sorted keys, since Go maps
// keep no insertion order.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	if v, ok := params.KwArgs["indent"]; ok && v.IsInteger() {
		indent = v.Integer()
	}
	var b strings.Builder
	if err := writePythonJSON(&b, in.Interface(), indent, 0, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(b.String())
}

// maxJSON bounds the text of one tojson.
const maxJSON = 1 << 22

var errJSONTooLarge = errors.New("tojson: value too deep or too large")

func writePythonJSON(b *strings.Builder, v any, indent, level, depth int) error {
	if depth > 100 || b.Len() > maxJSON {
		return errJSONTooLarge
	}
	newline := func(l int) error {
		if indent < 0 {
			return nil
		}
		if spaces := exec.MulBytes(indent, l); spaces <= maxJSON-b.Len() {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", spaces))
			return nil
		}
		return errJSONTooLarge
	}
	sep := ", "
	if indent >= 0 {
		sep = ","
	}
	if ev, ok := v.(*exec.Value); ok {
		v = ev.Interface()
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[x])
	case string:
		writePythonJSONString(b, x)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 0):
			b.WriteString(map[bool]string{true: "Infinity", false: "-Infinity"}[x > 0])
		case x == math.Trunc(x) && math.Abs(x) < 1e16:
			b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		default:
			b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		}
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			if rv.Len() == 0 {
				b.WriteString("[]")
				return nil
			}
			b.WriteByte('[')
			for i := 0; i < rv.Len(); i++ {
				if i > 0 {
					b.WriteString(sep)
				}
				if err := newline(level + 1); err != nil {
					return err
				}
				if err := writePythonJSON(b, rv.Index(i).Interface(), indent, level+1, depth+1); err != nil {
					return err
				}
			}
			if err := newline(level); err != nil {
				return err
			}
			b.WriteByte(']')
		case reflect.Map:
			if rv.Len() == 0 {
				b.WriteString("{}")
				return nil
			}
			keys := make([]string, 0, rv.Len())
			values := map[string]any{}
			for it := rv.MapRange(); it.Next(); {
				k := fmt.Sprint(it.Key().Interface())
				keys = append(keys, k)
				values[k] = it.Value().Interface()
			}
			sort.Strings(keys)
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteString(sep)
				}
				if err := newline(level + 1); err != nil {
					return err
				}
				writePythonJSONString(b, k)
				b.WriteString(": ")
				if err := writePythonJSON(b, values[k], indent, level+1, depth+1); err != nil {
					return err
				}
			}
			if err := newline(level); err != nil {
				return err
			}
			b.WriteByte('}')
		default:
			writePythonJSONString(b, fmt.Sprint(v))
		}
	}
	return nil
}

// writePythonJSONString quotes s as json.dumps(ensure_ascii=False) does.
func writePythonJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else if r == utf8.RuneError {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// strftime formats t with Python's strftime directives, in the C locale.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(map[bool]string{true: "PM", false: "AM"}[t.Hour() >= 12])
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
