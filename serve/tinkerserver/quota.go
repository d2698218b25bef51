package tinkerserver

import (
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Limits on what clients hold: models in memory (Config.MaxModels) and
// saves on disk (Config.MaxSavedStates, Config.MaxSavedBytes).

// reserveModelLocked counts a model about to be created against
// Config.MaxModels, refusing it beyond the limit; the caller decrements
// s.creating once the model is added or given up. Models of expired or
// finished sessions have stopped and do not count. s.mu is held.
func (s *Server) reserveModelLocked(now time.Time) error {
	live := s.creating
	for _, m := range s.models {
		if s.checkSessionLocked(m.sess, now) == nil && m.stopErr == nil {
			live++
		}
	}
	if live >= s.cfg.MaxModels {
		return errorf(http.StatusBadRequest, "create_model: %d models are alive, the server's limit of %d; a model is freed when its session ends (the client's close, or no heartbeat for %v)",
			live, s.cfg.MaxModels, s.cfg.SessionTTL)
	}
	s.creating++
	return nil
}

// savedKinds are the kinds of saves kept on disk, as directories
// StateDir/<model_id>/<kind>/<name>.
var savedKinds = []string{"weights", "external_weights"}

// savedUsage counts the saves in the state directory and their bytes.
// Saves being written (hidden directories) are not counted.
func (s *Server) savedUsage() (count int, bytes int64, err error) {
	for _, kind := range savedKinds {
		dirs, err := filepath.Glob(filepath.Join(s.cfg.StateDir, "*", kind, "*"))
		if err != nil {
			return 0, 0, err
		}
		for _, dir := range dirs {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() || !namePattern.MatchString(filepath.Base(dir)) {
				continue // removed meanwhile, or not a save
			}
			_, size, err := filesOf(dir)
			if err != nil {
				return 0, 0, err
			}
			count, bytes = count+1, bytes+size
		}
	}
	return count, bytes, nil
}

// checkSaveRoom refuses the save at path, of size bytes, when the saves
// on disk would exceed Config.MaxSavedStates or Config.MaxSavedBytes
// with it. Before the save is written its size is 0: the check then
// refuses only a state directory already full.
func (s *Server) checkSaveRoom(path string, size int64) error {
	count, used, err := s.savedUsage()
	if err != nil {
		return serverErr("saving %s: reading the state directory: %v", path, err)
	}
	const howToFree = "delete one (DELETE training_runs/<model_id>/checkpoints/<kind>/<name>) or let its TTL end"
	switch {
	case count >= s.cfg.MaxSavedStates:
		return userErr("saving %s: %d saves are kept, the server's limit of %d; %s", path, count, s.cfg.MaxSavedStates, howToFree)
	case used >= s.cfg.MaxSavedBytes:
		return userErr("saving %s: the saves kept take %d bytes, the server's limit of %d; %s", path, used, s.cfg.MaxSavedBytes, howToFree)
	case size > s.cfg.MaxSavedBytes-used:
		return userErr("saving %s: it takes %d bytes and the saves kept %d, more than the server's limit of %d together; %s",
			path, size, used, s.cfg.MaxSavedBytes, howToFree)
	}
	return nil
}
