package model

// TrainFLOPs counts the floating-point operations of one forward and
// backward pass over b as the engine performs them: 6 per parameter of every
// matrix product per token (2 forward, 4 backward), and attention's score
// and value products over the full T×(P+T) rectangle each sequence
// computes (P its parent's length), also 3× forward. Norms, activations and the optimizer are left out, as
// is customary; they are memory-bound and small.
func TrainFLOPs(c Config, b Batch) float64 {
	c = c.WithDefaults()
	N := float64(len(b.Tokens))
	O := float64(c.Heads * c.HeadDim)
	matmuls := 6 * N * matmulParams(c)
	var sq float64
	for s := 0; s+1 < len(b.Offsets); s++ {
		t := float64(b.Offsets[s+1] - b.Offsets[s])
		sq += t * (float64(b.parentLen(s)) + t)
	}
	attention := 3 * 2 * 2 * sq * O * float64(c.Layers) // QKᵀ and PV, each 2·T·(P+T)·hd per head
	return matmuls + attention
}

// DecodeFLOPs counts the floating-point operations of decoding one token
// that attends to ctx cached positions (itself included): 2 per parameter
// of every matrix product, the output head's included, and attention's
// score and value products, 2·ctx·hd each per head and layer (a local
// layer reads only its window of the cache).
func DecodeFLOPs(c Config, ctx int) float64 {
	c = c.WithDefaults()
	O := float64(c.Heads * c.HeadDim)
	matmuls := 2 * matmulParams(c)
	var keys float64
	for l := range c.Layers {
		n := ctx
		if w := c.window(l); w > 0 {
			n = min(ctx, w)
		}
		keys += float64(n)
	}
	return matmuls + 4*keys*O
}

// matmulParams counts the parameters of every matrix product of c, which
// has its defaults: each layer's QKV, output, gate, up and down
// projections, and the output head.
func matmulParams(c Config) float64 {
	D, F, V := float64(c.Dim), float64(c.Hidden), float64(c.Vocab)
	Q, O := float64(c.qkvWidth()), float64(c.Heads*c.HeadDim)
	return float64(c.Layers)*(D*Q+O*D+3*D*F) + D*V
}
