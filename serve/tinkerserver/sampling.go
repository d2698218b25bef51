package tinkerserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/engine/model"
	"rlvr/sample"
)

// samplingQueue is the sampling worker's queue, and the count of calls
// in the decoding loops.
type samplingQueue struct {
	jobs    []*sampleJob // guarded by s.mu
	inLoops int          // guarded by s.mu
	wake    chan struct{}
}

// sampleJob is one asample call waiting for the sampling worker.
type sampleJob struct {
	fut            *future
	w              *weights
	req            sample.Request
	promptLogprobs bool
	// promptLastN, when positive, limits the prompt logprobs to the last
	// promptLastN prompt tokens (prompt_logprobs_last_n); the others are
	// null.
	promptLastN int
}

// sampleRequest is asample's body (tinker.SampleRequest) with what may be
// absent optional, so that it takes SkyRL's default rather than zero, and
// the fields of calls not supported, so that they are refused rather than
// ignored.
type sampleRequest struct {
	NumSamples          *int              `json:"num_samples"`
	Prompt              tinker.ModelInput `json:"prompt"`
	SamplingParams      *samplingParams   `json:"sampling_params"`
	ModelPath           string            `json:"model_path"`
	BaseModel           string            `json:"base_model"`
	PromptLogprobs      *bool             `json:"prompt_logprobs"`
	TopKPromptLogprobs  int               `json:"topk_prompt_logprobs"`
	SamplingSessionID   string            `json:"sampling_session_id"`
	SeqID               *int64            `json:"seq_id"` // its clone's number is seq_id / cloneSeqSpan
	PromptLogprobsLastN *int              `json:"prompt_logprobs_last_n"`
	// The SDK's options this server does not offer, refused when set.
	TopKSampleLogprobs   int             `json:"topk_sample_logprobs"`
	PromptAltTokensK     int             `json:"prompt_alt_tokens_k"`
	TargetPromptLogprobs json.RawMessage `json:"target_prompt_logprobs"`
	RecordStabilityInfo  bool            `json:"record_stability_info"`
}

type samplingParams struct {
	MaxTokens   *int            `json:"max_tokens"`
	Seed        *int64          `json:"seed"`
	Stop        json.RawMessage `json:"stop"`
	Temperature *float64        `json:"temperature"`
	TopK        *int            `json:"top_k"`
	TopP        *float64        `json:"top_p"`
}

func (s *Server) asample(w http.ResponseWriter, r *http.Request) {
	var req sampleRequest
	if _, err := s.decode(w, r, "asample", &req); err != nil {
		writeError(w, err)
		return
	}
	var ss *samplingSession
	inflight := false // the session's model's inflight weights, as they are now
	if req.SamplingSessionID != "" {
		// The sampling session names the weights.
		var err error
		if ss, err = s.samplingSessionByID(req.SamplingSessionID); err != nil {
			writeError(w, fmt.Errorf("asample: %w", err))
			return
		}
		if req.ModelPath == "" && req.BaseModel == "" {
			req.ModelPath = ss.modelPath
			if ss.modelPath == "" {
				req.BaseModel = ss.baseModel
			}
			inflight = ss.inflight != nil
		}
	}
	if err := s.checkSample(&req); err != nil {
		writeError(w, err)
		return
	}
	var src *weights
	var modelID string
	var err error
	if inflight {
		src, modelID, err = s.inflightWeights(ss.inflight)
	} else {
		src, modelID, err = s.samplingWeights(&req)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	job, invalid := validateSample(&req, src.base)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		writeError(w, errorf(http.StatusServiceUnavailable, "asample: the server is shutting down"))
		return
	}
	if waiting := len(s.sampling.jobs) + s.sampling.inLoops; invalid == nil && waiting >= s.cfg.MaxQueue {
		writeError(w, errorf(http.StatusTooManyRequests, "asample: %d sampling calls are waiting already (the server's limit)", waiting))
		return
	}
	f := s.newFutureLocked()
	if ss != nil {
		ss.watch(f, req.SeqID)
	}
	switch {
	case invalid != nil:
		s.settleLocked(f, failureBody(withKind("asample", invalid)), true)
	case src.base.loop != nil:
		job.fut, job.w = f, src
		s.submitLocked(job)
	default:
		job.fut, job.w = f, src
		s.sampling.jobs = append(s.sampling.jobs, job)
		select {
		case s.sampling.wake <- struct{}{}:
		default:
		}
	}
	n := 1
	if req.NumSamples != nil && *req.NumSamples > 0 {
		n = *req.NumSamples
	}
	ids := make([]string, n)
	for k := range ids {
		ids[k] = fmt.Sprintf("seq_%s_%d", f.id, k) // request ids are unique, so these are
	}
	writeJSON(w, http.StatusOK, tinker.Future{RequestID: f.id, ModelID: modelID, SampleSequenceIDs: ids})
}

// checkSample refuses what this server does not do and what is beyond
// its limits.
func (s *Server) checkSample(req *sampleRequest) error {
	switch {
	case req.TopKPromptLogprobs != 0:
		return errorf(http.StatusBadRequest, "asample: topk_prompt_logprobs is not supported")
	case req.TopKSampleLogprobs != 0:
		return errorf(http.StatusBadRequest, "asample: topk_sample_logprobs is not supported")
	case req.PromptAltTokensK != 0:
		return errorf(http.StatusBadRequest, "asample: prompt_alt_tokens_k is not supported")
	case len(req.TargetPromptLogprobs) > 0 && string(req.TargetPromptLogprobs) != "null":
		return errorf(http.StatusBadRequest, "asample: target_prompt_logprobs is not supported")
	case req.RecordStabilityInfo:
		return errorf(http.StatusBadRequest, "asample: record_stability_info is not supported: the stable_reinforce loss that reads it is not offered: %s", stableReinforceWhy)
	case (req.ModelPath == "") == (req.BaseModel == ""):
		return errorf(http.StatusBadRequest, "asample: name exactly one of model_path and base_model")
	case req.NumSamples != nil && *req.NumSamples > s.cfg.MaxSamples:
		return errorf(http.StatusBadRequest, "asample: num_samples is %d, more than the server's limit of %d", *req.NumSamples, s.cfg.MaxSamples)
	case req.SamplingParams != nil && req.SamplingParams.MaxTokens != nil && *req.SamplingParams.MaxTokens > s.cfg.MaxNewTokens:
		return errorf(http.StatusBadRequest, "asample: sampling_params.max_tokens is %d, more than the server's limit of %d", *req.SamplingParams.MaxTokens, s.cfg.MaxNewTokens)
	}
	if total := chunkTokens(req.Prompt); total > s.cfg.MaxCallTokens {
		return errorf(http.StatusBadRequest, "asample: the prompt has %d tokens, more than the server's limit of %d", total, s.cfg.MaxCallTokens)
	}
	return nil
}

// samplingWeights finds the weights a sample call names, and the model
// they belong to ("" for a base model).
func (s *Server) samplingWeights(req *sampleRequest) (*weights, string, error) {
	if req.BaseModel != "" {
		b := s.bases[req.BaseModel]
		if b == nil {
			return nil, "", errorf(http.StatusNotFound, "asample: base_model %q is not served here (served: %s)", req.BaseModel, strings.Join(s.names, ", "))
		}
		return b.weights, "", nil
	}
	id, name, ok := parsePath(req.ModelPath, "sampler_weights", true)
	if !ok {
		return nil, "", errorf(http.StatusBadRequest, "asample: model_path %q is not a sampler weights path, tinker://<model_id>/sampler_weights/<name>", req.ModelPath)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.modelLocked(id, time.Now())
	if err != nil {
		return nil, "", fmt.Errorf("asample: %w", err)
	}
	i := m.samplerIndex(name)
	if i < 0 {
		return nil, "", errorf(http.StatusNotFound, "asample: sampler weights %s not found (model %s keeps its last %d)", req.ModelPath, id, s.cfg.MaxSamplerWeights)
	}
	return m.samplers[i], id, nil
}

// inflightWeights are the inflight weights model m publishes now.
func (s *Server) inflightWeights(m *trainModel) (*weights, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.modelLocked(m.id, time.Now()); err != nil {
		return nil, "", fmt.Errorf("asample: %w", err)
	}
	if m.inflight == nil {
		return nil, "", errorf(http.StatusGone, "asample: model %s has stopped; its inflight weights are gone", m.id)
	}
	return m.inflight, m.id, nil
}

// validateSample checks a sample call's content against its model and
// turns it into the sampler's request; an error names the field.
func validateSample(req *sampleRequest, b *base) (*sampleJob, error) {
	sp := req.SamplingParams
	if sp == nil {
		return nil, userErr("sampling_params is missing")
	}
	p := sample.Params{N: 1, Temperature: 1}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	switch {
	case sp.MaxTokens == nil:
		bad("sampling_params.max_tokens is required")
	case *sp.MaxTokens <= 0:
		bad("sampling_params.max_tokens is %d, want a positive number", *sp.MaxTokens)
	default:
		p.MaxTokens = *sp.MaxTokens
	}
	if n := req.NumSamples; n != nil {
		if *n < 1 {
			bad("num_samples is %d, want at least 1", *n)
		}
		p.N = *n
	}
	if t := sp.Temperature; t != nil {
		if !(*t >= 0 && *t <= math.MaxFloat32) {
			bad("sampling_params.temperature is %v, want finite and not negative", *t)
		}
		p.Temperature = float32(*t)
	}
	if t := sp.TopP; t != nil {
		if !(*t > 0 && *t <= 1) {
			bad("sampling_params.top_p is %v, want in (0, 1]", *t)
		}
		p.TopP = float32(*t)
	}
	if k := sp.TopK; k != nil {
		switch {
		case *k < -1:
			bad("sampling_params.top_k is %d, want -1 (every token) or a positive number", *k)
		case *k > 0:
			p.TopK = *k
		}
	}
	if sp.Seed != nil {
		p.Seed = uint64(*sp.Seed)
	} else {
		p.Seed = rand.Uint64()
	}
	ids, strs, err := parseStop(sp.Stop)
	if err != nil {
		bad("%v", err)
	}
	if err := checkVocab("sampling_params.stop", ids, b.loaded.Model.Config.Vocab); err != nil {
		bad("%v", err)
	}
	// Every sample ends at the model's own end tokens, as vLLM's do,
	// besides the ones the call names. A stop string's last token is
	// kept, as SkyRL tx and vLLM keep it.
	p.StopTokens = append(ids, b.loaded.StopTokens...)
	p.Stop, p.IncludeStop = strs, true

	mc := b.loaded.Model.Config
	prompt, err := req.Prompt.Tokens()
	switch {
	case err != nil:
		bad("prompt.%v", err)
	case len(prompt) == 0:
		bad("prompt has no tokens")
	case len(prompt) >= mc.MaxSeq:
		bad("prompt has %d tokens, leaving no room in the model's context of %d", len(prompt), mc.MaxSeq)
	}
	if err := checkVocab("prompt", prompt, mc.Vocab); err != nil {
		bad("%v", err)
	}
	wantPrompt := req.PromptLogprobs != nil && *req.PromptLogprobs
	lastN := 0
	if n := req.PromptLogprobsLastN; n != nil {
		switch {
		case !wantPrompt:
			bad("prompt_logprobs_last_n is %d, and prompt_logprobs is not true: it limits the prompt logprobs asked for", *n)
		case *n < 1 || *n > len(prompt)-1:
			bad("prompt_logprobs_last_n is %d, want 1 to %d (the prompt's tokens after the first)", *n, len(prompt)-1)
		}
		lastN = *n
	}
	if len(probs) > 0 {
		return nil, userErr("%s", strings.Join(probs, "; "))
	}
	return &sampleJob{req: sample.Request{Prompt: prompt, Params: p}, promptLogprobs: wantPrompt, promptLastN: lastN}, nil
}

// parseStop reads sampling_params.stop: null, a string, or a list of
// token ids or of strings (never both).
func parseStop(raw json.RawMessage) ([]int32, []string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil, fmt.Errorf("sampling_params.stop is an empty string")
		}
		return nil, []string{one}, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		out := make([]int32, len(ids))
		for i, id := range ids {
			if id < 0 || id > math.MaxInt32 {
				return nil, nil, fmt.Errorf("sampling_params.stop[%d] is %d, not a token id", i, id)
			}
			out[i] = int32(id)
		}
		return out, nil, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		for i, s := range strs {
			if s == "" {
				return nil, nil, fmt.Errorf("sampling_params.stop[%d] is an empty string", i)
			}
		}
		return nil, strs, nil
	}
	return nil, nil, fmt.Errorf("sampling_params.stop must be a list of token ids or a list of strings, not mixed, got %s", shorten(string(raw), 80))
}

// shorten cuts s to at most n bytes, at a character's start, and marks
// the cut with an ellipsis.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// runSampling is the sampling worker: it takes the queued requests for
// one set of weights and samples them in one batch.
func (s *Server) runSampling() {
	window := time.NewTimer(time.Hour)
	window.Stop()
	defer window.Stop()
	for {
		batch := s.nextSampleBatch(window)
		if batch == nil {
			return
		}
		s.sampleBatch(batch)
	}
}

// nextSampleBatch waits for sample jobs and takes the first one with the
// others queued for the same weights, up to Config.MaxBatch sequences.
// The first job after the queue was empty waits Config.BatchWindow, on
// the timer window, for others to join it, unless its batch is full
// first. It returns nil when the server closes.
func (s *Server) nextSampleBatch(window *time.Timer) []*sampleJob {
	s.mu.Lock()
	if len(s.sampling.jobs) == 0 {
		for len(s.sampling.jobs) == 0 {
			s.mu.Unlock()
			select {
			case <-s.sampling.wake:
			case <-s.ctx.Done():
				return nil
			}
			s.mu.Lock()
		}
		if s.cfg.BatchWindow > 0 {
			window.Reset(s.cfg.BatchWindow)
			for open := true; open; {
				if _, _, full := s.splitSampleJobsLocked(); full {
					break
				}
				s.mu.Unlock()
				select {
				case <-window.C:
					open = false
				case <-s.sampling.wake:
				case <-s.ctx.Done():
					window.Stop()
					return nil
				}
				s.mu.Lock()
			}
			window.Stop()
		}
	}
	batch, rest, _ := s.splitSampleJobsLocked()
	s.sampling.jobs = rest
	s.mu.Unlock()
	return batch
}

// splitSampleJobsLocked splits the queue into the next batch, the first
// job with the others for the same weights up to Config.MaxBatch
// sequences, and the rest, and reports whether the batch is full: no
// other job for its weights could join it. s.mu is held and the queue is
// not empty.
func (s *Server) splitSampleJobsLocked() (batch, rest []*sampleJob, full bool) {
	jobs := s.sampling.jobs
	w := jobs[0].w
	seqs := 0
	for _, j := range jobs {
		n := max(j.req.Params.N, 1)
		switch {
		case j.w != w:
			rest = append(rest, j)
		case len(batch) == 0 || seqs+n <= s.cfg.MaxBatch:
			batch = append(batch, j)
			seqs += n
		default:
			rest = append(rest, j)
			full = true
		}
	}
	return batch, rest, full || seqs >= s.cfg.MaxBatch
}

// sampleBatch samples a batch of jobs for the same weights and records
// each job's result.
func (s *Server) sampleBatch(jobs []*sampleJob) {
	if h := s.hook.Load(); h != nil {
		(*h)("asample")
	}
	start := time.Now()
	results, err := func() (res []tinker.SampleResponse, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tinkerserver: panic while sampling", "panic", p, "stack", string(debug.Stack()))
				err = serverErr("internal error: %v", p)
			}
		}()
		return s.sampleWith(s.ctx, jobs)
	}()
	if err != nil {
		s.log.Warn("tinkerserver: sampling failed", "requests", len(jobs), "err", err)
		for _, j := range jobs {
			s.fail(j.fut, err)
		}
		return
	}
	s.log.Debug("tinkerserver: sampled", "requests", len(jobs), "weights", jobs[0].w.path, "took", time.Since(start))
	for i, j := range jobs {
		s.finish(j.fut, results[i])
	}
}

// sampleWith runs the sampler over the jobs' weights.
func (s *Server) sampleWith(ctx context.Context, jobs []*sampleJob) ([]tinker.SampleResponse, error) {
	w := jobs[0].w
	b := w.base
	if b.current != w {
		copy(b.sampModel.Params, w.params)
		if err := b.sampler.Repack(); err != nil {
			return nil, err
		}
		b.current = w
	}
	reqs := make([]sample.Request, len(jobs))
	for i, j := range jobs {
		reqs[i] = j.req
	}
	out, err := b.sampler.Sample(ctx, reqs)
	if err != nil {
		return nil, serverErr("sampling: %v", err)
	}
	results := make([]tinker.SampleResponse, len(jobs))
	for i := range jobs {
		results[i] = sampleResponse(out[i])
	}
	if err := promptLogprobs(ctx, b.sampModel, jobs, results); err != nil {
		return nil, serverErr("prompt logprobs: %v", err)
	}
	return results, nil
}

// sampleResponse is the result of a call whose samples are out.
func sampleResponse(out []sample.Completion) tinker.SampleResponse {
	res := tinker.SampleResponse{Type: "sample", Sequences: make([]tinker.SampledSequence, len(out))}
	for k, c := range out {
		lps := make([]float64, len(c.Logprobs))
		for t, lp := range c.Logprobs {
			lps[t] = float64(lp)
		}
		reason := tinker.StopLength
		if c.Finish == sample.FinishStop {
			reason = tinker.StopStop
		}
		res.Sequences[k] = tinker.SampledSequence{StopReason: reason, Tokens: c.Tokens, Logprobs: lps}
	}
	return res
}

// promptLogprobs fills in the logprob of each prompt token given the ones
// before it, for the jobs that ask: null for the first, which has none,
// and, under prompt_logprobs_last_n, for every one before the last n.
// Every such prompt goes through the model in one forward pass: the
// tokens before the last n are its context, whose logprobs are not kept.
func promptLogprobs(ctx context.Context, m *model.Model, jobs []*sampleJob, results []tinker.SampleResponse) error {
	var data []backend.Datum
	var which []int
	for i, j := range jobs {
		if !j.promptLogprobs {
			continue
		}
		p := j.req.Prompt
		results[i].PromptLogprobs = []*float64{nil}
		if n := len(p); n > 1 {
			w := make([]float32, n-1)
			for k := range w {
				w[k] = 1
			}
			data = append(data, backend.Datum{Tokens: p[:n-1], Targets: p[1:], Weights: w})
			which = append(which, i)
		}
	}
	if len(data) == 0 {
		return nil
	}
	lps, err := local.Logprobs(ctx, m, data)
	if err != nil {
		return err
	}
	for k, i := range which {
		first := 0 // the first position kept; lps[k][j] is prompt token j+1's
		if n := jobs[i].promptLastN; n > 0 {
			first = len(lps[k]) - n
		}
		for j, lp := range lps[k] {
			if j < first {
				results[i].PromptLogprobs = append(results[i].PromptLogprobs, nil)
				continue
			}
			v := float64(lp)
			results[i].PromptLogprobs = append(results[i].PromptLogprobs, &v)
		}
	}
	return nil
}
