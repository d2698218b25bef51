package tinkerserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/agessh"

	"rlvr/api/tinker"
	"rlvr/internal/atomicfile"
)

// Exports and downloads: save_weights_external writes a model's weights as
// other programs take them (its LoRA adapters in Tinker's adapter format,
// which tinker-cookbook's weights.build_hf_model merges into a Hugging
// Face model; a full model as a Hugging Face directory), each file
// encrypted with age (filippo.io/age) when the call names recipients, to
// Config.StateDir/<model_id>/external_weights/<name>. The REST reads list
// a training run's checkpoints and hand out a download URL per file of an
// export, as Tinker's signed URLs: an unguessable token, valid for
// downloadTTL, served under tinker.PathFiles without the API key (the
// SDK fetches the URLs with a plain HTTP client).

// downloadTTL is how long a download URL stays valid.
const downloadTTL = time.Hour

// download is the files one download token serves.
type download struct {
	dir     string
	files   []string // relative to dir
	expires time.Time
}

// savedDir is where a model's saved weights of a kind ("weights",
// "external_weights") called name are kept.
func (s *Server) savedDir(modelID, kind, name string) string {
	return filepath.Join(s.cfg.StateDir, modelID, kind, name)
}

func (s *Server) saveWeightsExternal(w http.ResponseWriter, r *http.Request) {
	var req tinker.SaveWeightsExternalRequest
	body, err := s.decode(w, r, "save_weights_external", &req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.submit(w, "save_weights_external", req.ModelID, req.SeqID, body, func(m *trainModel) (func() (any, error), error) {
		if err := checkName("path", req.Path); err != nil {
			return nil, err
		}
		recipients, err := ageRecipients(req.AgeEncryptionRecipients)
		if err != nil {
			return nil, err
		}
		ttl, err := checkpointTTL(req.TTLSeconds)
		if err != nil {
			return nil, err
		}
		return func() (any, error) { return s.export(m, req.Path, recipients, ttl) }, nil
	})
}

// maxAgeRecipients bounds an export's age recipients, as Tinker's
// service does.
const maxAgeRecipients = 10

// ageRecipients parses save_weights_external's age recipients: native
// age1… keys or SSH public keys.
func ageRecipients(keys []string) ([]age.Recipient, error) {
	if len(keys) > maxAgeRecipients {
		return nil, userErr("age_encryption_recipients: %d recipients, at most %d", len(keys), maxAgeRecipients)
	}
	var out []age.Recipient
	for i, k := range keys {
		var r age.Recipient
		var err error
		if strings.HasPrefix(k, "age1") {
			r, err = age.ParseX25519Recipient(k)
		} else {
			r, err = agessh.ParseRecipient(k)
		}
		if err != nil {
			return nil, userErr("age_encryption_recipients[%d]: %v", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// export writes the model's weights for other programs under name, each
// file encrypted to the recipients when there are any (and named with a
// .age suffix), to expire ttl after it is written (0: never).
func (s *Server) export(m *trainModel, name string, recipients []age.Recipient, ttl time.Duration) (any, error) {
	path, dir, err := s.writeSaved(m, "external_weights", name, ttl, "exported", "exporting", func(tmp string) error {
		if err := m.learner.Export(context.Background(), tmp); err != nil || len(recipients) == 0 {
			return err
		}
		return encryptFiles(tmp, recipients)
	})
	if err != nil {
		return nil, err
	}
	_, size, err := filesOf(dir)
	if err != nil {
		return nil, serverErr("exporting %s: %v", path, err)
	}
	return tinker.SaveWeightsExternalResponse{Path: path, SizeBytes: size, Type: "save_weights_external"}, nil
}

// encryptFiles replaces every file under dir by its age encryption to
// recipients, named with a .age suffix.
func encryptFiles(dir string, recipients []age.Recipient) error {
	files, _, err := filesOf(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		plain := filepath.Join(dir, filepath.FromSlash(f))
		if err := encryptFile(plain, plain+".age", recipients); err != nil {
			return err
		}
		if err := os.Remove(plain); err != nil {
			return err
		}
	}
	return nil
}

func encryptFile(src, dst string, recipients []age.Recipient) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	w, err := age.Encrypt(out, recipients...)
	if err == nil {
		_, err = io.Copy(w, in)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// filesOf lists the regular files under dir, relative to it, and their
// total size.
func filesOf(dir string) (files []string, size int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files, size = append(files, filepath.ToSlash(rel)), size+info.Size()
		return nil
	})
	return files, size, err
}

// trainingRuns answers the REST calls under tinker.PathTrainingRuns:
// GET <model_id>, GET <model_id>/checkpoints, GET
// <model_id>/checkpoints/external_weights/<name>/external_weights_urls,
// and DELETE <model_id>/checkpoints/<kind>/<name>.
func (s *Server) trainingRuns(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, tinker.PathTrainingRuns)
	modelID, sub, _ := strings.Cut(rest, "/")
	if !idPattern.MatchString(modelID) {
		writeDetail(w, http.StatusNotFound, "training_runs: "+rest+" names no training run")
		return
	}
	parts := strings.Split(sub, "/")
	want := http.MethodGet
	switch {
	case sub == "" && r.Method == want:
		s.trainingRun(w, modelID)
	case sub == "checkpoints" && r.Method == want:
		s.listCheckpoints(w, modelID)
	case len(parts) == 4 && parts[0] == "checkpoints" && parts[1] == "external_weights" && parts[3] == "external_weights_urls" && r.Method == want:
		s.externalWeightsURLs(w, r, modelID, parts[2])
	case len(parts) == 3 && parts[0] == "checkpoints" && r.Method == http.MethodDelete:
		s.deleteCheckpoint(w, modelID, parts[1], parts[2])
	case len(parts) == 4 && parts[0] == "checkpoints" && parts[3] == "ttl" && r.Method == http.MethodPut:
		s.setCheckpointTTL(w, r, modelID, parts[1], parts[2])
	case len(parts) == 4 && parts[0] == "checkpoints" && parts[3] == "ttl":
		writeMethodNotAllowed(w, r, http.MethodPut)
	case len(parts) == 4 && parts[0] == "checkpoints" && parts[3] == "publish" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		s.publishCheckpoint(w, modelID, parts[1], parts[2], r.Method == http.MethodPost)
	case len(parts) == 4 && parts[0] == "checkpoints" && parts[3] == "publish":
		writeMethodNotAllowed(w, r, "POST, DELETE")
	case len(parts) == 3 && parts[0] == "checkpoints":
		want = http.MethodDelete
		fallthrough
	case sub == "", sub == "checkpoints", len(parts) == 4 && parts[3] == "external_weights_urls":
		writeMethodNotAllowed(w, r, want)
	default:
		writeNotOffered(w, "training_runs ("+rest+")", "<model_id>, <model_id>/checkpoints, .../external_weights_urls, PUT .../ttl, POST and DELETE .../publish, and DELETE of a checkpoint")
	}
}

// deleteCheckpoint deletes a saved state or export from disk, with the
// record of its TTL, or drops a running model's copy for sampling.
func (s *Server) deleteCheckpoint(w http.ResponseWriter, modelID, kind, name string) {
	s.checkpointCall(w, modelID, kind, name, "deleting", func(dir string) error {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		os.Remove(publicFile(dir))
		return setDiskExpiry(dir, time.Time{})
	}, func(m *trainModel, i int) error {
		m.samplers = slices.Delete(m.samplers, i, i+1)
		return nil
	})
}

// checkpointCall answers a REST call on one checkpoint: onDisk acts on a
// saved state's or export's directory, onSampler (under the server's lock)
// on a running model's copy for sampling, m.samplers[i]. A checkpoint that
// is not there is answered 404, an error of either with its status (an
// *httpError's, else 500; doing names the work: "deleting"), and success
// with {}.
func (s *Server) checkpointCall(w http.ResponseWriter, modelID, kind, name, doing string, onDisk func(dir string) error, onSampler func(m *trainModel, i int) error) {
	path := weightsPath(modelID, kind, name)
	if !namePattern.MatchString(name) {
		writeDetail(w, http.StatusNotFound, "no checkpoint "+path)
		return
	}
	switch kind {
	case "weights", "external_weights":
		dir := s.savedDir(modelID, kind, name)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			writeDetail(w, http.StatusNotFound, "no checkpoint "+path)
			return
		}
		if err := onDisk(dir); err != nil {
			writeDetail(w, statusOf(err), doing+" "+path+": "+err.Error())
			return
		}
	case "sampler_weights":
		s.mu.Lock()
		found := false
		var err error
		if m := s.models[modelID]; m != nil {
			if i := m.samplerIndex(name); i >= 0 {
				err = onSampler(m, i)
				found = true
			}
		}
		s.mu.Unlock()
		if !found {
			writeDetail(w, http.StatusNotFound, "no checkpoint "+path)
			return
		}
		if err != nil {
			writeDetail(w, statusOf(err), doing+" "+path+": "+err.Error())
			return
		}
	default:
		writeDetail(w, http.StatusNotFound, "no checkpoint "+path+": the kinds are weights, sampler_weights and external_weights")
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// runRecordFile is where a model's training run is recorded, in its state
// directory beside its saved weights.
const runRecordFile = "training_run.json"

// runRecord is what the state directory keeps of a model: what the REST
// reads report of it once it has stopped.
type runRecord struct {
	BaseModel    string         `json:"base_model"`
	LoRARank     int            `json:"lora_rank"` // 0: every parameter
	UserMetadata map[string]any `json:"user_metadata,omitempty"`
	Created      time.Time      `json:"created"`
}

func (s *Server) writeRunRecord(modelID string, rec runRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.cfg.StateDir, modelID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, runRecordFile), b)
}

// trainingRun answers GET training_runs/<model_id>.
func (s *Server) trainingRun(w http.ResponseWriter, modelID string) {
	run, err := s.runOf(modelID)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// runOf describes a model, running or stopped: its record, its last
// request, and its newest saved state and copy for sampling.
func (s *Server) runOf(modelID string) (tinker.TrainingRun, error) {
	b, err := os.ReadFile(filepath.Join(s.cfg.StateDir, modelID, runRecordFile))
	if err != nil {
		return tinker.TrainingRun{}, errorf(http.StatusNotFound, "training_runs: no training run %s", modelID)
	}
	var rec runRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return tinker.TrainingRun{}, errorf(http.StatusInternalServerError, "training_runs: reading %s's record: %v", modelID, err)
	}
	run := tinker.TrainingRun{TrainingRunID: modelID, BaseModel: rec.BaseModel, ModelOwner: "local", IsLoRA: rec.LoRARank > 0,
		LastRequestTime: rec.Created, UserMetadata: rec.UserMetadata}
	if rec.LoRARank > 0 {
		run.LoRARank = &rec.LoRARank
	}
	for _, c := range s.checkpoints(modelID) {
		switch c.CheckpointType {
		case "training":
			if run.LastCheckpoint == nil || c.Time.After(run.LastCheckpoint.Time) {
				run.LastCheckpoint = &c
			}
		case "sampler":
			run.LastSamplerCheckpoint = &c // in the order saved
		}
		if c.Time.After(run.LastRequestTime) {
			run.LastRequestTime = c.Time
		}
	}
	s.mu.Lock()
	if m := s.models[modelID]; m != nil && m.lastRequest.After(run.LastRequestTime) {
		run.LastRequestTime = m.lastRequest.UTC()
	}
	s.mu.Unlock()
	return run, nil
}

// listCheckpoints lists a model's saved states and exports, on disk
// whether or not the model still runs, and its copies for sampling while
// it does.
func (s *Server) listCheckpoints(w http.ResponseWriter, modelID string) {
	out := s.checkpoints(modelID)
	if len(out) == 0 {
		if _, err := os.Stat(filepath.Join(s.cfg.StateDir, modelID)); err != nil {
			writeDetail(w, http.StatusNotFound, "training_runs: no training run "+modelID)
			return
		}
	}
	writeJSON(w, http.StatusOK, tinker.CheckpointsListResponse{Checkpoints: out})
}

// checkpoints are a model's saved states and exports, on disk whether or
// not the model still runs, and its copies for sampling while it does.
func (s *Server) checkpoints(modelID string) []tinker.Checkpoint {
	out := []tinker.Checkpoint{}
	for _, kind := range []struct{ dir, typ string }{{"weights", "training"}, {"external_weights", "external"}} {
		entries, _ := os.ReadDir(filepath.Join(s.cfg.StateDir, modelID, kind.dir))
		for _, e := range entries {
			if !e.IsDir() || !namePattern.MatchString(e.Name()) { // not a hidden one being written
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			dir := filepath.Join(s.cfg.StateDir, modelID, kind.dir, e.Name())
			_, size, _ := filesOf(dir)
			out = append(out, tinker.Checkpoint{CheckpointID: kind.dir + "/" + e.Name(), CheckpointType: kind.typ, Time: info.ModTime().UTC(),
				TinkerPath: weightsPath(modelID, kind.dir, e.Name()), SizeBytes: &size, ExpiresAt: expiresAt(diskExpiry(dir)), Public: diskPublic(dir)})
		}
	}
	s.mu.Lock()
	if m := s.models[modelID]; m != nil {
		for _, c := range m.samplers {
			out = append(out, tinker.Checkpoint{CheckpointID: "sampler_weights/" + c.name, CheckpointType: "sampler", Time: c.saved.UTC(), TinkerPath: c.path,
				ExpiresAt: expiresAt(c.expires), Public: c.public})
		}
	}
	s.mu.Unlock()
	return out
}

// externalWeightsURLs hands out a download URL for each file of an export,
// on the host the request came to.
func (s *Server) externalWeightsURLs(w http.ResponseWriter, r *http.Request, modelID, name string) {
	dir := s.savedDir(modelID, "external_weights", name)
	path := weightsPath(modelID, "external_weights", name)
	if !namePattern.MatchString(name) {
		writeDetail(w, http.StatusNotFound, "no weights are exported at "+path)
		return
	}
	files, _, err := filesOf(dir)
	if err != nil || len(files) == 0 {
		writeDetail(w, http.StatusNotFound, "no weights are exported at "+path)
		return
	}
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	now := time.Now()
	d := &download{dir: dir, files: files, expires: now.Add(downloadTTL)}
	s.mu.Lock()
	for t, old := range s.downloads {
		if now.After(old.expires) {
			delete(s.downloads, t)
		}
	}
	s.downloads[token] = d
	s.mu.Unlock()
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	urls := map[string]string{}
	for _, f := range files {
		urls[f] = scheme + "://" + r.Host + tinker.PathFiles + token + "/" + f
	}
	writeJSON(w, http.StatusOK, tinker.ExternalWeightsURLsResponse{URLs: urls, Expires: d.expires.UTC()})
}

// serveFile serves one file of a download token, without the API key: the
// token is the capability.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	token, file, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, tinker.PathFiles), "/")
	s.mu.Lock()
	d := s.downloads[token]
	s.mu.Unlock()
	switch {
	case d == nil:
		writeDetail(w, http.StatusNotFound, "no such download (ask external_weights_urls for one)")
		return
	case time.Now().After(d.expires):
		writeDetail(w, http.StatusGone, "the download URL has expired (ask external_weights_urls for another)")
		return
	case !slices.Contains(d.files, file):
		writeDetail(w, http.StatusNotFound, "the export holds no file "+file)
		return
	}
	http.ServeFile(w, r, filepath.Join(d.dir, filepath.FromSlash(file)))
}
