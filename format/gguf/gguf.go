// Package gguf reads GGUF files, the format llama.cpp and ollama keep
// models in: the metadata, the tensor directory, and every tensor
// dequantized to float32, from F32, F16 and BF16 through the legacy block
// quantizations (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) to the k-quants (Q2_K to
// Q6_K). [File.HF] maps a Llama- or Gemma-3-architecture file to Hugging
// Face tensor names and a config.json, which is how the rest of rlvr loads
// it.
//
// The reader is rlvr's own. The Go readers that exist (ollama's fs/ggml,
// gpustack's gguf-parser-go) parse metadata for running or sizing models
// with llama.cpp and do not dequantize every type to float32, and bring
// large dependency trees; this one is a few hundred lines over the standard
// library.
//
// The file is memory-mapped and every count, length and offset is checked
// against its size before anything is allocated or read, so a truncated or
// lying file gives an error naming the file and the key or tensor, never a
// panic or an allocation the file cannot back.
package gguf

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

// magic is "GGUF" read as a little-endian uint32.
const magic = 0x46554747

// defaultAlignment is the tensor data alignment when general.alignment is
// absent.
const defaultAlignment = 32

// maxDims is the most dimensions a GGML tensor has.
const maxDims = 4

// File is an open GGUF file. Metadata values are bool, uint8 … uint64,
// int8 … int64, float32, float64, string, or a slice of one of these
// ([]string, []float32, []int32, …, and []any for arrays of arrays).
type File struct {
	Path      string
	Version   uint32
	Keys      []string // metadata keys in file order
	Metadata  map[string]any
	Tensors   []TensorInfo
	Alignment int

	data   []byte // the whole file
	unmap  func() error
	byName map[string]int
}

// TensorInfo is one tensor of the directory. Dims are GGML's, fastest
// varying first: the reverse of a row-major (PyTorch) shape.
type TensorInfo struct {
	Name   string
	Dims   []int
	Type   Type
	Offset int64 // from the start of the file
	Size   int64 // bytes
}

// Elements is the number of values in the tensor.
func (t TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Shape is the tensor's row-major shape: Dims reversed.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = d
	}
	return s
}

// Open reads path's header, metadata and tensor directory and maps its
// data. Close releases it.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	data, unmap, err := mapFile(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	g, err := Parse(path, data)
	if err != nil {
		unmap()
		return nil, err
	}
	g.unmap = unmap
	return g, nil
}

// Close unmaps the file; its tensors cannot be read after.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// Parse reads a GGUF file held in data; name is used in errors.
func Parse(name string, data []byte) (*File, error) {
	r := &reader{name: name, b: data}
	if m := r.u32("magic"); r.err == nil && m != magic {
		return nil, fmt.Errorf("gguf: %s: not a GGUF file (magic %#x)", name, m)
	}
	f := &File{Path: name, Metadata: map[string]any{}, Alignment: defaultAlignment, data: data, byName: map[string]int{}}
	f.Version = r.u32("version")
	if r.err == nil && f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("gguf: %s: version %d (supported: 2, 3)", name, f.Version)
	}
	nTensors := r.count("tensor count", 8+4+8)
	nKV := r.count("metadata count", 8+4)
	for i := 0; i < nKV && r.err == nil; i++ {
		key := r.str(fmt.Sprintf("metadata key %d", i))
		typ := r.u32(key)
		v := r.value(key, typ, 0)
		if r.err != nil {
			break
		}
		if _, dup := f.Metadata[key]; dup {
			return nil, fmt.Errorf("gguf: %s: metadata key %q appears twice", name, key)
		}
		f.Keys = append(f.Keys, key)
		f.Metadata[key] = v
	}
	if r.err != nil {
		return nil, r.err
	}
	if a, ok := f.Metadata["general.alignment"]; ok {
		n, ok := a.(uint32)
		if !ok || n == 0 || n&(n-1) != 0 || n > 1<<20 {
			return nil, fmt.Errorf("gguf: %s: general.alignment %v is not a power of two up to 1 MiB", name, a)
		}
		f.Alignment = int(n)
	}
	for i := 0; i < nTensors && r.err == nil; i++ {
		t := TensorInfo{Name: r.str(fmt.Sprintf("tensor %d name", i))}
		nd := r.u32(t.Name + " dimension count")
		if r.err == nil && (nd == 0 || nd > maxDims) {
			return nil, fmt.Errorf("gguf: %s: tensor %q has %d dimensions (1 to %d)", name, t.Name, nd, maxDims)
		}
		elems := uint64(1)
		for d := uint32(0); d < nd && r.err == nil; d++ {
			n := r.u64(t.Name + " dimension")
			if n == 0 || n > math.MaxInt32*4 || elems > math.MaxInt64/n {
				return nil, fmt.Errorf("gguf: %s: tensor %q: dimension %d = %d is out of range", name, t.Name, d, n)
			}
			elems *= n
			t.Dims = append(t.Dims, int(n))
		}
		t.Type = Type(r.u32(t.Name + " type"))
		off := r.u64(t.Name + " offset")
		if r.err != nil {
			break
		}
		tt, ok := types[t.Type]
		if !ok {
			return nil, fmt.Errorf("gguf: %s: tensor %q has unknown type %d", name, t.Name, uint32(t.Type))
		}
		if uint64(t.Dims[0])%uint64(tt.block) != 0 {
			return nil, fmt.Errorf("gguf: %s: tensor %q: first dimension %d is not a multiple of %s's block of %d", name, t.Name, t.Dims[0], t.Type, tt.block)
		}
		if elems/uint64(tt.block) > uint64(math.MaxInt64)/uint64(tt.bytes) || off > math.MaxInt64/2 {
			return nil, fmt.Errorf("gguf: %s: tensor %q is too large", name, t.Name)
		}
		t.Size = int64(elems / uint64(tt.block) * uint64(tt.bytes))
		t.Offset = int64(off)
		if _, dup := f.byName[t.Name]; dup {
			return nil, fmt.Errorf("gguf: %s: tensor %q appears twice", name, t.Name)
		}
		f.byName[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	if r.err != nil {
		return nil, r.err
	}
	// Tensor data starts at the next multiple of the alignment; offsets are
	// relative to it.
	start := int64(r.off+f.Alignment-1) / int64(f.Alignment) * int64(f.Alignment)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%int64(f.Alignment) != 0 {
			return nil, fmt.Errorf("gguf: %s: tensor %q: offset %d is not aligned to %d", name, t.Name, t.Offset, f.Alignment)
		}
		t.Offset += start
		if t.Offset > int64(len(data)) || t.Size > int64(len(data))-t.Offset {
			return nil, fmt.Errorf("gguf: %s: tensor %q: %d bytes at offset %d run past the end of the file (%d bytes; truncated?)", name, t.Name, t.Size, t.Offset, len(data))
		}
	}
	if err := checkOverlaps(name, f.Tensors); err != nil {
		return nil, err
	}
	return f, nil
}

// checkOverlaps refuses tensors whose data ranges overlap: each tensor's
// bytes must be its own, or one tensor's values would be read as
// another's. Gaps (alignment padding) are allowed.
func checkOverlaps(name string, tensors []TensorInfo) error {
	byOffset := make([]int, len(tensors))
	for i := range byOffset {
		byOffset[i] = i
	}
	slices.SortFunc(byOffset, func(a, b int) int {
		return cmp.Or(cmp.Compare(tensors[a].Offset, tensors[b].Offset), cmp.Compare(tensors[a].Size, tensors[b].Size))
	})
	for k := 1; k < len(byOffset); k++ {
		prev, t := tensors[byOffset[k-1]], tensors[byOffset[k]]
		if t.Offset < prev.Offset+prev.Size {
			return fmt.Errorf("gguf: %s: tensor %q: bytes [%d, %d) overlap tensor %q at [%d, %d)",
				name, t.Name, t.Offset, t.Offset+t.Size, prev.Name, prev.Offset, prev.Offset+prev.Size)
		}
	}
	return nil
}

// Tensor returns the directory entry of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Raw returns the tensor's bytes as stored, a view of the mapped file.
func (f *File) Raw(t TensorInfo) []byte { return f.data[t.Offset : t.Offset+t.Size] }

// Dequantize writes the named tensor as float32 into dst, which must hold
// exactly its element count.
func (f *File) Dequantize(name string, dst []float32) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("gguf: %s: no tensor %q", f.Path, name)
	}
	if f.data == nil {
		return fmt.Errorf("gguf: %s: the file is closed", f.Path)
	}
	if len(dst) != t.Elements() {
		return fmt.Errorf("gguf: %s: tensor %q has %d values, not %d", f.Path, name, t.Elements(), len(dst))
	}
	return Dequantize(t.Type, f.Raw(t), dst)
}

// String returns a metadata string, or "" when the key is absent or not a
// string.
func (f *File) String(key string) string {
	s, _ := f.Metadata[key].(string)
	return s
}

// Uint returns an unsigned or non-negative integer metadata value.
func (f *File) Uint(key string) (uint64, bool) {
	switch v := f.Metadata[key].(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Float returns a floating-point (or integer) metadata value.
func (f *File) Float(key string) (float64, bool) {
	switch v := f.Metadata[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	u, ok := f.Uint(key)
	return float64(u), ok
}

// Bool returns a boolean metadata value.
func (f *File) Bool(key string) (bool, bool) {
	b, ok := f.Metadata[key].(bool)
	return b, ok
}

// Metadata value types.
const (
	kindUint8 = iota
	kindInt8
	kindUint16
	kindInt16
	kindUint32
	kindInt32
	kindFloat32
	kindBool
	kindString
	kindArray
	kindUint64
	kindInt64
	kindFloat64
)

// kindSize is the encoded size of each fixed-size kind; strings take at
// least 8 bytes (their length), arrays at least 12.
var kindSize = [...]int{1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8}

// reader decodes little-endian values from a byte slice, recording the
// first error; every read after an error returns zero values.
type reader struct {
	name string
	b    []byte
	off  int
	err  error
}

func (r *reader) fail(what, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("gguf: %s: %s: %s", r.name, what, fmt.Sprintf(format, args...))
	}
}

func (r *reader) take(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(what, "needs %d bytes at offset %d, past the end of the file (%d bytes; truncated?)", n, r.off, len(r.b))
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u32(what string) uint32 {
	if p := r.take(what, 4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64(what string) uint64 {
	if p := r.take(what, 8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// count reads a 64-bit count of items that each take at least min bytes,
// refusing counts the rest of the file cannot hold.
func (r *reader) count(what string, min int) int {
	n := r.u64(what)
	if r.err == nil && n > uint64(len(r.b)-r.off)/uint64(min) {
		r.fail(what, "%d items cannot fit in the %d bytes left (truncated?)", n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

func (r *reader) str(what string) string {
	n := r.count(what+" length", 1)
	p := r.take(what, n)
	if r.err != nil {
		return ""
	}
	return string(p)
}

// maxNesting bounds arrays of arrays.
const maxNesting = 8

// value reads one metadata value of kind typ.
func (r *reader) value(key string, typ uint32, depth int) any {
	switch typ {
	case kindUint8:
		if p := r.take(key, 1); p != nil {
			return p[0]
		}
	case kindInt8:
		if p := r.take(key, 1); p != nil {
			return int8(p[0])
		}
	case kindUint16:
		if p := r.take(key, 2); p != nil {
			return binary.LittleEndian.Uint16(p)
		}
	case kindInt16:
		if p := r.take(key, 2); p != nil {
			return int16(binary.LittleEndian.Uint16(p))
		}
	case kindUint32:
		return r.u32(key)
	case kindInt32:
		return int32(r.u32(key))
	case kindFloat32:
		return math.Float32frombits(r.u32(key))
	case kindBool:
		if p := r.take(key, 1); p != nil {
			if p[0] > 1 {
				r.fail(key, "boolean byte %d", p[0])
			}
			return p[0] == 1
		}
	case kindString:
		s := r.str(key)
		if r.err == nil && !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		return s
	case kindUint64:
		return r.u64(key)
	case kindInt64:
		return int64(r.u64(key))
	case kindFloat64:
		return math.Float64frombits(r.u64(key))
	case kindArray:
		return r.array(key, depth)
	default:
		r.fail(key, "unknown metadata type %d", typ)
	}
	return nil
}

func (r *reader) array(key string, depth int) any {
	if depth >= maxNesting {
		r.fail(key, "arrays nested deeper than %d", maxNesting)
		return nil
	}
	typ := r.u32(key + " element type")
	if r.err != nil {
		return nil
	}
	if typ > kindFloat64 {
		r.fail(key, "unknown array element type %d", typ)
		return nil
	}
	n := r.count(key+" length", kindSize[typ])
	if r.err != nil {
		return nil
	}
	switch typ {
	case kindString:
		out := make([]string, n)
		for i := range out {
			out[i], _ = r.value(key, typ, depth).(string)
		}
		return out
	case kindArray:
		out := make([]any, n)
		for i := range out {
			out[i] = r.array(key, depth+1)
		}
		return out
	case kindFloat32:
		return fixedArray(r, key, n, 4, func(p []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(p)) })
	case kindInt32:
		return fixedArray(r, key, n, 4, func(p []byte) int32 { return int32(binary.LittleEndian.Uint32(p)) })
	case kindUint32:
		return fixedArray(r, key, n, 4, binary.LittleEndian.Uint32)
	case kindUint8:
		return fixedArray(r, key, n, 1, func(p []byte) uint8 { return p[0] })
	case kindInt8:
		return fixedArray(r, key, n, 1, func(p []byte) int8 { return int8(p[0]) })
	case kindUint16:
		return fixedArray(r, key, n, 2, binary.LittleEndian.Uint16)
	case kindInt16:
		return fixedArray(r, key, n, 2, func(p []byte) int16 { return int16(binary.LittleEndian.Uint16(p)) })
	case kindUint64:
		return fixedArray(r, key, n, 8, binary.LittleEndian.Uint64)
	case kindInt64:
		return fixedArray(r, key, n, 8, func(p []byte) int64 { return int64(binary.LittleEndian.Uint64(p)) })
	case kindFloat64:
		return fixedArray(r, key, n, 8, func(p []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(p)) })
	case kindBool:
		return fixedArray(r, key, n, 1, func(p []byte) bool { return p[0] != 0 })
	}
	return nil
}

// fixedArray decodes n values of size bytes each.
func fixedArray[T any](r *reader, key string, n, size int, dec func([]byte) T) []T {
	p := r.take(key, n*size)
	if p == nil {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = dec(p[i*size:])
	}
	return out
}
