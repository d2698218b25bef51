package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/internal/gzjson"
	"rlvr/internal/realmodel"
	"rlvr/internal/shareddata"
)

// TestDequantizeBlocks decodes random blocks of all 13 types and requires
// the gguf Python package's float32 values bit for bit
// (python/gguf_dequant_ref.py --blocks).
func TestDequantizeBlocks(t *testing.T) {
	var ref struct {
		Cases []struct {
			Type      Type
			Name      string
			Raw, Want string
		}
	}
	gzjson.Read(t, "testdata/blocks.json.gz", &ref)
	seen := map[Type]bool{}
	for _, c := range ref.Cases {
		raw, _ := base64.StdEncoding.DecodeString(c.Raw)
		wantBytes, _ := base64.StdEncoding.DecodeString(c.Want)
		want := make([]float32, len(wantBytes)/4)
		for i := range want {
			want[i] = math.Float32frombits(binary.LittleEndian.Uint32(wantBytes[4*i:]))
		}
		got := make([]float32, len(want))
		if err := Dequantize(c.Type, raw, got); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if c.Type.String() != c.Name {
			t.Errorf("type %d is %s here, %s in gguf-py", c.Type, c.Type, c.Name)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("%s: value %d = %v (%#x), gguf-py %v (%#x)", c.Name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
		seen[c.Type] = true
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("%s has no reference blocks", typ)
		}
	}
}

// firstDiff returns the first index where a and b differ bit for bit, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestDequantizeRealModels dequantizes every tensor of both real models and
// requires the sha256 of gguf-py's float32 output for each
// (python/gguf_dequant_ref.py --models).
func TestDequantizeRealModels(t *testing.T) {
	for _, tc := range []struct{ name, model string }{{"smollm2", realmodel.SmolLM2}, {"gemma3", realmodel.Gemma3}} {
		t.Run(tc.name, func(t *testing.T) {
			path := realmodel.Path(t, tc.model)
			data, err := os.ReadFile(filepath.Join("testdata", tc.name+".dequant.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ref struct {
				Tensors []struct {
					Name, Type, Sha256 string
					Dims               []int
				}
			}
			if err := json.Unmarshal(data, &ref); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors) != len(ref.Tensors) {
				t.Fatalf("%d tensors, gguf-py %d", len(f.Tensors), len(ref.Tensors))
			}
			byType := map[string]int{}
			for _, r := range ref.Tensors {
				ti, ok := f.Tensor(r.Name)
				if !ok {
					t.Errorf("no tensor %q", r.Name)
					continue
				}
				// gguf-py lists dims fastest first, like GGML.
				if ti.Type.String() != r.Type || !slices.Equal(ti.Dims, r.Dims) {
					t.Errorf("%s: %s %v, gguf-py %s %v", r.Name, ti.Type, ti.Dims, r.Type, r.Dims)
					continue
				}
				out := make([]float32, ti.Elements())
				if err := f.Dequantize(r.Name, out); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 4*len(out))
				for i, v := range out {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
				sum := sha256.Sum256(buf)
				if hex.EncodeToString(sum[:]) != r.Sha256 {
					t.Errorf("%s (%s): dequantized values differ from gguf-py's", r.Name, r.Type)
					continue
				}
				byType[r.Type]++
			}
			t.Logf("%s: tensors bit-equal to gguf-py by type: %v", tc.name, byType)
		})
	}
}

// TestOllamaTinyRandom reads a GGUF v3 file written by another program
// (ollama's test data: a tiny random Llama in F16).
func TestOllamaTinyRandom(t *testing.T) {
	path := shareddata.Path(t, "ollama-llama2-tiny-random")
	matches, _ := filepath.Glob(filepath.Join(path, "*.gguf"))
	if len(matches) == 0 {
		t.Fatalf("no .gguf in %s", path)
	}
	f, err := Open(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.String("general.architecture") != "llama" || len(f.Tensors) == 0 {
		t.Fatalf("version %d, architecture %q, %d tensors", f.Version, f.String("general.architecture"), len(f.Tensors))
	}
	for _, ti := range f.Tensors {
		out := make([]float32, ti.Elements())
		if err := f.Dequantize(ti.Name, out); err != nil {
			t.Fatal(err)
		}
		for i, v := range out {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s[%d] = %v", ti.Name, i, v)
			}
		}
	}
}

// builder writes small GGUF files for tests.
type builder struct {
	bytes.Buffer
}

func (b *builder) u32(v uint32) { binary.Write(b, binary.LittleEndian, v) }
func (b *builder) u64(v uint64) { binary.Write(b, binary.LittleEndian, v) }
func (b *builder) str(s string) { b.u64(uint64(len(s))); b.WriteString(s) }

// tinyFile is a valid GGUF v3 file: a few metadata values of several kinds
// and one tensor per type given, each with two blocks of arbitrary data.
func tinyFile(typ ...Type) []byte {
	var b builder
	b.u32(magic)
	b.u32(3)
	b.u64(uint64(len(typ)))
	b.u64(4)
	b.str("general.architecture")
	b.u32(kindString)
	b.str("llama")
	b.str("llama.block_count")
	b.u32(kindUint32)
	b.u32(2)
	b.str("tokenizer.ggml.tokens")
	b.u32(kindArray)
	b.u32(kindString)
	b.u64(3)
	for _, s := range []string{"a", "b", "<0x0A>"} {
		b.str(s)
	}
	b.str("tokenizer.ggml.scores")
	b.u32(kindArray)
	b.u32(kindFloat32)
	b.u64(3)
	for _, v := range []float32{0, -1, -2} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	var off uint64
	sizes := make([]int, len(typ))
	for i, t := range typ {
		vals, bytes, _ := t.BlockSize()
		b.str("t" + t.String())
		b.u32(2)
		b.u64(uint64(vals))
		b.u64(2)
		b.u32(uint32(t))
		b.u64(off)
		sizes[i] = 2 * bytes
		off += uint64(2*bytes+31) / 32 * 32
	}
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	for i, n := range sizes {
		for j := range n {
			b.WriteByte(byte(j*7 + i))
		}
		for j := n; j%32 != 0; j++ {
			b.WriteByte(0)
		}
	}
	return b.Bytes()
}

func TestParseTinyFile(t *testing.T) {
	data := tinyFile(Types()...)
	f, err := Parse("tiny.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	if f.String("general.architecture") != "llama" || len(f.Tensors) != len(Types()) {
		t.Fatalf("%+v", f.Metadata)
	}
	if n, ok := f.Uint("llama.block_count"); !ok || n != 2 {
		t.Errorf("block_count %v %v", n, ok)
	}
	if toks, _ := f.Metadata["tokenizer.ggml.tokens"].([]string); !slices.Equal(toks, []string{"a", "b", "<0x0A>"}) {
		t.Errorf("tokens %v", f.Metadata["tokenizer.ggml.tokens"])
	}
	for _, ti := range f.Tensors {
		if got := ti.Shape(); !slices.Equal(got, []int{2, ti.Dims[0]}) {
			t.Errorf("%s: shape %v", ti.Name, got)
		}
		if err := f.Dequantize(ti.Name, make([]float32, ti.Elements())); err != nil {
			t.Error(err)
		}
	}
}

// TestBadFiles: each broken file is refused with an error naming the
// file and the key or tensor.
func TestBadFiles(t *testing.T) {
	good := tinyFile(Q8_0, Q4_K)
	// The offset of the first tensor's type field: found by its name.
	name := []byte("tQ8_0")
	at := bytes.Index(good, name) + len(name)
	typeAt := at + 4 + 8 + 8
	offsetAt := typeAt + 4
	set32 := func(i int, v uint32) []byte {
		b := slices.Clone(good)
		binary.LittleEndian.PutUint32(b[i:], v)
		return b
	}
	set64 := func(i int, v uint64) []byte {
		b := slices.Clone(good)
		binary.LittleEndian.PutUint64(b[i:], v)
		return b
	}
	tokensLen := bytes.Index(good, []byte("tokenizer.ggml.tokens")) + len("tokenizer.ggml.tokens") + 4 + 4
	// The second tensor's offset, moved into the first tensor's 68 bytes.
	secondOffsetAt := bytes.Index(good, []byte("tQ4_K")) + len("tQ4_K") + 4 + 8 + 8 + 4
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"not gguf", []byte("GGML0000000000000000000000"), "not a GGUF file"},
		{"version", set32(4, 9), "version 9"},
		{"truncated header", good[:30], "truncated"},
		{"truncated data", good[:len(good)-40], `tensor "tQ4_K"`},
		{"unknown type", set32(typeAt, 99), `tensor "tQ8_0" has unknown type 99`},
		{"offset past the end", set64(offsetAt, 1<<40), `tensor "tQ8_0"`},
		{"unaligned offset", set64(offsetAt, 3), "not aligned"},
		{"huge tensor count", set64(8, 1<<60), "tensor count"},
		{"huge metadata count", set64(16, 1<<60), "metadata count"},
		{"huge array", set64(tokensLen, 1<<61), "tokenizer.ggml.tokens"},
		{"overlapping tensors", set64(secondOffsetAt, 32), `tensor "tQ4_K": bytes [`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.gguf", tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.gguf") {
				t.Errorf("error %v, want one naming bad.gguf and %q", err, tc.want)
			}
		})
	}
}

// FuzzRead parses arbitrary bytes and dequantizes every tensor found: no
// input may panic or allocate beyond what it can back.
func FuzzRead(f *testing.F) {
	f.Add(tinyFile(Types()...))
	f.Add(tinyFile(Q4_0, Q6_K))
	f.Add(tinyFile())
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse("fuzz.gguf", data)
		if err != nil {
			return
		}
		for _, ti := range g.Tensors {
			if ti.Elements() > 1<<20 {
				continue
			}
			if err := g.Dequantize(ti.Name, make([]float32, ti.Elements())); err != nil {
				t.Fatalf("%s: %v", ti.Name, err)
			}
		}
		_, _ = g.HF()
	})
}

// TestHFConfigMatchesTransformers compares the config.json built from each
// real model's metadata with the one transformers builds from the same
// file (python/gguf_config_ref.py), field by field for every field rlvr
// writes that transformers also has.
func TestHFConfigMatchesTransformers(t *testing.T) {
	for _, tc := range []struct{ name, model string }{{"smollm2", realmodel.SmolLM2}, {"gemma3", realmodel.Gemma3}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(realmodel.Path(t, tc.model))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, err := f.HF()
			if err != nil {
				t.Fatal(err)
			}
			var ours, theirs map[string]any
			if err := json.Unmarshal(h.Config, &ours); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join("testdata", tc.name+".config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &theirs); err != nil {
				t.Fatal(err)
			}
			// transformers 5 nests rope_theta in rope_parameters (per layer
			// type for Gemma 3); rlvr writes the flat fields older
			// transformers and other readers take.
			if rp, ok := theirs["rope_parameters"].(map[string]any); ok {
				if full, ok := rp["full_attention"].(map[string]any); ok {
					theirs["rope_theta"] = full["rope_theta"]
					theirs["rope_local_base_freq"] = rp["sliding_attention"].(map[string]any)["rope_theta"]
				} else {
					theirs["rope_theta"] = rp["rope_theta"]
				}
			}
			compared := 0
			for k, v := range ours {
				want, ok := theirs[k]
				if !ok || k == "architectures" || k == "torch_dtype" {
					continue // transformers leaves them unset for a GGUF
				}
				if k == "rms_norm_eps" { // float32 metadata, widened differently
					if math.Abs(v.(float64)-want.(float64)) > 1e-12 {
						t.Errorf("%s = %v, transformers %v", k, v, want)
					}
				} else if fmt.Sprint(v) != fmt.Sprint(want) {
					t.Errorf("%s = %v, transformers %v", k, v, want)
				}
				compared++
			}
			t.Logf("%s: %d config fields equal to transformers'", tc.name, compared)
			if compared < 12 {
				t.Errorf("only %d fields compared", compared)
			}
		})
	}
}
