package tinkerserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/engine/lora"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/hfconfig"
)

// trainModel is a model created for a session: its learner, owned by its
// worker, and what the handlers share with the worker under s.mu.
type trainModel struct {
	id   string
	sess *session
	base *base
	lora *lora.Config  // the LoRA adapters trained, nil when every parameter is
	wake chan struct{} // a call was queued, or the model stops

	// Guarded by s.mu.
	queue        []*modelCall
	seqs         map[int64]seqRecord
	samplers     []*weights // save_weights_for_sampler copies, oldest first
	samplerSaves int        // save_weights_for_sampler calls, naming unnamed copies
	inflight     *weights   // the weights the inflight saves published last; nil before the first
	stopErr      *callErr   // why the model stopped; nil while it runs
	unloaded     bool       // by unload_model: later calls find no model
	lastRequest  time.Time  // of the last call submitted

	// Owned by the worker.
	learner *local.Learner
}

// samplerIndex is the index in m.samplers of the copy called name, or -1.
// s.mu is held.
func (m *trainModel) samplerIndex(name string) int {
	return slices.IndexFunc(m.samplers, func(w *weights) bool { return w.name == name })
}

// seqRecord is the call recorded for a (model_id, seq_id).
type seqRecord struct {
	requestID string
	hash      [32]byte // the call's kind and its request body, to tell a retry from a reuse
}

// modelCall is a call queued for a model's worker.
type modelCall struct {
	kind string
	fut  *future
	run  func() (any, error)
}

// stop ends the model's worker once the call it runs, if any, is done:
// its queued calls fail with err. s.mu is held.
func (m *trainModel) stop(err *callErr) {
	if m.stopErr != nil {
		return
	}
	m.stopErr = err
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// runModel is a model's worker: it runs the model's calls one at a time
// in arrival order, since a learner is not safe for concurrent use. A call
// runs to its end, never cancelled: it is bounded by the server's limits.
func (s *Server) runModel(m *trainModel) {
	for {
		s.mu.Lock()
		if m.stopErr != nil {
			queued := m.queue
			m.queue, m.samplers, m.inflight = nil, nil, nil
			err := m.stopErr
			s.mu.Unlock()
			m.learner = nil // the weights go with the model
			for _, c := range queued {
				s.fail(c.fut, withKind(c.kind, err))
			}
			// A model holds gigabytes (weights, gradients, activations,
			// sampler copies); hand them back to the system now, not at
			// the runtime's leisure, for the models that follow.
			debug.FreeOSMemory()
			return
		}
		if len(m.queue) == 0 {
			s.mu.Unlock()
			<-m.wake
			continue
		}
		c := m.queue[0]
		m.queue[0] = nil
		m.queue = m.queue[1:]
		s.mu.Unlock()
		s.runCall(c.kind, c.fut, c.run)
	}
}

// submit queues a call on a model after checking what the handler could
// not: the model is there and live, its seq_id is new (or repeats the
// same request, whose request_id is answered), and its queue has room.
// prepare checks the call's content against the model and returns what
// the model's worker runs; its error fails the call at once. body, the
// request as it came, is what identifies a retry.
func (s *Server) submit(w http.ResponseWriter, kind, modelID string, seqID *int64, body []byte,
	prepare func(m *trainModel) (func() (any, error), error)) {
	s.mu.Lock()
	now := time.Now()
	m, err := s.modelLocked(modelID, now)
	if err == nil {
		m.lastRequest = now
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, fmt.Errorf("%s: %w", kind, err))
		return
	}
	run, invalid := prepare(m)
	var hash [32]byte
	if seqID != nil {
		h := sha256.New()
		h.Write([]byte(kind + "\x00"))
		h.Write(body)
		h.Sum(hash[:0])
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if m, err = s.modelLocked(modelID, time.Now()); err != nil {
		writeError(w, fmt.Errorf("%s: %w", kind, err))
		return
	}
	if s.closed {
		writeError(w, errorf(http.StatusServiceUnavailable, "%s: the server is shutting down", kind))
		return
	}
	if seqID != nil {
		if rec, ok := m.seqs[*seqID]; ok {
			if rec.hash != hash {
				writeError(w, errorf(http.StatusConflict, "%s: seq_id %d of model %s was already used by another request", kind, *seqID, modelID))
				return
			}
			writeJSON(w, http.StatusOK, tinker.Future{RequestID: rec.requestID, ModelID: modelID})
			return
		}
	}
	if invalid == nil && len(m.queue) >= s.cfg.MaxQueue {
		writeError(w, errorf(http.StatusTooManyRequests, "%s: model %s has %d calls waiting already (the server's limit)", kind, modelID, len(m.queue)))
		return
	}
	f := s.newFutureLocked()
	if seqID != nil {
		m.seqs[*seqID] = seqRecord{f.id, hash}
	}
	if invalid != nil {
		// The call fails without running; it still holds its seq_id.
		s.settleLocked(f, failureBody(withKind(kind, invalid)), true)
	} else {
		m.queue = append(m.queue, &modelCall{kind: kind, fut: f, run: run})
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	writeJSON(w, http.StatusOK, tinker.Future{RequestID: f.id, ModelID: modelID})
}

// forwardCall is the part of forward and forward_backward that is the
// same. textConfig holds the loss_fn_config values that are text (only
// the protobuf form carries them); no loss here takes one.
func (s *Server) forwardCall(w http.ResponseWriter, kind, modelID string, seqID *int64, body []byte, in *tinker.ForwardBackwardInput, textConfig map[string]string, grad bool) {
	if err := s.checkDataLimits(kind, in); err != nil {
		writeError(w, err)
		return
	}
	s.submit(w, kind, modelID, seqID, body, func(m *trainModel) (func() (any, error), error) {
		var spec lossSpec
		var err error
		if in.LossFn == "custom" {
			spec.fn, spec.loss = in.LossFn, backend.Loss{NLL: 1}
			spec.custom, err = s.customLossOf(m, in.LossFnConfig, textConfig)
		} else {
			spec, err = parseLoss(in.LossFn, in.LossFnConfig, textConfig)
		}
		if err != nil {
			return nil, err
		}
		batch, err := toDatums(in.Data, spec, m.base.loaded.Model.Config)
		if err != nil {
			return nil, err
		}
		return func() (any, error) {
			if grad {
				return m.forwardBackward(batch, spec, s.cfg.MicroBatchTokens)
			}
			return m.forward(batch, spec, s.cfg.MicroBatchTokens)
		}, nil
	})
}

// checkDataLimits bounds a forward(_backward)'s data.
func (s *Server) checkDataLimits(kind string, in *tinker.ForwardBackwardInput) error {
	if n := len(in.Data); n > s.cfg.MaxDatums {
		return errorf(http.StatusBadRequest, "%s: data has %d datums, more than the server's limit of %d", kind, n, s.cfg.MaxDatums)
	}
	total := 0
	for _, d := range in.Data {
		total += chunkTokens(d.ModelInput)
	}
	if total > s.cfg.MaxCallTokens {
		return errorf(http.StatusBadRequest, "%s: data has %d model_input tokens, more than the server's limit of %d", kind, total, s.cfg.MaxCallTokens)
	}
	return nil
}

// forwardBackward reads forward_backward in either form: JSON (rlvr's
// client, SkyRL's) or the SDK's protobuf, possibly zstd compressed, whose
// forward_only flag makes it the forward call.
func (s *Server) forwardBackward(w http.ResponseWriter, r *http.Request) {
	const kind = "forward_backward"
	if !protobufBody(r) {
		var req tinker.ForwardBackwardRequest
		body, err := s.decode(w, r, kind, &req)
		if err != nil {
			writeError(w, err)
			return
		}
		s.forwardCall(w, kind, req.ModelID, req.SeqID, body, &req.Input, nil, true)
		return
	}
	body, err := s.readBody(w, r, kind)
	if err != nil {
		writeError(w, err)
		return
	}
	pb, err := tinker.DecodeForwardBackwardProto(body)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%s: %v", kind, err))
		return
	}
	if pb.ForwardOnly {
		s.forwardCall(w, "forward", pb.Request.ModelID, pb.Request.SeqID, body, &pb.Request.Input, pb.LossFnConfig, false)
		return
	}
	s.forwardCall(w, kind, pb.Request.ModelID, pb.Request.SeqID, body, &pb.Request.Input, pb.LossFnConfig, true)
}

func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	var req tinker.ForwardRequest
	body, err := s.decode(w, r, "forward", &req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.forwardCall(w, "forward", req.ModelID, req.SeqID, body, &req.Input, nil, false)
}

// forwardBackward accumulates the loss's gradients and returns the
// learner's logprobs, the per-token losses and the summed loss.
func (m *trainModel) forwardBackward(b batch, spec lossSpec, microTokens int) (any, error) {
	if spec.gspo != nil || spec.custom != nil {
		return m.sequenceForwardBackward(b, spec, microTokens)
	}
	res, err := m.backward(b.datums, spec.loss, microTokens)
	if err != nil {
		return nil, err
	}
	out, err := output(b, spec, res.Logprobs)
	if err != nil {
		// The call fails, so its gradient must not stay.
		m.learner.Model.ZeroGrad()
		return nil, userErr("%v; the model's accumulated gradients were discarded", err)
	}
	out.Metrics["loss:sum"] = res.Metrics.Loss
	return out, nil
}

// backward accumulates loss's gradients over the datums in passes of at
// most microTokens tokens: a pass's activations grow with its tokens
// (about 1.3 MB a token for SmolLM2-135M), and each model keeps its own.
// A failed pass discards every accumulated gradient.
func (m *trainModel) backward(datums []backend.Datum, loss backend.Loss, microTokens int) (backend.Result, error) {
	var res backend.Result
	for _, micro := range backend.MicroBatches(datums, microTokens) {
		r, err := m.learner.ForwardBackward(context.Background(), micro, loss)
		if err != nil {
			// A failed pass may have left part of its gradient in the
			// output head's: the accumulated gradients are not what was
			// asked for.
			m.learner.Model.ZeroGrad()
			return res, serverErr("%v; the model's accumulated gradients were discarded", err)
		}
		res.Logprobs = append(res.Logprobs, r.Logprobs...)
		res.Metrics.Add(r.Metrics)
	}
	return res, nil
}

// sequenceForwardBackward runs a loss whose terms at one position depend
// on the whole sequence's logprobs (gspo, a custom loss) in two passes: a
// forward pass for the logprobs, from which the loss and its derivative g
// with respect to each logprob are computed here; then a backward pass of
// the NLL −Σ w·logp with weights w = −g, whose gradient is Σ g·∇logp, the
// loss's.
func (m *trainModel) sequenceForwardBackward(b batch, spec lossSpec, microTokens int) (any, error) {
	out, lps, err := m.forwardOutput(b, spec, microTokens)
	if err != nil {
		return nil, err
	}
	var custom [][]float64
	if spec.custom != nil {
		if _, custom, err = customOutput(b, spec.custom, lps); err != nil {
			return nil, err
		}
	}
	grad := make([]backend.Datum, len(b.datums))
	for i := range b.datums {
		var dlogp []float64
		if custom != nil {
			dlogp = custom[i]
		} else {
			_, dlogp = spec.gspo.terms(&b.datums[i], b.masks[i], lps[i])
		}
		w := make([]float32, len(dlogp))
		for j, g := range dlogp {
			w[j] = float32(-g)
			if math.IsInf(float64(w[j]), 0) || math.IsNaN(float64(w[j])) {
				return nil, userErr("data[%d]: the loss's derivative at position %d is %v: an input is too large", i, j, w[j])
			}
		}
		grad[i] = backend.Datum{Tokens: b.datums[i].Tokens, Targets: b.datums[i].Targets, Weights: w}
	}
	if _, err := m.backward(grad, spec.loss, microTokens); err != nil {
		return nil, err
	}
	return out, nil
}

// forward computes the logprobs and losses with no gradient.
func (m *trainModel) forward(b batch, spec lossSpec, microTokens int) (any, error) {
	out, _, err := m.forwardOutput(b, spec, microTokens)
	return out, err
}

// forwardOutput is a forward pass's result, with no gradient, in passes
// of at most microTokens tokens, and the logprobs it holds.
func (m *trainModel) forwardOutput(b batch, spec lossSpec, microTokens int) (*tinker.ForwardBackwardOutput, [][]float32, error) {
	var lps [][]float32
	for _, micro := range backend.MicroBatches(b.datums, microTokens) {
		l, err := local.Logprobs(context.Background(), m.learner.Model, micro)
		if err != nil {
			return nil, nil, serverErr("%v", err)
		}
		lps = append(lps, l...)
	}
	if spec.custom != nil {
		out, _, err := customOutput(b, spec.custom, lps)
		return out, lps, err
	}
	out, err := output(b, spec, lps)
	if err != nil {
		return nil, nil, err
	}
	out.Metrics["loss:sum"] = lossSum(out)
	return out, lps, nil
}

// lossSum adds up a result's per-token losses.
func lossSum(out *tinker.ForwardBackwardOutput) float64 {
	sum := 0.0
	for _, o := range out.LossFnOutputs {
		for _, v := range o["elementwise_loss"].Data {
			sum += v
		}
	}
	return sum
}

// output builds a forward(_backward) result from the learner's logprobs.
func output(b batch, spec lossSpec, lps [][]float32) (*tinker.ForwardBackwardOutput, error) {
	out := &tinker.ForwardBackwardOutput{LossFnOutputType: "TensorData", Metrics: map[string]float64{}}
	for i := range b.datums {
		loss := spec.elementwise(&b, i, lps[i])
		for j, v := range loss {
			if math.IsInf(float64(v), 0) {
				return nil, userErr("data[%d]: the loss at position %d is %v: an input is too large", i, j, v)
			}
		}
		out.LossFnOutputs = append(out.LossFnOutputs, map[string]tinker.TensorData{
			"logprobs":         tinker.Floats(lps[i]),
			"elementwise_loss": tinker.Floats(loss),
		})
	}
	return out, nil
}

// optimStepRequest is optim_step's body with AdamW's settings optional,
// so that an absent one takes SkyRL's default, not zero.
type optimStepRequest struct {
	ModelID    string      `json:"model_id"`
	AdamParams *adamParams `json:"adam_params"`
	SeqID      *int64      `json:"seq_id,omitempty"`
}

type adamParams struct {
	LearningRate *float64 `json:"learning_rate"`
	Beta1        *float64 `json:"beta1"`
	Beta2        *float64 `json:"beta2"`
	Eps          *float64 `json:"eps"`
	WeightDecay  *float64 `json:"weight_decay"`
	GradClipNorm *float64 `json:"grad_clip_norm"`
}

// settings returns AdamW's config and the step's parameters, with SkyRL's
// defaults (learning_rate 1e-4, beta1 0.9, beta2 0.95, eps 1e-12, no
// weight decay, no clipping) for what is absent.
func (a *adamParams) settings() (optim.AdamWConfig, backend.OptimParams, error) {
	get := func(p *float64, d float64) float64 {
		if p == nil {
			return d
		}
		return *p
	}
	cfg := optim.AdamWConfig{Beta1: get(a.Beta1, 0.9), Beta2: get(a.Beta2, 0.95), Eps: get(a.Eps, 1e-12), WeightDecay: get(a.WeightDecay, 0)}
	lr, clip := get(a.LearningRate, 1e-4), get(a.GradClipNorm, 0)
	var probs []string
	for _, c := range []struct {
		name   string
		v      float64
		ok     bool
		wanted string
	}{
		{"learning_rate", lr, lr >= 0 && lr <= math.MaxFloat32, "finite and not negative"},
		{"beta1", cfg.Beta1, cfg.Beta1 >= 0 && cfg.Beta1 < 1, "in [0, 1)"},
		{"beta2", cfg.Beta2, cfg.Beta2 >= 0 && cfg.Beta2 < 1, "in [0, 1)"},
		{"eps", cfg.Eps, cfg.Eps > 0 && cfg.Eps <= math.MaxFloat32, "finite and positive"},
		{"weight_decay", cfg.WeightDecay, cfg.WeightDecay >= 0 && cfg.WeightDecay <= math.MaxFloat32, "finite and not negative"},
		{"grad_clip_norm", clip, clip >= 0 && clip <= math.MaxFloat32, "finite and not negative (0: no clipping)"},
	} {
		if !c.ok {
			probs = append(probs, fmt.Sprintf("adam_params.%s is %v, want %s", c.name, c.v, c.wanted))
		}
	}
	if len(probs) > 0 {
		return cfg, backend.OptimParams{}, userErr("%s", strings.Join(probs, "; "))
	}
	return cfg, backend.OptimParams{LearningRate: float32(lr), GradClipNorm: float32(clip)}, nil
}

func (s *Server) optimStep(w http.ResponseWriter, r *http.Request) {
	var req optimStepRequest
	body, err := s.decode(w, r, "optim_step", &req)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.AdamParams == nil {
		writeError(w, errorf(http.StatusBadRequest, "optim_step: adam_params is missing"))
		return
	}
	s.submit(w, "optim_step", req.ModelID, req.SeqID, body, func(m *trainModel) (func() (any, error), error) {
		cfg, p, err := req.AdamParams.settings()
		if err != nil {
			return nil, err
		}
		return func() (any, error) {
			if err := m.learner.Opt.SetConfig(cfg); err != nil {
				return nil, userErr("%v", err)
			}
			res, err := m.learner.OptimStep(context.Background(), p)
			if err != nil {
				// A non-finite gradient would refuse every later step too.
				m.learner.Model.ZeroGrad()
				return nil, serverErr("%v; the model's accumulated gradients were discarded", err)
			}
			return tinker.OptimStepResponse{Metrics: map[string]float64{"grad_norm": res.GradNorm}}, nil
		}, nil
	})
}

// namePattern is what a saved state's name may be: one path element,
// never "." or "..".
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// idPattern is what a model id in a tinker:// path may be.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_:-]+$`)

// maxNameLen bounds a saved state's name, as SkyRL does.
const maxNameLen = 255

func checkName(field, name string) error {
	if !namePattern.MatchString(name) || len(name) > maxNameLen {
		return userErr("%s %q is not a name: want letters, digits, '.', '_' and '-', starting with a letter or digit, at most %d bytes", field, name, maxNameLen)
	}
	return nil
}

// weightsPath is the tinker:// path of a saved state or sampler copy.
func weightsPath(modelID, kind, name string) string {
	return "tinker://" + modelID + "/" + kind + "/" + name
}

// parsePath reads tinker://<model_id>/<kind>/<name>, or, when kind may be
// omitted, tinker://<model_id>/<name>.
func parsePath(path, kind string, kindOptional bool) (modelID, name string, ok bool) {
	rest, found := strings.CutPrefix(path, "tinker://")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 3 && parts[1] == kind:
		modelID, name = parts[0], parts[2]
	case len(parts) == 2 && kindOptional:
		modelID, name = parts[0], parts[1]
	default:
		return "", "", false
	}
	return modelID, name, idPattern.MatchString(modelID) && namePattern.MatchString(name) && len(name) <= maxNameLen
}

func (s *Server) saveWeights(w http.ResponseWriter, r *http.Request) {
	var req tinker.SaveWeightsRequest
	body, err := s.decode(w, r, "save_weights", &req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.submit(w, "save_weights", req.ModelID, req.SeqID, body, func(m *trainModel) (func() (any, error), error) {
		if err := checkName("path", req.Path); err != nil {
			return nil, err
		}
		ttl, err := checkpointTTL(req.TTLSeconds)
		if err != nil {
			return nil, err
		}
		return func() (any, error) { return s.save(m, req.Path, ttl) }, nil
	})
}

// save writes the model's training state under name, to expire ttl after
// it is written (0: never).
func (s *Server) save(m *trainModel, name string, ttl time.Duration) (any, error) {
	path, _, err := s.writeSaved(m, "weights", name, ttl, "saved", "saving", func(tmp string) error {
		if err := m.learner.Save(context.Background(), tmp); err != nil {
			return err
		}
		b, _ := json.Marshal(savedState{BaseModel: m.base.name}) // plain data
		return os.WriteFile(filepath.Join(tmp, stateFile), b, 0o644)
	})
	if err != nil {
		return nil, err
	}
	return tinker.SaveWeightsResponse{Path: path, Type: "save_weights"}, nil
}

// writeSaved writes a model's saved weights of a kind ("weights",
// "external_weights") under name with write: into a hidden directory
// first, renamed into place when complete, so that a path handed out
// always holds a whole save, whose TTL (0: none), counted from then, is
// recorded before it appears. It returns the save's tinker:// path and
// directory; done and doing name the work in errors ("saved", "saving").
func (s *Server) writeSaved(m *trainModel, kind, name string, ttl time.Duration, done, doing string, write func(tmp string) error) (path, dir string, err error) {
	dir = s.savedDir(m.id, kind, name)
	path = weightsPath(m.id, kind, name)
	if _, err := os.Stat(dir); err == nil {
		return "", "", userErr("weights %s are %s already", path, done)
	}
	if err := s.checkSaveRoom(path, 0); err != nil {
		return "", "", err
	}
	tmp := filepath.Join(filepath.Dir(dir), "."+doing+"-"+name)
	if err := os.RemoveAll(tmp); err != nil {
		return "", "", serverErr("%v", err)
	}
	if err := write(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", "", serverErr("%s %s: %v", doing, path, err)
	}
	_, size, err := filesOf(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", "", serverErr("%s %s: %v", doing, path, err)
	}
	s.saving.Lock()
	defer s.saving.Unlock()
	if err := s.checkSaveRoom(path, size); err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	// Written (or a stale one removed) first: the save never appears with
	// another's TTL, or without its own.
	err = setDiskExpiry(dir, expiry(ttl, time.Now()))
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		os.RemoveAll(tmp)
		setDiskExpiry(dir, time.Time{})
		return "", "", serverErr("%s %s: %v", doing, path, err)
	}
	return path, dir, nil
}

// saveForSamplerRequest is save_weights_for_sampler's body with the SDK's
// fields: an unnamed save (no path) may ask for a sampling session of the
// copy, numbered sampling_session_seq_id, answered with its id.
type saveForSamplerRequest struct {
	tinker.SaveWeightsForSamplerRequest
	SamplingSessionSeqID *int64 `json:"sampling_session_seq_id"`
	Kind                 string `json:"kind"`
}

func (s *Server) saveForSampler(w http.ResponseWriter, r *http.Request) {
	var req saveForSamplerRequest
	body, err := s.decode(w, r, "save_weights_for_sampler", &req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.submit(w, "save_weights_for_sampler", req.ModelID, req.SeqID, body, func(m *trainModel) (func() (any, error), error) {
		if req.Path != "" {
			if err := checkName("path", req.Path); err != nil {
				return nil, err
			}
		}
		ttl, err := checkpointTTL(req.TTLSeconds)
		if err != nil {
			return nil, err
		}
		switch req.Kind {
		case "", "snapshot":
		case "inflight":
			switch {
			case req.Path != "":
				return nil, userErr("kind inflight publishes the model's shared weights, which have no name: path %q is not taken", req.Path)
			case req.TTLSeconds != nil:
				return nil, userErr("kind inflight publishes the model's shared weights, which have no TTL: ttl_seconds is not taken")
			case req.SamplingSessionSeqID == nil:
				return nil, userErr("kind inflight needs sampling_session_seq_id: its answer is a sampling session of the shared weights")
			}
			return func() (any, error) { return s.publishInflight(m, *req.SamplingSessionSeqID) }, nil
		default:
			return nil, userErr("kind %q is not snapshot or inflight", req.Kind)
		}
		return func() (any, error) {
			// The copy is taken here, in the model's call order, so it
			// holds exactly the weights of the calls before it.
			params := append([]float32(nil), m.learner.Model.Params...)
			s.mu.Lock()
			defer s.mu.Unlock()
			m.samplerSaves++
			name := req.Path
			if name == "" {
				name = fmt.Sprintf("sampler-%06d", m.samplerSaves)
			}
			path := weightsPath(m.id, "sampler_weights", name)
			if m.stopErr != nil {
				return nil, m.stopErr
			}
			if i := m.samplerIndex(name); i >= 0 {
				// A new copy under an old name replaces it; sampling
				// calls queued already keep the copy they named.
				m.samplers = slices.Delete(m.samplers, i, i+1)
			}
			now := time.Now()
			m.samplers = append(m.samplers, &weights{base: m.base, params: params, path: path, name: name, saved: now, expires: expiry(ttl, now)})
			if n := len(m.samplers) - s.cfg.MaxSamplerWeights; n > 0 {
				clear(m.samplers[:n]) // so that the dropped copies are freed
				m.samplers = m.samplers[n:]
			}
			res := saveForSamplerResponse{SaveWeightsResponse: tinker.SaveWeightsResponse{Path: path, Type: "save_weights_for_sampler"}}
			if req.SamplingSessionSeqID != nil {
				ss, err := s.samplingSessionLocked(m.sess, *req.SamplingSessionSeqID, m.base.name, path, nil)
				if err != nil {
					return nil, userErr("%v", err)
				}
				res.SamplingSessionID = ss.id
			}
			return res, nil
		}, nil
	})
}

// publishInflight is an inflight save: a copy of the model's weights
// becomes its shared inflight weights, which every sampling session of
// its inflight saves samples from its next request on, and a new sampling
// session of them (a fresh namespace, numbered seq) is the answer. The
// copy is taken in the model's call order, so a session samples the
// weights of the save that made it or newer ones, never older.
func (s *Server) publishInflight(m *trainModel, seq int64) (any, error) {
	params := append([]float32(nil), m.learner.Model.Params...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.stopErr != nil {
		return nil, m.stopErr
	}
	m.samplerSaves++
	m.inflight = &weights{base: m.base, params: params, path: weightsPath(m.id, "sampler_weights", fmt.Sprintf("inflight-%06d", m.samplerSaves)),
		saved: time.Now()}
	ss, err := s.samplingSessionLocked(m.sess, seq, m.base.name, "", m)
	if err != nil {
		return nil, userErr("%v", err)
	}
	return saveForSamplerResponse{SaveWeightsResponse: tinker.SaveWeightsResponse{Type: "save_weights_for_sampler"}, SamplingSessionID: ss.id}, nil
}

// saveForSamplerResponse is save_weights_for_sampler's result, with the
// sampling session made for the copy when one was asked for.
type saveForSamplerResponse struct {
	tinker.SaveWeightsResponse
	SamplingSessionID string `json:"sampling_session_id,omitempty"`
}

// stateFile records, beside a saved state, what a model made from it needs
// that the weights do not say.
const stateFile = "tinker_state.json"

// savedState is stateFile's content.
type savedState struct {
	BaseModel string `json:"base_model"`
}

func (s *Server) loadWeights(w http.ResponseWriter, r *http.Request) {
	var req tinker.LoadWeightsRequest
	body, err := s.decode(w, r, "load_weights", &req)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.ModelID == "" {
		if req.ModelID, err = s.modelFromState(&req); err != nil {
			writeError(w, err)
			return
		}
	}
	s.submit(w, "load_weights", req.ModelID, req.SeqID, body, func(m *trainModel) (func() (any, error), error) {
		src, name, ok := parsePath(req.Path, "weights", false)
		if !ok {
			return nil, userErr("path %q is not a saved state's path, tinker://<model_id>/weights/<name>", req.Path)
		}
		return func() (any, error) {
			if err := s.load(m, s.savedDir(src, "weights", name), req.Path, req.Optimizer); err != nil {
				return nil, err
			}
			return tinker.LoadWeightsResponse{Type: "load_weights"}, nil
		}, nil
	})
}

// modelFromState creates the model a load_weights request without a
// model_id names by session_id and model_seq_id: of the saved state's base
// model (or req.BaseModel), with the state's adapters, if any.
func (s *Server) modelFromState(req *tinker.LoadWeightsRequest) (string, error) {
	if req.SessionID == "" || req.ModelSeqID == nil {
		return "", errorf(http.StatusBadRequest, "load_weights: name the model: model_id, or session_id and model_seq_id to create one")
	}
	src, name, ok := parsePath(req.Path, "weights", false)
	if !ok {
		return "", errorf(http.StatusBadRequest, "load_weights: path %q is not a saved state's path, tinker://<model_id>/weights/<name>", req.Path)
	}
	dir := s.savedDir(src, "weights", name)
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", errorf(http.StatusNotFound, "load_weights: no weights are saved at %s", req.Path)
	}
	var st savedState
	if err == nil {
		err = json.Unmarshal(raw, &st)
	}
	if err != nil {
		return "", errorf(http.StatusInternalServerError, "load_weights: reading %s: %v", req.Path, err)
	}
	if req.BaseModel != "" {
		st.BaseModel = req.BaseModel
	}
	b, err := s.baseNamed(st.BaseModel)
	if err != nil {
		return "", err
	}
	// The adapters' seed draws A, which the load replaces.
	cfg, ok, err := local.ReadLoRAConfig(dir)
	if err != nil {
		return "", errorf(http.StatusInternalServerError, "load_weights: reading %s: %v", req.Path, err)
	}
	var adapters *lora.Config
	if ok {
		adapters = &cfg
	}
	m, err := s.addModel(req.SessionID, *req.ModelSeqID, b, adapters, req.UserMetadata)
	if err != nil {
		return "", err
	}
	return m.id, nil
}

// load replaces the model's learner by one of the state in dir: its
// weights, and the saved optimizer state (optimizer) or a fresh one with
// the same settings. The accumulated gradients go with the old learner,
// and a state that fails to load changes nothing.
func (s *Server) load(m *trainModel, dir, path string, optimizer bool) error {
	configPath := filepath.Join(dir, "config.json")
	if _, err := os.Stat(configPath); errors.Is(err, fs.ErrNotExist) {
		return userErr("no weights are saved at %s", path)
	}
	l := m.learner
	// The config first: a state of another model is refused before its
	// weights are read.
	hc, err := hfconfig.Load(configPath)
	if err != nil {
		return serverErr("reading %s: %v", path, err)
	}
	mc, err := hf.ModelConfig(hc)
	if err != nil {
		return serverErr("reading %s: %v", path, err)
	}
	if got, want := mc.WithDefaults(), l.Model.Config.WithDefaults(); !got.Equal(want) {
		return userErr("the weights at %s are of another model than model %s's base %s: %+v, not %+v", path, m.id, m.base.name, got, want)
	}
	if optimizer {
		if _, err := os.Stat(filepath.Join(dir, local.OptimizerFile)); err != nil {
			return userErr("the state at %s holds no optimizer state", path)
		}
	}
	_, err = os.Stat(filepath.Join(dir, local.LoRAFile))
	if isLoRA := err == nil; isLoRA != (m.lora != nil) {
		if isLoRA {
			return userErr("the state at %s is of LoRA adapters, and model %s trains every parameter", path, m.id)
		}
		return userErr("the state at %s is of every parameter, and model %s trains LoRA adapters", path, m.id)
	}
	var nl *local.Learner
	if m.lora != nil {
		// Adapters over a fresh copy of the base weights.
		if nl, err = m.base.learner(l.Opt.Config(), m.lora); err != nil {
			return serverErr("%v", err)
		}
		if err := nl.LoadLoRA(dir); err != nil {
			return userErr("reading %s: %v", path, err)
		}
	} else {
		saved, _, err := hf.Load(dir)
		if err != nil {
			return serverErr("reading %s: %v", path, err)
		}
		if nl, err = local.NewLearner(saved, l.Opt.Config()); err != nil {
			return serverErr("%v", err)
		}
	}
	// Saves still carry the base model's config.json and tokenizer files.
	nl.Source, nl.HFConfig = l.Source, l.HFConfig
	if optimizer {
		if err := nl.LoadOptimizer(dir); err != nil {
			return serverErr("reading %s: %v", path, err)
		}
	}
	m.learner = nl
	return nil
}
