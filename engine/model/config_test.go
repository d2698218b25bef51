package model

import (
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
