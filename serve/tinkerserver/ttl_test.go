package tinkerserver

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/api/tinker"
)

// TestCheckpointTTL: a save's ttl_seconds and PUT .../ttl set when a
// checkpoint expires, as the SDK's set_checkpoint_ttl_from_tinker_path
// asks; the listing reports it (also to a server started again over the
// same state directory); a TTL outside an hour to ten years, a checkpoint
// that is not there and another method are refused; and the janitor
// deletes what has expired, from the disk and from the model's copies for
// sampling, and nothing else.
func TestCheckpointTTL(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	secs := func(n int64) *int64 { return &n }
	start := time.Now()
	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "hour", TTLSeconds: secs(3600)}, &saved)
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "kept"}, &saved)
	h.call(tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: id, Path: "s", TTLSeconds: secs(7200)}, &saved)
	var export tinker.SaveWeightsExternalResponse
	h.call(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: id, Path: "x"}, &export)

	list := func(h *harness) map[string]*time.Time {
		t.Helper()
		status, b := h.do(http.MethodGet, tinker.PathTrainingRuns+id+"/checkpoints", nil)
		if status != http.StatusOK {
			t.Fatalf("checkpoints: %d %s", status, b)
		}
		var l tinker.CheckpointsListResponse
		strict(t, b, &l)
		out := map[string]*time.Time{}
		for _, c := range l.Checkpoints {
			out[c.CheckpointID] = c.ExpiresAt
		}
		return out
	}
	near := func(name string, at *time.Time, ttl time.Duration) {
		t.Helper()
		if at == nil || at.Before(start.Add(ttl)) || at.After(time.Now().Add(ttl)) {
			t.Errorf("%s expires at %v, want %v from the save", name, at, ttl)
		}
	}
	got := list(h)
	if len(got) != 4 || got["weights/kept"] != nil || got["external_weights/x"] != nil {
		t.Fatalf("checkpoints %v: want 4, kept and x without expiry", got)
	}
	near("weights/hour", got["weights/hour"], time.Hour)
	near("sampler_weights/s", got["sampler_weights/s"], 2*time.Hour)

	ttlPath := func(ckpt string) string { return tinker.PathTrainingRuns + id + "/checkpoints/" + ckpt + "/ttl" }
	put := func(ckpt string, body any) (int, []byte) { return h.do(http.MethodPut, ttlPath(ckpt), body) }
	if status, b := put("external_weights/x", map[string]any{"ttl_seconds": 86400}); status != http.StatusOK {
		t.Fatalf("PUT ttl: %d %s", status, b)
	}
	near("external_weights/x", list(h)["external_weights/x"], 24*time.Hour)
	if status, b := put("external_weights/x", map[string]any{"ttl_seconds": nil}); status != http.StatusOK {
		t.Fatalf("PUT ttl null: %d %s", status, b)
	}
	if at := list(h)["external_weights/x"]; at != nil {
		t.Errorf("after removing its TTL, x expires at %v", at)
	}
	for _, tc := range []struct {
		method, ckpt string
		body         any
		status       int
		want         string
	}{
		{http.MethodPut, "weights/kept", map[string]any{"ttl_seconds": 60}, 400, "from 3600 (an hour)"},
		{http.MethodPut, "weights/kept", map[string]any{"ttl_seconds": int64(maxCheckpointTTL) + 1}, 400, "ten years"},
		{http.MethodPut, "weights/kept", `{"ttl_seconds": "1h"}`, 400, "ttl_seconds"},
		{http.MethodPut, "weights/none", map[string]any{"ttl_seconds": 3600}, 404, "no checkpoint tinker://" + id + "/weights/none"},
		{http.MethodPut, "sampler_weights/none", map[string]any{"ttl_seconds": 3600}, 404, "no checkpoint"},
		{http.MethodPut, "other/kept", map[string]any{"ttl_seconds": 3600}, 404, "the kinds are"},
		{http.MethodGet, "weights/kept", nil, 405, "PUT"},
	} {
		status, b := h.do(tc.method, ttlPath(tc.ckpt), tc.body)
		expectDetail(t, status, b, tc.status, tc.want)
	}
	if rf := h.failure(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "brief", TTLSeconds: secs(10)}); !strings.Contains(rf.Message, "ttl_seconds: 10 seconds") {
		t.Errorf("a TTL of 10 s: %+v", rf)
	}
	if _, err := os.Stat(h.srv.savedDir(id, "weights", "brief")); err == nil {
		t.Error("a save refused for its TTL is on disk")
	}

	// Another server over the same state directory reads the saved
	// states' expiry from the disk.
	again := newHarness(t, Config{StateDir: h.srv.cfg.StateDir})
	near("weights/hour after a restart", list(again)["weights/hour"], time.Hour)

	// Past an hour, the first save goes; past two, the copy for sampling.
	h.srv.expireCheckpoints(start.Add(90 * time.Minute))
	got = list(h)
	if _, ok := got["weights/hour"]; ok || len(got) != 3 {
		t.Errorf("after an hour and a half: %v, want kept, s and x", got)
	}
	if _, err := os.Stat(h.srv.savedDir(id, "weights", "hour")); err == nil {
		t.Error("the expired save is still on disk")
	}
	if _, err := os.Stat(expiryFile(h.srv.savedDir(id, "weights", "hour"))); err == nil {
		t.Error("the expired save's record is still on disk")
	}
	h.srv.expireCheckpoints(start.Add(3 * time.Hour))
	got = list(h)
	if _, ok := got["sampler_weights/s"]; ok || len(got) != 2 {
		t.Errorf("after three hours: %v, want kept and x", got)
	}
	entries, _ := os.ReadDir(filepath.Join(h.srv.cfg.StateDir, id, "weights"))
	if len(entries) != 1 || entries[0].Name() != "kept" {
		t.Errorf("weights on disk: %v, want kept alone", entries)
	}
}
