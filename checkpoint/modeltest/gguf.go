package modeltest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// GGUFKV is one metadata entry of a GGUF file. Value is a string, uint32,
// float32, bool, []string, []float32 or []int32.
type GGUFKV struct {
	Key   string
	Value any
}

// GGUFTensor is one F32 tensor of a GGUF file. Dims are GGML's, fastest
// varying first: the reverse of the Hugging Face shape.
type GGUFTensor struct {
	Name string
	Dims []int
	Data []float32
}

// ggufAlignment is the data alignment WriteGGUF uses, GGUF's default.
const ggufAlignment = 32

// WriteGGUF writes a GGUF v3 file of meta and tensors to path, each
// tensor's data aligned as llama.cpp aligns it.
func WriteGGUF(t testing.TB, path string, meta []GGUFKV, tensors []GGUFTensor) {
	t.Helper()
	var b bytes.Buffer
	put := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { put(uint64(len(s))); b.WriteString(s) }
	// GGUF's metadata value types.
	const kindUint32, kindInt32, kindFloat32, kindBool, kindString, kindArray = 4, 5, 6, 7, 8, 9
	put(uint32(0x46554747)) // "GGUF"
	put(uint32(3))
	put(uint64(len(tensors)))
	put(uint64(len(meta)))
	for _, kv := range meta {
		str(kv.Key)
		switch v := kv.Value.(type) {
		case string:
			put(uint32(kindString))
			str(v)
		case uint32:
			put(uint32(kindUint32))
			put(v)
		case float32:
			put(uint32(kindFloat32))
			put(v)
		case bool:
			put(uint32(kindBool))
			put(v)
		case []string:
			put(uint32(kindArray))
			put(uint32(kindString))
			put(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []float32:
			put(uint32(kindArray))
			put(uint32(kindFloat32))
			put(uint64(len(v)))
			put(v)
		case []int32:
			put(uint32(kindArray))
			put(uint32(kindInt32))
			put(uint64(len(v)))
			put(v)
		default:
			t.Fatalf("modeltest: GGUF metadata %s: %T is not written", kv.Key, kv.Value)
		}
	}
	var off uint64
	for _, ts := range tensors {
		str(ts.Name)
		put(uint32(len(ts.Dims)))
		n := 1
		for _, d := range ts.Dims {
			put(uint64(d))
			n *= d
		}
		if n != len(ts.Data) {
			t.Fatalf("modeltest: GGUF tensor %s: dims %v hold %d values, not %d", ts.Name, ts.Dims, n, len(ts.Data))
		}
		put(uint32(0)) // F32
		put(off)
		off += alignUp(uint64(4 * n))
	}
	pad := func() {
		for b.Len()%ggufAlignment != 0 {
			b.WriteByte(0)
		}
	}
	pad()
	for _, ts := range tensors {
		put(ts.Data)
		pad()
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func alignUp(n uint64) uint64 { return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment }

// TinyLlamaGGUF returns the metadata and tensors of a small random model
// of the llama architecture, as llama.cpp's converter lays it out: layers
// blocks of width 16, a SentencePiece vocabulary of <unk>, <s>, </s> and
// the 256 byte tokens, and tied embeddings (no output.weight). Tests edit
// them before WriteGGUF.
func TinyLlamaGGUF(layers int) ([]GGUFKV, []GGUFTensor) {
	const dim, hidden, heads, kvHeads = 16, 32, 2, 1
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3} // unknown, control, control
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6) // byte
	}
	scores := make([]float32, len(tokens))
	meta := []GGUFKV{
		{"general.architecture", "llama"},
		{"llama.block_count", uint32(layers)},
		{"llama.context_length", uint32(64)},
		{"llama.embedding_length", uint32(dim)},
		{"llama.feed_forward_length", uint32(hidden)},
		{"llama.attention.head_count", uint32(heads)},
		{"llama.attention.head_count_kv", uint32(kvHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.freq_base", float32(10000)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tensor := func(name string, dims ...int) GGUFTensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(rng.NormFloat64()) * 0.1
		}
		if len(dims) == 1 { // a norm's weight
			for i := range data {
				data[i] = 1 + data[i]
			}
		}
		return GGUFTensor{Name: name, Dims: dims, Data: data}
	}
	headDim := dim / heads
	ts := []GGUFTensor{tensor("token_embd.weight", dim, len(tokens))}
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor(p+"attn_norm.weight", dim),
			tensor(p+"attn_q.weight", dim, heads*headDim),
			tensor(p+"attn_k.weight", dim, kvHeads*headDim),
			tensor(p+"attn_v.weight", dim, kvHeads*headDim),
			tensor(p+"attn_output.weight", heads*headDim, dim),
			tensor(p+"ffn_norm.weight", dim),
			tensor(p+"ffn_gate.weight", dim, hidden),
			tensor(p+"ffn_up.weight", dim, hidden),
			tensor(p+"ffn_down.weight", hidden, dim),
		)
	}
	ts = append(ts, tensor("output_norm.weight", dim))
	return meta, ts
}
