package checkpoint_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/format/tokenizer"
	"rlvr/internal/gzjson"
	"rlvr/internal/realmodel"
)

// parityRef is what python/ref_logits.py records from transformers for one
// model: for each prompt, the greedy continuation and, at every position of
// prompt + continuation, the log-sum-exp of the logits, the largest logits
// and logits at fixed pseudo-random ids.
type parityRef struct {
	Model     string `json:"model"`
	Vocab     int    `json:"vocab"`
	Reference string `json:"reference"`
	Prompts   []struct {
		Text         string           `json:"text"`
		Prompt       []int32          `json:"prompt"`
		Continuation []int32          `json:"continuation"`
		Positions    []parityPosition `json:"positions"`
	} `json:"prompts"`
}

// parityPosition is transformers' logits at one position.
type parityPosition struct {
	LSE   float64      `json:"lse"`
	Top   [][2]float64 `json:"top"`   // the 8 largest: [id, logit]
	Probe [][2]float64 `json:"probe"` // 8 fixed pseudo-random ids
}

func readParityRef(t *testing.T, name string) *parityRef {
	t.Helper()
	return readParityFile(t, filepath.Join("testdata", "parity", name+".json.gz"))
}

func readParityFile(t *testing.T, path string) *parityRef {
	t.Helper()
	var ref parityRef
	gzjson.Read(t, path, &ref)
	return &ref
}

// logitTolerance is the largest |Δlogit| allowed against transformers: both
// run float32 on the same dequantized weights, and differ only in the
// order of their sums.
const logitTolerance = 1e-3

// TestRealModelParity runs the real models on the 20 prompts per model of
// python/ref_logits.py and compares, with transformers in float32 on the
// same GGUF weights:
//   - the prompt's token ids (rlvr's tokenizer against transformers');
//   - every position's logits, through the training forward (the logprob
//     of transformers' top token) and through the KV-cache decoder (the
//     log-sum-exp, the top 8 and 8 fixed ids at each generated position);
//   - the greedy continuation of 64 tokens, token for token (with the end
//     tokens suppressed, as transformers' min_new_tokens does), and
//     llama.cpp's on the F32 GGUF, which may depart from it only at a near
//     tie.
func TestRealModelParity(t *testing.T) {
	for _, tc := range []struct {
		name, model string
		missing     string // what rlvr lacks to run it, when it cannot yet
	}{
		{"smollm2", realmodel.SmolLM2, ""},
		{"gemma3", realmodel.Gemma3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.missing != "" {
				t.Skip(tc.missing)
			}
			path := realmodel.Path(t, tc.model)
			ref := readParityRef(t, tc.name)
			l, err := checkpoint.Open(path, "")
			if err != nil {
				t.Fatal(err)
			}
			m := l.Model
			if m.Config.Vocab != ref.Vocab {
				t.Fatalf("vocabulary %d, transformers %d", m.Config.Vocab, ref.Vocab)
			}
			suppress := append([]int32{}, l.StopTokens...)
			if eos, ok := l.Tokenizer.EOS(); ok {
				suppress = append(suppress, eos)
			}
			llama := readLlamaCppRef(t, tc.name)
			var worstTrain, worstKV float64
			agree, tokensAgree, llamaAgree := 0, 0, 0
			for i, p := range ref.Prompts {
				if got := encodeLike(l, p.Text, p.Prompt); slices.Equal(got, p.Prompt) {
					tokensAgree++
				} else {
					t.Errorf("prompt %d %q: ids %v, transformers %v", i, p.Text, got, p.Prompt)
				}
				seq := append(slices.Clone(p.Prompt), p.Continuation...)
				worstTrain = max(worstTrain, trainingForwardDelta(t, m, seq, p.Positions))
				alt := llama.Continuations[i]
				d, same, gap := decodeDelta(t, m, p.Prompt, p.Continuation, p.Positions, suppress, alt)
				worstKV = max(worstKV, d)
				if same {
					agree++
				} else {
					t.Errorf("prompt %d %q: greedy continuation differs from transformers'", i, p.Text)
				}
				// llama.cpp sums in another order; where its greedy choice
				// differs, the two candidates must be a near tie.
				switch k := firstDifference(alt, p.Continuation); {
				case k < 0 && same:
					llamaAgree++
				case k >= 0:
					t.Logf("prompt %d: llama.cpp's continuation departs at token %d: %d for %d, %.2g apart in rlvr's logits", i, k, alt[k], p.Continuation[k], gap)
					if gap > nearTie {
						t.Errorf("prompt %d: llama.cpp chose token %d at step %d, %.3g below rlvr's choice: not a near tie", i, alt[k], k, gap)
					}
				}
			}
			t.Logf("%s: %d/%d prompts tokenized identically; %d/%d greedy continuations identical to transformers', %d/%d to llama.cpp's; max |Δ| %.3g (training forward, logprob of the top token at every position), %.3g (KV-cache decoder, log-sum-exp, top 8 and 8 probes at every generated position)",
				tc.name, tokensAgree, len(ref.Prompts), agree, len(ref.Prompts), llamaAgree, len(ref.Prompts), worstTrain, worstKV)
			if worstTrain > logitTolerance || worstKV > logitTolerance {
				t.Errorf("max |Δlogit| %.3g / %.3g exceeds %g", worstTrain, worstKV, logitTolerance)
			}
		})
	}
}

// TestSavedCheckpointParity compares a checkpoint rlvr trained and saved
// (the directory in RLVR_SAVED_CHECKPOINT) with transformers loading that
// directory (its transformers.json.gz, written by python/ref_logits.py
// --hf): the same ids, logits within 1e-3 and greedy continuations.
// scripts/parity.sh trains one from each real model and runs it; without
// the variable it is skipped.
func TestSavedCheckpointParity(t *testing.T) {
	dir := os.Getenv("RLVR_SAVED_CHECKPOINT")
	if dir == "" {
		t.Skip("RLVR_SAVED_CHECKPOINT is not set; scripts/parity.sh sets it")
	}
	ref := readParityFile(t, filepath.Join(dir, "transformers.json.gz"))
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var suppress []int32
	if eos, ok := l.Tokenizer.EOS(); ok {
		suppress = append(suppress, eos)
	}
	suppress = append(suppress, l.StopTokens...)
	var worst float64
	for i, p := range ref.Prompts {
		if got := encodeLike(l, p.Text, p.Prompt); !slices.Equal(got, p.Prompt) {
			t.Errorf("prompt %d: ids %v, transformers %v", i, got, p.Prompt)
		}
		seq := append(slices.Clone(p.Prompt), p.Continuation...)
		worst = max(worst, trainingForwardDelta(t, l.Model, seq, p.Positions))
		d, same, _ := decodeDelta(t, l.Model, p.Prompt, p.Continuation, p.Positions, suppress, nil)
		worst = max(worst, d)
		if !same {
			t.Errorf("prompt %d: greedy continuation differs from transformers'", i)
		}
	}
	t.Logf("%s: %d prompts, max |Δlogit| %.3g against transformers loading the saved directory", dir, len(ref.Prompts), worst)
	if worst > logitTolerance {
		t.Errorf("max |Δlogit| %.3g exceeds %g", worst, logitTolerance)
	}
}

// encodeLike encodes text as transformers did for the reference: with the
// model's BOS first when the reference starts with it and the text does not
// already carry it.
func encodeLike(l *checkpoint.Loaded, text string, want []int32) []int32 {
	ids := l.Tokenizer.Encode(text)
	if bos, ok := l.Tokenizer.BOS(); ok && len(want) > 0 && want[0] == bos && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}

// trainingForwardDelta runs the training forward over seq and returns the
// largest |Δ| between rlvr's logprob of transformers' top token at each
// position and transformers' (its top logit minus its log-sum-exp).
func trainingForwardDelta(t *testing.T, m *model.Model, seq []int32, pos []parityPosition) float64 {
	t.Helper()
	if len(pos) != len(seq) {
		t.Fatalf("%d reference positions for %d tokens", len(pos), len(seq))
	}
	targets := make([]int32, len(seq))
	for i, p := range pos {
		targets[i] = int32(p.Top[0][0])
	}
	out := make([]float32, len(seq))
	if err := m.Logprobs(model.Pack([][]int32{seq}), targets, out, nil); err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i, p := range pos {
		worst = max(worst, math.Abs(float64(out[i])-(p.Top[0][1]-p.LSE)))
	}
	return worst
}

// nearTie is the largest logit gap at which llama.cpp may choose the other
// token: float32 sums in another order move logits by about 1e-4.
const nearTie = 1e-2

// llamaCppRef is python/llamacpp_ref.py's record: llama.cpp's greedy
// continuations of the same prompt ids on the F32 GGUF.
type llamaCppRef struct {
	Reference     string    `json:"reference"`
	Continuations [][]int32 `json:"continuations"`
}

func readLlamaCppRef(t *testing.T, name string) *llamaCppRef {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "parity", name+".llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref llamaCppRef
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	return &ref
}

// firstDifference is the first index where a and b differ, or -1.
func firstDifference(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// decodeDelta prefills prompt into a KV cache and decodes cont one token at
// a time, comparing each generated position's logits with the reference's
// and rlvr's greedy choice (suppress excluded) with the reference's token.
// It returns the largest |Δ|, whether every greedy choice agreed, and, at
// the first step where alt departs from cont, how far alt's token lies
// below cont's in rlvr's logits.
func decodeDelta(t *testing.T, m *model.Model, prompt, cont []int32, pos []parityPosition, suppress, alt []int32) (float64, bool, float64) {
	t.Helper()
	V := m.Config.Vocab
	c, err := m.NewCache(1, len(prompt)+len(cont))
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, V)
	scratch := make([]float32, V)
	var worst, gap float64
	same := true
	departs := firstDifference(alt, cont)
	next := prompt
	for step := 0; step < len(cont); step++ {
		if err := m.Extend(c, []int{0}, model.Pack([][]int32{next}), logits); err != nil {
			t.Fatal(err)
		}
		ref := pos[len(prompt)+step-1]
		lse, _ := model.LogSumExp(logits, scratch)
		worst = max(worst, math.Abs(lse-ref.LSE))
		for _, kv := range append(slices.Clone(ref.Top), ref.Probe...) {
			worst = max(worst, math.Abs(float64(logits[int(kv[0])])-kv[1]))
		}
		if step == departs && departs < len(alt) {
			gap = float64(logits[cont[step]] - logits[alt[step]])
		}
		for _, s := range suppress {
			logits[s] = float32(math.Inf(-1))
		}
		best := 0
		for j, z := range logits {
			if z > logits[best] {
				best = j
			}
		}
		if int32(best) != cont[step] {
			same = false
		}
		next = cont[step : step+1]
	}
	return worst, same, gap
}

// TestImportedMatchesGGUF opens each real model from its GGUF and from the
// directory rlvr import wrote (scripts/models.sh) and requires the same
// model: bit-identical parameters, the same ids for the parity prompts,
// the same chat render, BOS and stop tokens (the end of turn among them).
// The parity figures of the GGUF therefore hold for the directory too. A
// chat render encodes with one BOS, whether or not the template writes it.
func TestImportedMatchesGGUF(t *testing.T) {
	for _, tc := range []struct{ name, gguf, dir, endOfTurn string }{
		{"smollm2", realmodel.SmolLM2, realmodel.SmolLM2Imported, "<|im_end|>"},
		{"gemma3", realmodel.Gemma3, realmodel.Gemma3Imported, "<end_of_turn>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := checkpoint.Open(realmodel.Path(t, tc.gguf), "")
			if err != nil {
				t.Fatal(err)
			}
			b, err := checkpoint.Open(realmodel.Path(t, tc.dir), "")
			if err != nil {
				t.Fatal(err)
			}
			if !a.Model.Config.Equal(b.Model.Config) {
				t.Fatalf("config %+v, imported %+v", a.Model.Config, b.Model.Config)
			}
			if !slices.Equal(a.Model.Params, b.Model.Params) {
				t.Fatal("the imported parameters differ from the GGUF's")
			}
			for _, p := range readParityRef(t, tc.name).Prompts {
				if x, y := a.Encode(p.Text), b.Encode(p.Text); !slices.Equal(x, y) {
					t.Errorf("%q: ids %v from the GGUF, %v imported", p.Text, x, y)
				}
			}
			if a.Chat == nil || b.Chat == nil {
				t.Fatalf("chat template: GGUF %v, imported %v", a.Chat != nil, b.Chat != nil)
			}
			msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 7 × 8?"}}
			x, err1 := a.Chat(msgs)
			y, err2 := b.Chat(msgs)
			if err1 != nil || err2 != nil || x != y {
				t.Fatalf("chat render %q (%v) from the GGUF, %q (%v) imported", x, err1, y, err2)
			}
			if !slices.Equal(a.StopTokens, b.StopTokens) || a.AddBOS != b.AddBOS {
				t.Errorf("stop tokens %v / BOS %v from the GGUF, %v / %v imported", a.StopTokens, a.AddBOS, b.StopTokens, b.AddBOS)
			}
			if id := a.Tokenizer.Encode(tc.endOfTurn); len(id) != 1 || !slices.Contains(a.StopTokens, id[0]) {
				t.Errorf("stop tokens %v lack %s", a.StopTokens, tc.endOfTurn)
			}
			if bos, ok := a.Tokenizer.BOS(); ok && a.AddBOS {
				ids := a.Encode(x)
				if ids[0] != bos || (len(ids) > 1 && ids[1] == bos) {
					t.Errorf("chat render %q encodes as %v: want exactly one BOS (%d) first", x, ids[:min(4, len(ids))], bos)
				}
			}
		})
	}
}
