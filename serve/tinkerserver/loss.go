package tinkerserver

import (
	"fmt"
	"slices"
	"strings"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/engine/model"
)

// lossSpec is a call's loss function and the engine's loss that
// computes it.
type lossSpec struct {
	fn   string
	loss backend.Loss
}

// The loss_fn_inputs keys.
const (
	keyTargets    = "target_tokens"
	keyWeights    = "weights"
	keyLogprobs   = "logprobs"
	keyAdvantages = "advantages"
)

// parseLoss reads loss_fn and loss_fn_config.
func parseLoss(fn string, cfg map[string]float64) (lossSpec, error) {
	spec := lossSpec{fn: fn}
	allowed := []string{}
	switch fn {
	case tinker.CrossEntropy:
		spec.loss = backend.Loss{NLL: 1}
	case tinker.ImportanceSampling:
		spec.loss = backend.Loss{PolicyGradient: backend.Importance}
	case tinker.PPO:
		allowed = []string{tinker.ClipHighThreshold, tinker.ClipLowThreshold}
		lo, hi := 0.8, 1.2
		if v, ok := cfg[tinker.ClipLowThreshold]; ok {
			lo = v
		}
		if v, ok := cfg[tinker.ClipHighThreshold]; ok {
			hi = v
		}
		if !(lo > 0 && lo <= 1) {
			return spec, userErr("loss_fn_config.%s is %v, want in (0, 1]", tinker.ClipLowThreshold, lo)
		}
		if !(hi >= 1 && hi <= 1e6) {
			return spec, userErr("loss_fn_config.%s is %v, want at least 1 (and finite)", tinker.ClipHighThreshold, hi)
		}
		spec.loss = backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: float32(1 - lo), ClipHigh: float32(hi - 1)}
	case "":
		return spec, userErr("loss_fn is missing (want %s, %s or %s)", tinker.CrossEntropy, tinker.ImportanceSampling, tinker.PPO)
	default:
		return spec, userErr("loss_fn %q is not supported here (want %s, %s or %s)", fn, tinker.CrossEntropy, tinker.ImportanceSampling, tinker.PPO)
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
	return spec, nil
}

// policy reports whether the loss reads the sampler's logprobs and the
// advantages.
func (l *lossSpec) policy() bool { return l.loss.PolicyGradient != backend.NoPolicyGradient }

// toDatums checks the data against the loss and the model and turns it
// into the engine's datums; an error names the datum and the field.
func toDatums(data []tinker.Datum, spec lossSpec, mc model.Config) ([]backend.Datum, error) {
	if len(data) == 0 {
		return nil, userErr("data is empty")
	}
	out := make([]backend.Datum, len(data))
	for i := range data {
		d, err := toDatum(&data[i], spec, mc)
		if err != nil {
			return nil, userErr("data[%d]: %v", i, err)
		}
		out[i] = d
	}
	return out, nil
}

func toDatum(td *tinker.Datum, spec lossSpec, mc model.Config) (backend.Datum, error) {
	var d backend.Datum
	toks, err := td.ModelInput.Tokens()
	if err != nil {
		return d, fmt.Errorf("model_input.%v", err)
	}
	n := len(toks)
	switch {
	case n == 0:
		return d, fmt.Errorf("model_input has no tokens")
	case n > mc.MaxSeq:
		return d, fmt.Errorf("model_input has %d tokens, more than the model's context of %d", n, mc.MaxSeq)
	}
	if err := checkVocab("model_input", toks, mc.Vocab); err != nil {
		return d, err
	}
	d.Tokens = toks
	known := []string{keyAdvantages, keyLogprobs, keyTargets, keyWeights}
	var keys []string
	for k := range td.LossFnInputs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return d, fmt.Errorf("loss_fn_inputs.%s is not an input of %s (inputs: %s)", k, spec.fn, strings.Join(known, ", "))
		}
		if got := len(td.LossFnInputs[k].Data); got != n {
			return d, fmt.Errorf("loss_fn_inputs.%s has %d values, model_input %d", k, got, n)
		}
	}
	need := []string{keyTargets}
	if spec.policy() {
		need = append(need, keyLogprobs, keyAdvantages)
	}
	for _, k := range need {
		if _, ok := td.LossFnInputs[k]; !ok {
			return d, fmt.Errorf("loss_fn_inputs.%s is missing (loss_fn %s needs %s)", k, spec.fn, strings.Join(need, ", "))
		}
	}
	if d.Targets, err = td.LossFnInputs[keyTargets].Int32s(); err != nil {
		return d, fmt.Errorf("loss_fn_inputs.%s: %v", keyTargets, err)
	}
	for j, t := range d.Targets {
		if int(t) >= mc.Vocab {
			return d, fmt.Errorf("loss_fn_inputs.%s: data[%d] = %d is outside the vocabulary [0, %d)", keyTargets, j, t, mc.Vocab)
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
		return d, err
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
		return d, err
	}
	adv, err := floats(keyAdvantages)
	if err != nil {
		return d, err
	}
	if spec.policy() {
		d.SamplerLogprobs, d.Advantages = lps, adv
	}
	return d, nil
}

// elementwise is each position's loss, as the engine's loss states it,
// from the learner's logprobs.
func (l *lossSpec) elementwise(d *backend.Datum, lps []float32) []float32 {
	out := make([]float32, len(lps))
	for j, lp := range lps {
		out[j] = float32(l.loss.LogpTerms(float64(lp), d.Inputs(j)).Loss)
	}
	return out
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
