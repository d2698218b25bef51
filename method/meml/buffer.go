package meml

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/task"
)

// HardBuffer is MEML-GRPO's hard-example accumulation: when an expert
// answers more than K of its G samples wrong, (Q, P_i) → the reference
// solution joins the buffer with probability K/G; when the buffer holds
// Capacity examples, they all train by NLL in that step, and the buffer
// is emptied. The buffer survives checkpoints.
type HardBuffer struct {
	K        int // paper: 6 of G = 8
	Capacity int // B; paper: 64
	// LR 0 adds the buffer's term to the step's one gradient (eq. 11: one
	// objective); positive, the term takes an optimizer step of its own at
	// this rate, with optimizer state of its own (method.Term.LR).
	LR      float64
	Weight  float32 // λ2
	Entries []HardExample
	Passes  int // SFT updates run so far
}

// The hard-example buffer's metrics, each step.
const (
	MetricBufferAdded  = "buffer/added"  // (Q, P_i) added this step
	MetricBufferFill   = "buffer/fill"   // entries held after the step
	MetricBufferPasses = "buffer/passes" // SFT passes over a full buffer so far
)

// HardExample is one buffered (question, expert prompt).
type HardExample struct {
	Example task.Example
	Variant method.Variant
}

// Terms implements method.Extra.
func (h *HardBuffer) Terms(_ context.Context, sc *method.StepContext, groups []method.Scored) ([]method.Term, error) {
	// The draws derive from the step's seed, so a resumed run draws the
	// same.
	rng := rand.New(rand.NewPCG(sc.Seed, 0x68617264))
	added := 0
	for _, g := range groups {
		wrong := 0
		for _, c := range g.Correct {
			if !c {
				wrong++
			}
		}
		n := len(g.Correct)
		if n == 0 || wrong <= h.K || task.ReferenceResponse(g.Example) == "" {
			continue
		}
		if rng.Float64() < float64(h.K)/float64(n) {
			h.Entries = append(h.Entries, HardExample{Example: g.Example, Variant: g.Variant})
			added++
		}
	}
	sc.Metrics.Set(MetricBufferAdded, float64(added))
	if len(h.Entries) < h.Capacity {
		sc.Metrics.Set(MetricBufferFill, float64(len(h.Entries)))
		sc.Metrics.Set(MetricBufferPasses, float64(h.Passes))
		return nil, nil
	}
	var data []backend.Datum
	for _, e := range h.Entries {
		p, err := sc.Prompt(e.Example, e.Variant)
		if err != nil {
			return nil, err
		} else if p == nil {
			continue
		}
		data = append(data, method.ResponseDatum(p, sc.Render.Response(task.ReferenceResponse(e.Example))))
	}
	h.Entries, h.Passes = nil, h.Passes+1
	sc.Metrics.Set(MetricBufferFill, 0)
	sc.Metrics.Set(MetricBufferPasses, float64(h.Passes))
	return []method.Term{{Name: "hard_sft", Data: data, Loss: backend.Loss{NLL: h.Weight}, Aggregation: backend.TokenMean, LR: h.LR}}, nil
}

// hardState is what the buffer keeps across a checkpoint.
type hardState struct {
	Entries []HardExample `json:"entries"`
	Passes  int           `json:"passes"`
}

// StateName implements method.StateNamer: the name its state has had in
// checkpoints since it was written.
func (h *HardBuffer) StateName() string { return "*method.HardBuffer" }

// State implements method.Stateful.
func (h *HardBuffer) State() (json.RawMessage, error) {
	return json.Marshal(hardState{Entries: h.Entries, Passes: h.Passes})
}

// Restore implements method.Stateful.
func (h *HardBuffer) Restore(b json.RawMessage) error {
	var st hardState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("hard-example buffer: %w", err)
	}
	if len(st.Entries) > h.Capacity {
		return fmt.Errorf("hard-example buffer: %d entries saved for a capacity of %d", len(st.Entries), h.Capacity)
	}
	h.Entries, h.Passes = st.Entries, st.Passes
	return nil
}
