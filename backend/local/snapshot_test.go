package local

import (
	"slices"
	"testing"

	"rlvr/backend"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/engine/sampler"
	"rlvr/sample"
)

// TestSnapshotSamplesItsVersion: after an update, a snapshot's sampler
// draws from the weights of its version — its logprobs are the learner's
// at that version — while the learner updates its own in place, for full
// fine-tuning and for LoRA adapters. An async rollout that samples the
// base model instead of the updated adapters (ms-swift #9855, verl #3821)
// or the learner's newer weights fails it.
func TestSnapshotSamplesItsVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *Learner
	}{
		{"full", func(t *testing.T) *Learner {
			m, err := model.New(tinyConfig(10), 3)
			if err != nil {
				t.Fatal(err)
			}
			l, err := NewLearner(m, optim.DefaultAdamW())
			if err != nil {
				t.Fatal(err)
			}
			return l
		}},
		{"lora", func(t *testing.T) *Learner { return newLoRA(t, everyMatrix) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.open(t)
			s := &Session{Learner: l, Sampler: NewSampler(l.Model, nil)}
			corpus := sft([][]int32{{1, 5, 9, 2, 7, 7, 3, 0}, {2, 4, 4, 8, 2, 6, 0}})
			update := func() {
				t.Helper()
				if _, err := l.ForwardBackward(ctx, corpus, backend.Loss{NLL: 1}); err != nil {
					t.Fatal(err)
				}
				if _, err := l.OptimStep(ctx, backend.OptimParams{LearningRate: 3e-2}); err != nil {
					t.Fatal(err)
				}
			}
			// The weights of versions 0, 1 and 2, as the learner holds them.
			versions := [][]float32{slices.Clone(l.Model.Params)}
			snap0, err := s.Snapshot(0, nil)
			if err != nil {
				t.Fatal(err)
			}
			update()
			versions = append(versions, slices.Clone(l.Model.Params))
			snap1, err := s.Snapshot(1, nil)
			if err != nil {
				t.Fatal(err)
			}
			update() // the learner moves on to version 2 in place
			versions = append(versions, slices.Clone(l.Model.Params))
			// A spent snapshot taken again holds the newest version.
			snap2, err := s.Snapshot(2, snap0)
			if err != nil {
				t.Fatal(err)
			}
			if snap2 != snap0 || snap2.Version != 2 {
				t.Fatalf("reusing a snapshot: got %p version %d, want %p version 2", snap2, snap2.Version, snap0)
			}
			at := func(v int) *model.Model {
				m, err := model.NewEmpty(l.Model.Config)
				if err != nil {
					t.Fatal(err)
				}
				copy(m.Params, versions[v])
				return m
			}
			for _, sn := range []*Snapshot{snap1, snap2} {
				prompts, conts, lps := draw(t, sn.Sampler)
				for v := range versions {
					gap, err := sampler.LogprobGap(at(v), prompts, conts, lps)
					if err != nil {
						t.Fatal(err)
					}
					if v == sn.Version && gap > 1e-4 {
						t.Errorf("snapshot of version %d: max |sampler − learner at version %d| logprob gap %.3g > 1e-4", sn.Version, v, gap)
					}
					if v != sn.Version && gap < 1e-2 {
						t.Errorf("snapshot of version %d samples like version %d (gap %.3g): the updates did not reach it, or it follows the learner", sn.Version, v, gap)
					}
				}
			}
		})
	}
}

// draw samples a few continuations from s.
func draw(t *testing.T, s *Sampler) (prompts, conts [][]int32, lps [][]float32) {
	t.Helper()
	reqs := []sample.Request{{Prompt: []int32{1, 5}, Params: sample.Params{N: 4, MaxTokens: 12, Temperature: 1, Seed: 7}},
		{Prompt: []int32{2, 4, 4}, Params: sample.Params{N: 4, MaxTokens: 12, Temperature: 1, Seed: 8}}}
	out, err := s.Sample(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, cs := range out {
		for _, c := range cs {
			prompts = append(prompts, reqs[i].Prompt)
			conts = append(conts, c.Tokens)
			lps = append(lps, c.Logprobs)
		}
	}
	return prompts, conts, lps
}
