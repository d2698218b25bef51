package builtins

import (
	"math"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/utils"
	"github.com/pkg/errors"
)

var GlobalFunctions = exec.NewContext(map[string]any{
	"cycler":    cyclerFunction,
	"dict":      dictFunction,
	"joiner":    joinerFunction,
	"lipsum":    lipSumFunction,
	"namespace": namespaceFunction,
	"range":     rangeFunction,
	"_":         gettextFunction,
	"gettext":   gettextFunction,
	"ngettext":  ngettextFunction,
})

// rangeFunction returns the integers of Python's range as a list. Upstream
// gonja sends them on a channel from a goroutine of their own, which never
// ends when the range is not read to its end, and which a loop reads
// whole anyway; the list is counted against the render's limits before it
// is built, and a call without arguments is an error rather than a panic.
// (Patched in for rlvr: see README.md.)
func rangeFunction(e *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	var (
		start = 0
		stop  = -1
		step  = 1
	)
	switch n := len(params.Args); {
	case n == 1 && params.Args[0].IsInteger():
		stop = params.Args[0].Integer()
	case n == 2 && params.Args[0].IsInteger() && params.Args[1].IsInteger():
		start = params.Args[0].Integer()
		stop = params.Args[1].Integer()
	case n == 3 && params.Args[0].IsInteger() && params.Args[1].IsInteger() && params.Args[2].IsInteger():
		start = params.Args[0].Integer()
		stop = params.Args[1].Integer()
		step = params.Args[2].Integer()
	default:
		return nil, exec.ErrInvalidCall(errors.New("expected signature is [start, ]stop[, step] where all arguments are integers"))
	}

	if step == 0 {
		return nil, exec.ErrInvalidCall(errors.New("step cannot be 0"))
	}

	count := uint64(0)
	switch {
	case step > 0 && stop > start:
		count = (uint64(stop-start) + uint64(step) - 1) / uint64(step)
	case step < 0 && stop < start:
		count = (uint64(start-stop) + uint64(-step) - 1) / uint64(-step)
	}
	if count > math.MaxInt32 {
		count = math.MaxInt32 // past any limit, and a size that cannot overflow
	}
	if err := e.Allow(exec.MulBytes(int(count), exec.ItemBytes)); err != nil {
		return nil, err
	}
	items := make([]int, count)
	for i := range items {
		items[i] = start + i*step
	}
	return items, nil
}

func dictFunction(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	dict := exec.NewDict()
	for key, value := range params.KwArgs {
		dict.Pairs = append(dict.Pairs, &exec.Pair{
			Key:   exec.AsValue(key),
			Value: value,
		})
	}
	return exec.AsValue(dict)
}

type cycler struct {
	values  []string
	idx     int
	getters map[string]any
}

func (c *cycler) Reset() {
	c.idx = 0
	c.getters["current"] = c.values[c.idx]
}

func (c *cycler) Next() string {
	c.idx++
	value := c.getters["current"].(string)
	if c.idx >= len(c.values) {
		c.idx = 0
	}
	c.getters["current"] = c.values[c.idx]
	return value
}

func cyclerFunction(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	c := &cycler{}
	for _, arg := range params.Args {
		c.values = append(c.values, arg.String())
	}
	c.getters = map[string]any{
		"next":  c.Next,
		"reset": c.Reset,
	}
	c.Reset()
	return exec.AsValue(c.getters)
}

type joiner struct {
	sep   string
	first bool
}

func (j *joiner) String() string {
	if !j.first {
		j.first = true
		return ""
	}
	return j.sep
}

func joinerFunction(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	var (
		sep string
	)
	if err := params.Take(
		exec.KeywordArgument("sep", exec.AsValue(","), exec.StringArgument(&sep)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	j := &joiner{sep: sep}
	return exec.AsValue(j.String)
}

func namespaceFunction(_ *exec.Evaluator, params *exec.VarArgs) map[string]any {
	ns := map[string]any{}
	for key, value := range params.KwArgs {
		ns[key] = value
	}
	return ns
}

func lipSumFunction(e *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	var (
		n    int
		html bool
		min  int
		max  int
	)
	if err := params.Take(
		exec.KeywordArgument("n", exec.AsValue(5), exec.IntArgument(&n)),
		exec.KeywordArgument("html", exec.AsValue(true), exec.BoolArgument(&html)),
		exec.KeywordArgument("min", exec.AsValue(20), exec.IntArgument(&min)),
		exec.KeywordArgument("max", exec.AsValue(100), exec.IntArgument(&max)),
	); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	// n paragraphs of max-min words. (Patched in for rlvr: see README.md.)
	words := 0
	if max > min {
		words = int(min64(uint64(max)-uint64(min), math.MaxInt32))
	}
	if err := e.Allow(exec.MulBytes(exec.MulBytes(n, words), 24)); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(utils.Lipsum(n, html, min, max))
}

func gettextFunction(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	if len(params.Args) < 1 {
		return exec.AsValue("")
	}
	// Default: identity (no translation backend registered). Users can override
	// by setting environment.Context["__gonja_trans_hook__"] = func(s string) string { ... }
	return exec.AsValue(params.Args[0].String())
}

func ngettextFunction(_ *exec.Evaluator, params *exec.VarArgs) *exec.Value {
	// signature: ngettext(singular, plural, n)
	if len(params.Args) < 3 {
		return exec.AsValue("")
	}
	singular := params.Args[0].String()
	plural := params.Args[1].String()
	n := params.Args[2].Integer()
	if n == 1 {
		return exec.AsValue(singular)
	}
	return exec.AsValue(plural)
}

func min64(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}
