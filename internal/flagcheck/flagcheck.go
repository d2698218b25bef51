// Package flagcheck checks a command's flags and reports every problem at
// once, before the command does any work: each problem names its flag
// ("--k -1: must not be negative"), and Err joins them into one error.
// rlvr's commands bind their flags to an options type in the package
// that owns the work (eval.Options, serve.Options, …), whose Validate
// checks them here.
package flagcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"rlvr/internal/httpurl"
)

// Bounds on flags that size work or memory: far above any useful value,
// low enough that a mistyped number is an error rather than an attempt to
// allocate it.
const (
	MaxThreads   = 4096    // --threads
	MaxNewTokens = 1 << 20 // tokens generated per completion
	MaxSamples   = 1024    // samples per prompt (--n, --k, --max-n)
	MaxProblems  = 1 << 20 // problems evaluated
)

// Check collects the problems with a command's flags. The zero value has
// none.
type Check struct {
	problems []string
}

// Add records a problem with flag.
func (c *Check) Add(flag, format string, args ...any) {
	c.problems = append(c.problems, "--"+flag+" "+fmt.Sprintf(format, args...))
}

// Problem records a problem that is not one flag's, such as an argument's.
func (c *Check) Problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// Error records err, when not nil, as a problem with flag.
func (c *Check) Error(flag string, err error) {
	if err != nil {
		c.Add(flag, "%v", err)
	}
}

// Len is the number of problems recorded so far.
func (c *Check) Len() int { return len(c.problems) }

// Err returns the problems as one error, or nil.
func (c *Check) Err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(c.problems, "; "))
}

// IntIn checks lo <= v <= hi.
func (c *Check) IntIn(flag string, v, lo, hi int) {
	switch {
	case v < lo && lo == 0:
		c.Add(flag, "%d: must not be negative", v)
	case v < lo && lo == 1:
		c.Add(flag, "%d: must be positive", v)
	case v < lo || v > hi:
		c.Add(flag, "%d: must be in [%d, %d]", v, lo, hi)
	}
}

// FloatIn checks that v is finite and lo <= v <= hi, or lo < v <= hi when
// openLow; hi may be +Inf for no upper bound.
func (c *Check) FloatIn(flag string, v, lo, hi float64, openLow bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		c.Add(flag, "%v: must be a finite number", v)
	case openLow && v <= lo && lo == 0:
		c.Add(flag, "%v: must be positive", v)
	case !openLow && v < lo && lo == 0:
		c.Add(flag, "%v: must not be negative", v)
	case openLow && v <= lo, !openLow && v < lo, v > hi:
		open := "["
		if openLow {
			open = "("
		}
		c.Add(flag, "%v: must be in %s%v, %v]", v, open, lo, hi)
	}
}

// NonEmpty checks that a string flag the command line gave is not empty
// or blank; a flag not given keeps its default.
func (c *Check) NonEmpty(flag, v string, given bool) {
	if given && strings.TrimSpace(v) == "" {
		c.Add(flag, "is empty")
	}
}

// File checks that path names an existing regular file.
func (c *Check) File(flag, path string) {
	st, ok := c.stat(flag, path)
	switch {
	case !ok:
	case st.IsDir():
		c.Add(flag, "%s is a directory, not a file", path)
	case !st.Mode().IsRegular():
		c.Add(flag, "%s is not a regular file", path)
	}
}

// Dir checks that path names an existing directory.
func (c *Check) Dir(flag, path string) {
	if st, ok := c.stat(flag, path); ok && !st.IsDir() {
		c.Add(flag, "%s is a file, not a directory", path)
	}
}

// stat returns what path names, or records why it names nothing.
func (c *Check) stat(flag, path string) (fs.FileInfo, bool) {
	st, err := os.Stat(path)
	switch {
	case path == "":
		c.Add(flag, "is empty")
	case err != nil:
		c.Add(flag, "%s: %v", path, StatProblem(err))
	default:
		return st, true
	}
	return nil, false
}

// OutDir checks that path can become an output directory: an existing
// directory (empty unless mayHaveFiles) that can be written, or a path
// whose nearest existing ancestor is a writable directory. Nothing is
// created.
func (c *Check) OutDir(flag, path string, mayHaveFiles bool) {
	if path == "" {
		c.Add(flag, "is empty")
		return
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.IsDir():
		c.Add(flag, "%s is a file, not a directory", path)
		return
	case err == nil:
		if !mayHaveFiles {
			if entries, err := os.ReadDir(path); err != nil {
				c.Add(flag, "%s: %v", path, err)
				return
			} else if len(entries) > 0 {
				c.Add(flag, "%s is not empty", path)
				return
			}
		}
		if !writable(path) {
			c.Add(flag, "%s is not writable", path)
		}
		return
	case !errors.Is(err, fs.ErrNotExist):
		c.Add(flag, "%s: %v", path, StatProblem(err))
		return
	}
	// The directory will be created: its nearest existing ancestor must
	// be a writable directory.
	for p := filepath.Dir(filepath.Clean(path)); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			c.Add(flag, "%s: %s is a file, not a directory", path, p)
			return
		case err == nil:
			if !writable(p) {
				c.Add(flag, "%s: cannot create it in %s, which is not writable", path, p)
			}
			return
		case !errors.Is(err, fs.ErrNotExist):
			c.Add(flag, "%s: %v", path, StatProblem(err))
			return
		}
		if p == filepath.Dir(p) {
			return
		}
	}
}

// OutFile checks that path can be written as a file: not a directory, in
// an existing, writable directory. Nothing is created.
func (c *Check) OutFile(flag, path string) {
	if path == "" {
		c.Add(flag, "is empty")
		return
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		c.Add(flag, "%s is a directory, not a file", path)
		return
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.Add(flag, "%s: %v", path, StatProblem(err))
		return
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		c.Add(flag, "%s: directory %s: %v", path, dir, StatProblem(err))
	case !st.IsDir():
		c.Add(flag, "%s: %s is a file, not a directory", path, dir)
	case !writable(dir):
		c.Add(flag, "%s: directory %s is not writable", path, dir)
	}
}

// writable reports whether the directory dir can be written to.
func writable(dir string) bool {
	const wOK = 2 // access(2)'s W_OK
	return syscall.Access(dir, wOK) == nil
}

// StatProblem shortens an os.Stat error to what went wrong.
func StatProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, syscall.ENOTDIR):
		return "a parent is a file, not a directory"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Addr checks a listen address, host:port with a port number.
func (c *Check) Addr(flag, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.Add(flag, "%q: want host:port (e.g. 127.0.0.1:8000)", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.Add(flag, "%q: port %q is not a number in [0, 65535]", addr, port)
	}
}

// URL checks an http or https base URL.
func (c *Check) URL(flag, s string) {
	if !httpurl.Valid(s) {
		c.Add(flag, "%q: want an http:// or https:// URL", s)
	}
}

// Sampling checks the sampling flags that generation and evaluation
// share: --temperature finite and not negative, --top-p in (0, 1],
// --top-k not negative and --stop strings not empty. whyPositive, when
// not empty, refuses temperature 0 and says why.
func (c *Check) Sampling(temperature, topP float32, topK int, stop []string, whyPositive string) {
	if whyPositive != "" && temperature == 0 {
		c.Add("temperature", "0: must be positive (%s)", whyPositive)
	} else {
		c.FloatIn("temperature", float64(temperature), 0, math.Inf(1), false)
	}
	c.FloatIn("top-p", float64(topP), 0, 1, true)
	c.IntIn("top-k", topK, 0, math.MaxInt32)
	for i, s := range stop {
		if s == "" {
			c.Add("stop", "number %d is empty", i+1)
		}
	}
}

// Levels checks --levels: at least one level, each one of the world's n
// levels 0 to n-1.
func (c *Check) Levels(levels []int, n int) {
	if len(levels) == 0 {
		c.Add("levels", "is empty")
	}
	for _, lv := range levels {
		if lv < 0 || lv >= n {
			c.Add("levels", "%d: no such level (0 to %d)", lv, n-1)
		}
	}
}

// LevelsTotal checks --problems per level of len(levels) levels against
// MaxProblems in all.
func (c *Check) LevelsTotal(levels []int, problems int) {
	if problems >= 1 && problems*len(levels) > MaxProblems {
		c.Add("problems", "%d per level × %d levels: more than %d problems", problems, len(levels), MaxProblems)
	}
}

// Default sets *dst to v, the value a config or a run supplies for a
// flag, unless kept: a flag the command line gave keeps its own.
func Default[T any](kept bool, dst *T, v T) {
	if !kept {
		*dst = v
	}
}

// Newlines reads the two characters \n in a prompt flag as a newline, so
// that prompts such as the world's "@E2\n" can be typed in a shell.
func Newlines(s string) string { return strings.ReplaceAll(s, `\n`, "\n") }

// Given says whether the command line gave a flag, by name (cobra's
// Flags().Changed); nil means none was given. An options type holds one.
type Given func(flag string) bool

// Has reports whether the command line gave flag.
func (g Given) Has(flag string) bool { return g != nil && g(flag) }
