package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// maxHeaderSize is the largest header accepted, as in the reference
// implementation.
const maxHeaderSize = 100_000_000

// metadataKey is the header key of the optional metadata map.
const metadataKey = "__metadata__"

// fileError returns an error naming the file and, if tensor is not empty,
// the tensor.
func fileError(file, tensor, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if tensor != "" {
		return fmt.Errorf("safetensors: %s: tensor %q: %w", file, tensor, err)
	}
	return fmt.Errorf("safetensors: %s: %w", file, err)
}

// readHeader reads and checks the header of the safetensors file r of size
// bytes. It returns the tensors sorted by name.
func readHeader(r io.ReaderAt, size int64, name string) (*shard, []TensorInfo, map[string]string, error) {
	if size < 8 {
		return nil, nil, nil, fileError(name, "", "file is %d bytes, too short for the 8-byte header length", size)
	}
	var prefix [8]byte
	if err := readFull(r, prefix[:], 0); err != nil {
		return nil, nil, nil, fileError(name, "", "header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > maxHeaderSize {
		return nil, nil, nil, fileError(name, "", "header length %d exceeds the limit of %d bytes", n, maxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, nil, nil, fileError(name, "", "header length %d exceeds the %d bytes after the length prefix (truncated file?)", n, size-8)
	}
	header := make([]byte, n)
	if err := readFull(r, header, 8); err != nil {
		return nil, nil, nil, fileError(name, "", "header: %w", err)
	}
	s := &shard{name: name, r: r, data: 8 + int64(n)}
	infos, meta, err := parseHeader(name, header, size-s.data)
	if err != nil {
		return nil, nil, nil, err
	}
	return s, infos, meta, nil
}

// parseHeader parses and checks a JSON header for a data buffer of dataSize
// bytes. It returns the tensors sorted by name.
func parseHeader(name string, header []byte, dataSize int64) ([]TensorInfo, map[string]string, error) {
	if !utf8.Valid(header) {
		return nil, nil, fileError(name, "", "header is not valid UTF-8")
	}
	members, err := decodeObject(header)
	if err != nil {
		return nil, nil, fileError(name, "", "invalid JSON header: %w", err)
	}
	var meta map[string]string
	var infos []TensorInfo
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if seen[m.key] {
			if m.key == metadataKey {
				return nil, nil, fileError(name, "", "%s appears more than once in the header", metadataKey)
			}
			return nil, nil, fileError(name, m.key, "name appears more than once in the header")
		}
		seen[m.key] = true
		if m.key == metadataKey {
			if err := json.Unmarshal(m.val, &meta); err != nil {
				return nil, nil, fileError(name, "", "%s must map strings to strings: %w", metadataKey, err)
			}
			continue
		}
		t, err := parseTensorInfo(m.key, m.val, dataSize)
		if err != nil {
			return nil, nil, fileError(name, m.key, "%w", err)
		}
		infos = append(infos, t)
	}
	if err := checkLayout(name, infos, dataSize); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(infos, func(a, b TensorInfo) int { return cmp.Compare(a.Name, b.Name) })
	return infos, meta, nil
}

// parseTensorInfo parses one tensor's header entry and checks it against
// itself and the size of the data buffer.
func parseTensorInfo(name string, val json.RawMessage, dataSize int64) (TensorInfo, error) {
	var raw struct {
		DType   *DType   `json:"dtype"`
		Shape   []uint64 `json:"shape"`
		Offsets []uint64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(val, &raw); err != nil {
		return TensorInfo{}, fmt.Errorf("invalid entry: %w", err)
	}
	switch {
	case raw.DType == nil:
		return TensorInfo{}, errors.New("missing dtype")
	case raw.Shape == nil:
		return TensorInfo{}, errors.New("missing shape")
	case len(raw.Offsets) != 2:
		return TensorInfo{}, errors.New("data_offsets must be [begin, end]")
	}
	dtype := *raw.DType
	size := dtype.Size()
	if size == 0 {
		return TensorInfo{}, fmt.Errorf("unknown dtype %q", dtype)
	}
	begin, end := raw.Offsets[0], raw.Offsets[1]
	if begin > end {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] end before they begin", begin, end)
	}
	if end > uint64(dataSize) {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] exceed data size %d", begin, end, dataSize)
	}
	nbytes := uint64(size)
	shape := make([]int, len(raw.Shape))
	for i, d := range raw.Shape {
		hi, lo := bits.Mul64(nbytes, d)
		if hi != 0 || lo > math.MaxInt {
			return TensorInfo{}, fmt.Errorf("shape %v overflows", raw.Shape)
		}
		nbytes = lo
		shape[i] = int(d)
	}
	if nbytes != end-begin {
		return TensorInfo{}, fmt.Errorf("shape %v of %s needs %d bytes, but data_offsets [%d, %d] hold %d", shape, dtype, nbytes, begin, end, end-begin)
	}
	return TensorInfo{Name: name, DType: dtype, Shape: shape, Offsets: [2]int64{int64(begin), int64(end)}}, nil
}

// checkLayout checks that the tensors cover the data buffer exactly, in
// order of their offsets, without gaps or overlaps.
func checkLayout(name string, infos []TensorInfo, dataSize int64) error {
	byOffset := slices.Clone(infos)
	slices.SortFunc(byOffset, func(a, b TensorInfo) int {
		return cmp.Or(cmp.Compare(a.Offsets[0], b.Offsets[0]), cmp.Compare(a.Offsets[1], b.Offsets[1]))
	})
	var end int64
	for i, t := range byOffset {
		switch {
		case t.Offsets[0] < end:
			prev := byOffset[i-1]
			return fileError(name, t.Name, "data_offsets [%d, %d] overlap tensor %q at [%d, %d]", t.Offsets[0], t.Offsets[1], prev.Name, prev.Offsets[0], prev.Offsets[1])
		case t.Offsets[0] > end:
			return fileError(name, t.Name, "data_offsets [%d, %d] leave %d unused bytes before the tensor", t.Offsets[0], t.Offsets[1], t.Offsets[0]-end)
		}
		end = t.Offsets[1]
	}
	if end != dataSize {
		return fileError(name, "", "tensors cover %d of the %d bytes of data; the rest is unused", end, dataSize)
	}
	return nil
}

// member is one key and value of a JSON object.
type member struct {
	key string
	val json.RawMessage
}

// decodeObject decodes a JSON object into its members in order, keeping
// duplicate keys, and rejects anything after the object.
func decodeObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("object key is not a string")
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		members = append(members, member{key, val})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return members, nil
}
