package gguf

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps f's size bytes read-only: a model's tensors are read in
// place, one at a time, and never all held in memory at once.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
