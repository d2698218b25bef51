package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rlvr/format/safetensors"
	"rlvr/internal/shareddata"
)

// rawFile assembles a safetensors file from a header and a data buffer.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// writeFile writes data to name in a new temporary directory.
func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustOpen(t testing.TB, path string) *safetensors.File {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// llamaConfig holds the config.json fields that fix a Llama checkpoint's
// tensor shapes.
type llamaConfig struct {
	Hidden       int  `json:"hidden_size"`
	Intermediate int  `json:"intermediate_size"`
	Layers       int  `json:"num_hidden_layers"`
	Heads        int  `json:"num_attention_heads"`
	KVHeads      int  `json:"num_key_value_heads"`
	Vocab        int  `json:"vocab_size"`
	Tied         bool `json:"tie_word_embeddings"`
}

// expectedShapes returns the tensor names and shapes of a Llama checkpoint.
func (c llamaConfig) expectedShapes() map[string][]int {
	hd := c.Hidden / c.Heads
	m := map[string][]int{
		"model.embed_tokens.weight": {c.Vocab, c.Hidden},
		"model.norm.weight":         {c.Hidden},
	}
	if !c.Tied {
		m["lm_head.weight"] = []int{c.Vocab, c.Hidden}
	}
	for i := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		m[p+"input_layernorm.weight"] = []int{c.Hidden}
		m[p+"post_attention_layernorm.weight"] = []int{c.Hidden}
		m[p+"self_attn.q_proj.weight"] = []int{c.Heads * hd, c.Hidden}
		m[p+"self_attn.k_proj.weight"] = []int{c.KVHeads * hd, c.Hidden}
		m[p+"self_attn.v_proj.weight"] = []int{c.KVHeads * hd, c.Hidden}
		m[p+"self_attn.o_proj.weight"] = []int{c.Hidden, c.Heads * hd}
		m[p+"mlp.gate_proj.weight"] = []int{c.Intermediate, c.Hidden}
		m[p+"mlp.up_proj.weight"] = []int{c.Intermediate, c.Hidden}
		m[p+"mlp.down_proj.weight"] = []int{c.Hidden, c.Intermediate}
	}
	return m
}

func TestFixture(t *testing.T) {
	dir := shareddata.Path(t, "verl-arith-llama")
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg llamaConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	want := cfg.expectedShapes()

	for _, open := range []func() (*safetensors.File, error){
		func() (*safetensors.File, error) { return safetensors.Open(filepath.Join(dir, "model.safetensors")) },
		func() (*safetensors.File, error) { return safetensors.OpenDir(dir) },
	} {
		f, err := open()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if got := f.Metadata(); !reflect.DeepEqual(got, map[string]string{"format": "pt"}) {
			t.Errorf("Metadata() = %v, want format=pt", got)
		}
		infos := f.Tensors()
		if len(infos) != len(want) {
			t.Errorf("got %d tensors, want %d", len(infos), len(want))
		}
		if !slices.IsSortedFunc(infos, func(a, b safetensors.TensorInfo) int { return strings.Compare(a.Name, b.Name) }) {
			t.Error("Tensors() is not sorted by name")
		}
		for _, info := range infos {
			shape, ok := want[info.Name]
			if !ok {
				t.Errorf("unexpected tensor %q", info.Name)
				continue
			}
			if !slices.Equal(info.Shape, shape) || info.DType != safetensors.BF16 {
				t.Errorf("%s: %s %v, want BF16 %v", info.Name, info.DType, info.Shape, shape)
			}
			values, gotShape, err := f.Float32(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gotShape, shape) || len(values) != info.NumElements() {
				t.Errorf("%s: Float32 shape %v, %d values", info.Name, gotShape, len(values))
			}
			var sumSq float64
			for _, v := range values {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: non-finite value %v", info.Name, v)
				}
				sumSq += float64(v) * float64(v)
			}
			if sumSq == 0 {
				t.Errorf("%s: all zeros", info.Name)
			}
		}
		for name := range want {
			if _, ok := f.Tensor(name); !ok {
				t.Errorf("missing tensor %q", name)
			}
		}
	}
}

// TestFixtureRewrite writes the bf16 fixture back as bf16 and checks that
// every tensor's bytes, and the whole file, are unchanged.
func TestFixtureRewrite(t *testing.T) {
	path := shareddata.Path(t, "verl-arith-llama/model.safetensors")
	f := mustOpen(t, path)
	var tensors []safetensors.Tensor
	for _, info := range f.Tensors() {
		values, shape, err := f.Float32(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, safetensors.Tensor{Name: info.Name, Shape: shape, Data: values})
	}
	rand.Shuffle(len(tensors), func(i, j int) { tensors[i], tensors[j] = tensors[j], tensors[i] })
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.Write(out, tensors, f.Metadata(), safetensors.BF16); err != nil {
		t.Fatal(err)
	}
	g := mustOpen(t, out)
	if !reflect.DeepEqual(g.Tensors(), f.Tensors()) {
		t.Error("tensor infos differ after rewrite")
	}
	for _, info := range f.Tensors() {
		want, err := f.Bytes(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := g.Bytes(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: bytes differ after bf16 round trip", info.Name)
		}
	}
	orig, _ := os.ReadFile(path)
	rewritten, _ := os.ReadFile(out)
	if !bytes.Equal(orig, rewritten) {
		t.Error("rewritten file differs from the fixture (header layout differs from the reference writer)")
	}
}

// specials are float32 values worth round-tripping.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.1, 1e-45, -1e-40, math.MaxFloat32,
	-math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)),
	math.Float32frombits(0x7fc00000), math.Float32frombits(0xffa12345), // quiet and signalling NaNs
}

// testTensors returns tensors covering scalars, empty tensors and specials.
func testTensors(r *rand.Rand) []safetensors.Tensor {
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	return []safetensors.Tensor{
		{Name: "z.weight", Shape: []int{3, 5}, Data: rnd(15)},
		{Name: "a.bias", Shape: []int{7}, Data: rnd(7)},
		{Name: "scalar", Shape: []int{}, Data: []float32{42}},
		{Name: "empty", Shape: []int{0, 4}, Data: []float32{}},
		{Name: "specials", Shape: []int{len(specials)}, Data: specials},
		{Name: "big", Shape: []int{300, 301}, Data: rnd(300 * 301)},
	}
}

func TestRoundTripF32(t *testing.T) {
	tensors := testTensors(rand.New(rand.NewPCG(1, 2)))
	path := filepath.Join(t.TempDir(), "f32.safetensors")
	meta := map[string]string{"format": "pt", "note": `quote " and <tag> & é`}
	if err := safetensors.Write(path, tensors, meta, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	n := binary.LittleEndian.Uint64(raw)
	if (8+n)%8 != 0 {
		t.Errorf("header length %d leaves data unaligned", n)
	}
	if want := `{"__metadata__":{"format":"pt","note":"quote \" and <tag> & é"},"a.bias":{"dtype":"F32","shape":[7],"data_offsets":[0,28]},`; !strings.HasPrefix(string(raw[8:]), want) {
		t.Errorf("header starts %q, want %q", raw[8:8+len(want)], want)
	}
	f := mustOpen(t, path)
	if got := f.Metadata(); !reflect.DeepEqual(got, meta) {
		t.Errorf("Metadata() = %v, want %v", got, meta)
	}
	for _, want := range tensors {
		got, shape, err := f.Float32(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, want.Shape) || len(got) != len(want.Data) {
			t.Fatalf("%s: shape %v len %d, want %v len %d", want.Name, shape, len(got), want.Shape, len(want.Data))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want.Data[i]) {
				t.Fatalf("%s[%d] = %#x, want %#x", want.Name, i, math.Float32bits(got[i]), math.Float32bits(want.Data[i]))
			}
		}
	}
}

func TestRoundTripBF16(t *testing.T) {
	tensors := testTensors(rand.New(rand.NewPCG(3, 4)))
	path := filepath.Join(t.TempDir(), "bf16.safetensors")
	if err := safetensors.Write(path, tensors, nil, safetensors.BF16); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, path)
	if len(f.Metadata()) != 0 {
		t.Errorf("Metadata() = %v, want empty", f.Metadata())
	}
	for _, want := range tensors {
		info, _ := f.Tensor(want.Name)
		if info.DType != safetensors.BF16 {
			t.Errorf("%s: dtype %s", want.Name, info.DType)
		}
		got, _, err := f.Float32(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want.Data {
			rounded := safetensors.BF16ToFloat32(safetensors.Float32ToBF16(v))
			if math.IsNaN(float64(v)) {
				if !math.IsNaN(float64(got[i])) {
					t.Errorf("%s[%d]: NaN became %v", want.Name, i, got[i])
				}
				continue
			}
			if math.Float32bits(got[i]) != math.Float32bits(rounded) {
				t.Errorf("%s[%d] = %v, want %v", want.Name, i, got[i], rounded)
			}
			const minNormal = 0x1p-126 // bf16 keeps 8 significant bits for normal values
			if d := math.Abs(float64(got[i]) - float64(v)); d > math.Abs(float64(v))/256 && math.Abs(float64(v)) >= minNormal && !math.IsInf(float64(got[i]), 0) {
				t.Errorf("%s[%d] = %v, too far from %v", want.Name, i, got[i], v)
			}
		}
	}
}

func TestFloat32ToBF16(t *testing.T) {
	for _, tc := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0xbf800000, 0xbf80}, // -1
		{0x00000000, 0x0000},
		{0x80000000, 0x8000},
		{0x3f808000, 0x3f80}, // tie, rounds to even (down)
		{0x3f818000, 0x3f82}, // tie, rounds to even (up)
		{0x3f808001, 0x3f81}, // above the tie
		{0x3f807fff, 0x3f80}, // below the tie
		{0x7f7fffff, 0x7f80}, // MaxFloat32 rounds to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0xff800000, 0xff80}, // -Inf
		{0x7fc00000, 0x7fc0}, // quiet NaN
		{0x7f800001, 0x7fc0}, // NaN whose payload is in the dropped bits
		{0xffa12345, 0xffe1}, // signalling NaN, sign and high payload kept
		{0x00000001, 0x0000}, // smallest subnormal rounds to zero
		{0x00008000, 0x0000}, // subnormal tie to even
		{0x00018000, 0x0002},
	} {
		got := safetensors.Float32ToBF16(math.Float32frombits(tc.in))
		if got != tc.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	// Every bf16 value survives the round trip through float32.
	for b := range 1 << 16 {
		f := safetensors.BF16ToFloat32(uint16(b))
		got := safetensors.Float32ToBF16(f)
		if math.IsNaN(float64(f)) {
			if got&0x7fff <= 0x7f80 {
				t.Fatalf("bf16 NaN %#04x became %#04x", b, got)
			}
		} else if got != uint16(b) {
			t.Fatalf("bf16 %#04x became %#04x", b, got)
		}
	}
}

func TestF16ToFloat32(t *testing.T) {
	for _, tc := range []struct {
		in   uint16
		want float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0xfbff, -65504},
		{0x0400, 6.103515625e-05},       // smallest normal, 2^-14
		{0x03ff, 6.097555160522461e-05}, // largest subnormal
		{0x0001, 5.960464477539063e-08}, // smallest subnormal, 2^-24
		{0x8001, -5.960464477539063e-08},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	} {
		if got := safetensors.F16ToFloat32(tc.in); got != tc.want {
			t.Errorf("F16ToFloat32(%#04x) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := safetensors.F16ToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("F16ToFloat32(0x8000) = %v, want -0", got)
	}
	for _, h := range []uint16{0x7e00, 0x7c01, 0xfe00, 0x7fff} {
		if got := safetensors.F16ToFloat32(h); !math.IsNaN(float64(got)) {
			t.Errorf("F16ToFloat32(%#04x) = %v, want NaN", h, got)
		}
	}
	// Every finite value against the definition.
	for h := range 1 << 16 {
		exp, mant := h>>10&0x1f, float64(h&0x3ff)
		if exp == 0x1f {
			continue
		}
		want := math.Ldexp(mant, -24) // subnormal
		if exp != 0 {
			want = math.Ldexp(1+mant/1024, exp-15)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if got := safetensors.F16ToFloat32(uint16(h)); float64(got) != want {
			t.Fatalf("F16ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

// TestDTypes reads F16, F64 and integer tensors.
func TestDTypes(t *testing.T) {
	var data []byte
	for _, h := range []uint16{0x3c00, 0xc000, 0x0001} {
		data = binary.LittleEndian.AppendUint16(data, h)
	}
	data = append(data, 0, 0) // pad the F16 tensor to 8 bytes
	for _, v := range []float64{0.5, -3, 1e300} {
		data = binary.LittleEndian.AppendUint64(data, math.Float64bits(v))
	}
	data = binary.LittleEndian.AppendUint64(data, 7)
	header := `{"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},` +
		`"d":{"dtype":"F64","shape":[3,1],"data_offsets":[8,32]},` +
		`"i":{"dtype":"I64","shape":[],"data_offsets":[32,40],"extra":"ignored"}}`
	f := mustOpen(t, writeFile(t, "dtypes.safetensors", rawFile(header, data)))

	h, shape, err := f.Float32("h")
	if err != nil || !slices.Equal(h, []float32{1, -2, 5.960464477539063e-08, 0}) || !slices.Equal(shape, []int{4}) {
		t.Errorf(`Float32("h") = %v, %v, %v`, h, shape, err)
	}
	d, shape, err := f.Float32("d")
	if err != nil || !slices.Equal(d, []float32{0.5, -3, float32(math.Inf(1))}) || !slices.Equal(shape, []int{3, 1}) {
		t.Errorf(`Float32("d") = %v, %v, %v`, d, shape, err)
	}
	if _, _, err := f.Float32("i"); err == nil || !strings.Contains(err.Error(), `tensor "i": cannot convert dtype I64`) {
		t.Errorf(`Float32("i") error = %v`, err)
	}
	if b, err := f.Bytes("i"); err != nil || binary.LittleEndian.Uint64(b) != 7 {
		t.Errorf(`Bytes("i") = %v, %v`, b, err)
	}
	if _, _, err := f.Float32("nope"); err == nil || !strings.Contains(err.Error(), `dtypes.safetensors: no tensor "nope"`) {
		t.Errorf(`Float32("nope") error = %v`, err)
	}
	if _, err := f.Bytes("nope"); err == nil {
		t.Error(`Bytes("nope") succeeded`)
	}
}

// validFile returns a small valid file with two tensors, "a" and "b".
func validFile() []byte {
	return rawFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}}`,
		make([]byte, 16))
}

func TestMalformed(t *testing.T) {
	valid := validFile()
	tensor := func(dtype, shape, offsets string) string {
		return `{"t":{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":` + offsets + `}}`
	}
	for _, tc := range []struct {
		name string
		file []byte
		want []string
	}{
		{"empty", nil, []string{"too short"}},
		{"short", []byte{1, 2, 3}, []string{"too short"}},
		{"header length beyond file", rawFile("{}", nil)[:9], []string{"header length 2 exceeds the 1 bytes"}},
		{"huge header length", binary.LittleEndian.AppendUint64(nil, 1<<62), []string{"exceeds the limit"}},
		{"truncated data", valid[:len(valid)-1], []string{`tensor "b"`, "data_offsets [8, 16] exceed data size 15"}},
		{"trailing bytes", append(slices.Clone(valid), 0), []string{"tensors cover 16 of the 17 bytes"}},
		{"invalid JSON", rawFile(`{"a":`, nil), []string{"invalid JSON header"}},
		{"not an object", rawFile(`[1,2]`, nil), []string{"not a JSON object"}},
		{"data after object", rawFile(`{}{}`, nil), []string{"data after the JSON object"}},
		{"invalid UTF-8", rawFile("{\"\xff\":1}", nil), []string{"not valid UTF-8"}},
		{"entry not an object", rawFile(`{"t":5}`, nil), []string{`tensor "t"`, "invalid entry"}},
		{"unknown dtype", rawFile(tensor("F7", "[1]", "[0,1]"), []byte{0}), []string{`tensor "t"`, `unknown dtype "F7"`}},
		{"missing dtype", rawFile(`{"t":{"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), []string{`tensor "t"`, "missing dtype"}},
		{"missing shape", rawFile(`{"t":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), []string{`tensor "t"`, "missing shape"}},
		{"missing offsets", rawFile(`{"t":{"dtype":"F32","shape":[1]}}`, make([]byte, 4)), []string{`tensor "t"`, "data_offsets must be"}},
		{"three offsets", rawFile(tensor("F32", "[1]", "[0,4,8]"), make([]byte, 8)), []string{`tensor "t"`, "data_offsets must be"}},
		{"negative dimension", rawFile(tensor("F32", "[-1]", "[0,4]"), make([]byte, 4)), []string{`tensor "t"`, "invalid entry"}},
		{"shape mismatch", rawFile(tensor("F32", "[3]", "[0,8]"), make([]byte, 8)), []string{`tensor "t"`, "shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] hold 8"}},
		{"shape overflow", rawFile(tensor("F32", "[4294967296,4294967296,0]", "[0,0]"), nil), []string{`tensor "t"`, "overflows"}},
		{"offsets reversed", rawFile(tensor("F32", "[1]", "[4,0]"), make([]byte, 4)), []string{`tensor "t"`, "end before they begin"}},
		{"offsets out of range", rawFile(tensor("F32", "[1]", "[4,8]"), make([]byte, 4)), []string{`tensor "t"`, "exceed data size 4"}},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)),
			[]string{`tensor "b"`, `overlap tensor "a"`}},
		{"gap", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12)),
			[]string{`tensor "b"`, "4 unused bytes"}},
		{"duplicate name", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)),
			[]string{`tensor "a"`, "more than once"}},
		{"duplicate metadata", rawFile(`{"__metadata__":{},"__metadata__":{}}`, nil), []string{"__metadata__ appears more than once"}},
		{"metadata not strings", rawFile(`{"__metadata__":{"n":1}}`, nil), []string{"__metadata__ must map strings to strings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "bad.safetensors", tc.file)
			f, err := safetensors.Open(path)
			if err == nil {
				f.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			for _, want := range append([]string{"safetensors: " + path + ": "}, tc.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
		})
	}
	if _, err := safetensors.Open(filepath.Join(t.TempDir(), "missing.safetensors")); err == nil || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Errorf("Open(missing) error = %v", err)
	}
}

func TestNewFile(t *testing.T) {
	data := validFile()
	f, err := safetensors.NewFile(bytes.NewReader(data), int64(len(data)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	want := []safetensors.TensorInfo{
		{Name: "a", DType: safetensors.F32, Shape: []int{2}, Offsets: [2]int64{0, 8}},
		{Name: "b", DType: safetensors.BF16, Shape: []int{2, 2}, Offsets: [2]int64{8, 16}},
	}
	if got := f.Tensors(); !reflect.DeepEqual(got, want) {
		t.Errorf("Tensors() = %+v, want %+v", got, want)
	}
	// A reader shorter than the size it claims fails when read.
	short := data[:len(data)-4]
	f, err = safetensors.NewFile(bytes.NewReader(short), int64(len(data)), "short")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Float32("b"); err == nil || !strings.Contains(err.Error(), `short: tensor "b": read: unexpected EOF`) {
		t.Errorf("reading past the end: error = %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.safetensors")
	for _, tc := range []struct {
		name    string
		tensors []safetensors.Tensor
		dtype   safetensors.DType
		want    string
	}{
		{"dtype", nil, safetensors.F16, `cannot write dtype "F16"`},
		{"mismatch", []safetensors.Tensor{{Name: "w", Shape: []int{2, 2}, Data: make([]float32, 3)}}, safetensors.F32, `tensor "w": shape [2 2] needs 4 values, got 3`},
		{"negative", []safetensors.Tensor{{Name: "w", Shape: []int{-1}}}, safetensors.F32, `tensor "w": shape [-1] has a negative dimension`},
		{"duplicate", []safetensors.Tensor{{Name: "w", Shape: []int{}, Data: []float32{1}}, {Name: "w", Shape: []int{}, Data: []float32{2}}}, safetensors.BF16, `tensor "w": two tensors`},
		{"reserved", []safetensors.Tensor{{Name: "__metadata__", Shape: []int{}, Data: []float32{1}}}, safetensors.F32, "reserved"},
	} {
		err := safetensors.Write(path, tc.tensors, nil, tc.dtype)
		if err == nil || !strings.Contains(err.Error(), "safetensors: "+path+": ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := safetensors.Write(filepath.Join(dir, "no", "such", "dir.safetensors"), nil, nil, safetensors.F32); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
	// Writing replaces an existing file and leaves no temporary files.
	os.WriteFile(path, []byte("old"), 0o644)
	if err := safetensors.Write(path, []safetensors.Tensor{{Name: "x", Shape: []int{1}, Data: []float32{1}}}, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "out.safetensors" {
		t.Errorf("directory holds %v, want only out.safetensors", entries)
	}
	mustOpen(t, path)
}

// writeSharded writes a two-shard checkpoint into dir and returns its
// tensors.
func writeSharded(t *testing.T, dir string) []safetensors.Tensor {
	t.Helper()
	tensors := testTensors(rand.New(rand.NewPCG(5, 6)))
	shards := map[string][]safetensors.Tensor{
		"model-00001-of-00002.safetensors": tensors[:3],
		"model-00002-of-00002.safetensors": tensors[3:],
	}
	weightMap := map[string]string{}
	for name, ts := range shards {
		if err := safetensors.Write(filepath.Join(dir, name), ts, map[string]string{"format": "pt"}, safetensors.F32); err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			weightMap[x.Name] = name
		}
	}
	writeIndex(t, dir, weightMap)
	return tensors
}

func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1234}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	tensors := writeSharded(t, dir)
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	infos := f.Tensors()
	if len(infos) != len(tensors) {
		t.Fatalf("got %d tensors, want %d", len(infos), len(tensors))
	}
	if !slices.IsSortedFunc(infos, func(a, b safetensors.TensorInfo) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Tensors() is not sorted by name")
	}
	for _, want := range tensors {
		got, shape, err := f.Float32(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, want.Shape) || !slices.EqualFunc(got, want.Data, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Errorf("%s differs", want.Name)
		}
	}
	if !reflect.DeepEqual(f.Metadata(), map[string]string{"format": "pt"}) {
		t.Errorf("Metadata() = %v", f.Metadata())
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}

	// model.safetensors wins over the index, as in transformers.
	single := []safetensors.Tensor{{Name: "only", Shape: []int{1}, Data: []float32{3}}}
	if err := safetensors.Write(filepath.Join(dir, safetensors.SingleFileName), single, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	g, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if infos := g.Tensors(); len(infos) != 1 || infos[0].Name != "only" {
		t.Errorf("OpenDir with both layouts: tensors %v", infos)
	}
}

func TestShardedMalformed(t *testing.T) {
	index := func(dir string) string { return filepath.Join(dir, safetensors.IndexFileName) }
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"missing shard", func(t *testing.T, dir string) {
			writeSharded(t, dir)
			os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		}, []string{`shard "model-00002-of-00002.safetensors"`, "no such file"}},
		{"wrong shard", func(t *testing.T, dir string) {
			writeSharded(t, dir)
			writeIndex(t, dir, map[string]string{"a.bias": "model-00002-of-00002.safetensors"})
		}, []string{`tensor "a.bias"`, `weight_map puts the tensor in shard "model-00002-of-00002.safetensors"`}},
		{"tensor in two shards", func(t *testing.T, dir string) {
			writeSharded(t, dir)
			x := []safetensors.Tensor{{Name: "a.bias", Shape: []int{}, Data: []float32{1}}}
			safetensors.Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), x, nil, safetensors.F32)
		}, []string{`tensor "a.bias"`, "in two shards"}},
		{"bad shard", func(t *testing.T, dir string) {
			writeSharded(t, dir)
			os.WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), rawFile("{", nil), 0o644)
		}, []string{"model-00002-of-00002.safetensors: invalid JSON header"}},
		{"path in shard name", func(t *testing.T, dir string) {
			writeIndex(t, dir, map[string]string{"w": "../model.safetensors"})
		}, []string{`tensor "w"`, "is not a file name"}},
		{"no weight_map", func(t *testing.T, dir string) {
			os.WriteFile(index(dir), []byte(`{"metadata":{}}`), 0o644)
		}, []string{"no weight_map"}},
		{"empty weight_map", func(t *testing.T, dir string) {
			os.WriteFile(index(dir), []byte(`{"weight_map":{}}`), 0o644)
		}, []string{"weight_map is empty"}},
		{"weight_map value", func(t *testing.T, dir string) {
			os.WriteFile(index(dir), []byte(`{"weight_map":{"w":1}}`), 0o644)
		}, []string{`tensor "w"`, "must be a file name"}},
		{"duplicate in weight_map", func(t *testing.T, dir string) {
			os.WriteFile(index(dir), []byte(`{"weight_map":{"w":"a.safetensors","w":"b.safetensors"}}`), 0o644)
		}, []string{`tensor "w"`, "lists the tensor twice"}},
		{"invalid index", func(t *testing.T, dir string) {
			os.WriteFile(index(dir), []byte(`{"weight_map":`), 0o644)
		}, []string{"invalid index"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			f, err := safetensors.OpenDir(dir)
			if err == nil {
				f.Close()
				t.Fatal("OpenDir succeeded")
			}
			for _, want := range append([]string{"safetensors: "}, tc.want...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), index(dir)) && !strings.Contains(err.Error(), filepath.Join(dir, "model-0000")) {
				t.Errorf("error %q names neither the index nor a shard", err)
			}
		})
	}
	dir := t.TempDir()
	if _, err := safetensors.OpenDir(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("OpenDir(empty dir) error = %v", err)
	}
}

func FuzzOpen(f *testing.F) {
	valid := validFile()
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(valid[:20])
	f.Add(append(slices.Clone(valid), 1, 2, 3))
	f.Add(bytes.Replace(valid, []byte(`"BF16"`), []byte(`"F16" `), 1))
	f.Add(bytes.Replace(valid, []byte(`[8,16]`), []byte(`[4,16]`), 1))
	f.Add(bytes.Replace(valid, []byte(`[2,2]`), []byte(`[2,3]`), 1))
	f.Add(bytes.Replace(valid, []byte(`"b"`), []byte(`"a"`), 1))
	f.Add(bytes.Replace(valid, []byte(`"F32"`), []byte(`"I64"`), 1))
	f.Add(rawFile(`{"t":{"dtype":"F16","shape":[],"data_offsets":[0,2]}}      `, []byte{0, 0x7c}))
	f.Add(rawFile(`{"__metadata__":null}`, nil))
	huge := slices.Clone(valid)
	binary.LittleEndian.PutUint64(huge, math.MaxUint64)
	f.Add(huge)
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := safetensors.NewFile(bytes.NewReader(data), int64(len(data)), "fuzz.safetensors")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "safetensors: fuzz.safetensors: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, info := range file.Tensors() {
			b, err := file.Bytes(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(b)) != info.Offsets[1]-info.Offsets[0] || len(b) != info.NumElements()*info.DType.Size() {
				t.Fatalf("%s: %d bytes for %v", info.Name, len(b), info)
			}
			values, _, err := file.Float32(info.Name)
			if err == nil && len(values) != info.NumElements() {
				t.Fatalf("%s: %d values for %v", info.Name, len(values), info)
			}
		}
		file.Metadata()
	})
}
