package llama2c

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"rlvr/internal/shareddata"
)

// stories returns the path of a file of the stories260K fixture in the
// shared data folder (../shared/data beside the repository). When it is
// missing the test is skipped, or fails if CI=true.
func stories(t testing.TB, name string) string {
	t.Helper()
	return shareddata.Path(t, "stories260K/"+name)
}

// rawCheckpoint is a checkpoint in llama2.c's own layout, for building
// synthetic files and for the reference forward pass.
type rawCheckpoint struct {
	header [7]int32
	// Tensors in file order; per-layer tensors hold all layers.
	emb, rmsAtt, wq, wk, wv, wo, rmsFFN, w1, w2, w3, rmsFinal, freq, wcls []float32
}

// newRawCheckpoint fills a checkpoint with the given header with random
// values. vocab < 0 gives an unshared classifier.
func newRawCheckpoint(rng *rand.Rand, dim, hidden, layers, heads, kvHeads, vocab, seqLen int) *rawCheckpoint {
	hd := dim / heads
	v := vocab
	if v < 0 {
		v = -v
	}
	r := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64()) * 0.5
		}
		return out
	}
	c := &rawCheckpoint{
		header:   [7]int32{int32(dim), int32(hidden), int32(layers), int32(heads), int32(kvHeads), int32(vocab), int32(seqLen)},
		emb:      r(v * dim),
		rmsAtt:   r(layers * dim),
		wq:       r(layers * heads * hd * dim),
		wk:       r(layers * kvHeads * hd * dim),
		wv:       r(layers * kvHeads * hd * dim),
		wo:       r(layers * dim * heads * hd),
		rmsFFN:   r(layers * dim),
		w1:       r(layers * hidden * dim),
		w2:       r(layers * dim * hidden),
		w3:       r(layers * hidden * dim),
		rmsFinal: r(dim),
		freq:     r(seqLen * hd),
	}
	if vocab < 0 {
		c.wcls = r(v * dim)
	}
	return c
}

// bytes serialises c in llama2.c's format.
func (c *rawCheckpoint) bytes() []byte {
	var b []byte
	for _, v := range c.header {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	for _, t := range [][]float32{c.emb, c.rmsAtt, c.wq, c.wk, c.wv, c.wo, c.rmsFFN, c.w1, c.w2, c.w3, c.rmsFinal, c.freq, c.wcls} {
		for _, f := range t {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

// header builds a 28-byte checkpoint header.
func header(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// writeTemp writes data to a file in a temporary directory.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newRand returns a deterministic random source.
func newRand(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
}
