// Package docblock rewrites the generated parts of the Markdown pages the
// peer comparisons (scripts/peers.sh) write their tables into: the text
// between a "<!-- begin NAME -->" line and its "<!-- end NAME -->", so
// that the prose around the tables is written by hand and kept.
package docblock

import (
	"fmt"
	"os"
	"strings"

	"rlvr/internal/atomicfile"
)

// Replace replaces the text of each named block of the Markdown file at
// path, and fails, changing nothing, when a block is missing.
func Replace(path string, blocks map[string]string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	for name, text := range blocks {
		begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
		i := strings.Index(s, begin)
		j := strings.Index(s, end)
		if i < 0 || j < i {
			return fmt.Errorf("%s: no %q … %q block", path, strings.TrimSpace(begin), end)
		}
		s = s[:i+len(begin)] + text + s[j:]
	}
	return atomicfile.WriteBytes(path, []byte(s))
}
