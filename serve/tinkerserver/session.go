package tinkerserver

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"mime"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend/local"
	"rlvr/engine/lora"
	"rlvr/engine/model"
	"rlvr/engine/optim"
)

// session is a client's session: its heartbeat and its models.
type session struct {
	id      string
	created time.Time
	last    time.Time // the last heartbeat
	expired time.Time // when it expired or was finished; zero while it lives
	ended   *callErr  // why it ended
	// models by model_seq_id, so a retried create_model finds its model.
	models map[int64]*trainModel
	// samplers are its sampling sessions by sampling_session_seq_id.
	samplers map[int64]*samplingSession
	// What create_session named: GET sessions/<id> reports it.
	metadata    map[string]any
	displayName string
	// The custom losses it uploaded, by loss_id and by custom_loss_seq_id.
	losses   map[string]*customLoss
	lossSeqs map[int64]*customLoss
}

// tombstoneTTL is how long an expired session and its models are
// remembered, so that calls naming them say they expired.
const tombstoneTTL = 24 * time.Hour

// future is a call's pending or finished result.
type future struct {
	id        string
	done      chan struct{} // closed once body is set
	body      []byte        // the result, or a RequestFailed
	proto     []byte        // the result in the SDK's protobuf form, for the results that have one
	finished  time.Time
	retrieved time.Time // the first time it was retrieved
	// onSettle, when set, runs under s.mu once the future settles, told
	// whether the call failed (a sampling session's completion log).
	onSettle func(failed bool)
}

// randomID returns prefix and 8 random hex digits, as SkyRL names
// sessions and models.
func randomID(prefix string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// newFutureLocked issues a request_id. s.mu is held.
func (s *Server) newFutureLocked() *future {
	s.lastID++
	f := &future{id: strconv.FormatInt(s.lastID, 10), done: make(chan struct{})}
	s.futures[f.id] = f
	return f
}

// finish records a call's result, in JSON and, for forward(_backward)
// and sample results, in the SDK's protobuf form too: which one
// retrieve_future sends depends on what the client accepts.
func (s *Server) finish(f *future, v any) {
	b, err := json.Marshal(v)
	var pb []byte
	if err == nil {
		switch r := v.(type) {
		case *tinker.ForwardBackwardOutput:
			pb, err = tinker.ForwardBackwardOutputProto(r)
		case tinker.SampleResponse:
			pb, err = tinker.SampleResponseProto(&r)
		}
	}
	failed := err != nil
	if failed {
		b, pb = failureBody(serverErr("encoding the result: %v", err)), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.body == nil { // a future keeps its first outcome
		f.proto = pb
	}
	s.settleLocked(f, b, failed)
}

// fail records a call's failure.
func (s *Server) fail(f *future, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked(f, failureBody(err), true)
}

// settleLocked records a future's result body, a call's outcome or its
// failure (failed), and wakes its waiters; a future keeps the first body
// recorded. s.mu is held.
func (s *Server) settleLocked(f *future, body []byte, failed bool) {
	if f.body != nil {
		return
	}
	f.body, f.finished = body, time.Now()
	close(f.done)
	if f.onSettle != nil {
		f.onSettle(failed)
	}
}

// failureBody is the RequestFailed body of a call's failure, its message
// cut to maxMessageBytes; an error that is not a *callErr is the
// server's.
func failureBody(err error) []byte {
	ce := asCallErr(err)
	b, _ := json.Marshal(tinker.RequestFailed{Message: shorten(ce.msg, maxMessageBytes), Category: ce.category})
	return b
}

// asCallErr is err as a *callErr: an error that is not one is the
// server's.
func asCallErr(err error) *callErr {
	var ce *callErr
	if !errors.As(err, &ce) {
		ce = &callErr{"server", err.Error()}
	}
	return ce
}

// withKind is err as the failure of a call of kind: its message begins
// with the kind.
func withKind(kind string, err error) *callErr {
	ce := asCallErr(err)
	return &callErr{ce.category, kind + ": " + ce.msg}
}

// runCall runs one call on a worker and records its outcome; a panic is
// a server failure of that call, not of the server.
func (s *Server) runCall(kind string, f *future, run func() (any, error)) {
	if h := s.hook.Load(); h != nil {
		(*h)(kind)
	}
	start := time.Now()
	res, err := func() (res any, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tinkerserver: panic in a call", "call", kind, "request_id", f.id, "panic", p, "stack", string(debug.Stack()))
				err = serverErr("%s: internal error: %v", kind, p)
			}
		}()
		return run()
	}()
	if err != nil {
		s.log.Warn("tinkerserver: call failed", "call", kind, "request_id", f.id, "err", err)
		s.fail(f, err)
		return
	}
	s.log.Debug("tinkerserver: call done", "call", kind, "request_id", f.id, "took", time.Since(start))
	s.finish(f, res)
}

// expireLocked ends a session and stops its models. s.mu is held.
func (s *Server) expireLocked(sess *session, now time.Time) {
	s.endLocked(sess, now, userErr("session %s expired: no heartbeat for %v", sess.id, s.cfg.SessionTTL), "expired")
}

// finishLocked ends a session its client closed. s.mu is held.
func (s *Server) finishLocked(sess *session, now time.Time) {
	s.endLocked(sess, now, userErr("session %s was finished by its client", sess.id), "finished")
}

// endLocked ends a session, stopping its models with err. s.mu is held.
func (s *Server) endLocked(sess *session, now time.Time, err *callErr, how string) {
	if !sess.expired.IsZero() {
		return
	}
	sess.expired, sess.ended = now, err
	for _, m := range sess.models {
		m.stop(err)
	}
	s.log.Info("tinkerserver: session "+how, "session", sess.id, "models", len(sess.models))
}

// checkSessionLocked reports a session that has expired, expiring it
// first if its time is up. s.mu is held.
func (s *Server) checkSessionLocked(sess *session, now time.Time) error {
	if sess.expired.IsZero() && now.Sub(sess.last) > s.cfg.SessionTTL {
		s.expireLocked(sess, now)
	}
	if !sess.expired.IsZero() {
		return errorf(http.StatusGone, "%s", sess.ended.msg)
	}
	return nil
}

// sessionLocked finds a live session. s.mu is held.
func (s *Server) sessionLocked(id string, now time.Time) (*session, error) {
	if id == "" {
		return nil, errorf(http.StatusBadRequest, "session_id is missing")
	}
	sess := s.sessions[id]
	if sess == nil {
		return nil, errorf(http.StatusNotFound, "session %s not found", id)
	}
	return sess, s.checkSessionLocked(sess, now)
}

// modelLocked finds a model of a live session. s.mu is held.
func (s *Server) modelLocked(id string, now time.Time) (*trainModel, error) {
	if id == "" {
		return nil, errorf(http.StatusBadRequest, "model_id is missing")
	}
	m := s.models[id]
	if m == nil {
		return nil, errorf(http.StatusNotFound, "model %s not found", id)
	}
	if err := s.checkSessionLocked(m.sess, now); err != nil {
		return nil, errorf(http.StatusGone, "model %s: %v", id, err)
	}
	if m.unloaded {
		return nil, errorf(http.StatusNotFound, "model %s was unloaded", id)
	}
	return m, nil
}

// janitor expires sessions and drops old results and tombstones.
func (s *Server) janitor() {
	every := min(s.cfg.SessionTTL, s.cfg.ResultTTL) / 4
	every = max(10*time.Millisecond, min(every, 10*time.Second))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		s.sweep(now)
		s.expireCheckpoints(now)
	}
}

// sweep does the janitor's work once.
func (s *Server) sweep(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		s.checkSessionLocked(sess, now)
		if !sess.expired.IsZero() && now.Sub(sess.expired) > tombstoneTTL {
			for _, m := range sess.models {
				delete(s.models, m.id)
			}
			for _, ss := range sess.samplers {
				delete(s.samplingSessions, ss.id)
			}
			delete(s.sessions, id)
		}
	}
	defer s.dropSettledLocked() // after the results below are dropped
	keepRetrieved := min(time.Minute, s.cfg.ResultTTL)
	for id, f := range s.futures {
		if f.body == nil {
			continue
		}
		if now.Sub(f.finished) > s.cfg.ResultTTL || (!f.retrieved.IsZero() && now.Sub(f.retrieved) > keepRetrieved) {
			delete(s.futures, id)
		}
	}
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req tinker.CreateSessionRequest
	if _, err := s.decode(w, r, "create_session", &req); err != nil {
		writeError(w, err)
		return
	}
	if req.ProjectID != "" {
		writeError(w, errorf(http.StatusBadRequest, "create_session: project_id %q: this server keeps no projects (rlvr serve --tinker has one user)", req.ProjectID))
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, errorf(http.StatusServiceUnavailable, "the server is shutting down"))
		return
	}
	id := randomID("session_")
	for s.sessions[id] != nil {
		id = randomID("session_")
	}
	now := time.Now()
	s.sessions[id] = &session{id: id, created: now, last: now, models: map[int64]*trainModel{}, metadata: req.UserMetadata, displayName: req.DisplayName}
	s.mu.Unlock()
	s.log.Debug("tinkerserver: session created", "session", id, "tags", req.Tags, "sdk_version", req.SDKVersion)
	writeJSON(w, http.StatusOK, tinker.CreateSessionResponse{SessionID: id, Type: "create_session"})
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req tinker.HeartbeatRequest
	if _, err := s.decode(w, r, "session_heartbeat", &req); err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	now := time.Now()
	sess, err := s.sessionLocked(req.SessionID, now)
	if err == nil {
		sess.last = now
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"type": "session_heartbeat"})
}

// sessionCall answers the calls under tinker.PathSessions: GET <id>
// (getSession), and POST <id>/finish, the SDK's ServiceClient.close, which
// ends the session at once, as its expiry would, stopping its models and
// freeing their memory; its saved weights stay. finish's body (the
// reason) is not read.
func (s *Server) sessionCall(w http.ResponseWriter, r *http.Request) {
	id, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, tinker.PathSessions), "/")
	switch {
	case id == "search":
		writeRefused(w, "sessions/search", "searching by project, owner and status needs accounts this server does not keep; GET sessions lists them all")
		return
	case rest == "" && r.Method == http.MethodGet:
		s.getSession(w, r, id)
		return
	case rest == "":
		writeMethodNotAllowed(w, r, http.MethodGet)
		return
	case rest == "project":
		writeRefused(w, "sessions/<id>/project", "this server keeps no projects (it has one user)")
		return
	case rest == "trace_export":
		writeRefused(w, "sessions/<id>/trace_export", "this server keeps no traces of a session's calls")
		return
	case rest != "finish":
		writeNotOffered(w, "sessions ("+strings.TrimPrefix(r.URL.Path, "/api/v1/")+")", "GET sessions/<id> and POST sessions/<id>/finish")
		return
	}
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, r, http.MethodPost)
		return
	}
	io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	s.mu.Lock()
	now := time.Now()
	sess, err := s.sessionLocked(id, now)
	if err == nil {
		s.finishLocked(sess, now)
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) createModel(w http.ResponseWriter, r *http.Request) {
	var req tinker.CreateModelRequest
	if _, err := s.decode(w, r, "create_model", &req); err != nil {
		writeError(w, err)
		return
	}
	m, err := s.newModel(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	res := tinker.CreateModelResponse{ModelID: m.id}
	s.mu.Lock()
	f := s.newFutureLocked()
	s.mu.Unlock()
	s.finish(f, res)
	res.RequestID = f.id
	writeJSON(w, http.StatusOK, res)
}

// unloadModel is SkyRL's unload_model: the model stops (calls queued on
// it fail, naming why), its weights are freed, and it no longer counts
// against Config.MaxModels; its saves stay. Later calls on it are refused
// (404). The SDK does not send it; rlvr's client does when it closes.
func (s *Server) unloadModel(w http.ResponseWriter, r *http.Request) {
	var req tinker.UnloadModelRequest
	if _, err := s.decode(w, r, "unload_model", &req); err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	m, err := s.modelLocked(req.ModelID, time.Now())
	var f *future
	if err == nil {
		m.unloaded = true
		m.stop(userErr("model %s was unloaded by its client", m.id))
		f = s.newFutureLocked()
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, fmt.Errorf("unload_model: %w", err))
		return
	}
	s.log.Debug("tinkerserver: model unloaded", "model", m.id)
	s.finish(f, tinker.UnloadModelResponse{ModelID: m.id, Status: "unloaded", Type: "unload_model"})
	writeJSON(w, http.StatusOK, tinker.UnloadModelResponse{ModelID: m.id, RequestID: f.id})
}

// modelInfo is get_info's answer: what the SDK's training client reads of
// its model. tokenizer_id is the base model's local directory when it is
// one, so that the SDK's get_tokenizer loads it on this machine.
type modelInfo struct {
	Type      string    `json:"type"`
	ModelID   string    `json:"model_id"`
	ModelName string    `json:"model_name"`
	IsLoRA    bool      `json:"is_lora"`
	LoRARank  int       `json:"lora_rank"`
	ModelData modelData `json:"model_data"`
}

type modelData struct {
	ModelName   string `json:"model_name"`
	TokenizerID string `json:"tokenizer_id"`
}

func (s *Server) getInfo(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ModelID string `json:"model_id"`
	}
	if _, err := s.decode(w, r, "get_info", &req); err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	m, err := s.modelLocked(req.ModelID, time.Now())
	s.mu.Unlock()
	if err != nil {
		writeError(w, fmt.Errorf("get_info: %w", err))
		return
	}
	tokenizer := m.base.name
	if fi, err := os.Stat(s.cfg.Models[m.base.name]); err == nil && fi.IsDir() {
		tokenizer = s.cfg.Models[m.base.name]
	}
	info := modelInfo{Type: "get_info", ModelID: m.id, ModelName: m.base.name,
		ModelData: modelData{ModelName: m.base.name, TokenizerID: tokenizer}}
	if m.lora != nil {
		info.IsLoRA, info.LoRARank = true, m.lora.Rank
	}
	writeJSON(w, http.StatusOK, info)
}

// loraConfig is the adapters a create_model request asks for, with the
// SDK's defaults (every kind of matrix) and Tinker's alpha of 32. Without
// a seed, A's initial values are drawn at random, as on Tinker's service.
func loraConfig(c tinker.LoraConfig) lora.Config {
	on := func(b *bool) bool { return b == nil || *b }
	cfg := lora.Config{Rank: c.Rank, Alpha: lora.DefaultAlpha, Attention: on(c.TrainAttn), MLP: on(c.TrainMLP), Unembed: on(c.TrainUnembed)}
	if c.Seed != nil {
		cfg.Seed = uint64(*c.Seed)
	} else {
		cfg.Seed = mathrand.Uint64()
	}
	return cfg
}

// newModel creates the model req asks for, or finds the one a retry of
// the same request created.
func (s *Server) newModel(req *tinker.CreateModelRequest) (*trainModel, error) {
	b, err := s.baseNamed(req.BaseModel)
	if err != nil {
		return nil, err
	}
	if req.LoraConfig.Rank < 0 {
		return nil, errorf(http.StatusBadRequest, "create_model: lora_config.rank is %d: want 0 (every parameter) or a LoRA rank", req.LoraConfig.Rank)
	}
	if oc := req.OptimizerConfig; oc != nil && oc.Type != "adamw" {
		return nil, errorf(http.StatusBadRequest, "create_model: optimizer_config.type %q is not offered: this server trains with AdamW (\"adamw\")", oc.Type)
	}
	var adapters *lora.Config
	if req.LoraConfig.Rank > 0 {
		cfg := loraConfig(req.LoraConfig)
		adapters = &cfg
	}
	return s.addModel(req.SessionID, req.ModelSeqID, b, adapters, req.UserMetadata)
}

// baseNamed is the served base model a create_model names.
func (s *Server) baseNamed(name string) (*base, error) {
	if name == "" {
		return nil, errorf(http.StatusBadRequest, "create_model: base_model is missing")
	}
	b := s.bases[name]
	if b == nil {
		return nil, errorf(http.StatusNotFound, "create_model: base_model %q is not served here (served: %s)", name, strings.Join(s.names, ", "))
	}
	return b, nil
}

// addModel creates model seq of the session over base b, training every
// parameter or, with adapters, LoRA adapters, or finds the one a retry
// created. A new model's training run is recorded in the state directory
// with the user's metadata (runRecord).
func (s *Server) addModel(sessionID string, seq int64, b *base, adapters *lora.Config, metadata map[string]any) (*trainModel, error) {
	find := func() (*trainModel, error) {
		sess, err := s.sessionLocked(sessionID, time.Now())
		if err != nil {
			return nil, err
		}
		if s.closed {
			return nil, errorf(http.StatusServiceUnavailable, "the server is shutting down")
		}
		if m := sess.models[seq]; m != nil {
			if m.base != b {
				return nil, errorf(http.StatusConflict, "create_model: model_seq_id %d of session %s was already used for base model %s", seq, sess.id, m.base.name)
			}
			return m, nil
		}
		return nil, nil
	}
	s.mu.Lock()
	m, err := find()
	if m == nil && err == nil {
		err = s.reserveModelLocked(time.Now())
	}
	s.mu.Unlock()
	if m != nil || err != nil {
		return m, err
	}
	// Copy the base weights outside the lock: it takes a while.
	learner, err := b.learner(optim.DefaultAdamW(), adapters)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.creating-- // the model is added below, or never
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "create_model: %v", err)
	}
	if m, err := find(); m != nil || err != nil {
		return m, err
	}
	// The id the SDK derives itself for a model it creates by loading a
	// state (create_training_client_from_state).
	id := fmt.Sprintf("%s:train:%d", sessionID, seq)
	sess := s.sessions[sessionID]
	rec := runRecord{BaseModel: b.name, UserMetadata: metadata, Created: time.Now().UTC()}
	if adapters != nil {
		rec.LoRARank = adapters.Rank
	}
	if err := s.writeRunRecord(id, rec); err != nil {
		return nil, errorf(http.StatusInternalServerError, "create_model: %v", err)
	}
	m = &trainModel{id: id, sess: sess, base: b, lora: adapters, learner: learner, wake: make(chan struct{}, 1),
		seqs: map[int64]seqRecord{}, lastRequest: rec.Created}
	sess.models[seq] = m
	s.models[id] = m
	s.modelWG.Add(1)
	go func() {
		defer s.modelWG.Done()
		s.runModel(m)
	}()
	s.log.Debug("tinkerserver: model created", "model", id, "session", sess.id, "base_model", b.name)
	return m, nil
}

// learner is a learner over a fresh copy of b's weights: of every
// parameter, or of LoRA adapters over them. Its saves carry b's
// config.json and tokenizer files.
func (b *base) learner(adam optim.AdamWConfig, adapters *lora.Config) (*local.Learner, error) {
	m, err := model.NewEmpty(b.loaded.Model.Config)
	if err != nil {
		return nil, err
	}
	copy(m.Params, b.loaded.Model.Params)
	var l *local.Learner
	if adapters == nil {
		l, err = local.NewLearner(m, adam)
	} else {
		l, err = local.NewLoRALearner(m, adam, *adapters)
	}
	if err != nil {
		return nil, err
	}
	l.Source, l.HFConfig = b.loaded.Dir, b.loaded.HFConfig
	return l, nil
}

func (s *Server) retrieveFuture(w http.ResponseWriter, r *http.Request) {
	var req tinker.RetrieveFutureRequest
	if _, err := s.decode(w, r, "retrieve_future", &req); err != nil {
		writeError(w, err)
		return
	}
	if req.RequestID == "" {
		writeError(w, errorf(http.StatusBadRequest, "retrieve_future: request_id is missing"))
		return
	}
	s.mu.Lock()
	f := s.futures[req.RequestID]
	issued := false
	if n, err := strconv.ParseInt(req.RequestID, 10, 64); err == nil && n >= 1 && n <= s.lastID && strconv.FormatInt(n, 10) == req.RequestID {
		issued = true
	}
	s.mu.Unlock()
	switch {
	case f == nil && issued:
		writeError(w, errorf(http.StatusGone, "retrieve_future: the result of request %s is no longer kept", req.RequestID))
		return
	case f == nil:
		writeError(w, errorf(http.StatusNotFound, "Future not found: no request %q", req.RequestID))
		return
	}
	t := time.NewTimer(s.cfg.PollTimeout)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
		writeDetail(w, http.StatusRequestTimeout, "Timeout waiting for result")
		return
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	if f.retrieved.IsZero() {
		f.retrieved = time.Now()
	}
	body, pb := f.body, f.proto
	s.mu.Unlock()
	// The SDK asks for protobuf where it reads it (forward_backward and
	// sample results) and rejects JSON there; a failure stays JSON, which
	// it reads as such.
	if pb != nil && acceptsProtobuf(r) {
		w.Header().Set("Content-Type", tinker.ContentTypeProtobuf)
		w.WriteHeader(http.StatusOK)
		w.Write(pb)
		return
	}
	writeRaw(w, http.StatusOK, body)
}

// acceptsProtobuf reports whether the request's Accept header names the
// protobuf media type.
func acceptsProtobuf(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == tinker.ContentTypeProtobuf {
				return true
			}
		}
	}
	return false
}
