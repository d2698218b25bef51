package gguf_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/checkpoint/modeltest"
	"rlvr/format/gguf"
)

// TestHFAccountsForEveryTensor edits a small llama-architecture file: a
// layer beyond block_count, a layer tensor missing below it, a tensor
// with no Hugging Face name and rotary frequency factors other than 1 are
// each an error naming the tensor and the file; factors of 1 are left
// unread.
func TestHFAccountsForEveryTensor(t *testing.T) {
	setBlocks := func(n uint32) func([]modeltest.GGUFKV, []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor) {
		return func(meta []modeltest.GGUFKV, ts []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor) {
			for i := range meta {
				if meta[i].Key == "llama.block_count" {
					meta[i].Value = n
				}
			}
			return meta, ts
		}
	}
	without := func(name string) func([]modeltest.GGUFKV, []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor) {
		return func(meta []modeltest.GGUFKV, ts []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor) {
			return meta, slices.DeleteFunc(ts, func(t modeltest.GGUFTensor) bool { return t.Name == name })
		}
	}
	with := func(name string, data ...float32) func([]modeltest.GGUFKV, []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor) {
		return func(meta []modeltest.GGUFKV, ts []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor) {
			return meta, append(ts, modeltest.GGUFTensor{Name: name, Dims: []int{len(data)}, Data: data})
		}
	}
	for _, tc := range []struct {
		name string
		edit func([]modeltest.GGUFKV, []modeltest.GGUFTensor) ([]modeltest.GGUFKV, []modeltest.GGUFTensor)
		want string // in the error; "": it maps
	}{
		{"as written", nil, ""},
		{"a layer beyond block_count", setBlocks(1), `tensor "blk.1.attn_norm.weight" is of layer 1, beyond llama.block_count 1`},
		{"block_count beyond the layers", setBlocks(3), `tensor "blk.2.attn_k.weight" is missing (llama.block_count 3)`},
		{"a layer tensor missing", without("blk.0.ffn_up.weight"), `tensor "blk.0.ffn_up.weight" is missing`},
		{"the final norm missing", without("output_norm.weight"), `tensor "output_norm.weight" is missing`},
		{"a tensor with no name", with("mm.proj.weight", 1, 2), `tensor "mm.proj.weight" has no Hugging Face name`},
		{"a layer number not in canonical form", with("blk.01.attn_norm.weight", 1, 2), `tensor "blk.01.attn_norm.weight" has no Hugging Face name`},
		{"unit rotary factors", with("rope_freqs.weight", 1, 1, 1, 1), ""},
		{"scaled rotary factors", with("rope_freqs.weight", 1, 1, 4, 8), `tensor "rope_freqs.weight" scales rotary frequency 2 by 4`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta, ts := modeltest.TinyLlamaGGUF(2)
			if tc.edit != nil {
				meta, ts = tc.edit(meta, ts)
			}
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			modeltest.WriteGGUF(t, path, meta, ts)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, err := f.HF()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n := 2 + 2*9; len(h.Tensors) != n {
					t.Errorf("%d tensors mapped, want %d", len(h.Tensors), n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and saying %q", err, path, tc.want)
			}
		})
	}
}

// FuzzHF maps arbitrary files, seeded with small llama-architecture ones:
// no input panics; what parses has no two tensors sharing a byte, and what
// maps reads every tensor of the file but the unit rotary factors.
func FuzzHF(f *testing.F) {
	for _, layers := range []int{1, 2} {
		meta, ts := modeltest.TinyLlamaGGUF(layers)
		for _, extra := range [][]modeltest.GGUFTensor{nil, {{Name: "rope_freqs.weight", Dims: []int{4}, Data: []float32{1, 1, 1, 1}}}} {
			path := filepath.Join(f.TempDir(), "seed.gguf")
			modeltest.WriteGGUF(f, path, meta, append(slices.Clone(ts), extra...))
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := gguf.Parse("fuzz.gguf", data)
		if err != nil {
			return
		}
		for i, a := range g.Tensors {
			for _, b := range g.Tensors[i+1:] {
				if a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size {
					t.Fatalf("tensors %q and %q share bytes", a.Name, b.Name)
				}
			}
		}
		h, err := g.HF()
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.gguf") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		read := map[string]bool{}
		for _, ht := range h.Tensors {
			read[ht.Source] = true
		}
		for _, ti := range g.Tensors {
			if !read[ti.Name] && ti.Name != "rope_freqs.weight" {
				t.Fatalf("tensor %q is mapped to no Hugging Face tensor", ti.Name)
			}
		}
	})
}
