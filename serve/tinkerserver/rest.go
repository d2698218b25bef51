package tinkerserver

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend/local"
)

// The REST management surface of the SDK's RestClient and the tinker
// CLI, as far as one local server with one user can honour it:
//
//   - GET training_runs (limit, offset): every training run the state
//     directory records, newest first, with a cursor;
//   - GET checkpoints (limit, offset): every run's checkpoints, newest
//     first, with a cursor (list_user_checkpoints);
//   - GET sessions (limit, offset) and GET sessions/<id>: the sessions
//     this server process has seen (a session lives in memory, and is
//     remembered for tombstoneTTL after it ends), and a session's models
//     and sampling sessions;
//   - POST weights_info {tinker_path}: the base model and adapters of
//     saved weights;
//   - POST and DELETE training_runs/<id>/checkpoints/<kind>/<name>/publish:
//     the checkpoint's public flag in the listings (409 if it is so
//     already). A local server has no other users to show it to: the flag
//     is kept, and changes no access;
//   - GET billing/usage/checkpoints/current: the saves' count and bytes
//     (no cost: nothing is billed).
//
// Projects, search, traces, billing events, audit logs, copies between
// accounts and the caller's identity (whoami) need accounts this server
// does not have, and are refused by name (notOffered).

// page reads a listing's limit and offset (default limit def), and its
// access_scope, which must be owned or accessible (one user: both are
// everything). A project_id is refused: this server keeps no projects.
func page(q url.Values, def int) (limit, offset int, err error) {
	limit, offset = def, 0
	for _, f := range []struct {
		name string
		v    *int
		min  int
	}{{"limit", &limit, 1}, {"offset", &offset, 0}} {
		raw := q.Get(f.name)
		if raw == "" {
			continue
		}
		n, perr := strconv.Atoi(raw)
		if perr != nil || n < f.min || n > 1<<20 {
			return 0, 0, errorf(http.StatusBadRequest, "%s is %q, want a whole number from %d", f.name, raw, f.min)
		}
		*f.v = n
	}
	switch scope := q.Get("access_scope"); scope {
	case "", "owned", "accessible":
	default:
		return 0, 0, errorf(http.StatusBadRequest, "access_scope is %q, want owned or accessible", scope)
	}
	if q.Get("project_id") != "" {
		return 0, 0, errorf(http.StatusBadRequest, "project_id: this server keeps no projects (rlvr serve --tinker has one user)")
	}
	return limit, offset, nil
}

// window is items[offset : offset+limit], within bounds.
func window[T any](items []T, limit, offset int) []T {
	if offset >= len(items) {
		return []T{}
	}
	return items[offset:min(len(items), offset+limit)]
}

// runIDs lists the training runs the state directory records.
func (s *Server) runIDs() []string {
	records, _ := filepath.Glob(filepath.Join(s.cfg.StateDir, "*", runRecordFile))
	ids := make([]string, 0, len(records))
	for _, r := range records {
		if id := filepath.Base(filepath.Dir(r)); idPattern.MatchString(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// listTrainingRuns answers GET training_runs.
func (s *Server) listTrainingRuns(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := page(r.URL.Query(), 20)
	if err != nil {
		writeError(w, err)
		return
	}
	var runs []tinker.TrainingRun
	for _, id := range s.runIDs() {
		if run, err := s.runOf(id); err == nil { // a run deleted meanwhile is left out
			runs = append(runs, run)
		}
	}
	slices.SortFunc(runs, func(a, b tinker.TrainingRun) int {
		return cmp.Or(b.LastRequestTime.Compare(a.LastRequestTime), strings.Compare(a.TrainingRunID, b.TrainingRunID))
	})
	writeJSON(w, http.StatusOK, tinker.TrainingRunsResponse{TrainingRuns: window(runs, limit, offset),
		Cursor: tinker.Cursor{Offset: offset, Limit: limit, TotalCount: len(runs)}})
}

// listUserCheckpoints answers GET checkpoints: every run's checkpoints.
func (s *Server) listUserCheckpoints(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := page(r.URL.Query(), 100)
	if err != nil {
		writeError(w, err)
		return
	}
	var all []tinker.Checkpoint
	for _, id := range s.runIDs() {
		all = append(all, s.checkpoints(id)...)
	}
	slices.SortFunc(all, func(a, b tinker.Checkpoint) int {
		return cmp.Or(b.Time.Compare(a.Time), strings.Compare(a.TinkerPath, b.TinkerPath))
	})
	writeJSON(w, http.StatusOK, tinker.CheckpointsListResponse{Checkpoints: window(all, limit, offset),
		Cursor: &tinker.Cursor{Offset: offset, Limit: limit, TotalCount: len(all)}})
}

// listSessions answers GET sessions: the ids of the sessions this process
// knows, newest first.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	limit, offset, err := page(r.URL.Query(), 20)
	if err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b *session) int {
		return cmp.Or(b.created.Compare(a.created), strings.Compare(a.id, b.id))
	})
	ids := []string{}
	for _, sess := range window(all, limit, offset) {
		ids = append(ids, sess.id)
	}
	writeJSON(w, http.StatusOK, tinker.ListSessionsResponse{Sessions: ids})
}

// getSession answers GET sessions/<id>: its models and sampling sessions,
// whether it lives or has ended.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request, id string) {
	if _, _, err := page(r.URL.Query(), 1); err != nil {
		writeError(w, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[id]
	if sess == nil {
		writeDetail(w, http.StatusNotFound, "session "+id+" not found")
		return
	}
	out := tinker.GetSessionResponse{TrainingRunIDs: []string{}, SamplerIDs: []string{}, UserMetadata: sess.metadata, DisplayName: sess.displayName}
	for _, seq := range slices.Sorted(maps.Keys(sess.models)) {
		out.TrainingRunIDs = append(out.TrainingRunIDs, sess.models[seq].id)
	}
	for _, seq := range slices.Sorted(maps.Keys(sess.samplers)) {
		out.SamplerIDs = append(out.SamplerIDs, sess.samplers[seq].id)
	}
	writeJSON(w, http.StatusOK, out)
}

// weightsInfo answers POST weights_info {tinker_path}: the base model and
// adapters of a saved state, an export, or a running model's copy for
// sampling.
func (s *Server) weightsInfo(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TinkerPath string `json:"tinker_path"`
	}
	if _, err := s.decode(w, r, "weights_info", &req); err != nil {
		writeError(w, err)
		return
	}
	id, kind, name, ok := parseAnyPath(req.TinkerPath)
	if !ok {
		writeError(w, errorf(http.StatusBadRequest, "weights_info: tinker_path %q is not a checkpoint's path, tinker://<model_id>/<weights|sampler_weights|external_weights>/<name>", req.TinkerPath))
		return
	}
	run, err := s.runOf(id)
	if err != nil {
		writeError(w, errorf(http.StatusNotFound, "weights_info: no checkpoint %s", req.TinkerPath))
		return
	}
	if !slices.ContainsFunc(s.checkpoints(id), func(c tinker.Checkpoint) bool { return c.TinkerPath == weightsPath(id, kind, name) }) {
		writeError(w, errorf(http.StatusNotFound, "weights_info: no checkpoint %s", req.TinkerPath))
		return
	}
	info := tinker.WeightsInfoResponse{BaseModel: run.BaseModel, IsLoRA: run.IsLoRA, LoRARank: run.LoRARank}
	if kind == "weights" {
		// A saved state says which matrices its adapters train.
		if cfg, isLoRA, err := local.ReadLoRAConfig(s.savedDir(id, kind, name)); err == nil && isLoRA {
			info.TrainAttn, info.TrainMLP, info.TrainUnembed = &cfg.Attention, &cfg.MLP, &cfg.Unembed
		}
	}
	writeJSON(w, http.StatusOK, info)
}

// parseAnyPath reads tinker://<model_id>/<kind>/<name> of any kind.
func parseAnyPath(path string) (modelID, kind, name string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(path, "tinker://"), "/")
	if !strings.HasPrefix(path, "tinker://") || len(parts) != 3 {
		return "", "", "", false
	}
	switch parts[1] {
	case "weights", "sampler_weights", "external_weights":
	default:
		return "", "", "", false
	}
	id, name, ok := parsePath(path, parts[1], false)
	return id, parts[1], name, ok
}

// publicFile is where a saved checkpoint's published flag is kept, beside
// it, as its expiry is.
func publicFile(dir string) string {
	return filepath.Join(filepath.Dir(dir), ".public-"+filepath.Base(dir))
}

// diskPublic reports whether the saved checkpoint in dir is published.
func diskPublic(dir string) bool {
	_, err := os.Stat(publicFile(dir))
	return err == nil
}

// publishCheckpoint sets (publish) or clears a checkpoint's public flag;
// 409 when it is already so, as Tinker answers.
func (s *Server) publishCheckpoint(w http.ResponseWriter, modelID, kind, name string, publish bool) {
	already := errorf(http.StatusConflict, "the checkpoint is already private")
	doing := "unpublishing"
	if publish {
		already, doing = errorf(http.StatusConflict, "the checkpoint is already public"), "publishing"
	}
	s.checkpointCall(w, modelID, kind, name, doing, func(dir string) error {
		if diskPublic(dir) == publish {
			return already
		}
		if publish {
			b, _ := json.Marshal(map[string]time.Time{"published": time.Now().UTC()})
			return os.WriteFile(publicFile(dir), b, 0o644)
		}
		return os.Remove(publicFile(dir))
	}, func(m *trainModel, i int) error {
		if m.samplers[i].public == publish {
			return already
		}
		m.samplers[i].public = publish
		return nil
	})
}

// storageUsage answers GET billing/usage/checkpoints/current: the saves
// in the state directory, as one item with no cost.
func (s *Server) storageUsage(w http.ResponseWriter, r *http.Request) {
	count, size := 0, int64(0)
	for _, id := range s.runIDs() {
		for _, c := range s.checkpoints(id) {
			if c.SizeBytes != nil { // copies for sampling live in memory
				count++
				size += *c.SizeBytes
			}
		}
	}
	type item struct {
		CheckpointCount int     `json:"checkpoint_count"`
		SizeBytes       int64   `json:"size_bytes"`
		SizeGigabytes   float64 `json:"size_gigabytes"`
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": []item{{count, size, float64(size) / 1e9}}})
}
