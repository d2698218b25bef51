package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// decodeRun prefills three prompts into a cache of m and decodes four
// tokens after each, returning every logit Extend wrote.
func decodeRun(t *testing.T, m *Model) []float32 {
	t.Helper()
	c, err := m.NewCache(3, m.Config.MaxSeq)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.Vocab
	logits := make([]float32, 3*V)
	var all []float32
	prompts := [][]int32{{1, 5, 2, 7, 3}, {4, 4, 9}, {10, 0, 6, 8, 2, 1, 5}}
	if err := m.Extend(c, []int{0, 1, 2}, Pack(prompts), logits); err != nil {
		t.Fatal(err)
	}
	all = append(all, logits...)
	for step := range 4 {
		next := []int32{int32(step + 1), int32(2 * step), int32(V - 1 - step)}
		if err := m.Extend(c, []int{0, 1, 2}, Batch{Tokens: next, Offsets: []int{0, 1, 2, 3}}, logits); err != nil {
			t.Fatal(err)
		}
		all = append(all, logits...)
	}
	return all
}

// packedName reports whether a tensor is one of the matrices the decoder
// packs (and a frozen model releases).
func packedName(name string) bool {
	for _, s := range []string{"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
		"gate_proj.weight", "up_proj.weight", "down_proj.weight", "lm_head.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// TestFreezeDecodesTheSame: a frozen model decodes, prefill and steps,
// bit for bit as a cache packed from its float32 weights does, in FP32,
// BF16 and INT8, having released every matrix the packed copy replaces and
// kept only the embedding, norms and biases in float32.
func TestFreezeDecodesTheSame(t *testing.T) {
	useBF16Kernel(t, "emulate")
	for name, cfg := range variants {
		for _, prec := range []Precision{FP32, BF16, INT8} {
			t.Run(name+"/"+prec.String(), func(t *testing.T) {
				twin := func() *Model {
					m, _ := New(cfg, 61)
					perturb(m, 62)
					m.Precision = prec
					return m
				}
				want := decodeRun(t, twin())
				m := twin()
				m.Freeze()
				if got := decodeRun(t, m); !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Fatal("the frozen model's logits differ from the unfrozen model's")
				}
				if m.Params != nil || m.Grads != nil {
					t.Fatal("a frozen model still holds its parameter slab")
				}
				for l, w := range m.w.layers {
					if w.qkv != nil || w.o != nil || w.gateUp != nil || w.down != nil {
						t.Fatalf("layer %d still holds a float32 projection", l)
					}
				}
				if m.w.head != nil {
					t.Fatal("the frozen model still holds a float32 output head")
				}
				kept := 0
				for _, ts := range m.Tensors {
					if !packedName(ts.Name) {
						kept += ts.Len()
					}
				}
				if m.WeightBytes() != int64(4*kept) || len(m.kept) != kept {
					t.Fatalf("the frozen model holds %d float32 bytes, want %d (embedding, norms, biases)", m.WeightBytes(), 4*kept)
				}
				if m.NumParams() != twin().NumParams() {
					t.Fatalf("NumParams %d after freezing, %d before", m.NumParams(), twin().NumParams())
				}
				if got := decodeRun(t, m); !slices.Equal(got, want) {
					t.Fatal("a second cache of the frozen model decodes differently")
				}
			})
		}
	}
}

// TestFrozenRefusesLearning: what needs the released float32 weights fails
// on a frozen model with ErrFrozen, instead of reading them.
func TestFrozenRefusesLearning(t *testing.T) {
	useBF16Kernel(t, "emulate")
	cfg := variants["qwen2-gqa"]
	r := rand.New(rand.NewPCG(70, 71))
	b := Pack(randomSeqs(r, cfg.Vocab, 6, 4))
	tg := fullTargets(r, cfg.Vocab, len(b.Tokens))
	m, _ := New(cfg, 71)
	m.Precision = BF16
	c, err := m.NewCache(1, cfg.MaxSeq) // packed before the freeze
	if err != nil {
		t.Fatal(err)
	}
	m.Freeze()
	m.Freeze() // a second freeze does nothing
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrFrozen) {
			t.Errorf("%s on a frozen model: %v, want ErrFrozen", what, err)
		}
	}
	_, err = m.ForwardBackward(b, tg, Loss{Logp: NLL{}}, nil, nil)
	check("ForwardBackward", err)
	check("Logprobs", m.Logprobs(b, tg.Targets, make([]float32, len(b.Tokens)), nil))
	check("Cache.Pack", c.Pack(m))
	m.Precision = FP32
	_, err = m.NewCache(1, cfg.MaxSeq)
	check("NewCache in another precision", err)
	m.Precision = BF16
	if _, _, ok := m.Tensor("model.embed_tokens.weight"); ok {
		t.Error("Tensor found a view of a frozen model")
	}
	func() {
		defer func() {
			if err, _ := recover().(error); !errors.Is(err, ErrFrozen) {
				t.Errorf("Gradients on a frozen model: panic %v, want ErrFrozen", err)
			}
		}()
		m.Gradients()
	}()
}

// TestDiscard: the pages wholly inside a discarded slice are given back
// and read as zeros; the partial pages at its ends keep their values.
func TestDiscard(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("pages are given back on Linux only")
	}
	buf := make([]float32, 1<<20)
	for i := range buf {
		buf[i] = 1
	}
	v := buf[1000 : len(buf)-1000] // starts and ends inside a page
	discard(v)
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&v[0]))
	lo := (start + page - 1) / page * page // the first whole page's start
	hi := (start + uintptr(len(v))*4) / page * page
	zeros := 0
	for i := range buf {
		addr := uintptr(unsafe.Pointer(&buf[i]))
		inside := addr >= lo && addr < hi
		switch x := buf[i]; {
		case inside && x != 0:
			t.Fatalf("element %d, on a page wholly inside the slice, reads %v after discard", i, x)
		case !inside && x != 1:
			t.Fatalf("element %d, outside the pages given back, reads %v", i, x)
		case inside:
			zeros++
		}
	}
	if want := int(hi-lo) / 4; zeros != want || zeros < len(v)-2*int(page)/4 {
		t.Fatalf("%d elements given back, want %d of the slice's %d", zeros, want, len(v))
	}
}

// TestRegrowReusesPacking: a cache regrown for more slots packs into the
// old cache's storage (no second packed copy) and decodes as a new cache.
func TestRegrowReusesPacking(t *testing.T) {
	cfg := variants["qwen2-gqa"]
	m, _ := New(cfg, 81)
	perturb(m, 82)
	want := decodeRun(t, m)
	small, err := m.NewCache(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	p := small.packed
	c, err := small.Regrow(m, 3, cfg.MaxSeq)
	if err != nil {
		t.Fatal(err)
	}
	if c.packed != p || c.Slots != 3 || c.Capacity != cfg.MaxSeq {
		t.Fatal("the regrown cache did not take over the old packed copy")
	}
	V := cfg.Vocab
	logits := make([]float32, 3*V)
	prompts := [][]int32{{1, 5, 2, 7, 3}, {4, 4, 9}, {10, 0, 6, 8, 2, 1, 5}}
	if err := m.Extend(c, []int{0, 1, 2}, Pack(prompts), logits); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logits, want[:3*V]) {
		t.Fatal("the regrown cache's prefill differs from a new cache's")
	}
}
