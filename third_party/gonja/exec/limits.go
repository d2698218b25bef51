package exec

// Render limits. (Patched in for rlvr: see README.md.)
//
// A template from an untrusted source can recurse without end, build
// strings and lists that double at every step, or loop for ever. Upstream
// gonja bounds none of these, and the first two exhaust the stack or the
// memory, which Go cannot recover from. [Template.ExecuteLimited] renders
// under [Limits] and a context: every evaluation step checks the context,
// every call nests one level deeper, and every value built is counted,
// before it is allocated wherever its size can be told in advance.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Limits bound one render. A zero field leaves its resource unbounded, as
// upstream gonja does.
type Limits struct {
	// MaxCallDepth bounds how deeply calls nest: macros (called directly,
	// passed as arguments or as caller()), recursive loops, self blocks
	// and includes.
	MaxCallDepth int
	// MaxValueBytes bounds the size of any one string, list or dict the
	// render builds: the bytes of its text, with ItemBytes for each
	// element of a collection (see ValueSize).
	MaxValueBytes int
	// MaxTotalBytes bounds the sum of the sizes of all values the render
	// builds and of all it writes, so that values kept in a loop cannot
	// add up to more either.
	MaxTotalBytes int
}

// ItemBytes is what one element of a list or one entry of a dict counts
// for against the limits, about what it costs in memory.
const ItemBytes = 32

// ErrLimit is wrapped by the errors of a render stopped by its [Limits] or
// its context.
var ErrLimit = errors.New("the template exceeded its limits")

// RenderError is the error of [Template.ExecuteLimited]: Line is the line
// of the template statement being rendered when the render failed (0 when
// none was).
type RenderError struct {
	Line int
	Err  error
}

func (e *RenderError) Error() string {
	if e.Line == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *RenderError) Unwrap() error { return e.Err }

// guard is the state of one limited render, shared by every renderer and
// evaluator of it through their Environment. A render runs on one
// goroutine; only stopped is written from another.
type guard struct {
	limits  Limits
	depth   int   // calls in progress
	total   int   // bytes counted so far against MaxTotalBytes
	line    int   // line of the statement being rendered
	err     error // the first limit error: every later step fails with it
	stopped atomic.Bool
	ctx     context.Context
}

// ExecuteLimited is [Template.Execute] under limits, stopping soon after
// ctx is done: every evaluation step (each statement, loop iteration,
// expression, filter, test and call) checks ctx. The error, if any, is a
// *RenderError; one caused by limits or ctx wraps ErrLimit and, for ctx,
// ctx.Err(). A panic in the engine or in a function of data is returned as
// an error.
func (t *Template) ExecuteLimited(ctx context.Context, wr io.Writer, data *Context, limits Limits) (err error) {
	if data == nil {
		data = EmptyContext()
	}
	g := &guard{limits: limits, ctx: ctx}
	stop := context.AfterFunc(ctx, func() { g.stopped.Store(true) })
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the template engine failed: %v", r)
		}
		if g.err != nil {
			// Swallowing paths (default filters, tests of definedness)
			// may have hidden the limit error; it is what stopped the
			// render.
			err = g.err
		}
		if err != nil {
			err = &RenderError{Line: g.line, Err: err}
		}
	}()
	return NewRenderer(t.renderEnvironment(data, g), wr, t.config, t.loader, t).Execute()
}

// fail records err as the render's limit error, unless one is already.
func (g *guard) fail(err error) error {
	if g.err == nil {
		g.err = err
	}
	return g.err
}

// step is one evaluation step: it fails once the render is stopped.
func (g *guard) step() error {
	if g.err != nil {
		return g.err
	}
	if g.stopped.Load() {
		return g.fail(fmt.Errorf("%w: %w", ErrLimit, context.Cause(g.ctx)))
	}
	return nil
}

// allow fails unless a value of n bytes may be built.
func (g *guard) allow(n int) error {
	if err := g.step(); err != nil {
		return err
	}
	if m := g.limits.MaxValueBytes; m > 0 && n > m {
		return g.fail(fmt.Errorf("%w: a value of %d bytes or more, past the %d allowed", ErrLimit, n, m))
	}
	if m := g.limits.MaxTotalBytes; m > 0 && n > m-g.total {
		return g.fail(fmt.Errorf("%w: the render would build more than %d bytes", ErrLimit, m))
	}
	return nil
}

// charge counts n bytes built, failing first if they are not allowed.
func (g *guard) charge(n int) error {
	if err := g.allow(n); err != nil {
		return err
	}
	g.total += n
	return nil
}

// chargeValue counts v, a value built or about to be kept, by ValueSize.
func (g *guard) chargeValue(v any) error {
	return g.charge(ValueSize(v, g.sizeLimit()))
}

// sizeLimit is how far ValueSize need count: just past what may be built.
func (g *guard) sizeLimit() int {
	limit := math.MaxInt - 1
	if m := g.limits.MaxValueBytes; m > 0 {
		limit = m
	}
	if m := g.limits.MaxTotalBytes; m > 0 {
		limit = min(limit, m-g.total)
	}
	return limit
}

// enterLine starts a statement on line, returning the line it was on
// before; leaveLine ends it with its error: a statement that fails leaves
// its line for the error, one that succeeds gives the outer line back.
// Both do nothing without a guard.
func (g *guard) enterLine(line int) (outer int) {
	if g == nil {
		return 0
	}
	outer, g.line = g.line, line
	return outer
}

func (g *guard) leaveLine(outer int, err error) {
	if g != nil && err == nil {
		g.line = outer
	}
}

// enter starts a call, failing past MaxCallDepth; leave ends it.
func (g *guard) enter() error {
	if err := g.step(); err != nil {
		return err
	}
	if m := g.limits.MaxCallDepth; m > 0 && g.depth >= m {
		return g.fail(fmt.Errorf("%w: calls nest deeper than %d (a macro that calls itself without end?)", ErrLimit, m))
	}
	g.depth++
	return nil
}

func (g *guard) leave() { g.depth-- }

// The limits as the evaluator offers them to filters, functions and
// control structures. Each does nothing in an unlimited render.

// Step checks that the render may go on: it fails once the render's
// context is done or a limit was exceeded. Loops of filters and control
// structures call it for each item.
func (e *Evaluator) Step() error {
	if g := e.guard(); g != nil {
		return g.step()
	}
	return nil
}

// Allow fails unless a value of n bytes may be built: a filter or function
// calls it with an upper bound of its result's size before building it.
func (e *Evaluator) Allow(n int) error {
	if g := e.guard(); g != nil {
		return g.allow(n)
	}
	return nil
}

// Charge counts n bytes about to be built against the render's limits,
// failing, before anything is built, if they exceed them.
func (e *Evaluator) Charge(n int) error {
	if g := e.guard(); g != nil {
		return g.charge(n)
	}
	return nil
}

// ChargeValue counts v, a value built or kept in a container, by its
// ValueSize.
func (e *Evaluator) ChargeValue(v any) error {
	if g := e.guard(); g != nil {
		return g.chargeValue(v)
	}
	return nil
}

// Enter starts a call (a macro, caller(), a recursive loop, a block, an
// include), failing past Limits.MaxCallDepth; Leave ends it.
func (e *Evaluator) Enter() error {
	if g := e.guard(); g != nil {
		return g.enter()
	}
	return nil
}

// Leave ends a call started by a successful Enter.
func (e *Evaluator) Leave() {
	if g := e.guard(); g != nil {
		g.leave()
	}
}

func (e *Evaluator) guard() *guard {
	if e.Environment == nil {
		return nil
	}
	return e.Environment.guard
}

// ValueSize is what v counts for against the limits: the bytes of a
// string, 8 for any other scalar, and for a list, tuple or dict ItemBytes
// per element plus the sizes of the elements, so that a value that holds
// another many times counts it many times, as its text would. It stops
// counting once past limit (returning more than limit), so its time is
// bounded by limit.
func ValueSize(v any, limit int) int {
	s := sizer{limit: limit}
	s.add(reflect.ValueOf(v))
	return s.n
}

type sizer struct{ n, limit int }

var (
	typeOfReflectValue = reflect.TypeFor[reflect.Value]()
	typeOfPair         = reflect.TypeFor[Pair]()
)

func (s *sizer) add(v reflect.Value) {
	if s.n > s.limit {
		return
	}
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			s.n += 8
			return
		}
		if v.Type() == typeOfValuePtr {
			v = v.Interface().(*Value).Val
			continue
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		s.n += 8
		return
	}
	if v.Type() == typeOfReflectValue && v.CanInterface() {
		s.add(v.Interface().(reflect.Value))
		return
	}
	switch v.Kind() {
	case reflect.String:
		s.n += v.Len()
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			s.n += v.Len()
			return
		}
		for i := 0; i < v.Len() && s.n <= s.limit; i++ {
			s.n += ItemBytes
			s.add(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next() && s.n <= s.limit; {
			s.n += ItemBytes
			s.add(it.Key())
			s.add(it.Value())
		}
	case reflect.Struct:
		switch v.Type() {
		case TypeDict:
			for _, p := range v.Interface().(Dict).Pairs {
				if s.n > s.limit {
					return
				}
				s.n += ItemBytes
				s.add(reflect.ValueOf(p))
			}
		case typeOfPair:
			p := v.Interface().(Pair)
			s.add(reflect.ValueOf(p.Key))
			s.add(reflect.ValueOf(p.Value))
		default:
			s.n += 16 // opaque: loop state, a cycler, a struct of data
		}
	default:
		s.n += 8
	}
}

// mulBytes is a*b for sizes (0 when either is negative), saturating
// instead of overflowing.
func mulBytes(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// addBytes is a+b for sizes, saturating instead of overflowing.
func addBytes(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// MulBytes and AddBytes are mulBytes and addBytes for filters' bounds.
func MulBytes(a, b int) int { return mulBytes(a, b) }
func AddBytes(a, b int) int { return addBytes(a, b) }

// FormatBound is an upper bound of the size of a string formatted from
// format (str.format, or the format filter's printf style) with args:
// every field may print the largest argument, every number in format may
// be a width or precision that pads to its value, and so may every integer
// argument (a nested field such as {:{}} or a * takes the width from one).
// It counts argument sizes only up to limit.
func FormatBound(format string, args []*Value, limit int) int {
	largest, widths := 0, 0
	for _, a := range args {
		largest = max(largest, ValueSize(a.Interface(), limit))
		if a.IsInteger() {
			widths = addBytes(widths, max(a.Integer(), 0))
		}
	}
	n := len(format)
	fields := strings.Count(format, "{") + strings.Count(format, "%")
	n = addBytes(n, mulBytes(fields, addBytes(largest, 64)))
	n = addBytes(n, mulBytes(widths, utf8.UTFMax))
	number := 0
	for i := 0; i <= len(format); i++ {
		if i < len(format) && format[i] >= '0' && format[i] <= '9' {
			number = min(addBytes(mulBytes(number, 10), int(format[i]-'0')), math.MaxInt/20)
			continue
		}
		n = addBytes(n, mulBytes(number, utf8.UTFMax))
		number = 0
	}
	return n
}

// methodBound is an upper bound of the size of the result of the string
// method name called on self with args, for the methods whose result can
// outgrow self and their arguments: padding to a width, tab expansion,
// replacement, join, format, and splits into many items. ok is false for
// the others, whose results are counted once built. It counts argument
// sizes only up to limit.
func methodBound(name, self string, args *VarArgs, limit int) (n int, ok bool) {
	arg := func(i int, keyword string) *Value {
		if i < len(args.Args) {
			return args.Args[i]
		}
		if v, found := args.KwArgs[keyword]; found {
			return v
		}
		return nil
	}
	intArg := func(i int, keyword string, fallback int) int {
		if v := arg(i, keyword); v != nil && v.IsInteger() {
			return v.Integer()
		}
		return fallback
	}
	strArg := func(i int, keyword string) string {
		if v := arg(i, keyword); v != nil && v.IsString() {
			return v.String()
		}
		return ""
	}
	switch name {
	case "center", "ljust", "rjust", "zfill":
		return addBytes(len(self), mulBytes(intArg(0, "width", 0), utf8.UTFMax)), true
	case "expandtabs":
		return addBytes(len(self), mulBytes(strings.Count(self, "\t"), intArg(0, "tabsize", 8))), true
	case "replace":
		count := strings.Count(self, strArg(0, "old")) // len(self)+1 for an empty old
		if c := intArg(2, "count", -1); c >= 0 {
			count = min(count, c)
		}
		return addBytes(len(self), mulBytes(count, len(strArg(1, "new")))), true
	case "join":
		items := arg(0, "iterable")
		if items == nil {
			return len(self), true
		}
		return addBytes(ValueSize(items.Interface(), limit), mulBytes(items.Len(), len(self))), true
	case "format", "format_map":
		all := append([]*Value{}, args.Args...)
		for _, a := range args.KwArgs {
			all = append(all, a)
		}
		return FormatBound(self, all, limit), true
	case "split", "rsplit":
		parts := fieldCount(self)
		if sep := strArg(0, "sep"); sep != "" {
			parts = strings.Count(self, sep) + 1
		}
		return addBytes(len(self), mulBytes(parts+1, ItemBytes)), true
	case "splitlines":
		lines := strings.Count(self, "\n") + strings.Count(self, "\r") + 2
		return addBytes(len(self), mulBytes(lines, ItemBytes)), true
	}
	return 0, false
}

// fieldCount is len(strings.Fields(s)), without building the fields.
func fieldCount(s string) int {
	n, inField := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !inField {
			n++
		}
		inField = !space
	}
	return n
}

// holds reports whether v holds container, a map or a struct that
// outer points to: whether v is it or reaches it through values, lists
// and dicts. Values stay acyclic (see Value.Set), so the walk ends; seen
// keeps it linear in the containers v holds.
func holds(v, outer, container reflect.Value) bool {
	var targets []unsafe.Pointer
	if container.Kind() == reflect.Map {
		targets = append(targets, container.UnsafePointer())
	}
	if outer.Kind() == reflect.Pointer {
		targets = append(targets, outer.UnsafePointer())
	}
	if len(targets) == 0 {
		return false
	}
	w := holder{targets: targets, seen: map[seenKey]bool{}}
	return w.holds(v)
}

type seenKey struct {
	p unsafe.Pointer
	n int
}

type holder struct {
	targets []unsafe.Pointer
	seen    map[seenKey]bool
}

func (w *holder) visit(p unsafe.Pointer, n int) (found, again bool) {
	if slices.Contains(w.targets, p) {
		return true, false
	}
	k := seenKey{p, n}
	again = w.seen[k]
	w.seen[k] = true
	return false, again
}

func (w *holder) holds(v reflect.Value) bool {
	for v.IsValid() && v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if !v.IsValid() {
		return false
	}
	if v.Type() == typeOfReflectValue && v.CanInterface() {
		return w.holds(v.Interface().(reflect.Value))
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return false
		}
		if found, again := w.visit(v.UnsafePointer(), 0); found || again {
			return found
		}
		if v.Type() == typeOfValuePtr {
			return w.holds(v.Interface().(*Value).Val)
		}
		return w.holds(v.Elem())
	case reflect.Map:
		if v.IsNil() {
			return false
		}
		if found, again := w.visit(v.UnsafePointer(), 0); found || again {
			return found
		}
		for it := v.MapRange(); it.Next(); {
			if w.holds(it.Key()) || w.holds(it.Value()) {
				return true
			}
		}
	case reflect.Slice:
		if v.Len() == 0 || v.Type().Elem().Kind() == reflect.Uint8 {
			return false
		}
		if found, again := w.visit(v.UnsafePointer(), v.Len()); found || again {
			return found
		}
		for i := 0; i < v.Len(); i++ {
			if w.holds(v.Index(i)) {
				return true
			}
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if w.holds(v.Index(i)) {
				return true
			}
		}
	case reflect.Struct:
		switch v.Type() {
		case TypeDict:
			for _, p := range v.Interface().(Dict).Pairs {
				if w.holds(reflect.ValueOf(p)) {
					return true
				}
			}
		case typeOfPair:
			p := v.Interface().(Pair)
			return w.holds(reflect.ValueOf(p.Key)) || w.holds(reflect.ValueOf(p.Value))
		}
	}
	return false
}
