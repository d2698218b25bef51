package collect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// maxLine bounds one line of a D_ME or cache file (a variable for tests).
var maxLine = 64 << 20

// line is one line of a JSONL file.
type line struct {
	text     []byte // without the newline (and a \r before it)
	n        int    // 1-based
	end      int64  // byte offset just past the line, newline included
	complete bool   // ended by a newline
}

// eachLine calls fn with every non-blank line of r, in order, and stops
// at fn's first error. A line longer than maxLine is an *Error naming
// file and the line.
func eachLine(r io.Reader, file string, fn func(line) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	for n := 1; ; n++ {
		var buf []byte
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			buf = append(buf, chunk...)
			if len(buf) > maxLine {
				return lineError(file, n, fmt.Errorf("longer than %d bytes", maxLine))
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return err
		}
		off += int64(len(buf))
		complete := bytes.HasSuffix(buf, []byte("\n"))
		text := bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(text)) > 0 {
			if ferr := fn(line{text: text, n: n, end: off, complete: complete}); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
