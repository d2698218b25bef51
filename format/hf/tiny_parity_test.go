package hf_test

import (
	"math"
	"path/filepath"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/format/hfconfig"
	"rlvr/internal/gzjson"
)

// tinyRef is python/gemma3_ref.py's record: transformers' logits at every
// position of a few sequences, per tiny model.
type tinyRef struct {
	Reference string `json:"reference"`
	Models    map[string]struct {
		Sequences [][]int32     `json:"sequences"`
		Logits    [][][]float64 `json:"logits"` // (sequence, position, vocab)
	} `json:"models"`
}

// tinyTolerance bounds |Δlogit| against transformers on the tiny models:
// both run float32 and differ only in the order of their sums.
const tinyTolerance = 1e-4

// TestTinyModelsMatchTransformers loads, through checkpoint.Open, the tiny
// random models python/gemma3_ref.py saved with transformers (a Gemma 3
// mixing sliding-window and global layers, a Llama with llama3 RoPE
// scaling) and compares their logits with transformers' at every position:
// the training forward's log-softmax of every vocabulary entry, and the
// KV-cache decoder's raw logits, prefilling part of each sequence and
// decoding the rest one token at a time.
func TestTinyModelsMatchTransformers(t *testing.T) {
	var ref tinyRef
	gzjson.Read(t, filepath.Join("testdata", "tiny", "reference.json.gz"), &ref)
	for _, name := range []string{"gemma3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			mr, ok := ref.Models[name]
			if !ok {
				t.Fatalf("no reference for %s", name)
			}
			l, err := checkpoint.Open(filepath.Join("testdata", "tiny", name), "")
			if err != nil {
				t.Fatal(err)
			}
			m := l.Model
			if name == "gemma3" && (!m.Config.Gemma3 || l.HFConfig.Architecture != hfconfig.Gemma3 || m.Config.SlidingWindow != 4) {
				t.Fatalf("not read as Gemma 3 with a window of 4: %+v", m.Config)
			}
			if name == "llama3" && m.Config.RopeScaling.Type != "llama3" {
				t.Fatalf("no llama3 RoPE scaling: %+v", m.Config)
			}
			var worstTrain, worstKV float64
			for s, seq := range mr.Sequences {
				worstTrain = max(worstTrain, trainingLogprobsDelta(t, m, seq, mr.Logits[s]))
				worstKV = max(worstKV, decoderLogitsDelta(t, m, seq, mr.Logits[s]))
			}
			t.Logf("%s: max |Δ| %.3g (training forward, log-softmax of every id at every position), %.3g (KV-cache decoder, logits at every position), against %s",
				name, worstTrain, worstKV, ref.Reference)
			if worstTrain > tinyTolerance || worstKV > tinyTolerance {
				t.Errorf("max |Δ| %.3g / %.3g exceeds %g", worstTrain, worstKV, tinyTolerance)
			}
		})
	}
}

// trainingLogprobsDelta returns the largest |Δ| between the training
// forward's logprob of every vocabulary id at every position of seq and
// the log-softmax of the reference logits (T, V).
func trainingLogprobsDelta(t *testing.T, m *model.Model, seq []int32, logits [][]float64) float64 {
	t.Helper()
	V := m.Config.Vocab
	b := model.Pack([][]int32{seq})
	lse := make([]float64, len(seq))
	for p, row := range logits {
		mx := math.Inf(-1)
		for _, z := range row {
			mx = max(mx, z)
		}
		var sum float64
		for _, z := range row {
			sum += math.Exp(z - mx)
		}
		lse[p] = mx + math.Log(sum)
	}
	targets, out := make([]int32, len(seq)), make([]float32, len(seq))
	var worst float64
	for id := range V {
		for p := range targets {
			targets[p] = int32(id)
		}
		if err := m.Logprobs(b, targets, out, nil); err != nil {
			t.Fatal(err)
		}
		for p := range seq {
			worst = max(worst, math.Abs(float64(out[p])-(logits[p][id]-lse[p])))
		}
	}
	return worst
}

// decoderLogitsDelta prefills the first third of seq into a KV cache,
// decodes the rest one token at a time, and returns the largest |Δ|
// between the decoder's logits at each position from the prefill's last
// on and the reference's.
func decoderLogitsDelta(t *testing.T, m *model.Model, seq []int32, logits [][]float64) float64 {
	t.Helper()
	c, err := m.NewCache(1, len(seq))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, m.Config.Vocab)
	var worst float64
	prefill := max(1, len(seq)/3)
	for end := prefill; end <= len(seq); end++ {
		start := end - 1
		if end == prefill {
			start = 0
		}
		if err := m.Extend(c, []int{0}, model.Pack([][]int32{seq[start:end]}), out); err != nil {
			t.Fatal(err)
		}
		for id, z := range logits[end-1] {
			worst = max(worst, math.Abs(float64(out[id])-z))
		}
	}
	return worst
}
