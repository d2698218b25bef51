package method

import (
	"context"

	"rlvr/backend"
	"rlvr/task"
)

// Supervised is SFT as a method: token-mean NLL of each example's
// reference solution after its prompt, under every variant, or only under
// the variant its Meta[VariantKey] names (MEML-GRPO's MEF trains one model
// on every expert's answers, each behind its own expert's prompt). It
// samples nothing.
type Supervised struct {
	Variants []Variant // empty: the plain prompt
	// MaxLen is the longest sequence the model takes; longer examples are
	// skipped and counted.
	MaxLen int
}

// Step implements Method.
func (s *Supervised) Step(ctx context.Context, sc *StepContext, examples []task.Example) (*Batch, error) {
	variants := s.Variants
	if len(variants) == 0 {
		variants = []Variant{{}}
	}
	var data []backend.Datum
	for _, e := range examples {
		resp := task.ReferenceResponse(e)
		if resp == "" {
			sc.Metrics["data/skipped_no_solution"]++
			continue
		}
		for _, v := range variants {
			if name, ok := e.Meta[VariantKey]; ok && name != v.Name {
				continue
			}
			p, err := sc.Prompt(e, v)
			if err != nil {
				return nil, err
			} else if p == nil {
				continue
			}
			d := ResponseDatum(p, sc.Render.Response(resp))
			if s.MaxLen > 0 && d.Len() > s.MaxLen {
				sc.Metrics["data/skipped_long_prompts"]++
				continue
			}
			data = append(data, d)
		}
	}
	if len(data) == 0 {
		return &Batch{}, nil
	}
	return &Batch{Terms: []Term{{Name: "sft", Data: data, Loss: backend.Loss{NLL: 1}, Aggregation: backend.TokenMean}}}, nil
}
