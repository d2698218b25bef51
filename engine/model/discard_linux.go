//go:build linux

package model

import (
	"syscall"
	"unsafe"
)

// discard gives the memory pages lying wholly inside v back to the system
// (madvise MADV_DONTNEED): they hold no memory until written again, and
// read as zeros. v's values must not be read after.
func discard(v []float32) {
	if len(v) == 0 {
		return
	}
	page := uintptr(syscall.Getpagesize())
	base := unsafe.Pointer(unsafe.SliceData(v))
	size := uintptr(len(v)) * 4
	skip := (page - uintptr(base)%page) % page // to the first page boundary
	if size < skip+page {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(base, skip)), (size-skip)&^(page-1))
	_ = syscall.Madvise(b, syscall.MADV_DONTNEED) // advice: on failure the pages stay until the slab goes
}
