package model

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"rlvr/engine/gemm"
	"rlvr/engine/nn"
	"rlvr/engine/parallel"
)

// Model is a decoder with its parameters, gradients and the activations its
// last forward pass saved for the backward.
type Model struct {
	Config Config
	// Params and Grads are the slabs; Tensors names their views (the same
	// offsets in both). Grads is nil until the first ForwardBackward (or
	// Gradients): a model that only samples never holds it.
	Params, Grads []float32
	Tensors       []Tensor

	// Profile, when set, accumulates time per op.
	Profile *Profile

	// Recompute, when set, trades compute for memory in ForwardBackward:
	// the forward keeps each block's input (the residual stream) and one
	// block's activations instead of every block's, and the backward re-runs
	// each block's forward, but for its down projection, just before that
	// block's backward. A step then does one more forward of the blocks
	// less their down projections (a fifth to a third more work, the more
	// attention weighs), and its activations shrink by a factor near the
	// number of layers: at sequence length T a block saves H·T² attention
	// probabilities per sequence and 4·F+3·D+Q+H·hd floats per token. The
	// gradients, loss and logprobs are bit-identical either way; the
	// recomputed forward counts as forward time in a Profile.
	Recompute bool

	// Precision is the arithmetic of the matrix products in the forward,
	// the backward and the sampler; the zero value is FP32. It splits the
	// work as PyTorch's autocast does: with BF16 every linear layer's
	// product (the q/k/v, o, gate/up and down projections and the output
	// head), forward and backward (the input's and the weight's
	// gradients), rounds its inputs to bfloat16 and accumulates in
	// float32. The weights stay float32 (the master copy AdamW updates);
	// norms, softmax, RoPE, attention, the loss and logprobs stay float32.
	// docs/precision.md says where this differs from autocast.
	// Where no bf16 kernel exists (gemm.BF16KernelOK), BF16 runs in float32
	// after a one-line notice; EffectivePrecision says which runs. It is
	// read at each forward and by Cache.Pack, so it may change between
	// calls.
	Precision Precision
	// prec is Precision as the current forward runs it (Effective); bw
	// is nil in FP32 and the weights' bf16 copy in BF16, rounded at the
	// start of each forward (bf holds it between forwards).
	prec Precision
	bw   *gemm.BF16Weights
	bf   *gemm.BF16Weights

	w, g weights // views of Params and Grads
	// frozen, once Freeze ran, is the packed copy every cache uses, and
	// kept the slab of the float32 weights the model still reads (w's
	// views of it); Params and Grads are nil then.
	frozen *packedWeights
	kept   []float32
	// rotary tables (MaxSeq, hd/2) of the global layers and, when there
	// are local ones, of theirs
	cos, sin           []float32
	cosLocal, sinLocal []float32
	act                activations
}

// New returns a model with freshly initialized weights (deterministic for a
// seed) and zero gradients.
func New(cfg Config, seed uint64) (*Model, error) {
	m, err := NewEmpty(cfg)
	if err != nil {
		return nil, err
	}
	initParams(m.Config, m.Tensors, m.Params, seed)
	return m, nil
}

// NewEmpty returns a model whose parameters are all zero, to be filled from
// a checkpoint.
func NewEmpty(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	ts, n := layout(cfg)
	m := &Model{Config: cfg, Params: make([]float32, n), Tensors: ts}
	m.w = views(cfg, ts, m.Params)
	m.cos, m.sin = ropeTables(cfg, false)
	if slices.Contains(cfg.LocalLayers, true) {
		m.cosLocal, m.sinLocal = ropeTables(cfg, true)
	}
	return m, nil
}

// rope returns layer l's rotary tables.
func (m *Model) rope(l int) (cos, sin []float32) {
	if m.Config.Local(l) {
		return m.cosLocal, m.sinLocal
	}
	return m.cos, m.sin
}

// Tensor returns the parameter view and descriptor named name (a Hugging
// Face tensor name). A frozen model has no parameter slab: it finds none.
func (m *Model) Tensor(name string) ([]float32, Tensor, bool) {
	if m.frozen != nil {
		return nil, Tensor{}, false
	}
	for _, t := range m.Tensors {
		if t.Name == name {
			return m.Params[t.Offset : t.Offset+t.Len()], t, true
		}
	}
	return nil, Tensor{}, false
}

// NumParams is the number of parameters (of the architecture: a frozen
// model's too).
func (m *Model) NumParams() int {
	t := m.Tensors[len(m.Tensors)-1]
	return t.Offset + t.Len()
}

// ZeroGrad clears the accumulated gradients.
func (m *Model) ZeroGrad() { clear(m.Grads) }

// Gradients returns the gradient slab, allocating it (zero) on first use.
// A frozen model has none: it panics with ErrFrozen.
func (m *Model) Gradients() []float32 {
	if err := m.learnable("gradients"); err != nil {
		panic(err)
	}
	if m.Grads == nil {
		m.Grads = make([]float32, len(m.Params))
		m.g = views(m.Config, m.Tensors, m.Grads)
	}
	return m.Grads
}

// Batch is a packed batch: sequence s is Tokens[Offsets[s]:Offsets[s+1]].
//
// A sequence may continue another, its parent: its tokens then come after
// all of the parent's, in positions and in attention, as if the parent's
// tokens were copied in front of it. A group of answers to one prompt
// packs the prompt once as the parent of every answer, and the forward and
// backward run over the prompt once instead of once per answer. Parents
// (nil, or one entry per sequence: −1, or the parent's index) must name a
// sequence that continues none, with every sequence between the two
// continuing the same parent.
type Batch struct {
	Tokens  []int32 // (N)
	Offsets []int   // (S+1), starting at 0 and ending at N
	Parents []int   // (S) or nil
}

// parentLen is the length of sequence s's parent, 0 when it has none.
func (b Batch) parentLen(s int) int { return nn.ParentLen(b.Offsets, b.Parents, s) }

// Pack concatenates sequences into a Batch.
func Pack(seqs [][]int32) Batch {
	b := Batch{Offsets: make([]int, 1, len(seqs)+1)}
	for _, s := range seqs {
		b.Tokens = append(b.Tokens, s...)
		b.Offsets = append(b.Offsets, len(b.Tokens))
	}
	return b
}

// PackPadded packs a right-padded rectangular batch, as Hugging Face
// tensors come: rows × cols tokens, of which row r's first lengths[r] are
// real. Rows of length 0 are dropped; what lies past a row's length is
// never read.
func PackPadded(tokens []int32, rows, cols int, lengths []int) (Batch, error) {
	if len(tokens) != rows*cols || len(lengths) != rows {
		return Batch{}, fmt.Errorf("padded batch: %d tokens and %d lengths for %d×%d", len(tokens), len(lengths), rows, cols)
	}
	b := Batch{Offsets: []int{0}}
	for r, n := range lengths {
		if n < 0 || n > cols {
			return Batch{}, fmt.Errorf("padded batch: row %d has length %d outside [0, %d]", r, n, cols)
		}
		if n > 0 {
			b.Tokens = append(b.Tokens, tokens[r*cols:r*cols+n]...)
			b.Offsets = append(b.Offsets, len(b.Tokens))
		}
	}
	return b, nil
}

// Validate checks offsets and token ids against the model, naming the
// sequence and position of the first bad one.
func (m *Model) Validate(b Batch) error {
	if len(b.Offsets) < 2 || b.Offsets[0] != 0 || b.Offsets[len(b.Offsets)-1] != len(b.Tokens) {
		return fmt.Errorf("batch: offsets %v do not cover %d tokens", short(b.Offsets), len(b.Tokens))
	}
	S := len(b.Offsets) - 1
	if b.Parents != nil && len(b.Parents) != S {
		return fmt.Errorf("batch: %d parents for %d sequences", len(b.Parents), S)
	}
	for s := range S {
		T := b.Offsets[s+1] - b.Offsets[s]
		if T <= 0 {
			return fmt.Errorf("batch: sequence %d is empty or offsets decrease", s)
		}
		if b.Parents != nil {
			if p := b.Parents[s]; p >= s || p < -1 || p >= 0 && b.Parents[p] != -1 || p >= 0 && s > p+1 && b.Parents[s-1] != p {
				return fmt.Errorf("batch: sequence %d has parent %d: a parent comes before its continuations, continues none, and its continuations follow it", s, p)
			}
		}
		if T += b.parentLen(s); T > m.Config.MaxSeq {
			return fmt.Errorf("batch: sequence %d has %d tokens with its parent's, more than max_seq %d", s, T, m.Config.MaxSeq)
		}
		for i, t := range b.Tokens[b.Offsets[s]:b.Offsets[s+1]] {
			if t < 0 || int(t) >= m.Config.Vocab {
				return &PositionError{"batch", s, i, fmt.Sprintf("token %d outside the vocabulary [0, %d)", t, m.Config.Vocab)}
			}
		}
	}
	return nil
}

func short(v []int) string {
	if len(v) > 8 {
		return fmt.Sprintf("%v…", v[:8])
	}
	return fmt.Sprint(v)
}

// activations are the forward pass's saved tensors and the backward's
// scratch, sized for the largest batch seen so far: they grow, never
// shrink, so a steady training loop allocates nothing.
//
// layers holds every block's saved tensors (L of them), or with
// Model.Recompute the one block's the forward and backward share.
type activations struct {
	N, S, probs int // capacity: tokens, sequences, attention probabilities

	pos     []int32   // (N) position of each token in its sequence
	resid   []float32 // (L+1, N, D) residual stream entering each layer, and the last
	layers  []layerActs
	normed  []float32 // (N, D) final norm output
	rstd    []float32 // (N) final norm's saved reciprocal RMS
	dresid  []float32 // (N, D) gradient of the residual stream
	dh      []float32 // (N, D) gradient of a norm's output
	dqkv    []float32 // (N, Q)
	dqkvRaw []float32 // (N, Q) gradient before the q/k norms (Qwen3)
	dattn   []float32 // (N, H·hd)
	dgu     []float32 // (N, 2F)
	dact    []float32 // (N, F)
	scratch []float32 // attention backward, per thread

	logits     []float32    // (chunk, V) the loss head's logits, then their gradient
	expScratch []float32    // (threads, V) exp(z − max) of a row being scored
	dnormed    []float32    // (N, D) gradient at the final norm's output
	headRows   []int        // (chunk) the positions of a chunk with a gradient
	headIn     []float32    // (chunk, D) their final-norm outputs
	headOut    []float32    // (chunk, D) their dnormed
	stats      []tokenStats // (N) per-position loss results
}

// layerActs is what one block's forward saves.
type layerActs struct {
	h1, rstd1 []float32 // (N, D), (N): attention norm output and rstd
	qkvRaw    []float32 // (N, Q) projections before the q/k norms (QKNorm only)
	qkRstd    []float32 // (N, H) then (N, KV): the q/k norms' rstd (QKNorm only)
	qkv       []float32 // (N, Q) queries and keys after RoPE, values
	probs     []float32 // (Σ H·T²) attention probabilities
	attn      []float32 // (N, H·hd) attention output before o_proj
	ao, rstdA []float32 // (N, D), (N): o_proj's output and its norm's rstd (Gemma 3 only)
	mid       []float32 // (N, D) residual after attention
	h2, rstd2 []float32 // (N, D), (N): MLP norm output and rstd
	gu        []float32 // (N, 2F) gate and up projections
	sig       []float32 // (N, F) σ(gate) (SwiGLU), or σ(2β·(g + κ·g³)) (GeGLU)
	act       []float32 // (N, F) silu(gate)·up or gelu_tanh(gate)·up
	mo, rstdM []float32 // (N, D), (N): down_proj's output and its norm's rstd (Gemma 3 only)
}

// qkvWidth is Q, the width of the fused q/k/v projection.
func (c Config) qkvWidth() int { return (c.Heads + 2*c.KVHeads) * c.HeadDim }

// ensure sizes the activations for batch b: every block's, or with
// m.Recompute the one block's the forward and backward share.
func (m *Model) ensure(b Batch) {
	c, a := m.Config, &m.act
	N, S := len(b.Tokens), len(b.Offsets)-1
	probs := nn.AttentionProbsSize(b.Offsets, b.Parents, c.Heads)
	blocks := c.Layers
	if m.Recompute {
		blocks = 1
	}
	if need := parallel.Threads() * nn.AttentionScratch(b.Offsets, b.Parents); len(a.scratch) < need {
		a.scratch = make([]float32, need)
	}
	if N <= a.N && probs <= a.probs && S <= a.S {
		if len(a.layers) > blocks {
			a.layers = []layerActs{a.layers[0]} // lets the others go
		}
		for len(a.layers) < blocks {
			a.layers = append(a.layers, newLayerActs(c, a.N, a.probs))
		}
		return
	}
	N, probs, S = max(N, a.N), max(probs, a.probs), max(S, a.S)
	D, Q, F, Hd := c.Dim, c.qkvWidth(), c.Hidden, c.Heads*c.HeadDim
	f := func(n int) []float32 { return make([]float32, n) }
	scratch := a.scratch
	*a = activations{} // lets the old buffers go before the new ones are made
	*a = activations{N: N, S: S, probs: probs,
		pos: make([]int32, N), resid: f((c.Layers + 1) * N * D), normed: f(N * D), rstd: f(N),
		dresid: f(N * D), dh: f(N * D), dqkv: f(N * Q), dattn: f(N * Hd), dgu: f(N * 2 * F), dact: f(N * F),
		scratch: scratch,
	}
	if c.QKNorm {
		a.dqkvRaw = f(N * Q)
	}
	a.layers = make([]layerActs, blocks)
	for l := range a.layers {
		a.layers[l] = newLayerActs(c, N, probs)
	}
}

// newLayerActs allocates one block's activations for N tokens and probs
// attention probabilities.
func newLayerActs(c Config, N, probs int) layerActs {
	D, Q, F, Hd := c.Dim, c.qkvWidth(), c.Hidden, c.Heads*c.HeadDim
	f := func(n int) []float32 { return make([]float32, n) }
	la := layerActs{h1: f(N * D), rstd1: f(N), qkv: f(N * Q), probs: f(probs), attn: f(N * Hd),
		mid: f(N * D), h2: f(N * D), rstd2: f(N), gu: f(N * 2 * F), sig: f(N * F), act: f(N * F)}
	if c.QKNorm {
		la.qkvRaw, la.qkRstd = f(N*Q), f(N*(c.Heads+c.KVHeads))
	}
	if c.Gemma3 {
		la.ao, la.rstdA, la.mo, la.rstdM = f(N*D), f(N), f(N*D), f(N)
	}
	return la
}

// saved is where block l's activations are: its own, or the shared ones
// when the forward recomputes.
func (a *activations) saved(l int) *layerActs {
	if len(a.layers) == 1 {
		return &a.layers[0]
	}
	return &a.layers[l]
}

// ActivationBytes is the memory the activations hold now: what the forward
// saves for the backward (every block's, or one block's with Recompute),
// the backward's scratch and the loss head's logits chunk. They grow to the
// largest batch seen and never shrink.
func (m *Model) ActivationBytes() int64 { return sliceBytes(reflect.ValueOf(m.act)) }

// sliceBytes sums the capacities of the slices in v, a struct of slices and
// of slices of such structs, in bytes.
func sliceBytes(v reflect.Value) int64 {
	var n int64
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			n += sliceBytes(v.Field(i))
		}
	case reflect.Slice:
		n += int64(v.Cap()) * int64(v.Type().Elem().Size())
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := range v.Len() {
				n += sliceBytes(v.Index(i))
			}
		}
	}
	return n
}

// forward runs the decoder over a validated batch and leaves the final
// normed hidden states (N, D) in m.act.normed, saving what backward needs.
func (m *Model) forward(b Batch) {
	m.setPrecision()
	m.ensure(b)
	var t0 time.Time
	c, a := m.Config, &m.act
	N, D := len(b.Tokens), c.Dim
	for s := 0; s+1 < len(b.Offsets); s++ {
		for n := b.Offsets[s]; n < b.Offsets[s+1]; n++ {
			a.pos[n] = int32(b.parentLen(s) + n - b.Offsets[s])
		}
	}
	x := a.resid[:N*D]
	m.embed(x, b.Tokens)
	for l := range c.Layers {
		m.block(l, b, a.resid[(l+1)*a.N*D:][:N*D])
	}
	last := a.resid[c.Layers*a.N*D:][:N*D]
	t0 = m.tic()
	nn.RMSNormForward(a.normed, a.rstd, last, m.w.norm, N, 1, D, D, c.NormEps, c.normOffset())
	m.toc(OpRMSNorm, false, t0)
}

// embed gathers the tokens' embeddings into x (N, D), scaled by √D in
// Gemma 3 (in float32, as transformers rounds the scale to the weights'
// dtype).
func (m *Model) embed(x []float32, tokens []int32) {
	t0 := m.tic()
	nn.EmbeddingForward(x, tokens, m.w.embed, m.Config.Dim)
	if m.Config.Gemma3 {
		nn.Scale(x, m.embedScale())
	}
	m.toc(OpEmbedding, false, t0)
}

// embedScale is Gemma 3's embedding multiplier, √D rounded to float32.
func (m *Model) embedScale() float32 { return float32(math.Sqrt(float64(m.Config.Dim))) }

// block runs layer l's forward from the residual stream entering it into
// next (N, D), saving its activations in a.saved(l). The backward calls it
// with next nil to recompute what it saves, which stops before the down
// projection (in Gemma 3, whose post-MLP norm saves the projection's
// output, after it).
func (m *Model) block(l int, b Batch, next []float32) {
	c, a := m.Config, &m.act
	N, D := len(b.Tokens), c.Dim
	H, KV, hd, Q := c.Heads, c.KVHeads, c.HeadDim, c.qkvWidth()
	w, la := m.w.layers[l], a.saved(l)
	x := a.resid[l*a.N*D:][:N*D]
	// mid = x + o(attention(rope(qkv(norm(x))))), the o output normed in
	// Gemma 3
	m.attentionInput(l, w, nil, x, la.h1, la.rstd1, la.qkv, la.qkvRaw, la.qkRstd, a.pos[:N], N)
	t0 := m.tic()
	nn.AttentionForward(la.attn, la.probs, la.qkv[:N*Q], b.Offsets, b.Parents, H, KV, hd, c.attentionScale(), c.window(l))
	m.toc(OpAttention, false, t0)
	m.attentionOutput(w, nil, la.mid[:N*D], x, la.attn, la.ao, la.rstdA, N)
	// next = mid + down(silu(gate(norm(mid))) ⊙ up(norm(mid))), with
	// gelu_tanh and the down output normed in Gemma 3
	if next == nil && c.Gemma3 {
		next = a.dh[:N*D] // the post-MLP norm's rstd is saved; its output is not needed
	}
	m.mlp(w, nil, next, la.mid[:N*D], la.h2, la.rstd2, la.gu, la.sig, la.act, la.mo, la.rstdM, N)
}

// attentionInput is the first half of layer l's block, shared by the
// training forward and the KV-cache forward: h = norm(x), then the q/k/v
// projections into qkv with the optional per-head q/k norms, then the
// layer's RoPE at positions pos. raw, when not nil, keeps the projections
// from before the q/k norms for the backward; nil applies the norms in
// place. pk is the layer's packed projections when decoding (Extend), nil
// when training.
func (m *Model) attentionInput(l int, w layer, pk *packedLayer, x, h, rstd, qkv, raw, qkRstd []float32, pos []int32, N int) {
	c := m.Config
	D, H, KV, hd, Q := c.Dim, c.Heads, c.KVHeads, c.HeadDim, c.qkvWidth()
	off := c.normOffset()
	qkv = qkv[:N*Q]
	t0 := m.tic()
	nn.RMSNormForward(h, rstd, x, w.attnNorm, N, 1, D, D, c.NormEps, off)
	m.toc(OpRMSNorm, false, t0)
	proj := qkv
	if c.QKNorm && raw != nil {
		proj = raw[:N*Q]
	}
	var pqkv *gemm.Panels
	if pk != nil {
		pqkv = &pk.qkv
	}
	m.linear(proj, h, w.qkv, w.qkvBias, pqkv, N, D, Q, false)
	if c.QKNorm {
		copy(qkv, proj) // the values pass through unchanged
		t0 = m.tic()
		qr, kr := splitQKRstd(qkRstd, H, KV)
		nn.RMSNormForward(qkv, qr[:N*H], proj, w.qNorm, N, H, hd, Q, c.NormEps, off)
		nn.RMSNormForward(qkv[H*hd:], kr[:N*KV], proj[H*hd:], w.kNorm, N, KV, hd, Q, c.NormEps, off)
		m.toc(OpRMSNorm, false, t0)
	}
	t0 = m.tic()
	cos, sin := m.rope(l)
	nn.RoPE(qkv, N, H+KV, hd, Q, pos, cos, sin, false)
	m.toc(OpRoPE, false, t0)
}

// attentionOutput sets dst = x + o(attn), or in Gemma 3 dst = x +
// norm(o(attn)) with o's output in ao and the norm's rstd saved. dst may
// be x itself (then ao is overwritten by the norm). p is the packed o_proj
// when decoding.
func (m *Model) attentionOutput(w layer, p *gemm.Panels, dst, x, attn, ao, rstd []float32, N int) {
	c := m.Config
	Hd := c.Heads * c.HeadDim
	if !c.Gemma3 {
		m.residual(dst, x, attn, w.o, p, N, Hd)
		return
	}
	m.linear(ao, attn, w.o, nil, p, N, Hd, c.Dim, false)
	m.normedResidual(dst, x, ao, w.postAttnNorm, rstd, N)
}

// normedResidual sets dst = x + norm(y) with weight (Gemma 3's
// sandwich norms), saving the norm's rstd. dst may be x itself; then the
// norm's output overwrites y.
func (m *Model) normedResidual(dst, x, y, weight, rstd []float32, N int) {
	c := m.Config
	D := c.Dim
	t0 := m.tic()
	if &dst[0] == &x[0] {
		nn.RMSNormForward(y, rstd, y, weight, N, 1, D, D, c.NormEps, 1)
		m.toc(OpRMSNorm, false, t0)
		t0 = m.tic()
		nn.Add(dst[:N*D], y[:N*D])
	} else {
		nn.RMSNormForward(dst, rstd, y, weight, N, 1, D, D, c.NormEps, 1)
		m.toc(OpRMSNorm, false, t0)
		t0 = m.tic()
		nn.Add(dst[:N*D], x[:N*D])
	}
	m.toc(OpResidual, false, t0)
}

// splitQKRstd splits the q/k norms' rstd buffer, sized for some number of
// rows R, into the queries' (R, H) and the keys' (R, KV): a batch of any
// prefix of those rows finds its rows at the same places.
func splitQKRstd(qkRstd []float32, H, KV int) (q, k []float32) {
	R := len(qkRstd) / (H + KV)
	return qkRstd[:R*H], qkRstd[R*H:]
}

// residual sets dst = x + inp·wᵀ (dst may be x itself), through the
// packed p when decoding.
func (m *Model) residual(dst, x, inp, w []float32, p *gemm.Panels, N, in int) {
	if &dst[0] != &x[0] {
		copy(dst, x)
	}
	m.linear(dst, inp, w, nil, p, N, in, m.Config.Dim, true)
}

// linear sets out = inp·wᵀ + bias (bias may be nil), or with accumulate
// adds inp·wᵀ to out: through the packed panels p when the layer is being
// decoded (p not nil), else through the general GEMM.
func (m *Model) linear(out, inp, w, bias []float32, p *gemm.Panels, N, in, outF int, accumulate bool) {
	t0 := m.tic()
	switch {
	case p != nil:
		gemm.MulPanels(out, outF, inp, in, N, p, accumulate)
		if bias != nil {
			nn.AddBias(out, bias, N, outF)
		}
	case accumulate:
		nn.MatmulAccumulate(m.bw, out, inp, w, N, in, outF)
	default:
		nn.MatmulForward(m.bw, out, inp, w, bias, N, in, outF)
	}
	m.toc(OpMatmul, false, t0)
}

// mlp is the second half of a block: next = mid + down(silu(gate(h)) ⊙
// up(h)) with h = norm(mid), saving h, rstd, the projections gu, σ(gate)
// and the product act. In Gemma 3 the activation is gelu_tanh (sig saves
// its sigmoid) and next = mid + norm(down(…)), with down's output in mo and
// the norm's rstd in rstdM. next may be mid itself; nil stops before the
// down projection, leaving only what the backward reads. pk is the layer's
// packed projections when decoding (Extend), nil when training.
func (m *Model) mlp(w layer, pk *packedLayer, next, mid, h, rstd, gu, sig, act, mo, rstdM []float32, N int) {
	c := m.Config
	D, F := c.Dim, c.Hidden
	t0 := m.tic()
	nn.RMSNormForward(h, rstd, mid, w.mlpNorm, N, 1, D, D, c.NormEps, c.normOffset())
	m.toc(OpRMSNorm, false, t0)
	var pgu, pdown *gemm.Panels
	if pk != nil {
		pgu, pdown = &pk.gateUp, &pk.down
	}
	m.linear(gu, h, w.gateUp, nil, pgu, N, D, 2*F, false)
	t0 = m.tic()
	if c.Gemma3 {
		nn.GeGLUForward(act, sig, gu, N, F)
	} else {
		nn.SwiGLUForward(act, sig, gu, N, F)
	}
	m.toc(OpSwiGLU, false, t0)
	switch {
	case next == nil:
	case c.Gemma3:
		m.linear(mo, act, w.down, nil, pdown, N, F, D, false)
		m.normedResidual(next, mid, mo, w.postMLPNorm, rstdM, N)
	default:
		m.residual(next, mid, act, w.down, pdown, N, F)
	}
}

// backward propagates dnormed (N, D), the gradient of the final norm's
// output, through the decoder, adding into m.Grads. When the forward kept
// one block's activations (m.Recompute), it recomputes each block's before
// that block's backward; the last block's are still there.
func (m *Model) backward(b Batch, dnormed []float32) {
	c, a := m.Config, &m.act
	N, D, F := len(b.Tokens), c.Dim, c.Hidden
	H, KV, hd, Q := c.Heads, c.KVHeads, c.HeadDim, c.qkvWidth()
	pos := a.pos[:N]
	off := c.normOffset()
	var t0 time.Time
	dx := a.dresid[:N*D]
	clear(dx)
	last := a.resid[c.Layers*a.N*D:][:N*D]
	t0 = m.tic()
	nn.RMSNormBackward(dx, m.g.norm, dnormed, last, m.w.norm, a.rstd, N, 1, D, D, off)
	m.toc(OpRMSNorm, true, t0)
	recompute := len(a.layers) < c.Layers
	for l := c.Layers - 1; l >= 0; l-- {
		if recompute && l < c.Layers-1 {
			m.block(l, b, nil)
		}
		w, g, la := m.w.layers[l], m.g.layers[l], a.saved(l)
		x := a.resid[l*a.N*D:][:N*D]
		// MLP block; dx is d(next) and becomes d(mid).
		dact, dgu, dh := a.dact[:N*F], a.dgu[:N*2*F], a.dh[:N*D]
		ddown := m.sandwichBackward(dx, dh, g.postMLPNorm, la.mo, w.postMLPNorm, la.rstdM, N)
		clear(dact)
		t0 = m.tic()
		nn.MatmulBackward(m.bw, dact, g.down, nil, ddown, la.act, w.down, N, F, D)
		m.toc(OpMatmul, true, t0)
		clear(dgu)
		t0 = m.tic()
		if c.Gemma3 {
			nn.GeGLUBackward(dgu, dact, la.gu, la.sig, N, F)
		} else {
			nn.SwiGLUBackward(dgu, dact, la.gu, la.sig, N, F)
		}
		m.toc(OpSwiGLU, true, t0)
		clear(dh)
		t0 = m.tic()
		nn.MatmulBackward(m.bw, dh, g.gateUp, nil, dgu, la.h2, w.gateUp, N, D, 2*F)
		m.toc(OpMatmul, true, t0)
		t0 = m.tic()
		nn.RMSNormBackward(dx, g.mlpNorm, dh, la.mid, w.mlpNorm, la.rstd2, N, 1, D, D, off)
		m.toc(OpRMSNorm, true, t0)
		// Attention block; dx becomes d(x).
		dattn, dqkv := a.dattn[:N*H*hd], a.dqkv[:N*Q]
		dao := m.sandwichBackward(dx, dh, g.postAttnNorm, la.ao, w.postAttnNorm, la.rstdA, N)
		clear(dattn)
		t0 = m.tic()
		nn.MatmulBackward(m.bw, dattn, g.o, nil, dao, la.attn, w.o, N, H*hd, D)
		m.toc(OpMatmul, true, t0)
		clear(dqkv)
		t0 = m.tic()
		nn.AttentionBackward(dqkv, dattn, la.qkv, la.probs, a.scratch, b.Offsets, b.Parents, H, KV, hd, c.attentionScale())
		m.toc(OpAttention, true, t0)
		t0 = m.tic()
		cos, sin := m.rope(l)
		nn.RoPE(dqkv, N, H+KV, hd, Q, pos, cos, sin, true)
		m.toc(OpRoPE, true, t0)
		if c.QKNorm {
			raw := a.dqkvRaw[:N*Q]
			clear(raw)
			t0 = m.tic()
			qr, kr := splitQKRstd(la.qkRstd, H, KV)
			nn.RMSNormBackward(raw, g.qNorm, dqkv, la.qkvRaw, w.qNorm, qr[:N*H], N, H, hd, Q, off)
			m.toc(OpRMSNorm, true, t0)
			t0 = m.tic()
			nn.RMSNormBackward(raw[H*hd:], g.kNorm, dqkv[H*hd:], la.qkvRaw[H*hd:], w.kNorm, kr[:N*KV], N, KV, hd, Q, off)
			m.toc(OpRMSNorm, true, t0)
			for n := 0; n < N; n++ { // values had no norm
				copy(raw[n*Q+(H+KV)*hd:(n+1)*Q], dqkv[n*Q+(H+KV)*hd:(n+1)*Q])
			}
			dqkv = raw
		}
		clear(dh)
		t0 = m.tic()
		nn.MatmulBackward(m.bw, dh, g.qkv, g.qkvBias, dqkv, la.h1, w.qkv, N, D, Q)
		m.toc(OpMatmul, true, t0)
		t0 = m.tic()
		nn.RMSNormBackward(dx, g.attnNorm, dh, x, w.attnNorm, la.rstd1, N, 1, D, D, off)
		m.toc(OpRMSNorm, true, t0)
	}
	t0 = m.tic()
	if c.Gemma3 {
		nn.Scale(dx, m.embedScale()) // dx is not read again
	}
	nn.EmbeddingBackward(m.g.embed, dx, b.Tokens, D)
	m.toc(OpEmbedding, true, t0)
}

// sandwichBackward returns the gradient at the output of a sublayer's last
// projection given dx, the gradient of the residual stream after it: dx
// itself, or in Gemma 3, where the output y went through a norm before the
// residual add, the norm's backward written into scratch (N, D), adding
// the norm weight's gradient into dweight.
func (m *Model) sandwichBackward(dx, scratch, dweight, y, weight, rstd []float32, N int) []float32 {
	if !m.Config.Gemma3 {
		return dx
	}
	D := m.Config.Dim
	clear(scratch)
	t0 := m.tic()
	nn.RMSNormBackward(scratch, dweight, dx, y, weight, rstd, N, 1, D, D, 1)
	m.toc(OpRMSNorm, true, t0)
	return scratch
}
