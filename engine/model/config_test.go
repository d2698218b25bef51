package model

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestParamCountMatchesLayout checks the size check counts exactly the
// parameters a model allocates, and that Layout lists the model's tensors.
func TestParamCountMatchesLayout(t *testing.T) {
	for name, cfg := range variants {
		m, err := NewEmpty(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Config.paramCount(); got != float64(len(m.Params)) {
			t.Errorf("%s: paramCount %v, the model has %d", name, got, len(m.Params))
		}
		ts, err := Layout(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != len(m.Tensors) {
			t.Fatalf("%s: Layout has %d tensors, the model %d", name, len(ts), len(m.Tensors))
		}
		for i := range ts {
			if ts[i].Name != m.Tensors[i].Name || ts[i].Len() != m.Tensors[i].Len() || ts[i].Offset != m.Tensors[i].Offset {
				t.Errorf("%s: Layout tensor %d is %+v, the model's %+v", name, i, ts[i], m.Tensors[i])
			}
		}
	}
}

// TestUnallocatableConfigIsAnError checks that sizes no machine can hold
// are refused by NewEmpty with an error naming them, not a panic or an
// attempt to allocate.
func TestUnallocatableConfigIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"parameters", Config{Vocab: 1 << 30, Dim: 1 << 20, Layers: 1, Heads: 1 << 10, Hidden: 8, MaxSeq: 4}, "exceed the engine's limit"},
		{"overflowing int", Config{Vocab: 1 << 40, Dim: 1 << 40, Layers: 1 << 40, Heads: 2, Hidden: 1 << 40, MaxSeq: 4}, "parameters"},
		{"rotary tables", Config{Vocab: 8, Dim: 4096, Layers: 1, Heads: 2, Hidden: 8, MaxSeq: 1 << 40}, "max_seq = 1099511627776 × head_dim = 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			m, err := NewEmpty(tc.cfg)
			if err == nil || m != nil {
				t.Fatalf("no error (model %v)", m != nil)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if _, err := Layout(tc.cfg); err == nil {
				t.Error("Layout: no error")
			}
		})
	}
}

// TestConfigEqual checks Equal compares every field, the per-layer slice
// by its contents.
func TestConfigEqual(t *testing.T) {
	a := Config{Vocab: 8, Dim: 16, Layers: 2, Heads: 2, Hidden: 8, MaxSeq: 8, LocalLayers: []bool{true, false}, SlidingWindow: 4}
	b := a
	b.LocalLayers = []bool{true, false}
	if !a.Equal(b) {
		t.Error("equal configs with distinct slices compare unequal")
	}
	for name, change := range map[string]func(*Config){
		"local layers":  func(c *Config) { c.LocalLayers = []bool{false, false} },
		"no local":      func(c *Config) { c.LocalLayers = nil },
		"rope scaling":  func(c *Config) { c.RopeScaling.Factor = 2 },
		"gemma3":        func(c *Config) { c.Gemma3 = true },
		"window":        func(c *Config) { c.SlidingWindow = 5 },
		"local theta":   func(c *Config) { c.LocalRopeTheta = 1 },
		"scalar":        func(c *Config) { c.QueryPreAttnScalar = 3 },
		"plain integer": func(c *Config) { c.Vocab = 9 },
	} {
		c := a
		c.LocalLayers = slices.Clone(a.LocalLayers)
		change(&c)
		if a.Equal(c) || c.Equal(a) {
			t.Errorf("%s: changed config compares equal", name)
		}
	}
	if !(Config{}).Equal(Config{LocalLayers: []bool{}}) {
		t.Error("nil and empty LocalLayers differ")
	}
}

// TestValidateGemmaAndScaling checks the new fields are validated, each
// problem named.
func TestValidateGemmaAndScaling(t *testing.T) {
	base := Config{Vocab: 8, Dim: 16, Layers: 2, Heads: 2, Hidden: 8, MaxSeq: 8}
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.LocalLayers = []bool{true} }, "local_layers has 1 entries for 2 layers"},
		{func(c *Config) { c.LocalLayers = []bool{true, false} }, "local layers need a sliding_window"},
		{func(c *Config) { c.SlidingWindow = -1 }, "sliding_window = -1"},
		{func(c *Config) { c.QueryPreAttnScalar = -2 }, "query_pre_attn_scalar = -2"},
		{func(c *Config) { c.RopeScaling = RopeScaling{Type: "yarn", Factor: 2} }, `rope_scaling type "yarn" is not supported`},
		{func(c *Config) { c.RopeScaling = RopeScaling{Type: "linear"} }, "linear: factor = 0"},
		{func(c *Config) { c.RopeScaling = RopeScaling{Type: "dynamic", Factor: 2, OriginalMaxSeq: 4} }, "max_seq = 8 exceeds the original 4 positions"},
		{func(c *Config) {
			c.RopeScaling = RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 4, HighFreqFactor: 1, OriginalMaxSeq: 8}
		}, "high_freq_factor = 1 must exceed low_freq_factor = 4"},
		{func(c *Config) {
			c.RopeScaling = RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4}
		}, "original_max_position_embeddings = 0"},
	} {
		c := base
		tc.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to mention %q", c, err, tc.want)
		}
	}
	good := base
	good.Gemma3, good.LocalLayers, good.SlidingWindow, good.QueryPreAttnScalar = true, []bool{true, false}, 3, 12
	good.RopeScaling = RopeScaling{Type: "dynamic", Factor: 2, OriginalMaxSeq: 8}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}

// TestConfigJSONOmitsUnusedFields checks a configuration that uses none of
// the RoPE-scaling, Gemma 3 or sliding-window fields encodes as it did
// before they existed: trained models are found by a hash of it.
func TestConfigJSONOmitsUnusedFields(t *testing.T) {
	b, err := json.Marshal(Tiny(259))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"Vocab":259,"Dim":128,"Layers":4,"Heads":4,"KVHeads":4,"HeadDim":0,"Hidden":344,"MaxSeq":512,"RopeTheta":10000,"NormEps":0.00001,"TiedEmbeddings":false,"AttentionBias":false,"QKNorm":false}`
	if string(b) != want {
		t.Errorf("JSON %s\nwant %s", b, want)
	}
	g := Config{Gemma3: true, LocalLayers: []bool{true}, SlidingWindow: 4, RopeScaling: RopeScaling{Type: "linear", Factor: 2}}
	var back Config
	if b, err = json.Marshal(g); err != nil || json.Unmarshal(b, &back) != nil || !back.Equal(g) {
		t.Errorf("round trip of %s: %+v", b, back)
	}
}
