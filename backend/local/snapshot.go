package local

import (
	"fmt"

	"rlvr/engine/model"
)

// Snapshot is a sampler over a copy of a session's weights taken at one
// version: it keeps drawing from that version while the learner updates
// its own weights in place (async RL). The session's own Sampler reads
// the learner's weights, so it always samples the latest update; a
// Snapshot never does. With LoRA adapters the copy is of the merged
// weights (base + BA, which every optimizer step writes into the model),
// so a snapshot samples the adapted model, never the base alone.
//
// A Snapshot is not safe for concurrent use, and it is independent of the
// session once taken: the learner and any number of snapshots may run at
// the same time, each from its own goroutine.
type Snapshot struct {
	*Sampler
	// Version labels the weights copied: the caller's count of the
	// learner's updates when they were taken (the training loop counts
	// steps).
	Version int
	model   *model.Model
}

// Snapshot copies the session's weights as they are now, labelled
// version, into a sampler over the copy, in the sampler's precision and
// with its stream bound. reuse, when not nil, is a snapshot of this
// session no longer in use: its memory (the copy, and the packed weights
// and KV cache of its sampler) is taken instead of allocating new.
func (s *Session) Snapshot(version int, reuse *Snapshot) (*Snapshot, error) {
	if s.Model.Frozen() {
		return nil, fmt.Errorf("local: snapshot: %w", model.ErrFrozen)
	}
	from := s.Sampler.Engine
	if reuse != nil && len(reuse.model.Params) == len(s.Model.Params) {
		copy(reuse.model.Params, s.Model.Params)
		reuse.model.Precision = from.Model.Precision
		reuse.Engine.MaxStreams = from.MaxStreams
		if err := reuse.Engine.Repack(); err != nil {
			return nil, fmt.Errorf("local: snapshot: %w", err)
		}
		reuse.Version = version
		return reuse, nil
	}
	m, err := model.NewEmpty(s.Model.Config)
	if err != nil {
		return nil, fmt.Errorf("local: snapshot: %w", err)
	}
	copy(m.Params, s.Model.Params)
	m.Precision = from.Model.Precision
	smp := NewFixedSampler(m, s.Sampler.Decoder)
	smp.Engine.MaxStreams = from.MaxStreams
	return &Snapshot{Sampler: smp, Version: version, model: m}, nil
}
