// Package mdblock rewrites the generated parts of a Markdown file: the
// text between a "<!-- begin NAME -->" line and its "<!-- end NAME -->",
// which scripts fill with measured tables.
package mdblock

import (
	"fmt"
	"os"
	"strings"

	"rlvr/internal/atomicfile"
)

// Replace replaces the text of each named block of the file at path with
// blocks[NAME] (which should end in a newline), atomically; a block
// missing from the file is an error naming it, and nothing is written.
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
