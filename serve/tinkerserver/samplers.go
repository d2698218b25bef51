package tinkerserver

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"rlvr/api/tinker"
)

// samplingSession is what the SDK's sampling client samples through: a
// name for one set of weights — a base model, or a sampler copy's
// tinker:// path — within a session. asample naming it samples those
// weights, as if it named them itself.
type samplingSession struct {
	id        string
	sess      *session
	baseModel string // the base model, always set
	modelPath string // the sampler copy's path; "" for the base model's weights
	// inflight, when set, is the model whose shared inflight weights the
	// session samples: the newest its inflight saves published.
	inflight *trainModel

	// Guarded by s.mu.
	logs   map[int64]*completionLog // completions by clone (futures.go)
	clones int64                    // the clone numbers join_sampling_session gave
}

// createSamplingSessionRequest is create_sampling_session's body.
type createSamplingSessionRequest struct {
	SessionID            string `json:"session_id"`
	SamplingSessionSeqID *int64 `json:"sampling_session_seq_id"`
	BaseModel            string `json:"base_model"`
	ModelPath            string `json:"model_path"`
}

// samplerResponse is GET samplers/<id>'s answer.
type samplerResponse struct {
	SamplerID string `json:"sampler_id"`
	BaseModel string `json:"base_model"`
	ModelPath string `json:"model_path,omitempty"`
}

func (s *Server) createSamplingSession(w http.ResponseWriter, r *http.Request) {
	const kind = "create_sampling_session"
	var req createSamplingSessionRequest
	if _, err := s.decode(w, r, kind, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.SamplingSessionSeqID == nil {
		writeError(w, errorf(http.StatusBadRequest, "%s: sampling_session_seq_id is missing", kind))
		return
	}
	base := req.BaseModel
	if req.ModelPath != "" {
		id, _, ok := parsePath(req.ModelPath, "sampler_weights", true)
		if !ok {
			writeError(w, errorf(http.StatusBadRequest, "%s: model_path %q is not a sampler weights path, tinker://<model_id>/sampler_weights/<name>", kind, req.ModelPath))
			return
		}
		s.mu.Lock()
		m, err := s.modelLocked(id, time.Now())
		s.mu.Unlock()
		if err != nil {
			writeError(w, errorf(http.StatusNotFound, "%s: model_path %s: %v", kind, req.ModelPath, err))
			return
		}
		if base != "" && base != m.base.name {
			writeError(w, errorf(http.StatusBadRequest, "%s: base_model %q is not the base of model_path %s (%s)", kind, base, req.ModelPath, m.base.name))
			return
		}
		base = m.base.name
	}
	if s.bases[base] == nil {
		writeError(w, errorf(http.StatusBadRequest, "%s: base_model %q is not served here (served: %s)", kind, base, strings.Join(s.names, ", ")))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, err := s.sessionLocked(req.SessionID, time.Now())
	if err != nil {
		writeError(w, errorf(statusOf(err), "%s: %v", kind, err))
		return
	}
	ss, err := s.samplingSessionLocked(sess, *req.SamplingSessionSeqID, base, req.ModelPath, nil)
	if err != nil {
		writeError(w, errorf(statusOf(err), "%s: %v", kind, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"type": kind, "sampling_session_id": ss.id})
}

// samplingSessionLocked makes the sampling session numbered seq in sess
// for the weights named — a base model, a copy's path, or with inflight
// set that model's inflight weights — or finds the one a retry of the
// same call made; seq reused for other weights is an error. s.mu is held.
func (s *Server) samplingSessionLocked(sess *session, seq int64, base, modelPath string, inflight *trainModel) (*samplingSession, error) {
	if ss := sess.samplers[seq]; ss != nil {
		if ss.baseModel != base || ss.modelPath != modelPath || ss.inflight != inflight {
			return nil, errorf(http.StatusConflict, "sampling_session_seq_id %d of session %s was already used for other weights", seq, sess.id)
		}
		return ss, nil
	}
	id := randomID("sampler_")
	for s.samplingSessions[id] != nil {
		id = randomID("sampler_")
	}
	ss := &samplingSession{id: id, sess: sess, baseModel: base, modelPath: modelPath, inflight: inflight}
	if sess.samplers == nil {
		sess.samplers = map[int64]*samplingSession{}
	}
	sess.samplers[seq] = ss
	s.samplingSessions[id] = ss
	return ss, nil
}

// samplingSessionByID finds a sampling session of a live session.
func (s *Server) samplingSessionByID(id string) (*samplingSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.samplingSessions[id]
	if ss == nil {
		return nil, errorf(http.StatusNotFound, "sampling session %s not found", id)
	}
	if err := s.checkSessionLocked(ss.sess, time.Now()); err != nil {
		return nil, errorf(http.StatusGone, "sampling session %s: %v", id, err)
	}
	return ss, nil
}

// getSampler answers GET samplers/<id>: the weights a sampling session
// samples.
func (s *Server) getSampler(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, tinker.PathSamplers)
	ss, err := s.samplingSessionByID(id)
	if err != nil {
		writeError(w, err)
		return
	}
	// An inflight session's weights change with each inflight save: no
	// path names them.
	writeJSON(w, http.StatusOK, samplerResponse{SamplerID: ss.id, BaseModel: ss.baseModel, ModelPath: ss.modelPath})
}

// statusOf is the HTTP status of an *httpError, else 500.
func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	return http.StatusInternalServerError
}
