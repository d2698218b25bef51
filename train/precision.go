package train

import (
	"context"
	"fmt"
	"math"
	"strings"

	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/method"
)

// PrecisionFP32 is the precision a config that names none runs in.
const PrecisionFP32 = "fp32"

// resolvePrecision fills the sampler's precision from the learner's,
// writes both by their one name (bfloat16 as bf16), and checks them and
// the sampler correction.
func (c *RLConfig) resolvePrecision(add func(string, ...any)) {
	if c.Precision == "" {
		c.Precision = PrecisionFP32
	}
	check := func(name string, v *string) {
		p, err := model.ParsePrecision(*v)
		if err != nil {
			add("%s %s", name, strings.TrimPrefix(err.Error(), "precision "))
			return
		}
		*v = p.String()
		if p != model.FP32 && c.Backend.remote() {
			add("backend tinker: %s %s sets rlvr's own engine; the server computes in its own precision (%s: %s)", name, *v, name, PrecisionFP32)
		}
	}
	check("precision", &c.Precision)
	if c.Precision == model.INT8.String() {
		add("precision int8 is for sampling (sampler_precision: int8): the learner trains in fp32 or bf16")
	}
	if c.SamplerPrecision == "" {
		c.SamplerPrecision = c.Precision
	} else {
		check("sampler_precision", &c.SamplerPrecision)
	}
	if sc := c.SamplerCorrection; sc != nil {
		if err := (backend.SamplerCorrection{Cap: sc.Cap}).Validate(); err != nil {
			add("sampler_correction.cap = %v must be finite and at least 1 (a cap below 1 truncates the tokens both sides agree on)", sc.Cap)
		}
		if c.Algorithm == method.SFT || c.Algorithm == method.RFT {
			add("sampler_correction weighs a policy gradient, which %s does not train", c.Algorithm)
		}
	}
}

// precisions are the parsed precisions of the run's learner and sampler,
// of a resolved config.
func (c *RLConfig) precisions() (learner, sampler model.Precision, err error) {
	if learner, err = model.ParsePrecision(c.Precision); err != nil {
		return learner, sampler, fmt.Errorf("train config: precision: %w", err)
	}
	if sampler, err = model.ParsePrecision(c.SamplerPrecision); err != nil {
		return learner, sampler, fmt.Errorf("train config: sampler_precision: %w", err)
	}
	return learner, sampler, nil
}

// logprobGap sums |learner logprob − sampler logprob| over the sampled
// tokens of the datums it is given: those with sampler logprobs, at
// their positions of non-zero weight.
type logprobGap struct {
	tokens     int
	sum, worst float64
}

// add scores data, whose targets the learner gave the logprobs lps.
func (g *logprobGap) add(data []backend.Datum, lps [][]float32) {
	for i := range data {
		d := &data[i]
		if d.SamplerLogprobs == nil || i >= len(lps) || len(lps[i]) != d.Len() {
			continue
		}
		for j, w := range d.Weights {
			if w == 0 {
				continue
			}
			x := math.Abs(float64(lps[i][j]) - float64(d.SamplerLogprobs[j]))
			g.tokens++
			g.sum += x
			g.worst = math.Max(g.worst, x)
		}
	}
}

// log sets the gap's metrics, when it saw a token.
func (g *logprobGap) log(m method.Metrics) {
	if g.tokens > 0 {
		m.Set(MetricLogprobGapMean, g.sum/float64(g.tokens))
		m.Set(MetricLogprobGapMax, g.worst)
	}
}

// correctSampler folds the sampler correction into the policy-gradient
// terms among terms: the learner scores their datums before the step's
// first update (π_old), and backend.SamplerCorrection.Apply weighs each
// sampled token. The gap between those logprobs and the sampler's goes to
// gap, and the weights' mean and truncated share to m.
func (l *loop) correctSampler(ctx context.Context, terms []method.Term, gap *logprobGap, m method.Metrics) error {
	c := backend.SamplerCorrection{Cap: l.cfg.SamplerCorrection.Cap}
	var st backend.CorrectionStats
	for _, t := range terms {
		if t.Loss.PolicyGradient == backend.NoPolicyGradient {
			continue
		}
		// In the passes the update takes, so that memory stays bounded
		// as micro_batch_tokens bounds it.
		var old [][]float32
		for _, micro := range backend.MicroBatches(t.Data, l.cfg.MicroBatchTokens) {
			lps, err := l.pol.learner.Logprobs(ctx, micro)
			if err != nil {
				return fmt.Errorf("term %s: the learner's logprobs before the update: %w", t.Name, err)
			}
			old = append(old, lps...)
		}
		gap.add(t.Data, old)
		s, err := c.Apply(t.Data, old)
		if err != nil {
			return fmt.Errorf("term %s: %w", t.Name, err)
		}
		st.Tokens += s.Tokens
		st.Capped += s.Capped
		st.Sum += s.Sum
	}
	if st.Tokens > 0 {
		m.Set(MetricISWeightMean, st.Sum/float64(st.Tokens))
		m.Set(MetricISCappedFrac, float64(st.Capped)/float64(st.Tokens))
	}
	return nil
}
