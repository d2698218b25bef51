package local

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/engine/optim"
)

var ctx = context.Background()

func tinyConfig(vocab int) model.Config {
	return model.Config{Vocab: vocab, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, MaxSeq: 32, NormEps: 1e-5}
}

// sft turns token sequences into next-token datums weighted for a
// token-mean loss.
func sft(seqs [][]int32) []backend.Datum {
	var out []backend.Datum
	for _, s := range seqs {
		w := make([]float32, len(s)-1)
		for i := range w {
			w[i] = 1
		}
		out = append(out, backend.Datum{Tokens: s[:len(s)-1], Targets: s[1:], Weights: w})
	}
	if err := backend.Aggregate(out, backend.TokenMean, 0); err != nil {
		panic(err)
	}
	return out
}

// TestMemorizesASmallCorpus trains from scratch until every next token of
// a small corpus is the model's most likely one.
func TestMemorizesASmallCorpus(t *testing.T) {
	corpus := [][]int32{
		// Distinct first tokens: every continuation is determined.
		{1, 5, 9, 2, 7, 7, 3, 0},
		{2, 4, 4, 8, 2, 6, 0},
		{3, 9, 8, 7, 6, 5, 4, 3, 2, 0},
		{4, 3, 6, 9, 0},
	}
	m, err := model.New(tinyConfig(10), 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLearner(m, optim.DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for step := range 150 {
		res, err := l.ForwardBackward(ctx, sft(corpus), backend.Loss{NLL: 1})
		if err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = res.Metrics.Loss
		}
		last = res.Metrics.Loss
		if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-2, GradClipNorm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if last > 0.05 || last > first/20 {
		t.Fatalf("loss %.4f -> %.4f: did not memorize", first, last)
	}
	lps, err := l.Logprobs(ctx, sft(corpus))
	if err != nil {
		t.Fatal(err)
	}
	for s, lp := range lps {
		for i, v := range lp {
			if v < float32(math.Log(0.5)) {
				t.Errorf("sequence %d position %d: p(target) = %.3f, not the most likely token", s, i, math.Exp(float64(v)))
			}
		}
	}
}

// TestEveryLossChangesEveryParameter runs each loss type one step on a tiny
// model and checks no tensor was left behind.
func TestEveryLossChangesEveryParameter(t *testing.T) {
	seqs := [][]int32{{1, 2, 3, 4, 5, 6}, {1, 6, 5, 4}}
	losses := map[string]backend.Loss{
		"nll":       {NLL: 1},
		"clipped":   {PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.28},
		"reinforce": {PolicyGradient: backend.Reinforce},
		"kl-k3":     {RefKL: 1, RefKLEstimator: backend.K3},
		"entropy":   {Entropy: 1},
		"teacher":   {TeacherKL: 1},
	}
	for name, loss := range losses {
		cfg := tinyConfig(8)
		cfg.AttentionBias, cfg.QKNorm = true, true
		m, _ := model.New(cfg, 2)
		l, _ := NewLearner(m, optim.DefaultAdamW())
		batch := sft(seqs)
		for i := range batch {
			d := &batch[i]
			n := d.Len()
			d.Advantages, d.SamplerLogprobs, d.RefLogprobs = make([]float32, n), make([]float32, n), make([]float32, n)
			for j := range n {
				d.Advantages[j] = float32(1 - 2*(i%2))
				d.SamplerLogprobs[j] = -2.08
				d.RefLogprobs[j] = -1 - float32(j)*0.3
			}
			d.Teacher = &backend.Teacher{Tokens: append([]int32{7, 7}, d.Tokens...), Aligned: n - 1}
		}
		before := append([]float32(nil), m.Params...)
		if _, err := l.ForwardBackward(ctx, batch, loss); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-3}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, ts := range m.Tensors {
			changed := false
			for i := ts.Offset; i < ts.Offset+ts.Len(); i++ {
				changed = changed || m.Params[i] != before[i]
			}
			if !changed {
				t.Errorf("%s: %s did not change", name, ts.Name)
			}
		}
	}
}

// TestSaveLoadContinuesExactly checks that a learner saved mid-run and
// loaded again continues bit for bit like one that never stopped.
func TestSaveLoadContinuesExactly(t *testing.T) {
	seqs := sft([][]int32{{1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}})
	train := func(l *Learner, steps int) {
		for range steps {
			if _, err := l.ForwardBackward(ctx, seqs, backend.Loss{NLL: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkResumeExact(t, train, 6, 3)
}

// checkResumeExact trains one learner steps steps straight, and another
// saveAt steps, saved, loaded and trained the rest, and checks that both
// end with the same parameters bit for bit.
func checkResumeExact(t *testing.T, train func(*Learner, int), steps, saveAt int) {
	t.Helper()
	m1, _ := model.New(tinyConfig(6), 3)
	straight, _ := NewLearner(m1, optim.DefaultAdamW())
	train(straight, steps)
	m2, _ := model.New(tinyConfig(6), 3)
	first, _ := NewLearner(m2, optim.DefaultAdamW())
	train(first, saveAt)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := first.Save(ctx, dir); err != nil {
		t.Fatal(err)
	}
	resumed, err := Load(dir, optim.DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	train(resumed, steps-saveAt)
	for i := range m1.Params {
		if math.Float32bits(m1.Params[i]) != math.Float32bits(resumed.Model.Params[i]) {
			t.Fatalf("parameter %d: %v straight, %v resumed", i, m1.Params[i], resumed.Model.Params[i])
		}
	}
}

// TestNamedOptimizerState: a step that names a state of its own neither
// reads nor moves the shared AdamW moments and step count, and a run that
// alternates the two continues exactly across a save and load.
func TestNamedOptimizerState(t *testing.T) {
	seqs := sft([][]int32{{1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}})
	train := func(l *Learner, steps int) {
		for i := range steps {
			if _, err := l.ForwardBackward(ctx, seqs, backend.Loss{NLL: 1}); err != nil {
				t.Fatal(err)
			}
			p := backend.OptimParams{LearningRate: 1e-2}
			if i%2 == 1 {
				p.State, p.LearningRate = "sft", 3e-2
			}
			if _, err := l.OptimStep(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	m0, _ := model.New(tinyConfig(6), 3)
	l, _ := NewLearner(m0, optim.DefaultAdamW())
	train(l, 1)
	m, v, step := l.Opt.State()
	m, v = slices.Clone(m), slices.Clone(v)
	train(l, 2) // a shared step then a named one: only the shared one moves Opt
	m2, v2, step2 := l.Opt.State()
	if step2 != step+1 || slices.Equal(m, m2) || slices.Equal(v, v2) {
		t.Fatalf("shared step count %d → %d", step, step2)
	}
	if _, _, named := l.named["sft"].State(); named != 1 {
		t.Fatalf("the named state took %d steps, want 1", named)
	}

	checkResumeExact(t, train, 6, 4)
}

// TestNonFiniteGradientRefused checks the optimizer names the tensor and
// leaves every weight as it was.
func TestNonFiniteGradientRefused(t *testing.T) {
	m, _ := model.New(tinyConfig(6), 4)
	l, _ := NewLearner(m, optim.DefaultAdamW())
	if _, err := l.ForwardBackward(ctx, sft([][]int32{{1, 2, 3}}), backend.Loss{NLL: 1}); err != nil {
		t.Fatal(err)
	}
	_, ts, _ := m.Tensor("model.layers.1.mlp.down_proj.weight")
	m.Grads[ts.Offset+5] = float32(math.Inf(1))
	before := append([]float32(nil), m.Params...)
	_, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 1e-2, GradClipNorm: 1})
	if err == nil || !strings.Contains(err.Error(), "model.layers.1.mlp.down_proj.weight") {
		t.Fatalf("error %v, want it to name the tensor", err)
	}
	for i := range before {
		if math.Float32bits(before[i]) != math.Float32bits(m.Params[i]) {
			t.Fatalf("parameter %d changed", i)
		}
	}
}

func TestBadDatumNamesIt(t *testing.T) {
	m, _ := model.New(tinyConfig(6), 4)
	l, _ := NewLearner(m, optim.DefaultAdamW())
	batch := sft([][]int32{{1, 2, 3}, {1, 2, 3, 4}})
	batch[1].Weights = batch[1].Weights[:1]
	_, err := l.ForwardBackward(ctx, batch, backend.Loss{NLL: 1})
	if err == nil || !strings.Contains(err.Error(), "datum 1: datum has 3 tokens but 1 weights") {
		t.Fatalf("error %v", err)
	}
	_, err = l.ForwardBackward(ctx, sft([][]int32{{1, 2}}), backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2})
	if err == nil || !strings.Contains(err.Error(), "needs advantages") {
		t.Fatalf("error %v", err)
	}
	// Three datums sharing a context of two tokens, packed as one parent
	// and three continuations: a bad token or target is named at its
	// datum's own position, in the context or after it.
	shared := func() []backend.Datum {
		var out []backend.Datum
		for _, tail := range [][]int32{{3, 4}, {4, 5, 1}, {5}} {
			toks := append([]int32{1, 2}, tail...)
			w := make([]float32, len(toks))
			for i := 1; i < len(toks); i++ {
				w[i] = 1
			}
			out = append(out, backend.Datum{Tokens: toks, Targets: append(toks[1:len(toks):len(toks)], 0), Weights: w})
		}
		return out
	}
	for _, c := range []struct {
		edit func([]backend.Datum)
		want string
	}{
		{func(b []backend.Datum) { b[2].Targets[1] = 9 }, "targets: datum 2 position 1: target 9 outside"},
		{func(b []backend.Datum) { b[1].Tokens[3] = 7 }, "batch: datum 1 position 3: token 7 outside"},
		{func(b []backend.Datum) { b[0].Tokens[0], b[1].Tokens[0], b[2].Tokens[0] = 8, 8, 8 }, "batch: datum 0 position 0: token 8 outside"},
	} {
		batch := shared()
		c.edit(batch)
		if p, err := pack(batch, &backend.Loss{NLL: 1}); err != nil || len(p.b.Parents) != 4 {
			t.Fatalf("packed as %v (%v), want one parent and three continuations", p.b.Parents, err)
		}
		_, err := l.ForwardBackward(ctx, batch, backend.Loss{NLL: 1})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}

// TestSharedPromptsAreExact packs two GRPO groups whose answers share
// their prompt (weight 0), the two prompts sharing their first tokens, with a teacher on their last positions, and
// checks the logprobs, metrics and gradient against each datum run alone.
func TestSharedPromptsAreExact(t *testing.T) {
	// The prompts begin alike, as a system prompt: each group still
	// shares its whole prompt.
	prompts := [][]int32{{1, 2, 3, 4, 5}, {1, 2, 5, 4}}
	answers := [][][]int32{{{7, 1}, {2, 2, 3}, {4}}, {{1, 1, 1, 2}, {3, 3}}}
	var batch []backend.Datum
	for g, p := range prompts {
		for i, a := range answers[g] {
			seq := append(append([]int32{}, p...), a...)
			n := len(seq) - 1
			d := backend.Datum{Tokens: seq[:n], Targets: seq[1:], Weights: make([]float32, n),
				Advantages: make([]float32, n), SamplerLogprobs: make([]float32, n)}
			for j := len(p) - 1; j < n; j++ {
				d.Weights[j], d.Advantages[j], d.SamplerLogprobs[j] = 1, float32(i)-1, -2
			}
			d.Teacher = &backend.Teacher{Tokens: append([]int32{7, int32(g)}, seq[:n]...), Aligned: len(a)}
			batch = append(batch, d)
		}
	}
	loss := backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: 0.2, ClipHigh: 0.2, TeacherKL: 0.5}
	p, err := pack(batch, &loss)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{-1, 0, 0, 0, -1, 4, 4}; !slices.Equal(p.b.Parents, want) {
		t.Fatalf("parents %v, want %v (each group's prompt but its last token packed once)", p.b.Parents, want)
	}
	learner := func() *Learner {
		m, _ := model.New(tinyConfig(8), 3)
		l, _ := NewLearner(m, optim.DefaultAdamW())
		return l
	}
	shared := learner()
	res, err := shared.ForwardBackward(ctx, batch, loss)
	if err != nil {
		t.Fatal(err)
	}
	alone := learner()
	var sum backend.Metrics
	for i := range batch {
		r, err := alone.ForwardBackward(ctx, batch[i:i+1], loss)
		if err != nil {
			t.Fatal(err)
		}
		sum.Loss += r.Metrics.Loss
		sum.Tokens += r.Metrics.Tokens
		for j, v := range r.Logprobs[0] {
			if math.Abs(float64(v-res.Logprobs[i][j])) > 1e-5 {
				t.Fatalf("datum %d position %d: logprob %v shared, %v alone", i, j, res.Logprobs[i][j], v)
			}
		}
		if len(r.Logprobs[0]) != len(res.Logprobs[i]) {
			t.Fatalf("datum %d: %d logprobs shared, %d alone", i, len(res.Logprobs[i]), len(r.Logprobs[0]))
		}
	}
	if math.Abs(sum.Loss-res.Metrics.Loss) > 1e-5 || sum.Tokens != res.Metrics.Tokens {
		t.Fatalf("metrics: loss %v over %v tokens shared, %v over %v alone", res.Metrics.Loss, res.Metrics.Tokens, sum.Loss, sum.Tokens)
	}
	g, ga := shared.Model.Gradients(), alone.Model.Gradients()
	for i := range g {
		if math.Abs(float64(g[i]-ga[i])) > 1e-5+1e-4*math.Abs(float64(ga[i])) {
			t.Fatalf("gradient %d: %v shared, %v alone", i, g[i], ga[i])
		}
	}
	lps, err := Logprobs(ctx, shared.Model, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range batch {
		if !slices.Equal(lps[i], res.Logprobs[i]) {
			t.Fatalf("datum %d: Logprobs %v, ForwardBackward %v", i, lps[i], res.Logprobs[i])
		}
	}
}
