package main

import (
	"bufio"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// -update-docs writes each cited command's table into its doc in place of
// the one there (a new section may hold a one-line placeholder table).
var updateDocs = flag.Bool("update-docs", false, "rewrite the docs' cited tables from their commands' output")

// TestDocsTablesAreTheirCommandsOutput: every results table in docs/ that
// follows the `rlvr report --table` command it cites is that command's
// output on the runs kept in results/, cell for cell. A write-up's numbers
// can then neither drift from the kept runs nor be typed in by hand.
func TestDocsTablesAreTheirCommandsOutput(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("docs: %v %v", files, err)
	}
	checked := 0
	for _, f := range files {
		var rewrites []citedTable
		for _, c := range citedTables(t, f) {
			args := c.args[1:] // without bin/rlvr
			for i, a := range args {
				if strings.HasPrefix(a, "results/") {
					args[i] = "../../" + a
				}
			}
			out, _, err := execute(t, context.Background(), args...)
			if err != nil {
				t.Errorf("%s:%d: rlvr %s: %v", c.file, c.line, strings.Join(c.args[1:], " "), err)
				continue
			}
			if got := tableLines(out); got != c.table {
				if *updateDocs {
					c.table = got
					rewrites = append(rewrites, c)
				} else {
					t.Errorf("%s:%d: the table below the command is not its output.\ndoc:\n%s\ncommand:\n%s", c.file, c.line, c.table, got)
				}
			}
			checked++
		}
		if len(rewrites) > 0 {
			rewriteTables(t, f, rewrites)
		}
	}
	// The write-ups of the three experiments cite this many today.
	if checked < 21 {
		t.Errorf("%d cited tables checked, want at least 21: are the docs' commands still found?", checked)
	}
}

// citedTable is a command of a ```sh block in a doc, all of whose lines
// are `bin/rlvr report --table` (or --compute) commands, and the table that follows the
// block in the same place as the command in it (the first command's the
// first table after the block, and so on).
type citedTable struct {
	file  string
	line  int
	args  []string
	table string
	// start and end are the table's lines in the doc, [start, end) from 0.
	start, end int
}

// rewriteTables writes each table in its place in the doc at path.
func rewriteTables(t *testing.T, path string, tables []citedTable) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, c := range slices.Backward(tables) {
		lines = slices.Replace(lines, c.start, c.end, strings.Split(c.table, "\n")...)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d tables rewritten", path, len(tables))
}

func citedTables(t *testing.T, path string) []citedTable {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	name := filepath.Base(path)
	var out []citedTable
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```sh" {
			continue
		}
		var cmds []citedTable
		j := i + 1
		cited := true
		for ; j < len(lines) && lines[j] != "```"; j++ {
			l := strings.TrimSpace(lines[j])
			switch {
			case l == "":
			case (strings.HasPrefix(l, "bin/rlvr report --table ") || strings.HasPrefix(l, "bin/rlvr report --compute ")) && !strings.ContainsAny(l, "<…#"):
				cmds = append(cmds, citedTable{file: name, line: j + 1, args: expandWords(t, name, j+1, l)})
			default:
				cited = false
			}
		}
		if !cited || len(cmds) == 0 {
			i = j
			continue
		}
		// The tables after the block, up to the next block or heading.
		k := j + 1
		for n := range cmds {
			for k < len(lines) && !strings.HasPrefix(lines[k], "|") && !strings.HasPrefix(lines[k], "```") && !strings.HasPrefix(lines[k], "#") {
				k++
			}
			var table []string
			cmds[n].start = k
			for ; k < len(lines) && strings.HasPrefix(lines[k], "|"); k++ {
				table = append(table, lines[k])
			}
			cmds[n].end = k
			if len(table) == 0 {
				t.Errorf("%s:%d: no table follows the command", name, cmds[n].line)
				break
			}
			cmds[n].table = strings.Join(table, "\n")
		}
		out = append(out, cmds...)
		i = j
	}
	return out
}

// tableLines is the markdown table in a command's output.
func tableLines(out string) string {
	var table []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
		}
	}
	return strings.Join(table, "\n")
}

// expandWords splits a command line as the shell would for the commands
// the docs cite: words separated by spaces, "double" or 'single' quotes
// holding spaces, and brace alternatives a{b,c}d expanded in order.
func expandWords(t *testing.T, file string, line int, cmd string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range cmd {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ':
			if inWord {
				words = append(words, expandBraces(w.String())...)
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("%s:%d: an unclosed quote", file, line)
	}
	if inWord {
		words = append(words, expandBraces(w.String())...)
	}
	return words
}

// expandBraces expands a word's {a,b,…} groups, the leftmost varying
// slowest, as bash does; groups do not nest in the docs' commands.
func expandBraces(word string) []string {
	open := strings.IndexByte(word, '{')
	if open < 0 {
		return []string{word}
	}
	end := strings.IndexByte(word[open:], '}')
	if end < 0 {
		return []string{word}
	}
	end += open
	var out []string
	for _, alt := range strings.Split(word[open+1:end], ",") {
		out = append(out, expandBraces(word[:open]+alt+word[end+1:])...)
	}
	return out
}
