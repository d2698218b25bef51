package collect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// key identifies an answer: a question and an expert.
type key struct {
	id, expert string
}

func keyOf(r Record) key { return key{r.ID, r.Name} }

// cache is the append-only file of answers collected so far: one JSON
// line per answer, each synced to disk before the next, so that a process
// killed at any moment loses at most the line it was writing. It is safe
// for concurrent use.
type cache struct {
	path string
	mu   sync.Mutex
	f    *os.File // nil for no cache
}

// openCache opens (creating it if need be) the cache at path, locks it
// against other collections, and reads the answers it holds, the last
// line of a key winning. A last line cut short by an interrupted write,
// with no newline and not a complete answer, is cut off the file and
// reported to warn. Any other malformed line is an *Error. An empty path
// is no cache: nothing is read or kept.
func openCache(path string, warn func(string)) (*cache, map[key]Record, error) {
	got := map[key]Record{}
	if path == "" {
		return &cache{}, got, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("collect: cache: %w", err)
	}
	fail := func(err error) (*cache, map[key]Record, error) {
		f.Close()
		return nil, nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fail(fmt.Errorf("collect: cache %s is in use by another collection", path))
		}
		return fail(fmt.Errorf("collect: locking the cache %s: %w", path, err))
	}
	var good int64   // bytes up to the end of the last line kept
	var unended bool // the last line kept has no newline
	var cut *line    // a truncated last line
	err = eachLine(f, path, func(l line) error {
		rec, err := ParseRecord(l.text)
		switch {
		case err != nil && !l.complete:
			cut = &l
			return nil
		case err != nil:
			return lineError(path, l.n, err)
		}
		got[keyOf(rec)] = rec
		good, unended = l.end, !l.complete
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if cut != nil {
		warn(fmt.Sprintf("%s:%d: ignoring the last line, cut short (%d bytes, no newline) when a collection was interrupted", path, cut.n, len(cut.text)))
		// Blank lines between the last answer and the cut line are cut too.
		if err := f.Truncate(good); err != nil {
			return fail(fmt.Errorf("collect: cutting the truncated line off %s: %w", path, err))
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return fail(fmt.Errorf("collect: cache %s: %w", path, err))
	}
	c := &cache{path: path, f: f}
	if unended {
		if err := c.write([]byte("\n")); err != nil {
			return fail(err)
		}
	}
	return c, got, nil
}

// append writes r as the cache's next line and syncs it to disk.
func (c *cache) append(r Record) error {
	b, err := r.MarshalLine()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write(b)
}

func (c *cache) write(b []byte) error {
	if c.f == nil {
		return nil
	}
	if _, err := c.f.Write(b); err != nil {
		return fmt.Errorf("collect: writing the cache: %w", err)
	}
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("collect: syncing the cache: %w", err)
	}
	return nil
}

// close releases the cache and its lock.
func (c *cache) close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}
