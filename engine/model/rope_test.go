package model

import (
	"math"
	"testing"

	"rlvr/engine/nn"
	"rlvr/internal/gzjson"
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

// ropeRef is python/rope_ref.py's record of transformers' inverse
// frequencies.
type ropeRef struct {
	Reference string `json:"reference"`
	Cases     []struct {
		Name           string  `json:"name"`
		HeadDim        int     `json:"head_dim"`
		RopeTheta      float64 `json:"rope_theta"`
		LocalRopeTheta float64 `json:"local_rope_theta"`
		MaxPos         int     `json:"max_position_embeddings"`
		Local          bool    `json:"local"`
		Scaling        *struct {
			Type           string  `json:"rope_type"`
			Factor         float64 `json:"factor"`
			LowFreqFactor  float64 `json:"low_freq_factor"`
			HighFreqFactor float64 `json:"high_freq_factor"`
			OriginalMaxPos int     `json:"original_max_position_embeddings"`
		} `json:"rope_scaling"`
		InvFreq []float64 `json:"inv_freq"`
	} `json:"cases"`
}

// TestInvFreqMatchesTransformers compares the engine's rotary inverse
// frequencies with transformers' (ROPE_INIT_FUNCTIONS, the default
// computation, Gemma 3's per-layer-type rotary embedding) within 1e-6
// relative: plain, linear, dynamic and llama3 RoPE, and Gemma 3's global
// and local layers.
func TestInvFreqMatchesTransformers(t *testing.T) {
	var ref ropeRef
	gzjson.Read(t, "testdata/rope.json.gz", &ref)
	if len(ref.Cases) < 10 {
		t.Fatalf("%d cases", len(ref.Cases))
	}
	var worst float64
	for _, rc := range ref.Cases {
		c := Config{Vocab: 8, Dim: 2 * rc.HeadDim, Layers: 1, Heads: 2, HeadDim: rc.HeadDim, Hidden: 8,
			MaxSeq: rc.MaxPos, RopeTheta: rc.RopeTheta, LocalRopeTheta: rc.LocalRopeTheta}
		if s := rc.Scaling; s != nil {
			c.RopeScaling = RopeScaling{Type: s.Type, Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
				HighFreqFactor: s.HighFreqFactor, OriginalMaxSeq: s.OriginalMaxPos}
			if s.Type == "dynamic" {
				c.RopeScaling.OriginalMaxSeq = rc.MaxPos
			}
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", rc.Name, err)
		}
		got := InvFreq(c, rc.Local)
		if len(got) != len(rc.InvFreq) {
			t.Fatalf("%s: %d frequencies, transformers %d", rc.Name, len(got), len(rc.InvFreq))
		}
		for i, want := range rc.InvFreq {
			rel := math.Abs(float64(got[i])-want) / want
			worst = max(worst, rel)
			if rel > 1e-6 {
				t.Errorf("%s: frequency %d = %v, transformers %v (relative %.2g)", rc.Name, i, got[i], want, rel)
			}
		}
	}
	t.Logf("%d cases against %s: max relative difference %.3g", len(ref.Cases), ref.Reference, worst)
}
