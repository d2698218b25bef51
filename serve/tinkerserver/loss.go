package tinkerserver

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/engine/model"
)

// lossSpec is a call's loss function and the engine's loss that
// computes it, or, for a sequence-level loss (gspo), the terms the server
// computes from a forward pass's logprobs.
type lossSpec struct {
	fn   string
	loss backend.Loss
	gspo *gspoLoss // set for gspo: its terms at a position depend on the whole sequence
	// custom, for loss_fn custom, is the uploaded loss (customloss.go).
	custom *customLoss
}

// The loss_fn_inputs keys.
const (
	keyTargets    = "target_tokens"
	keyWeights    = "weights"
	keyLogprobs   = "logprobs"
	keyAdvantages = "advantages"
	keyRatioMask  = tinker.SequenceRatioMask
)

// lossNames are the loss functions served, in the order errors list them.
var lossNames = []string{tinker.CrossEntropy, tinker.ImportanceSampling, tinker.PPO, tinker.CISPO, tinker.DRO, tinker.GSPO}

// unsupportedLosses are the SDK's other loss functions, with why they are
// refused.
var unsupportedLosses = map[string]string{
	"stable_reinforce": stableReinforceWhy,
}

// stableReinforceWhy is why stable_reinforce, and the sampler's
// record_stability_info it needs, are not offered.
const stableReinforceWhy = "Tinker publishes neither its objective nor what a sampler records for it with record_stability_info " +
	"(its documentation calls it alpha), so this server has no definition to compute; gspo, ppo and cispo correct for an off-policy sampler"

// parseLoss reads loss_fn and its config: loss_fn_config's numbers, and
// the text values only the protobuf form's loss_fn_config_v2 carries
// (none of these losses takes one).
//
// ppo, cispo and gspo take clip_low_threshold (default 0.8, in (0, 1])
// and clip_high_threshold (default 1.2, at least 1) — Tinker documents
// these defaults for ppo, and cispo and gspo take the same; dro takes
// beta, required, since Tinker documents no default for it.
func parseLoss(fn string, cfg map[string]float64, text map[string]string) (lossSpec, error) {
	spec := lossSpec{fn: fn}
	allowed := []string{}
	clip := func() (lo, hi float32, err error) {
		allowed = []string{tinker.ClipHighThreshold, tinker.ClipLowThreshold}
		l, h := 0.8, 1.2
		if v, ok := cfg[tinker.ClipLowThreshold]; ok {
			l = v
		}
		if v, ok := cfg[tinker.ClipHighThreshold]; ok {
			h = v
		}
		if !(l > 0 && l <= 1) {
			return 0, 0, userErr("loss_fn_config.%s is %v, want in (0, 1]", tinker.ClipLowThreshold, l)
		}
		if !(h >= 1 && h <= 1e6) {
			return 0, 0, userErr("loss_fn_config.%s is %v, want at least 1 (and finite)", tinker.ClipHighThreshold, h)
		}
		return float32(1 - l), float32(h - 1), nil
	}
	switch fn {
	case tinker.CrossEntropy:
		spec.loss = backend.Loss{NLL: 1}
	case tinker.ImportanceSampling:
		spec.loss = backend.Loss{PolicyGradient: backend.Importance}
	case tinker.GSPO:
		lo, hi, err := clip()
		if err != nil {
			return spec, err
		}
		spec.gspo = &gspoLoss{low: 1 - float64(lo), high: 1 + float64(hi)}
		// The engine's pass is the gradient's: an NLL whose weights are the
		// derivatives gspoLoss computes (sequenceForwardBackward).
		spec.loss = backend.Loss{NLL: 1}
	case tinker.PPO, tinker.CISPO:
		lo, hi, err := clip()
		if err != nil {
			return spec, err
		}
		pg := backend.ClippedPG
		if fn == tinker.CISPO {
			pg = backend.CISPO
		}
		spec.loss = backend.Loss{PolicyGradient: pg, ClipLow: lo, ClipHigh: hi}
	case tinker.DRO:
		allowed = []string{tinker.Beta}
		beta, ok := cfg[tinker.Beta]
		switch {
		case !ok:
			return spec, userErr("loss_fn_config.%s is missing: loss_fn %s needs it (the penalty's weight, e.g. 0.05)", tinker.Beta, fn)
		case !(beta >= 0 && beta <= math.MaxFloat32):
			return spec, userErr("loss_fn_config.%s is %v, want finite and not negative", tinker.Beta, beta)
		}
		spec.loss = backend.Loss{PolicyGradient: backend.DRO, DROBeta: float32(beta)}
	case "":
		return spec, userErr("loss_fn is missing (want %s)", strings.Join(lossNames, ", "))
	default:
		if why, ok := unsupportedLosses[fn]; ok {
			return spec, userErr("loss_fn %s is not supported here: %s (supported: %s)", fn, why, strings.Join(lossNames, ", "))
		}
		return spec, userErr("loss_fn %q is not supported here (want %s)", fn, strings.Join(lossNames, ", "))
	}
	var unknown []string
	for k := range cfg {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		if len(allowed) == 0 {
			return spec, userErr("loss_fn_config: loss_fn %s takes no config, got %s", fn, strings.Join(unknown, ", "))
		}
		return spec, userErr("loss_fn_config: loss_fn %s does not take %s (it takes %s)", fn, strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	}
	if len(text) > 0 {
		keys := slices.Sorted(maps.Keys(text))
		return spec, userErr("loss_fn_config_v2: %s is text (%q); loss_fn %s takes numbers only", keys[0], shorten(text[keys[0]], 64), fn)
	}
	return spec, nil
}

// policy reports whether the loss reads the sampler's logprobs and the
// advantages.
func (l *lossSpec) policy() bool {
	return l.loss.PolicyGradient != backend.NoPolicyGradient || l.gspo != nil
}

// batch is a call's data as the engine takes it, with what a
// sequence-level loss reads beside it.
type batch struct {
	datums []backend.Datum
	masks  [][]float32 // gspo's sequence_ratio_mask, per datum; nil for other losses
	custom [][]tensor  // a custom loss's inputs per datum, logprobs (index 0) aside; nil for other losses
}

// toDatums checks the data against the loss and the model and turns it
// into the engine's datums; an error names the datum and the field.
func toDatums(data []tinker.Datum, spec lossSpec, mc model.Config) (batch, error) {
	if len(data) == 0 {
		return batch{}, userErr("data is empty")
	}
	out := batch{datums: make([]backend.Datum, len(data))}
	if spec.gspo != nil {
		out.masks = make([][]float32, len(data))
	}
	if spec.custom != nil {
		out.custom = make([][]tensor, len(data))
	}
	for i := range data {
		d, mask, err := toDatum(&data[i], spec, mc)
		if err == nil && spec.custom != nil {
			out.custom[i], err = customInputs(&data[i], spec.custom, len(d.Tokens))
		}
		if err != nil {
			return batch{}, userErr("data[%d]: %v", i, err)
		}
		out.datums[i] = d
		if out.masks != nil {
			out.masks[i] = mask
		}
	}
	return out, nil
}

func toDatum(td *tinker.Datum, spec lossSpec, mc model.Config) (d backend.Datum, mask []float32, err error) {
	toks, err := td.ModelInput.Tokens()
	if err != nil {
		return d, nil, fmt.Errorf("model_input.%v", err)
	}
	n := len(toks)
	switch {
	case n == 0:
		return d, nil, fmt.Errorf("model_input has no tokens")
	case n > mc.MaxSeq:
		return d, nil, fmt.Errorf("model_input has %d tokens, more than the model's context of %d", n, mc.MaxSeq)
	}
	if err := checkVocab("model_input", toks, mc.Vocab); err != nil {
		return d, nil, err
	}
	d.Tokens = toks
	known := []string{keyAdvantages, keyLogprobs, keyTargets, keyWeights}
	if spec.gspo != nil {
		known = []string{keyAdvantages, keyLogprobs, keyRatioMask, keyTargets, keyWeights}
	}
	var keys []string
	for k := range td.LossFnInputs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if spec.custom != nil {
			break // the loss's inputs are read by customInputs; others are not read
		}
		if !slices.Contains(known, k) {
			return d, nil, fmt.Errorf("loss_fn_inputs.%s is not an input of %s (inputs: %s)", k, spec.fn, strings.Join(known, ", "))
		}
		if got := len(td.LossFnInputs[k].Data); got != n {
			return d, nil, fmt.Errorf("loss_fn_inputs.%s has %d values, model_input %d", k, got, n)
		}
	}
	need := []string{keyTargets}
	if spec.policy() {
		need = append(need, keyLogprobs, keyAdvantages)
	}
	if spec.gspo != nil {
		need = append(need, keyRatioMask)
	}
	for _, k := range need {
		if _, ok := td.LossFnInputs[k]; !ok {
			return d, nil, fmt.Errorf("loss_fn_inputs.%s is missing (loss_fn %s needs %s)", k, spec.fn, strings.Join(need, ", "))
		}
	}
	if d.Targets, err = td.LossFnInputs[keyTargets].Int32s(); err != nil {
		return d, nil, fmt.Errorf("loss_fn_inputs.%s: %v", keyTargets, err)
	}
	for j, t := range d.Targets {
		if int(t) >= mc.Vocab {
			return d, nil, fmt.Errorf("loss_fn_inputs.%s: data[%d] = %d is outside the vocabulary [0, %d)", keyTargets, j, t, mc.Vocab)
		}
	}
	floats := func(k string) ([]float32, error) {
		v, ok := td.LossFnInputs[k]
		if !ok {
			return nil, nil
		}
		f, err := v.Float32s()
		if err != nil {
			return nil, fmt.Errorf("loss_fn_inputs.%s: %v", k, err)
		}
		return f, nil
	}
	if d.Weights, err = floats(keyWeights); err != nil {
		return d, nil, err
	}
	if d.Weights == nil {
		// SkyRL's default: every position counts.
		d.Weights = make([]float32, n)
		for j := range d.Weights {
			d.Weights[j] = 1
		}
	}
	lps, err := floats(keyLogprobs)
	if err != nil {
		return d, nil, err
	}
	adv, err := floats(keyAdvantages)
	if err != nil {
		return d, nil, err
	}
	if spec.policy() {
		d.SamplerLogprobs, d.Advantages = lps, adv
	}
	if spec.gspo != nil {
		if mask, err = floats(keyRatioMask); err != nil {
			return d, nil, err
		}
		if !slices.ContainsFunc(mask, func(m float32) bool { return m != 0 }) {
			return d, nil, fmt.Errorf("loss_fn_inputs.%s marks no position: the sequence ratio averages over the positions it marks (non-zero)", keyRatioMask)
		}
	}
	return d, mask, nil
}

// elementwise is each position's loss of datum i, as the engine's loss
// (or gspoLoss) states it, from the learner's logprobs.
func (l *lossSpec) elementwise(b *batch, i int, lps []float32) []float32 {
	out := make([]float32, len(lps))
	if l.gspo != nil {
		loss, _ := l.gspo.terms(&b.datums[i], b.masks[i], lps)
		for j, v := range loss {
			out[j] = float32(v)
		}
		return out
	}
	d := &b.datums[i]
	for j, lp := range lps {
		out[j] = float32(l.loss.LogpTerms(float64(lp), d.Inputs(j)).Loss)
	}
	return out
}

// gspoLoss is GSPO's token-level form as Tinker states it: the sequence
// ratio s = exp(mean over the positions sequence_ratio_mask marks of
// (logp − sampler logp)), a value every position carries with the
// gradient of its own logprob, s_t = sg(s)·p_t/sg(p_t), and the loss
// −Σ_t w_t·min(s_t·A_t, clip(s_t, low, high)·A_t).
type gspoLoss struct {
	low, high float64 // the ratio's bounds, 1 − ε_low and 1 + ε_high
}

// terms are each position's loss and its derivative with respect to that
// position's logprob, the others held fixed (s is a stop-gradient value):
// −w·A·s where the unclipped branch is taken, 0 where the clip is.
func (g *gspoLoss) terms(d *backend.Datum, mask, lps []float32) (loss, dlogp []float64) {
	sum, n := 0.0, 0
	for j, m := range mask {
		if m != 0 {
			sum += float64(lps[j]) - float64(d.SamplerLogprobs[j])
			n++
		}
	}
	logRatio := sum / float64(n) // toDatum checked that the mask marks a position
	s := math.Exp(math.Max(-backend.MaxLogRatio, math.Min(backend.MaxLogRatio, logRatio)))
	loss, dlogp = make([]float64, len(lps)), make([]float64, len(lps))
	for j := range lps {
		w, a := float64(d.Weights[j]), float64(d.Advantages[j])
		switch {
		case a > 0 && s > g.high:
			loss[j] = -w * g.high * a
		case a < 0 && s < g.low:
			loss[j] = -w * g.low * a
		default:
			loss[j] = -w * s * a
			dlogp[j] = -w * a * s
		}
	}
	return loss, dlogp
}

// chunkTokens counts a model input's tokens, whatever its chunks' types.
func chunkTokens(in tinker.ModelInput) int {
	n := 0
	for _, c := range in.Chunks {
		n += len(c.Tokens)
	}
	return n
}

// checkVocab refuses the first token outside the vocabulary [0, vocab),
// naming it as a token of what.
func checkVocab(what string, toks []int32, vocab int) error {
	for j, t := range toks {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("%s token %d is %d, outside the vocabulary [0, %d)", what, j, t, vocab)
		}
	}
	return nil
}
