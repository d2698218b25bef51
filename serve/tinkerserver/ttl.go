package tinkerserver

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rlvr/internal/atomicfile"
)

// Checkpoint TTLs, as Tinker's service keeps them: a save may ask for one
// (ttl_seconds on save_weights, save_weights_for_sampler and
// save_weights_external), PUT <model_id>/checkpoints/<kind>/<name>/ttl sets
// one from now or removes it ({"ttl_seconds": n} or null, the SDK's
// RestClient.set_checkpoint_ttl_from_tinker_path), the listing reports
// expires_at, and the janitor deletes a checkpoint once it has expired. A
// saved state's or export's expiry is kept beside it on disk, in
// <kind>/.expires-<name> (a hidden name no save can take), so that it
// outlives a restart of the server; a copy for sampling lives in memory
// with its model, and its expiry with it.

// The bounds of a checkpoint's TTL, Tinker's: an hour to ten years.
const (
	minCheckpointTTL = 3600
	maxCheckpointTTL = 10 * 365 * 24 * 3600
)

// checkpointTTL checks a request's ttl_seconds and returns the TTL; nil is
// none, 0.
func checkpointTTL(seconds *int64) (time.Duration, error) {
	if seconds == nil {
		return 0, nil
	}
	if *seconds < minCheckpointTTL || *seconds > maxCheckpointTTL {
		return 0, userErr("ttl_seconds: %d seconds; a checkpoint's TTL is from %d (an hour) to %d (ten years), or null for none",
			*seconds, minCheckpointTTL, maxCheckpointTTL)
	}
	return time.Duration(*seconds) * time.Second, nil
}

// expiry is when a TTL counted from now ends: the zero time for none.
func expiry(ttl time.Duration, now time.Time) time.Time {
	if ttl == 0 {
		return time.Time{}
	}
	return now.Add(ttl).UTC()
}

// expiryFile is where the expiry of the saved checkpoint in dir is kept.
func expiryFile(dir string) string {
	return filepath.Join(filepath.Dir(dir), ".expires-"+filepath.Base(dir))
}

// setDiskExpiry records when the saved checkpoint in dir expires, or with
// the zero time that it does not.
func setDiskExpiry(dir string, at time.Time) error {
	f := expiryFile(dir)
	if at.IsZero() {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return atomicfile.WriteBytes(f, []byte(at.UTC().Format(time.RFC3339Nano)+"\n"))
}

// diskExpiry is when the saved checkpoint in dir expires; the zero time
// when it does not, or when its record cannot be read (a checkpoint is
// never deleted on a doubt).
func diskExpiry(dir string) time.Time {
	b, err := os.ReadFile(expiryFile(dir))
	if err != nil {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}
	}
	return at
}

// expiresAt is the listing's expires_at of an expiry: nil for none.
func expiresAt(at time.Time) *time.Time {
	if at.IsZero() {
		return nil
	}
	at = at.UTC()
	return &at
}

// checkpointTTLRequest is PUT .../ttl's body.
type checkpointTTLRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

// setCheckpointTTL answers PUT <model_id>/checkpoints/<kind>/<name>/ttl.
func (s *Server) setCheckpointTTL(w http.ResponseWriter, r *http.Request, modelID, kind, name string) {
	var req checkpointTTLRequest
	if _, err := s.decode(w, r, "checkpoint ttl", &req); err != nil {
		writeError(w, err)
		return
	}
	ttl, err := checkpointTTL(req.TTLSeconds)
	if err != nil {
		writeDetail(w, http.StatusBadRequest, err.Error())
		return
	}
	at := expiry(ttl, time.Now())
	s.checkpointCall(w, modelID, kind, name, "setting the TTL of", func(dir string) error {
		return setDiskExpiry(dir, at)
	}, func(m *trainModel, i int) error {
		m.samplers[i].expires = at
		return nil
	})
}

// expireCheckpoints deletes every checkpoint whose TTL has ended by now:
// saved states and exports from disk, copies for sampling from their
// models (sampling calls queued already keep the copy they named).
func (s *Server) expireCheckpoints(now time.Time) {
	records, _ := filepath.Glob(filepath.Join(s.cfg.StateDir, "*", "*", ".expires-*"))
	for _, f := range records {
		dir := filepath.Join(filepath.Dir(f), strings.TrimPrefix(filepath.Base(f), ".expires-"))
		at := diskExpiry(dir)
		if at.IsZero() || now.Before(at) {
			continue
		}
		rel, _ := filepath.Rel(s.cfg.StateDir, dir)
		if err := os.RemoveAll(dir); err != nil {
			s.log.Error("tinkerserver: deleting an expired checkpoint", "checkpoint", filepath.ToSlash(rel), "err", err)
			continue
		}
		os.Remove(f)
		os.Remove(publicFile(dir))
		s.log.Info("tinkerserver: deleted an expired checkpoint", "checkpoint", filepath.ToSlash(rel), "expired", at)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.models {
		kept := m.samplers[:0]
		for _, c := range m.samplers {
			if c.expires.IsZero() || now.Before(c.expires) {
				kept = append(kept, c)
			}
		}
		clear(m.samplers[len(kept):])
		m.samplers = kept
	}
}
