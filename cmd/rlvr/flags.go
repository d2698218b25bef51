package main

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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/checkpoint"

	"rlvr/internal/httpurl"
	"rlvr/sample"
	"rlvr/task/world"
)

// Bounds on flags that size work or memory: far above any useful value,
// low enough that a mistyped number is an error rather than an attempt to
// allocate it.
const (
	maxThreads   = 4096    // --threads
	maxNewTokens = 1 << 20 // tokens generated per completion
	maxSamples   = 1024    // samples per prompt (--n, --k, --max-n)
	maxProblems  = 1 << 20 // problems evaluated
)

// flagCheck collects every problem with a command's flags, so that the
// command reports them all at once, before doing any work. Each problem
// names its flag.
type flagCheck struct {
	problems []string
}

// add records a problem with flag.
func (c *flagCheck) add(flag, format string, args ...any) {
	c.problems = append(c.problems, "--"+flag+" "+fmt.Sprintf(format, args...))
}

// err returns the problems as one error, or nil.
func (c *flagCheck) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(c.problems, "; "))
}

// intIn checks lo <= v <= hi.
func (c *flagCheck) intIn(flag string, v, lo, hi int) {
	switch {
	case v < lo && lo == 0:
		c.add(flag, "%d: must not be negative", v)
	case v < lo && lo == 1:
		c.add(flag, "%d: must be positive", v)
	case v < lo || v > hi:
		c.add(flag, "%d: must be in [%d, %d]", v, lo, hi)
	}
}

// floatIn checks that v is finite and lo <= v <= hi, or lo < v <= hi when
// openLow; hi may be +Inf for no upper bound.
func (c *flagCheck) floatIn(flag string, v, lo, hi float64, openLow bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		c.add(flag, "%v: must be a finite number", v)
	case openLow && v <= lo && lo == 0:
		c.add(flag, "%v: must be positive", v)
	case !openLow && v < lo && lo == 0:
		c.add(flag, "%v: must not be negative", v)
	case openLow && v <= lo, !openLow && v < lo, v > hi:
		open := "["
		if openLow {
			open = "("
		}
		c.add(flag, "%v: must be in %s%v, %v]", v, open, lo, hi)
	}
}

// file checks that path names an existing regular file.
func (c *flagCheck) file(flag, path string) {
	st, err := os.Stat(path)
	switch {
	case path == "":
		c.add(flag, "is empty")
	case err != nil:
		c.add(flag, "%s: %v", path, statProblem(err))
	case st.IsDir():
		c.add(flag, "%s is a directory, not a file", path)
	case !st.Mode().IsRegular():
		c.add(flag, "%s is not a regular file", path)
	}
}

// dir checks that path names an existing directory.
func (c *flagCheck) dir(flag, path string) {
	st, err := os.Stat(path)
	switch {
	case path == "":
		c.add(flag, "is empty")
	case err != nil:
		c.add(flag, "%s: %v", path, statProblem(err))
	case !st.IsDir():
		c.add(flag, "%s is a file, not a directory", path)
	}
}

// model checks that path names a model checkpoint.Open can read: a
// directory with a config.json, a .gguf file or a llama2.c .bin file. A
// world model not yet in the cache is left to openModel, which installs it
// or explains how to get it.
func (c *flagCheck) model(flag, path string) {
	if worldVersionOf(path) != 0 {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
	if path == "" {
		c.add(flag, "is empty")
	} else if _, err := checkpoint.FormatOf(path); err != nil {
		c.add(flag, "%v", strings.TrimPrefix(err.Error(), "checkpoint: "))
	}
}

// outDir checks that path can become an output directory: an existing
// directory (empty unless mayHaveFiles) that can be written, or a path
// whose nearest existing ancestor is a writable directory. Nothing is
// created.
func (c *flagCheck) outDir(flag, path string, mayHaveFiles bool) {
	if path == "" {
		c.add(flag, "is empty")
		return
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.IsDir():
		c.add(flag, "%s is a file, not a directory", path)
		return
	case err == nil:
		if !mayHaveFiles {
			if entries, err := os.ReadDir(path); err != nil {
				c.add(flag, "%s: %v", path, err)
				return
			} else if len(entries) > 0 {
				c.add(flag, "%s is not empty", path)
				return
			}
		}
		if !writable(path) {
			c.add(flag, "%s is not writable", path)
		}
		return
	case !errors.Is(err, fs.ErrNotExist):
		c.add(flag, "%s: %v", path, statProblem(err))
		return
	}
	// The directory will be created: its nearest existing ancestor must
	// be a writable directory.
	for p := filepath.Dir(filepath.Clean(path)); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			c.add(flag, "%s: %s is a file, not a directory", path, p)
			return
		case err == nil:
			if !writable(p) {
				c.add(flag, "%s: cannot create it in %s, which is not writable", path, p)
			}
			return
		case !errors.Is(err, fs.ErrNotExist):
			c.add(flag, "%s: %v", path, statProblem(err))
			return
		}
		if p == filepath.Dir(p) {
			return
		}
	}
}

// outFile checks that path can be written as a file: not a directory, in
// an existing, writable directory. Nothing is created.
func (c *flagCheck) outFile(flag, path string) {
	if path == "" {
		c.add(flag, "is empty")
		return
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		c.add(flag, "%s is a directory, not a file", path)
		return
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.add(flag, "%s: %v", path, statProblem(err))
		return
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		c.add(flag, "%s: directory %s: %v", path, dir, statProblem(err))
	case !st.IsDir():
		c.add(flag, "%s: %s is a file, not a directory", path, dir)
	case !writable(dir):
		c.add(flag, "%s: directory %s is not writable", path, dir)
	}
}

// writable reports whether the directory dir can be written to.
func writable(dir string) bool {
	const wOK = 2 // access(2)'s W_OK
	return syscall.Access(dir, wOK) == nil
}

// statProblem shortens an os.Stat error to what went wrong.
func statProblem(err error) string {
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

// addr checks a listen address, host:port with a port number.
func (c *flagCheck) addr(flag, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.add(flag, "%q: want host:port (e.g. 127.0.0.1:8000)", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		c.add(flag, "%q: port %q is not a number in [0, 65535]", addr, port)
	}
}

// url checks an http or https base URL.
func (c *flagCheck) url(flag, s string) {
	if !httpurl.Valid(s) {
		c.add(flag, "%q: want an http:// or https:// URL", s)
	}
}

// pathFlags marks the named flags of cmd as paths: shells complete them as
// file names, and a path flag given an empty value is an error
// (emptyPaths) rather than read as unset, which would mean its default.
func pathFlags(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		if err := cmd.MarkFlagFilename(name); err != nil {
			panic(err) // a flag name beside the flag's definition
		}
	}
}

// emptyPaths reports every path flag (pathFlags) that the command line
// gave an empty value, naming each.
func emptyPaths(flags *pflag.FlagSet) error {
	var c flagCheck
	flags.Visit(func(f *pflag.Flag) {
		if _, isPath := f.Annotations[cobra.BashCompFilenameExt]; isPath && strings.TrimSpace(f.Value.String()) == "" {
			c.add(f.Name, "is empty")
		}
	})
	return c.err()
}

// nonEmptyIfSet checks that a string flag the user set is not empty.
func (c *flagCheck) nonEmptyIfSet(cmd *cobra.Command, flag, v string) {
	if cmd.Flags().Changed(flag) && strings.TrimSpace(v) == "" {
		c.add(flag, "is empty")
	}
}

// checkSampling checks the sampling flags shared by generate and eval:
// --temperature finite and not negative, --top-p in (0, 1], --top-k not
// negative and --stop strings not empty.
// whyPositive, when not empty, refuses temperature 0 and says why.
func checkSampling(c *flagCheck, p sample.Params, whyPositive string) {
	if whyPositive != "" {
		if t := float64(p.Temperature); t == 0 {
			c.add("temperature", "0: must be positive (%s)", whyPositive)
		} else {
			c.floatIn("temperature", t, 0, math.Inf(1), false)
		}
	} else {
		c.floatIn("temperature", float64(p.Temperature), 0, math.Inf(1), false)
	}
	c.floatIn("top-p", float64(p.TopP), 0, 1, true)
	c.intIn("top-k", p.TopK, 0, math.MaxInt32)
	for i, s := range p.Stop {
		if s == "" {
			c.add("stop", "number %d is empty", i+1)
		}
	}
}

// withNewlines reads the two characters \n in a prompt flag as a newline,
// so that prompts such as the world's "@E2\n" can be typed in a shell.
func withNewlines(s string) string { return strings.ReplaceAll(s, `\n`, "\n") }

// worldLevels checks --levels: the world's levels, at least one.
func (c *flagCheck) worldLevels(levels []int) {
	if len(levels) == 0 {
		c.add("levels", "is empty")
	}
	for _, lv := range levels {
		if lv < 0 || lv >= len(world.Levels) {
			c.add("levels", "%d: no such level (0 to %d)", lv, len(world.Levels)-1)
		}
	}
}

// worldTotal checks --problems per level of the world against maxProblems
// in all.
func (c *flagCheck) worldTotal(levels []int, problems int) {
	if problems >= 1 && problems*len(levels) > maxProblems {
		c.add("problems", "%d per level × %d levels: more than %d problems", problems, len(levels), maxProblems)
	}
}
