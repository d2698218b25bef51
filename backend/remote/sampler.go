package remote

import (
	"context"
	"encoding/json"
	"fmt"

	"golang.org/x/sync/errgroup"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/sample"
)

// Sampler samples on the server from a Model's latest weights, publishing
// them (save_weights_for_sampler) after each optimizer step: tokens and
// logprobs come back as the server sampled them, never re-tokenized. It
// implements rollout.Sampler and is safe for concurrent use.
type Sampler struct {
	Model *Model
	// Decoder decodes completions, and finds stop strings.
	Decoder sample.Decoder
	// Pinned samples Path, a version Model.SamplerPath published ("" the
	// base model), however the model trains on: an async run's rollouts
	// sample the version they were given while forward_backward runs.
	// Unpinned, each Sample publishes and samples the latest weights.
	Pinned bool
	Path   string
}

// Sample implements rollout.Sampler: one asample call per request, in
// flight together. The server stops at its own end tokens and the
// request's stop tokens or strings; sample.Replay then applies the
// request's stop rules exactly as the local sampler does (a stop string's
// last token kept or dropped, the text cut).
func (s *Sampler) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	path := s.Path
	if !s.Pinned {
		var err error
		if path, err = s.Model.samplerPath(ctx); err != nil {
			return nil, err
		}
	}
	for i := range reqs {
		if err := reqs[i].Params.Validate(); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if reqs[i].OnToken != nil {
			return nil, fmt.Errorf("request %d: a remote sampler does not stream tokens", i)
		}
	}
	out := make([][]sample.Completion, len(reqs))
	g, ctx := inFlight(ctx)
	for i := range reqs {
		g.Go(func() (err error) {
			if out[i], err = s.one(ctx, path, &reqs[i]); err != nil {
				return fmt.Errorf("request %d: %w", i, err)
			}
			return nil
		})
	}
	return out, g.Wait()
}

// maxInFlight bounds the calls one Sample or Logprobs has in flight.
const maxInFlight = 64

// inFlight is a group of at most maxInFlight calls whose context ends at
// the first failure, so the others stop polling.
func inFlight(ctx context.Context) (*errgroup.Group, context.Context) {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(maxInFlight)
	return g, ctx
}

func (s *Sampler) one(ctx context.Context, path string, r *sample.Request) ([]sample.Completion, error) {
	p := &r.Params
	n := max(p.N, 1)
	seed := int64(p.Seed)
	sp := tinker.SamplingParams{MaxTokens: p.MaxNew(), Seed: &seed, Temperature: float64(p.Temperature), TopK: p.TopK, TopP: float64(p.TopP)}
	if sp.TopK == 0 {
		sp.TopK = -1
	}
	if sp.TopP == 0 {
		sp.TopP = 1
	}
	// Tinker's stop is strings or token ids, not both. Strings, when the
	// request has them, save the server generating past one; the server
	// stops at its model's end tokens anyway, and Replay honours every
	// stop token the request names.
	var err error
	if len(p.Stop) > 0 {
		sp.Stop, err = json.Marshal(p.Stop)
	} else if len(p.StopTokens) > 0 {
		sp.Stop, err = json.Marshal(p.StopTokens)
	}
	if err != nil {
		return nil, err
	}
	req := tinker.SampleRequest{NumSamples: n, Prompt: tinker.Text(r.Prompt), SamplingParams: sp, Type: "sample"}
	if path != "" {
		req.ModelPath = path
	} else {
		req.BaseModel = s.Model.cfg.BaseModel
	}
	var res tinker.SampleResponse
	if err := s.Model.cfg.Client.Call(ctx, "asample", tinker.PathSample, req, &res); err != nil {
		return nil, err
	}
	if len(res.Sequences) != n {
		return nil, &CallError{Call: "asample", Message: fmt.Sprintf("%d sequences for num_samples %d", len(res.Sequences), n)}
	}
	cs := make([]sample.Completion, n)
	for k, q := range res.Sequences {
		if len(q.Logprobs) != len(q.Tokens) {
			return nil, &CallError{Call: "asample", Message: fmt.Sprintf("sequence %d has %d tokens but %d logprobs", k, len(q.Tokens), len(q.Logprobs))}
		}
		var finish sample.Finish
		switch q.StopReason {
		case tinker.StopStop:
			finish = sample.FinishStop
		case tinker.StopLength:
			finish = sample.FinishLength
		default:
			return nil, &CallError{Call: "asample", Message: fmt.Sprintf("sequence %d: unknown stop_reason %q", k, q.StopReason)}
		}
		lps := make([]float32, len(q.Logprobs))
		for j, v := range q.Logprobs {
			if v > 0 || v != v {
				return nil, &CallError{Call: "asample", Message: fmt.Sprintf("sequence %d: logprobs[%d] = %v is not a logprob", k, j, v)}
			}
			lps[j] = float32(v)
		}
		if cs[k], err = sample.Replay(p, s.Decoder, q.Tokens, lps, finish); err != nil {
			return nil, fmt.Errorf("remote: sequence %d: %w", k, err)
		}
	}
	return cs, nil
}

// Reference scores sequences under a base model's weights on the server:
// the frozen reference of a KL term, as the Tinker cookbook computes it —
// asample with prompt_logprobs on the base model, one token generated.
type Reference struct {
	Client    *Client
	BaseModel string
}

// Logprobs implements backend.Logprober. A datum's sequence is its tokens
// and last target; its targets must be its tokens shifted by one.
func (r *Reference) Logprobs(ctx context.Context, batch []backend.Datum) ([][]float32, error) {
	for i := range batch {
		d := &batch[i]
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("remote: datum %d: %w", i, err)
		}
		for j := 0; j+1 < d.Len(); j++ {
			if d.Targets[j] != d.Tokens[j+1] {
				return nil, fmt.Errorf("remote: datum %d: target %d is not the next token, so the reference cannot score it as one sequence", i, j)
			}
		}
	}
	out := make([][]float32, len(batch))
	g, ctx := inFlight(ctx)
	for i := range batch {
		g.Go(func() (err error) {
			if out[i], err = r.one(ctx, &batch[i]); err != nil {
				return fmt.Errorf("remote: reference logprobs of datum %d: %w", i, err)
			}
			return nil
		})
	}
	return out, g.Wait()
}

func (r *Reference) one(ctx context.Context, d *backend.Datum) ([]float32, error) {
	seq := append(append([]int32(nil), d.Tokens...), d.Targets[d.Len()-1])
	seed := int64(0)
	req := tinker.SampleRequest{NumSamples: 1, Prompt: tinker.Text(seq), BaseModel: r.BaseModel, PromptLogprobs: true, Type: "sample",
		SamplingParams: tinker.SamplingParams{MaxTokens: 1, Seed: &seed, Temperature: 1, TopK: -1, TopP: 1}}
	var res tinker.SampleResponse
	if err := r.Client.Call(ctx, "asample", tinker.PathSample, req, &res); err != nil {
		return nil, err
	}
	// The Tinker SDK's prompt_logprobs has one entry per prompt token, the
	// first null (nothing predicts it); SkyRL tx 0.3.0 leaves that one out.
	first := 1
	switch len(res.PromptLogprobs) {
	case len(seq):
	case len(seq) - 1:
		first = 0
	default:
		return nil, &CallError{Call: "asample", Message: fmt.Sprintf("%d prompt logprobs for a prompt of %d tokens", len(res.PromptLogprobs), len(seq))}
	}
	lp := make([]float32, d.Len())
	for j := range lp {
		v := res.PromptLogprobs[first+j]
		if v == nil || *v > 0 || *v != *v {
			return nil, &CallError{Call: "asample", Message: fmt.Sprintf("prompt_logprobs[%d] is not a logprob", first+j)}
		}
		lp[j] = float32(*v)
	}
	return lp, nil
}
