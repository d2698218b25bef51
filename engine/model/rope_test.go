package model

import (
	"math"
	"testing"

	"rlvr/engine/nn"
)

// TestPlainRoPEIsUnchanged checks that without scaling the tables are
// bit for bit the ones nn.RoPETables builds, which trained models rely on.
func TestPlainRoPEIsUnchanged(t *testing.T) {
	c := Config{Vocab: 8, Dim: 64, Layers: 1, Heads: 2, Hidden: 8, MaxSeq: 300, RopeTheta: 500000}
	cos, sin := ropeTables(c.WithDefaults(), false)
	wc, ws := nn.RoPETables(c.MaxSeq, 32, c.RopeTheta)
	for i := range wc {
		if math.Float32bits(cos[i]) != math.Float32bits(wc[i]) || math.Float32bits(sin[i]) != math.Float32bits(ws[i]) {
			t.Fatalf("entry %d differs", i)
		}
	}
	// dynamic scaling leaves frequencies alone up to the original length.
	d := c
	d.RopeScaling = RopeScaling{Type: "dynamic", Factor: 4, OriginalMaxSeq: 300}
	plain, dyn := InvFreq(c, false), InvFreq(d, false)
	for i := range plain {
		if plain[i] != dyn[i] {
			t.Fatalf("dynamic frequency %d: %v, plain %v", i, dyn[i], plain[i])
		}
	}
	// local layers take LocalRopeTheta and no scaling.
	l := c
	l.RopeScaling = RopeScaling{Type: "linear", Factor: 4}
	l.LocalRopeTheta = 500000
	if got := InvFreq(l, true); got[1] != plain[1] {
		t.Fatalf("local frequency %v, want the unscaled %v", got[1], plain[1])
	}
	if got := InvFreq(l, false); got[1] != plain[1]/4 {
		t.Fatalf("linear frequency %v, want %v", got[1], plain[1]/4)
	}
}
