package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"rlvr/internal/atomicfile"
)

// Tensor is a named float32 tensor to write.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32 // row-major; len(Data) is the product of Shape
}

// Write writes tensors to the safetensors file at path, storing their
// values as dtype, F32 or BF16 (rounded to nearest even). metadata, if not
// empty, becomes the header's "__metadata__"; transformers expects
// {"format": "pt"}.
//
// The file is laid out as the reference implementation lays it out: tensors
// in name order, a compact JSON header with "__metadata__" first and keys
// sorted, padded with spaces to a multiple of 8 bytes. Write replaces path
// atomically: it writes a temporary file in the same directory, syncs it
// and renames it to path.
func Write(path string, tensors []Tensor, metadata map[string]string, dtype DType) error {
	if dtype != F32 && dtype != BF16 {
		return fileError(path, "", "cannot write dtype %q: want F32 or BF16", dtype)
	}
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return cmp.Compare(a.Name, b.Name) })
	for i, t := range sorted {
		if err := checkTensor(t); err != nil {
			return fileError(path, t.Name, "%w", err)
		}
		if i > 0 && sorted[i-1].Name == t.Name {
			return fileError(path, t.Name, "two tensors have this name")
		}
	}
	header := encodeHeader(sorted, metadata, dtype)
	err := atomicfile.Write(path, func(w io.Writer) error {
		return writeTo(w, header, sorted, dtype)
	})
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// checkTensor checks that a tensor's shape matches its data.
func checkTensor(t Tensor) error {
	if t.Name == metadataKey {
		return fmt.Errorf("name %s is reserved", metadataKey)
	}
	n := uint64(1)
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("shape %v has a negative dimension", t.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt {
			return fmt.Errorf("shape %v overflows", t.Shape)
		}
		n = lo
	}
	if n != uint64(len(t.Data)) {
		return fmt.Errorf("shape %v needs %d values, got %d", t.Shape, n, len(t.Data))
	}
	return nil
}

// encodeHeader returns the padded JSON header for tensors sorted by name.
func encodeHeader(tensors []Tensor, metadata map[string]string, dtype DType) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		b.WriteString(`"` + metadataKey + `":{`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeQuoted(&b, k)
			b.WriteByte(':')
			writeQuoted(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	var offset int
	for i, t := range tensors {
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		writeQuoted(&b, t.Name)
		b.WriteString(`:{"dtype":"` + string(dtype) + `","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		end := offset + len(t.Data)*dtype.Size()
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, offset, end)
		offset = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes()
}

// writeQuoted writes s as a JSON string without HTML escaping (and without
// the newline that Encode adds).
func writeQuoted(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // cannot fail for a string
	b.Truncate(b.Len() - 1)
}

// writeTo writes a safetensors file: header length, header and the data of
// tensors as dtype.
func writeTo(w io.Writer, header []byte, tensors []Tensor, dtype DType) error {
	buf := binary.LittleEndian.AppendUint64(make([]byte, 0, 64<<10), uint64(len(header)))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	buf = buf[:0]
	for _, t := range tensors {
		for _, v := range t.Data {
			if dtype == F32 {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			} else {
				buf = binary.LittleEndian.AppendUint16(buf, Float32ToBF16(v))
			}
			if len(buf) > cap(buf)-4 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err := w.Write(buf)
	return err
}
