package llama2c

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
)

// HeaderSize is the size in bytes of a llama2.c checkpoint header: seven
// little-endian int32 values.
const HeaderSize = 28

// RopeTheta is the rotary embedding base that run.c uses; it is not stored
// in the checkpoint. run.c rotates pair i of each head at position pos by
// the angle pos/RopeTheta^(2i/headDim), computed in float32.
const RopeTheta = 10000.0

// RMSNormEps is the epsilon that run.c adds inside every RMSNorm; it is not
// stored in the checkpoint.
const RMSNormEps = 1e-5

// Config holds the hyperparameters from a llama2.c checkpoint header.
type Config struct {
	Dim     int // model width (hidden_size)
	Hidden  int // feed-forward width (intermediate_size)
	Layers  int // number of transformer blocks
	Heads   int // number of query heads
	KVHeads int // number of key/value heads; divides Heads
	Vocab   int // vocabulary size, always positive here
	SeqLen  int // maximum sequence length

	// SharedClassifier reports whether the output classifier is tied to
	// the token embedding (a positive vocab_size in the header). When it
	// is false the checkpoint carries its own lm_head.weight.
	SharedClassifier bool
}

// HeadDim returns the per-head width, Dim/Heads.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// KVDim returns the width of the key and value projections,
// KVHeads*HeadDim.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim() }

// Tensor is a dense row-major float32 tensor.
type Tensor struct {
	Shape []int     // dimensions, outermost first
	Data  []float32 // len(Data) is the product of Shape
}

// Checkpoint is a llama2.c checkpoint converted to the Hugging Face Llama
// layout.
//
// Tensors is keyed by Hugging Face parameter name; every weight matrix has
// the PyTorch nn.Linear shape (out, in):
//
//	model.embed_tokens.weight                         (Vocab, Dim)
//	model.layers.{i}.input_layernorm.weight           (Dim)
//	model.layers.{i}.self_attn.q_proj.weight          (Heads*HeadDim, Dim), rows permuted
//	model.layers.{i}.self_attn.k_proj.weight          (KVHeads*HeadDim, Dim), rows permuted
//	model.layers.{i}.self_attn.v_proj.weight          (KVHeads*HeadDim, Dim)
//	model.layers.{i}.self_attn.o_proj.weight          (Dim, Heads*HeadDim)
//	model.layers.{i}.post_attention_layernorm.weight  (Dim)
//	model.layers.{i}.mlp.gate_proj.weight             (Hidden, Dim), llama2.c w1
//	model.layers.{i}.mlp.up_proj.weight               (Hidden, Dim), llama2.c w3
//	model.layers.{i}.mlp.down_proj.weight             (Dim, Hidden), llama2.c w2
//	model.norm.weight                                 (Dim)
//	lm_head.weight                                    (Vocab, Dim), only if !SharedClassifier
//
// The q_proj and k_proj rows are reordered by [PermuteForRotateHalf] so that
// rotate-half RoPE reproduces run.c's interleaved RoPE. When
// Config.SharedClassifier is true there is no lm_head.weight entry and the
// logits use model.embed_tokens.weight.
type Checkpoint struct {
	Config  Config
	Tensors map[string]Tensor
}

// Names returns the tensor names of c in a fixed order: the embedding,
// then each layer's tensors in the order listed in the [Checkpoint]
// documentation, then the final norm and, if present, the classifier.
func (c *Checkpoint) Names() []string {
	names := []string{"model.embed_tokens.weight"}
	for i := 0; i < c.Config.Layers; i++ {
		for _, s := range layerSuffixes {
			names = append(names, layerName(i, s))
		}
	}
	names = append(names, "model.norm.weight")
	if !c.Config.SharedClassifier {
		names = append(names, "lm_head.weight")
	}
	return names
}

var layerSuffixes = []string{
	"input_layernorm.weight",
	"self_attn.q_proj.weight",
	"self_attn.k_proj.weight",
	"self_attn.v_proj.weight",
	"self_attn.o_proj.weight",
	"post_attention_layernorm.weight",
	"mlp.gate_proj.weight",
	"mlp.up_proj.weight",
	"mlp.down_proj.weight",
}

func layerName(i int, suffix string) string {
	return fmt.Sprintf("model.layers.%d.%s", i, suffix)
}

// ReadCheckpoint reads the llama2.c checkpoint at path. The file size must
// be exactly the size implied by its header. Errors name the file.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("llama2c: %s: not a regular file", path)
	}
	ck, err := decodeCheckpoint(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("llama2c: %s: %w", path, err)
	}
	return ck, nil
}

// Parse decodes a llama2.c checkpoint held in memory. It validates the
// header and the size exactly as [ReadCheckpoint] does and never panics,
// whatever data holds. The returned tensors do not alias data.
func Parse(data []byte) (*Checkpoint, error) {
	ck, err := decodeCheckpoint(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	return ck, nil
}

// ParseConfig decodes and validates a checkpoint header, the first
// [HeaderSize] bytes of a checkpoint file, without checking the file size.
func ParseConfig(header []byte) (Config, error) {
	if len(header) < HeaderSize {
		return Config{}, fmt.Errorf("llama2c: header is %d bytes, want %d", len(header), HeaderSize)
	}
	c, err := parseHeader(header)
	if err != nil {
		return Config{}, fmt.Errorf("llama2c: %w", err)
	}
	return c, nil
}

// parseHeader decodes and validates the seven header fields.
func parseHeader(h []byte) (Config, error) {
	var v [7]int32
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(h[4*i:]))
	}
	names := [7]string{"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"}
	for i, x := range v {
		if i == 5 {
			if x == 0 || x == math.MinInt32 {
				return Config{}, fmt.Errorf("bad header: vocab_size is %d", x)
			}
			continue
		}
		if x <= 0 {
			return Config{}, fmt.Errorf("bad header: %s is %d, must be positive", names[i], x)
		}
	}
	c := Config{
		Dim:              int(v[0]),
		Hidden:           int(v[1]),
		Layers:           int(v[2]),
		Heads:            int(v[3]),
		KVHeads:          int(v[4]),
		Vocab:            int(v[5]),
		SeqLen:           int(v[6]),
		SharedClassifier: v[5] > 0,
	}
	if c.Vocab < 0 {
		c.Vocab = -c.Vocab
	}
	if c.Dim%c.Heads != 0 {
		return Config{}, fmt.Errorf("bad header: dim %d is not divisible by n_heads %d", c.Dim, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return Config{}, fmt.Errorf("bad header: n_heads %d is not a multiple of n_kv_heads %d", c.Heads, c.KVHeads)
	}
	if hd := c.HeadDim(); hd%2 != 0 {
		return Config{}, fmt.Errorf("bad header: head size %d (dim %d / n_heads %d) is odd; RoPE rotates pairs", hd, c.Dim, c.Heads)
	}
	return c, nil
}

// fields lists the header's values by name, for errors about the size
// they imply.
func (c Config) fields() string {
	vocab := c.Vocab
	if !c.SharedClassifier {
		vocab = -vocab
	}
	return fmt.Sprintf("dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d",
		c.Dim, c.Hidden, c.Layers, c.Heads, c.KVHeads, vocab, c.SeqLen)
}

// sizer adds up products of non-negative sizes, remembering overflow.
type sizer struct {
	n        uint64
	overflow bool
}

// add adds the product of factors to s.n.
func (s *sizer) add(factors ...uint64) {
	p := uint64(1)
	for _, f := range factors {
		hi, lo := bits.Mul64(p, f)
		if hi != 0 {
			s.overflow = true
			return
		}
		p = lo
	}
	sum, carry := bits.Add64(s.n, p, 0)
	if carry != 0 {
		s.overflow = true
	}
	s.n = sum
}

// impliedSize returns the file size in bytes that c implies, and the size
// the file would have if its vocab_size had the other sign. ok is false if
// the size does not fit in an int64.
func (c Config) impliedSize() (size, flipped uint64, ok bool) {
	D, F, L := uint64(c.Dim), uint64(c.Hidden), uint64(c.Layers)
	V, T := uint64(c.Vocab), uint64(c.SeqLen)
	hd := uint64(c.HeadDim())
	q, kv := uint64(c.Heads)*hd, uint64(c.KVHeads)*hd
	var s sizer
	s.add(V, D)       // token_embedding_table
	s.add(L, D)       // rms_att_weight
	s.add(L, q, D)    // wq
	s.add(L, kv, D)   // wk
	s.add(L, kv, D)   // wv
	s.add(L, D, q)    // wo
	s.add(L, D)       // rms_ffn_weight
	s.add(L, F, D)    // w1
	s.add(L, D, F)    // w2
	s.add(L, F, D)    // w3
	s.add(D)          // rms_final_weight
	s.add(2, T, hd/2) // freq_cis_real, freq_cis_imag
	withoutCls := s
	s.add(V, D) // wcls
	actual, other := withoutCls, s
	if !c.SharedClassifier {
		actual, other = s, withoutCls
	}
	var a, b sizer
	a.add(HeaderSize)
	a.add(4, actual.n)
	b.add(HeaderSize)
	b.add(4, other.n)
	if actual.overflow || a.overflow || a.n > math.MaxInt64 {
		return 0, 0, false
	}
	if other.overflow || b.overflow {
		b.n = 0
	}
	return a.n, b.n, true
}

// decodeCheckpoint reads a whole checkpoint of the given size from r. Its
// errors carry no "llama2c: file:" prefix.
func decodeCheckpoint(r io.Reader, size int64) (*Checkpoint, error) {
	if size < HeaderSize {
		return nil, fmt.Errorf("file is %d bytes, shorter than the %d-byte header", size, HeaderSize)
	}
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("reading header: %w", noEOF(err))
	}
	c, err := parseHeader(h[:])
	if err != nil {
		return nil, err
	}
	want, flipped, ok := c.impliedSize()
	if !ok {
		return nil, fmt.Errorf("file is %d bytes, header implies more than %d bytes (%s)", size, int64(math.MaxInt64), c.fields())
	}
	if uint64(size) != want {
		msg := fmt.Sprintf("file is %d bytes, header implies %d (%s)", size, want, c.fields())
		switch {
		case uint64(size) == flipped && c.SharedClassifier:
			msg += "; the extra bytes fit an unshared classifier, but vocab_size is positive (shared)"
		case uint64(size) == flipped:
			msg += "; vocab_size is negative (unshared classifier) but the file has no classifier"
		}
		return nil, errors.New(msg)
	}
	// Every tensor fits in the file, so its length fits in an int unless
	// the file is larger than the address space.
	if want > uint64(math.MaxInt) {
		return nil, fmt.Errorf("file is %d bytes, too large for this platform", size)
	}

	d := &decoder{r: r, buf: make([]byte, 256<<10)}
	hd := c.HeadDim()
	D, F, L := c.Dim, c.Hidden, c.Layers
	qRows, kvRows := c.Heads*hd, c.KVHeads*hd
	ck := &Checkpoint{Config: c, Tensors: make(map[string]Tensor, 2+9*L+1)}

	ck.Tensors["model.embed_tokens.weight"] = d.tensor("token_embedding_table", c.Vocab, D)
	perLayer := func(suffix, what string, rows, cols int, permuteHeads int) {
		for i := 0; i < L; i++ {
			t := d.tensor(what, rows, cols)
			if d.err == nil && permuteHeads > 0 {
				t.Data = PermuteForRotateHalf(t.Data, permuteHeads, hd, cols)
			}
			ck.Tensors[layerName(i, suffix)] = t
		}
	}
	perLayer("input_layernorm.weight", "rms_att_weight", D, 0, 0)
	perLayer("self_attn.q_proj.weight", "wq", qRows, D, c.Heads)
	perLayer("self_attn.k_proj.weight", "wk", kvRows, D, c.KVHeads)
	perLayer("self_attn.v_proj.weight", "wv", kvRows, D, 0)
	perLayer("self_attn.o_proj.weight", "wo", D, qRows, 0)
	perLayer("post_attention_layernorm.weight", "rms_ffn_weight", D, 0, 0)
	perLayer("mlp.gate_proj.weight", "w1", F, D, 0)
	perLayer("mlp.down_proj.weight", "w2", D, F, 0)
	perLayer("mlp.up_proj.weight", "w3", F, D, 0)
	ck.Tensors["model.norm.weight"] = d.tensor("rms_final_weight", D, 0)
	d.skip("freq_cis", 2*c.SeqLen*(hd/2))
	if !c.SharedClassifier {
		ck.Tensors["lm_head.weight"] = d.tensor("wcls", c.Vocab, D)
	}
	if d.err != nil {
		return nil, d.err
	}
	return ck, nil
}

// decoder reads consecutive float32 tensors, keeping the first error.
type decoder struct {
	r   io.Reader
	buf []byte
	err error
}

// tensor reads a (rows, cols) tensor, or a (rows) vector when cols is 0.
func (d *decoder) tensor(what string, rows, cols int) Tensor {
	shape := []int{rows, cols}
	n := rows * cols
	if cols == 0 {
		shape, n = []int{rows}, rows
	}
	if d.err != nil {
		return Tensor{Shape: shape}
	}
	data := make([]float32, n)
	for off := 0; off < n && d.err == nil; {
		k := min(n-off, len(d.buf)/4)
		b := d.buf[:4*k]
		if _, err := io.ReadFull(d.r, b); err != nil {
			d.err = fmt.Errorf("reading %s: %w", what, noEOF(err))
			break
		}
		for i := range k {
			data[off+i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		off += k
	}
	return Tensor{Shape: shape, Data: data}
}

// skip discards n float32 values.
func (d *decoder) skip(what string, n int) {
	if d.err != nil {
		return
	}
	if _, err := io.CopyN(io.Discard, d.r, 4*int64(n)); err != nil {
		d.err = fmt.Errorf("reading %s: %w", what, noEOF(err))
	}
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF: the size check has already
// promised more data.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
