// Package safetensors reads and writes checkpoints in the safetensors format
// used by Hugging Face models (model.safetensors, or shards listed in
// model.safetensors.index.json).
//
// A safetensors file holds an 8-byte little-endian header length N, N bytes
// of JSON header and then the data buffer. The header maps each tensor name
// to its dtype, shape and data_offsets, a [begin, end) byte range relative to
// the start of the data buffer; the optional "__metadata__" key maps strings
// to strings. Tensors are stored row-major and little-endian.
//
// Reading checks the whole header against the file before any tensor is
// read, as the reference implementation does: every tensor must lie within
// the data buffer, its size must match its dtype and shape, and the tensors
// must cover the data buffer exactly, without gaps or overlaps. Errors name
// the file and, where there is one, the tensor.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
)

// DType is the element type of a tensor, spelled as in the header ("F32").
type DType string

// The floating-point dtypes that File.Float32 converts. Headers may use the
// other dtypes of the reference implementation (BOOL, U8, I8, F8_E5M2,
// F8_E4M3, I16, U16, I32, U32, I64, U64), whose data can be read as bytes.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
)

var dtypeSizes = map[DType]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, F16: 2, BF16: 2,
	"I32": 4, "U32": 4, F32: 4,
	F64: 8, "I64": 8, "U64": 8,
}

// Size returns the size in bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// TensorInfo describes one tensor of a checkpoint.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	// Offsets is the [begin, end) byte range of the tensor in the data
	// buffer of the file that holds it.
	Offsets [2]int64
}

// NumElements returns the number of elements, the product of the shape.
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an open safetensors checkpoint: a single file, or the shards of a
// sharded checkpoint presented as one set of tensors. Its methods may be
// called from several goroutines at once.
type File struct {
	name     string       // path used in error messages
	tensors  []TensorInfo // sorted by name
	where    []*shard     // where[i] holds tensors[i]
	index    map[string]int
	metadata map[string]string
	closers  []io.Closer
}

// shard is one safetensors file of a checkpoint.
type shard struct {
	name string      // path used in error messages
	r    io.ReaderAt // the whole file
	data int64       // offset of the data buffer in r
}

// Open opens the safetensors file at path and checks its header.
func Open(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := openFile(osf, path)
	if err != nil {
		osf.Close()
		return nil, err
	}
	return f, nil
}

// openFile reads the header of an open file and returns a File that closes
// osf on Close.
func openFile(osf *os.File, name string) (*File, error) {
	fi, err := osf.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := NewFile(osf, fi.Size(), name)
	if err != nil {
		return nil, err
	}
	f.closers = []io.Closer{osf}
	return f, nil
}

// NewFile reads a safetensors file of size bytes from r and checks its
// header. name is used in error messages. Closing the returned File does
// not close r.
func NewFile(r io.ReaderAt, size int64, name string) (*File, error) {
	s, infos, meta, err := readHeader(r, size, name)
	if err != nil {
		return nil, err
	}
	f := &File{name: name, metadata: meta}
	for _, t := range infos {
		f.add(t, s)
	}
	return f, nil
}

// add appends a tensor; callers add tensors in name order.
func (f *File) add(t TensorInfo, s *shard) {
	if f.index == nil {
		f.index = make(map[string]int)
	}
	f.index[t.Name] = len(f.tensors)
	f.tensors = append(f.tensors, t)
	f.where = append(f.where, s)
}

// Close closes the files that Open, OpenDir or OpenIndex opened.
func (f *File) Close() error {
	var errs []error
	for _, c := range f.closers {
		errs = append(errs, c.Close())
	}
	f.closers = nil
	return errors.Join(errs...)
}

// Tensors returns the tensors sorted by name.
func (f *File) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.tensors))
	for i, t := range f.tensors {
		t.Shape = slices.Clone(t.Shape)
		out[i] = t
	}
	return out
}

// Tensor returns the tensor called name and whether there is one.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	t := f.tensors[i]
	t.Shape = slices.Clone(t.Shape)
	return t, true
}

// Metadata returns a copy of the header's "__metadata__" map, which may be
// empty. For a sharded checkpoint it merges the shards' maps; where they
// disagree, the shard whose file name sorts first wins.
func (f *File) Metadata() map[string]string {
	m := make(map[string]string, len(f.metadata))
	for k, v := range f.metadata {
		m[k] = v
	}
	return m
}

// lookup finds a tensor by name.
func (f *File) lookup(name string) (TensorInfo, *shard, error) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("safetensors: %s: no tensor %q", f.name, name)
	}
	return f.tensors[i], f.where[i], nil
}

// Bytes returns the raw little-endian data of the tensor called name.
func (f *File) Bytes(name string) ([]byte, error) {
	t, s, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	b := make([]byte, t.Offsets[1]-t.Offsets[0])
	if err := s.readAt(b, t.Offsets[0]); err != nil {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", s.name, name, err)
	}
	return b, nil
}

// SameData reports whether the tensors called a and b have the same
// dtype, shape and bytes. It reads both in chunks, so comparing two large
// tensors allocates little.
func (f *File) SameData(a, b string) (bool, error) {
	ta, sa, err := f.lookup(a)
	if err != nil {
		return false, err
	}
	tb, sb, err := f.lookup(b)
	if err != nil {
		return false, err
	}
	if ta.DType != tb.DType || !slices.Equal(ta.Shape, tb.Shape) {
		return false, nil
	}
	n := ta.Offsets[1] - ta.Offsets[0]
	bufA, bufB := make([]byte, min(chunkBytes, n)), make([]byte, min(chunkBytes, n))
	for done := int64(0); done < n; {
		k := min(int64(len(bufA)), n-done)
		if err := sa.readAt(bufA[:k], ta.Offsets[0]+done); err != nil {
			return false, fmt.Errorf("safetensors: %s: tensor %q: %w", sa.name, a, err)
		}
		if err := sb.readAt(bufB[:k], tb.Offsets[0]+done); err != nil {
			return false, fmt.Errorf("safetensors: %s: tensor %q: %w", sb.name, b, err)
		}
		if !bytes.Equal(bufA[:k], bufB[:k]) {
			return false, nil
		}
		done += k
	}
	return true, nil
}

// converters decode little-endian elements of a dtype into float32.
var converters = map[DType]func(dst []float32, src []byte){
	F32: func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	},
	BF16: func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	},
	F16: func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	},
	F64: func(dst []float32, src []byte) {
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	},
}

// chunkBytes is how much tensor data Float32 reads at a time.
const chunkBytes = 1 << 20

// chunks holds Float32Into's read buffers (chunkBytes each), so loading a
// model's tensors one after another leaves no garbage behind.
var chunks = sync.Pool{New: func() any { return new([chunkBytes]byte) }}

// Float32 returns the values and shape of the tensor called name, converted
// to float32. It converts F32, BF16, F16 and F64 (rounding to nearest).
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, _, err := f.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	out := make([]float32, t.NumElements())
	if err := f.Float32Into(out, name); err != nil {
		return nil, nil, err
	}
	return out, slices.Clone(t.Shape), nil
}

// Float32Into is Float32 into dst, which must hold exactly the tensor's
// elements: a loader fills its own storage with it, allocating nothing.
func (f *File) Float32Into(dst []float32, name string) error {
	t, s, err := f.lookup(name)
	if err != nil {
		return err
	}
	conv, ok := converters[t.DType]
	if !ok {
		return fmt.Errorf("safetensors: %s: tensor %q: cannot convert dtype %s to float32", s.name, name, t.DType)
	}
	n, size := t.NumElements(), t.DType.Size()
	if len(dst) != n {
		return fmt.Errorf("safetensors: %s: tensor %q has %d elements, read into %d", s.name, name, n, len(dst))
	}
	buf := chunks.Get().(*[chunkBytes]byte)
	defer chunks.Put(buf)
	for done := 0; done < n; {
		k := min(chunkBytes/size, n-done)
		b := buf[:k*size]
		if err := s.readAt(b, t.Offsets[0]+int64(done*size)); err != nil {
			return fmt.Errorf("safetensors: %s: tensor %q: %w", s.name, name, err)
		}
		conv(dst[done:done+k], b)
		done += k
	}
	return nil
}

// readAt reads len(b) bytes at offset off of the data buffer.
func (s *shard) readAt(b []byte, off int64) error {
	return readFull(s.r, b, s.data+off)
}

// readFull reads len(b) bytes at offset off of r.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read: %w", err)
}
