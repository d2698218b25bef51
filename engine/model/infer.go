package model

import (
	"fmt"
	"time"

	"rlvr/engine/gemm"
	"rlvr/engine/nn"
	"rlvr/engine/parallel"
	"rlvr/engine/vec"
)

// Cache holds the keys and values of a set of sequences ("slots") for
// incremental decoding: Extend appends tokens to slots and returns the
// next-token logits of each. It also holds a copy of the blocks'
// projection weights packed for products with few rows (gemm.Panels), so
// a decoding step's GEMMs pack nothing: NewCache packs them, and Pack
// must be called again after the model's weights change. The cache of a
// frozen model (Model.Freeze) uses the model's own packed copy instead,
// shared by all its caches. A cache is owned by one goroutine.
type Cache struct {
	Slots, Capacity int
	Len             []int // tokens cached per slot
	// Per layer, keys transposed, (Slots, KV, hd, Capacity), so a query's
	// scores against consecutive keys are contiguous vector products; and
	// values (Slots, KV, Capacity, hd), so one head's values are contiguous.
	k, v [][]float32

	// scratch for the new tokens of one Extend, grown as needed
	n                         int
	x, h, qkv, attn, gu, act  []float32
	sig, rstd, qkRstd, scores []float32
	pos                       []int32
	base, lens                []int32 // decode attention: each sequence's slot and length

	packed *packedWeights // the cache's own, or its frozen model's
}

// packedWeights are the matrices Extend multiplies by, packed for
// products with few rows: every block's projections and the output head.
type packedWeights struct {
	layers []packedLayer
	head   gemm.Panels
	prec   Precision // the panels' kind: float32, bf16 or int8
	frozen bool      // a frozen model's, shared by its caches: never packed again
}

// packedLayer is one block's projections packed for decoding.
type packedLayer struct{ qkv, o, gateUp, down gemm.Panels }

// packer returns the packing of precision p: float32, bf16 or int8
// panels.
func packer(p Precision) func(*gemm.Panels, []float32, int, int) {
	switch p {
	case BF16:
		return (*gemm.Panels).PackBF16
	case INT8:
		return (*gemm.Panels).PackInt8
	}
	return (*gemm.Panels).Pack
}

// packLayer packs block w's projections into p.
func (c Config) packLayer(p *packedLayer, w layer, pack func(*gemm.Panels, []float32, int, int)) {
	D, F, Hd, Q := c.Dim, c.Hidden, c.Heads*c.HeadDim, c.qkvWidth()
	pack(&p.qkv, w.qkv, Q, D)
	pack(&p.o, w.o, D, Hd)
	pack(&p.gateUp, w.gateUp, 2*F, D)
	pack(&p.down, w.down, D, F)
}

// Pack copies the model's current projection and output-head weights
// into the cache's packed copy, which Extend multiplies by. The packing is
// one pass over the weights; the copy costs as much memory as they do.
// Every product of a row then depends on that row alone, so a sequence's
// logits are bitwise the same whatever it is batched with.
//
// With the model in BF16 (and a bf16 kernel: EffectivePrecision) the copy
// is packed in bf16, half the bytes, and Extend's projections take bf16
// inputs with float32 accumulation, as the learner's do; the cache
// itself, attention and the norms stay float32. In INT8 it is packed in
// int8 with a scale per output feature, a quarter of float32's bytes, and
// the projections' inputs stay float32.
//
// A frozen model (Model.Freeze) has no weights to pack from: Pack then
// returns an error wrapping ErrFrozen.
func (c *Cache) Pack(m *Model) error {
	if m.frozen != nil {
		return fmt.Errorf("cache: packing: %w", ErrFrozen)
	}
	cf := m.Config
	if c.packed == nil || c.packed.frozen || len(c.packed.layers) != cf.Layers {
		c.packed = &packedWeights{layers: make([]packedLayer, cf.Layers)}
	}
	p := c.packed
	p.prec = m.EffectivePrecision()
	pack := packer(p.prec)
	for l, w := range m.w.layers {
		cf.packLayer(&p.layers[l], w, pack)
	}
	pack(&p.head, m.w.head, cf.Vocab, cf.Dim)
	return nil
}

// PackedBytes is the memory the packed weights hold: 4 bytes a weight in
// FP32, 2 in BF16, 1 (and a scale per feature) in INT8. A frozen model's
// caches share theirs.
func (c *Cache) PackedBytes() int64 { return c.packed.bytes() }

// bytes is the memory the panels hold.
func (p *packedWeights) bytes() int64 {
	n := p.head.Bytes()
	for i := range p.layers {
		l := &p.layers[i]
		n += l.qkv.Bytes() + l.o.Bytes() + l.gateUp.Bytes() + l.down.Bytes()
	}
	return n
}

// NewCache returns a cache for slots sequences of up to capacity tokens
// each (at most the model's MaxSeq), with the model's weights packed (or,
// when it is frozen, its packed copy).
func (m *Model) NewCache(slots, capacity int) (*Cache, error) {
	return m.newCache(slots, capacity, nil)
}

// Regrow returns a cache of m for slots sequences of up to capacity
// tokens that takes over c's packed copy, packing m's current weights into
// its storage, so that growing a cache never holds two packed copies at
// once. c must not be used after.
func (c *Cache) Regrow(m *Model, slots, capacity int) (*Cache, error) {
	p := c.packed
	*c = Cache{} // its KV and scratch may go before the new ones come
	return m.newCache(slots, capacity, p)
}

// newCache is NewCache packing into p's storage when it is not nil.
func (m *Model) newCache(slots, capacity int, p *packedWeights) (*Cache, error) {
	if slots < 1 || capacity < 1 || capacity > m.Config.MaxSeq {
		return nil, fmt.Errorf("cache: %d slots of %d tokens (max_seq %d)", slots, capacity, m.Config.MaxSeq)
	}
	if f := m.frozen; f != nil && f.prec != m.EffectivePrecision() {
		return nil, fmt.Errorf("cache: the model was frozen in %s and now runs in %s: %w", f.prec, m.EffectivePrecision(), ErrFrozen)
	}
	c := &Cache{Slots: slots, Capacity: capacity, Len: make([]int, slots), packed: p}
	kvw := m.Config.KVHeads * m.Config.HeadDim
	for range m.Config.Layers {
		c.k = append(c.k, make([]float32, slots*capacity*kvw))
		c.v = append(c.v, make([]float32, slots*capacity*kvw))
	}
	if m.frozen != nil {
		c.packed = m.frozen
		return c, nil
	}
	if err := c.Pack(m); err != nil {
		return nil, err
	}
	return c, nil
}

// Reset empties every slot.
func (c *Cache) Reset() { clear(c.Len) }

// CopySlot makes slot dst a copy of slot src (a shared prompt for several
// samples is run once).
func (c *Cache) CopySlot(dst, src int) {
	n := c.Len[src]
	for l := range c.k {
		slot := len(c.k[l]) / c.Slots // floats per slot
		copy(c.k[l][dst*slot:][:slot], c.k[l][src*slot:][:slot])
		copy(c.v[l][dst*slot:][:slot], c.v[l][src*slot:][:slot])
	}
	c.Len[dst] = n
}

func (c *Cache) grow(m *Model, n int) {
	if n <= c.n {
		return
	}
	cf := m.Config
	D, Q, F := cf.Dim, cf.qkvWidth(), cf.Hidden
	f := func(k int) []float32 { return make([]float32, k) }
	c.n = n
	c.x, c.h, c.qkv, c.attn = f(n*D), f(n*D), f(n*Q), f(n*cf.Heads*cf.HeadDim)
	c.gu, c.act, c.sig, c.rstd = f(n*2*F), f(n*F), f(n*F), f(n)
	c.qkRstd, c.pos = f(n*(cf.Heads+cf.KVHeads)), make([]int32, n)
}

// Extend appends b's sequences to the given slots (sequence s of b to slot
// slots[s], after the tokens the slot already holds) and writes the logits
// of each sequence's last token into logits (S, V). The computation is the
// training forward's, op for op, so logprobs from these logits match the
// learner's.
func (m *Model) Extend(c *Cache, slots []int, b Batch, logits []float32) error {
	if err := m.Validate(b); err != nil {
		return err
	}
	if b.Parents != nil {
		return fmt.Errorf("extend: a batch with parents: the cache's slots hold what a sequence continues")
	}
	S := len(b.Offsets) - 1
	cf := m.Config
	if len(slots) != S || len(logits) < S*cf.Vocab {
		return fmt.Errorf("extend: %d slots and %d logits for %d sequences", len(slots), len(logits), S)
	}
	for s, slot := range slots {
		if slot < 0 || slot >= c.Slots {
			return fmt.Errorf("extend: slot %d outside [0, %d)", slot, c.Slots)
		}
		if n := c.Len[slot] + b.Offsets[s+1] - b.Offsets[s]; n > c.Capacity {
			return fmt.Errorf("extend: slot %d would hold %d tokens, capacity %d", slot, n, c.Capacity)
		}
	}
	N := len(b.Tokens)
	c.grow(m, N)
	var t0 time.Time
	D, F, H, hd, Q := cf.Dim, cf.Hidden, cf.Heads, cf.HeadDim, cf.qkvWidth()
	for s, slot := range slots {
		for n := b.Offsets[s]; n < b.Offsets[s+1]; n++ {
			c.pos[n] = int32(c.Len[slot] + n - b.Offsets[s])
		}
	}
	x, h, qkv := c.x[:N*D], c.h[:N*D], c.qkv[:N*Q]
	m.embed(x, b.Tokens)
	for l, w := range m.w.layers {
		p := &c.packed.layers[l]
		m.attentionInput(l, w, p, x, h, c.rstd, qkv, nil, c.qkRstd, c.pos[:N], N)
		t0 = m.tic()
		m.appendKV(c, l, slots, b.Offsets)
		m.cachedAttention(c, l, slots, b.Offsets)
		m.toc(OpAttention, false, t0)
		// h, the norm's output, is free once projected: it takes the
		// outputs of o_proj and down_proj that Gemma 3 normalizes.
		m.attentionOutput(w, &p.o, x, x, c.attn[:N*H*hd], h, c.rstd, N)
		m.mlp(w, p, x, x, h, c.rstd, c.gu[:N*2*F], c.sig[:N*F], c.act[:N*F], h, c.rstd, N)
	}
	// Only each sequence's last position needs logits.
	last := c.h[:S*D]
	for s := 0; s < S; s++ {
		n := b.Offsets[s+1] - 1
		copy(last[s*D:(s+1)*D], x[n*D:(n+1)*D])
	}
	t0 = m.tic()
	nn.RMSNormForward(last, c.rstd, last, m.w.norm, S, 1, D, D, cf.NormEps, cf.normOffset())
	m.toc(OpRMSNorm, false, t0)
	t0 = m.tic()
	gemm.MulPanels(logits, cf.Vocab, last, D, S, &c.packed.head, false)
	m.toc(OpHeadMatmul, false, t0)
	for s, slot := range slots {
		c.Len[slot] += b.Offsets[s+1] - b.Offsets[s]
	}
	return nil
}

// appendKV writes the new keys and values of layer l (in c.qkv) into
// their slots, keys transposed, split across threads by sequence.
func (m *Model) appendKV(c *Cache, l int, slots []int, offsets []int) {
	cf := m.Config
	H, KV, hd, Q := cf.Heads, cf.KVHeads, cf.HeadDim, cf.qkvWidth()
	kvw := KV * hd
	parallel.For(len(slots), 8, func(lo, hi int) {
		for s := lo; s < hi; s++ {
			kt, vs := c.k[l][slots[s]*kvw*c.Capacity:], c.v[l][slots[s]*kvw*c.Capacity:]
			for n := offsets[s]; n < offsets[s+1]; n++ {
				p := int(c.pos[n])
				for i, x := range c.qkv[n*Q+H*hd:][:kvw] {
					kt[i*c.Capacity+p] = x
				}
				for g := 0; g < KV; g++ {
					copy(vs[(g*c.Capacity+p)*hd:][:hd], c.qkv[n*Q+(H+KV+g)*hd:][:hd])
				}
			}
		}
	})
}

// cachedAttention attends the new queries of layer l (in c.qkv) to every
// cached key of their slot up to their own position (within the window on
// a local layer), writing c.attn. It is AttentionForward's computation with
// the keys and values read from the cache.
func (m *Model) cachedAttention(c *Cache, l int, slots []int, offsets []int) {
	cf := m.Config
	H, KV, hd, Q := cf.Heads, cf.KVHeads, cf.HeadDim, cf.qkvWidth()
	rep, kvw := H/KV, KV*hd
	scale, window := cf.attentionScale(), cf.window(l)
	S := len(slots)
	need, decode := 0, len(offsets)-1 == offsets[len(offsets)-1]
	c.base, c.lens = c.base[:0], c.lens[:0]
	for s := 0; s < S; s++ {
		T := offsets[s+1] - offsets[s]
		need = max(need, max(T, 4)*(c.Len[slots[s]]+T)) // decode attention scores up to four heads at once
		c.base = append(c.base, int32(slots[s]))
		c.lens = append(c.lens, int32(c.Len[slots[s]]+T))
	}
	if len(c.scores) < parallel.Threads()*need {
		c.scores = make([]float32, parallel.Threads()*need)
	}
	if decode {
		// One new token per sequence: the whole loop runs in vec, split
		// across threads by sequence.
		parallel.Worker(S, func(w, lo, hi int) {
			vec.DecodeAttention(c.attn[lo*H*hd:], H*hd, c.qkv[lo*Q:], Q, c.k[l], c.v[l], c.Capacity,
				c.base[lo:hi], c.lens[lo:hi], H, KV, hd, scale, window, c.scores[w*need:][:need])
		})
		return
	}
	parallel.Worker(S*KV, func(w, lo, hi int) {
		for task := lo; task < hi; task++ {
			s, g := task/KV, task%KV
			o, T := offsets[s], offsets[s+1]-offsets[s]
			past := int(c.pos[o]) // tokens before the first new one
			L := past + T
			base := slots[s] * c.Capacity * kvw
			k, v := c.k[l][base+g*hd*c.Capacity:], c.v[l][base+g*hd*c.Capacity:]
			p := c.scores[w*need:][:T*L]
			for h := g * rep; h < (g+1)*rep; h++ {
				gemm.SgemmSerial(false, false, T, L, hd, scale, c.qkv[o*Q+h*hd:], Q, k, c.Capacity, 0, p, L)
				vec.SoftmaxWindow(p, T, L, past, window)
				gemm.SgemmSerial(false, false, T, hd, L, 1, p, L, v, hd, 0, c.attn[o*H*hd+h*hd:], H*hd)
			}
		}
	})
}
