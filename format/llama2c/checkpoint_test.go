package llama2c

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestReadCheckpointStories(t *testing.T) {
	path := stories(t, "stories260K.bin")
	ck, err := ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Dim: 64, Hidden: 172, Layers: 5, Heads: 8, KVHeads: 4, Vocab: 512, SeqLen: 512, SharedClassifier: true}
	if ck.Config != want {
		t.Fatalf("config = %+v, want %+v", ck.Config, want)
	}
	if hd, kv := ck.Config.HeadDim(), ck.Config.KVDim(); hd != 8 || kv != 32 {
		t.Fatalf("HeadDim, KVDim = %d, %d, want 8, 32", hd, kv)
	}
	names := ck.Names()
	if len(names) != 1+9*5+1 || len(ck.Tensors) != len(names) {
		t.Fatalf("%d names, %d tensors, want 47", len(names), len(ck.Tensors))
	}
	if _, ok := ck.Tensors["lm_head.weight"]; ok {
		t.Fatal("lm_head.weight present for a shared classifier")
	}

	// Check every tensor against the file, located independently here.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstRaw(t, ck, data)
}

// checkAgainstRaw compares ck's tensors with the llama2.c layout of data.
func checkAgainstRaw(t *testing.T, ck *Checkpoint, data []byte) {
	t.Helper()
	c := ck.Config
	D, F, L, hd := c.Dim, c.Hidden, c.Layers, c.HeadDim()
	q, kv := c.Heads*hd, c.KVDim()
	off := HeaderSize / 4
	at := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])) }
	// next returns the file offset of a tensor of n values and moves on.
	next := func(n int) int { o := off; off += n; return o }
	type ref struct {
		name       string
		base, rows int
		cols       int
		heads      int // > 0: rows permuted per head
	}
	var refs []ref
	refs = append(refs, ref{"model.embed_tokens.weight", next(c.Vocab * D), c.Vocab, D, 0})
	layered := func(suffix string, rows, cols, heads int) {
		n := rows * max(cols, 1)
		for i := range L {
			refs = append(refs, ref{layerName(i, suffix), next(n), rows, cols, heads})
		}
	}
	layered("input_layernorm.weight", D, 0, 0)
	layered("self_attn.q_proj.weight", q, D, c.Heads)
	layered("self_attn.k_proj.weight", kv, D, c.KVHeads)
	layered("self_attn.v_proj.weight", kv, D, 0)
	layered("self_attn.o_proj.weight", D, q, 0)
	layered("post_attention_layernorm.weight", D, 0, 0)
	layered("mlp.gate_proj.weight", F, D, 0)
	layered("mlp.down_proj.weight", D, F, 0)
	layered("mlp.up_proj.weight", F, D, 0)
	refs = append(refs, ref{"model.norm.weight", next(D), D, 0, 0})
	next(c.SeqLen * hd)
	if !c.SharedClassifier {
		refs = append(refs, ref{"lm_head.weight", next(c.Vocab * D), c.Vocab, D, 0})
	}
	if 4*off != len(data) {
		t.Fatalf("test layout covers %d bytes, file has %d", 4*off, len(data))
	}
	if len(refs) != len(ck.Tensors) {
		t.Fatalf("%d tensors, want %d", len(ck.Tensors), len(refs))
	}
	for _, r := range refs {
		ten, ok := ck.Tensors[r.name]
		if !ok {
			t.Fatalf("missing %s", r.name)
		}
		cols := max(r.cols, 1)
		wantShape := []int{r.rows, r.cols}
		if r.cols == 0 {
			wantShape = []int{r.rows}
		}
		if len(ten.Shape) != len(wantShape) || ten.Shape[0] != wantShape[0] || ten.Shape[len(ten.Shape)-1] != wantShape[len(wantShape)-1] {
			t.Fatalf("%s: shape %v, want %v", r.name, ten.Shape, wantShape)
		}
		if len(ten.Data) != r.rows*cols {
			t.Fatalf("%s: %d values, want %d", r.name, len(ten.Data), r.rows*cols)
		}
		for row := range r.rows {
			src := row
			if r.heads > 0 {
				// Row j of head h holds interleaved row 2j (j < hd/2)
				// or 2(j-hd/2)+1.
				h, j := row/hd, row%hd
				if j < hd/2 {
					src = h*hd + 2*j
				} else {
					src = h*hd + 2*(j-hd/2) + 1
				}
			}
			for col := range cols {
				got, want := ten.Data[row*cols+col], at(r.base+src*cols+col)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s[%d,%d] = %v, want %v (file row %d)", r.name, row, col, got, want, src)
				}
			}
		}
	}
}

func TestParseSynthetic(t *testing.T) {
	for _, vocab := range []int{-11, 11} {
		raw := newRawCheckpoint(newRand(3), 12, 10, 3, 6, 2, vocab, 5)
		data := raw.bytes()
		ck, err := Parse(data)
		if err != nil {
			t.Fatalf("vocab %d: %v", vocab, err)
		}
		want := Config{Dim: 12, Hidden: 10, Layers: 3, Heads: 6, KVHeads: 2, Vocab: 11, SeqLen: 5, SharedClassifier: vocab > 0}
		if ck.Config != want {
			t.Fatalf("config = %+v, want %+v", ck.Config, want)
		}
		checkAgainstRaw(t, ck, data)
		if !want.SharedClassifier {
			got := ck.Tensors["lm_head.weight"].Data
			for i := range got {
				if got[i] != raw.wcls[i] {
					t.Fatalf("lm_head.weight[%d] = %v, want %v", i, got[i], raw.wcls[i])
				}
			}
		}
		cfg, err := ParseConfig(data[:HeaderSize])
		if err != nil || cfg != want {
			t.Fatalf("ParseConfig = %+v, %v", cfg, err)
		}
	}
}

func TestReadCheckpointCorrupt(t *testing.T) {
	// A file shaped like stories260K.bin: its header, zero weights.
	real := make([]byte, 1056540)
	copy(real, header(64, 172, 5, 8, 4, 512, 512))
	if _, err := Parse(real); err != nil {
		t.Fatalf("stories260K-shaped file: %v", err)
	}
	small := newRawCheckpoint(newRand(1), 8, 6, 1, 2, 1, 5, 3)
	unshared := newRawCheckpoint(newRand(1), 8, 6, 1, 2, 1, -5, 3)
	withHeader := func(h []byte) []byte { return append(h, small.bytes()[HeaderSize:]...) }
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", real[:1000], "file is 1000 bytes, header implies 1056540"},
		{"extra byte", append(real[:len(real):len(real)], 0), "file is 1056541 bytes, header implies 1056540"},
		{"missing last float", real[:len(real)-4], "file is 1056536 bytes, header implies 1056540"},
		{"empty", nil, "file is 0 bytes, shorter than the 28-byte header"},
		{"short header", real[:27], "file is 27 bytes, shorter than the 28-byte header"},
		{"zero dim", withHeader(header(0, 6, 1, 2, 1, 5, 3)), "dim is 0, must be positive"},
		{"negative hidden", withHeader(header(8, -6, 1, 2, 1, 5, 3)), "hidden_dim is -6, must be positive"},
		{"zero layers", withHeader(header(8, 6, 0, 2, 1, 5, 3)), "n_layers is 0, must be positive"},
		{"zero heads", withHeader(header(8, 6, 1, 0, 1, 5, 3)), "n_heads is 0, must be positive"},
		{"negative kv heads", withHeader(header(8, 6, 1, 2, -1, 5, 3)), "n_kv_heads is -1, must be positive"},
		{"zero vocab", withHeader(header(8, 6, 1, 2, 1, 0, 3)), "vocab_size is 0"},
		{"min vocab", withHeader(header(8, 6, 1, 2, 1, math.MinInt32, 3)), "vocab_size is -2147483648"},
		{"zero seq", withHeader(header(8, 6, 1, 2, 1, 5, 0)), "seq_len is 0, must be positive"},
		{"heads not dividing dim", withHeader(header(8, 6, 1, 3, 1, 5, 3)), "dim 8 is not divisible by n_heads 3"},
		{"kv heads not dividing heads", withHeader(header(8, 6, 1, 2, 3, 5, 3)), "n_heads 2 is not a multiple of n_kv_heads 3"},
		{"kv heads above heads", withHeader(header(8, 6, 1, 2, 4, 5, 3)), "n_heads 2 is not a multiple of n_kv_heads 4"},
		{"odd head size", withHeader(header(9, 6, 1, 3, 1, 5, 3)), "head size 3 (dim 9 / n_heads 3) is odd"},
		{"huge", header(1<<30, math.MaxInt32, math.MaxInt32, 2, 1, math.MaxInt32, math.MaxInt32), "header implies more than"},
		{"shared with classifier", append(small.bytes(), unshared.wcls2bytes()...), "the extra bytes fit an unshared classifier, but vocab_size is positive"},
		{"unshared without classifier", unshared.bytes()[:len(small.bytes())], "vocab_size is negative (unshared classifier) but the file has no classifier"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, "stories260K.bin", tc.data)
			_, err := ReadCheckpoint(path)
			if err == nil {
				t.Fatal("no error")
			}
			if want := "llama2c: " + path + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			_, perr := Parse(tc.data)
			if perr == nil || perr.Error() != "llama2c: "+strings.TrimPrefix(err.Error(), "llama2c: "+path+": ") {
				t.Errorf("Parse error %q does not match ReadCheckpoint's %q", perr, err)
			}
		})
	}
}

// wcls2bytes returns the classifier as file bytes.
func (c *rawCheckpoint) wcls2bytes() []byte {
	var b []byte
	for _, f := range c.wcls {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func TestReadCheckpointNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.bin")
	_, err := ReadCheckpoint(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "llama2c: ") {
		t.Fatalf("error %v does not name %s", err, path)
	}
	dir := t.TempDir()
	if _, err := ReadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("directory: error %v does not name %s", err, dir)
	}
}

func TestParseConfigErrors(t *testing.T) {
	if _, err := ParseConfig(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "header is 10 bytes") {
		t.Errorf("short header: %v", err)
	}
	if _, err := ParseConfig(header(8, 6, 1, 3, 1, 5, 3)); err == nil || !strings.Contains(err.Error(), "not divisible") {
		t.Errorf("bad header: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	small := newRawCheckpoint(newRand(1), 8, 6, 1, 2, 1, 5, 3).bytes()
	unshared := newRawCheckpoint(newRand(2), 8, 4, 2, 4, 2, -3, 2).bytes()
	f.Add(small)
	f.Add(unshared)
	f.Add(small[:HeaderSize])
	f.Add(small[:len(small)-1])
	f.Add(header(1<<30, math.MaxInt32, math.MaxInt32, 2, 1, math.MaxInt32, math.MaxInt32))
	f.Add(header(2, 1, 1, 1, 1, -1, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		ck, err := Parse(data)
		if err != nil {
			if ck != nil {
				t.Fatal("checkpoint returned with an error")
			}
			return
		}
		// A successful parse accounts for every byte of the input.
		c := ck.Config
		n := HeaderSize/4 + c.SeqLen*c.HeadDim()
		for _, name := range ck.Names() {
			ten, ok := ck.Tensors[name]
			if !ok {
				t.Fatalf("missing %s", name)
			}
			size := 1
			for _, s := range ten.Shape {
				size *= s
			}
			if size != len(ten.Data) {
				t.Fatalf("%s: shape %v but %d values", name, ten.Shape, len(ten.Data))
			}
			n += size
		}
		if 4*n != len(data) {
			t.Fatalf("tensors cover %d bytes of %d", 4*n, len(data))
		}
	})
}

// TestHeaderClaimingMoreThanTheFile gives a stories260K-sized file headers
// that claim larger models: each is refused from the header and the file
// size alone, naming the header's fields, before any tensor is allocated.
func TestHeaderClaimingMoreThanTheFile(t *testing.T) {
	const size = 1056540 // stories260K.bin
	for _, tc := range []struct {
		name string
		h    []byte
		want string
	}{
		{"wide, large vocabulary", header(4096, 11008, 5, 32, 32, 1<<20, 512), "vocab_size 1048576"},
		{"many layers", header(64, 172, 1<<20, 8, 4, 512, 512), "n_layers 1048576"},
		{"long context", header(64, 172, 5, 8, 4, 512, math.MaxInt32), "seq_len 2147483647"},
		{"unshared classifier", header(64, 172, 5, 8, 4, -(1 << 24), 512), "vocab_size -16777216"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]byte, size)
			copy(data, tc.h)
			path := writeTemp(t, "model.bin", data)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ck, err := ReadCheckpoint(path)
			runtime.ReadMemStats(&after)
			if err == nil || ck != nil {
				t.Fatal("no error")
			}
			for _, w := range []string{path, "file is 1056540 bytes, header implies", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("ReadCheckpoint allocated %d bytes before failing", n)
			}
		})
	}
}
