package dapo

import (
	"rlvr/method"
	"rlvr/method/part"
)

// The parts of DAPO, as a config's parts: lists them.
const (
	PartDynamicSampling = "dynamic_sampling"
	PartOverlongPenalty = "overlong_penalty"
)

func init() {
	// Algorithm dapo runs both unless a config lists its parts.
	part.Register(part.Part{Name: PartDynamicSampling, Order: 20, Rollouts: true, DefaultFor: []method.Algorithm{method.DAPO},
		New:   func() part.Section { return &DynamicSamplingConfig{MaxRounds: 3} },
		Acted: func(m method.Metrics) bool { return m[method.MetricResampled] > 0 }})
	part.Register(part.Part{Name: PartOverlongPenalty, Order: 30, Rollouts: true, DefaultFor: []method.Algorithm{method.DAPO},
		New:   func() part.Section { return &OverlongPenaltyConfig{} },
		Acted: func(m method.Metrics) bool { return m[MetricOverlongPenalized] > 0 }})
	// DAPO: clip-higher and token-mean (the algorithm), dynamic sampling
	// and the soft overlong penalty.
	part.RegisterPreset("dapo", `
algorithm: dapo
parts: [dynamic_sampling, overlong_penalty]
dynamic_sampling: {max_rounds: 3}
overlong_penalty: {}
`)
}

// DynamicSamplingConfig is DAPO's filter: groups all right or all wrong are
// dropped and more questions drawn. A run that lists the part without a
// section draws up to 3 extra rounds; a section that sets no max_rounds,
// none.
type DynamicSamplingConfig struct {
	MaxRounds int `yaml:"max_rounds"` // extra sampling rounds per step
}

// Resolve implements part.Section.
func (d *DynamicSamplingConfig) Resolve(_ *part.Run, add func(string, ...any)) {
	if d.MaxRounds < 0 {
		add("dynamic_sampling.max_rounds = %d is negative", d.MaxRounds)
	}
}

// Join implements part.Section.
func (d *DynamicSamplingConfig) Join(b *part.Build) error {
	b.Filter = DynamicSampling{MaxRounds: d.MaxRounds}
	return nil
}

// OverlongPenaltyConfig is DAPO's soft overlong penalty over the last
// Buffer tokens of the budget.
type OverlongPenaltyConfig struct {
	Buffer int `yaml:"buffer"` // tokens; 0 means max_tokens/4
}

// Resolve implements part.Section.
func (o *OverlongPenaltyConfig) Resolve(run *part.Run, add func(string, ...any)) {
	if o.Buffer == 0 {
		o.Buffer = run.MaxTokens / 4
	}
	if o.Buffer < 0 || o.Buffer >= run.MaxTokens {
		add("overlong_penalty.buffer = %d must be in [0, max_tokens)", o.Buffer)
	}
}

// Join implements part.Section. The penalty shapes the verifier's reward
// first, before a KL in the reward and any other part's shaping: it is
// part of what an answer earns.
func (o *OverlongPenaltyConfig) Join(b *part.Build) error {
	b.Shapers = append([]method.Shaper{OverlongPenalty{MaxTokens: b.Run.MaxTokens, Buffer: o.Buffer}}, b.Shapers...)
	return nil
}
