package tinkerserver

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/api/tinker"
)

// TestModelLimit creates models up to Config.MaxModels: the next
// create_model gets 400 naming the limit, a retry of one created answers
// as before, and a session's end frees its model's place.
func TestModelLimit(t *testing.T) {
	h := newHarness(t, Config{MaxModels: 2})
	first, _ := h.newModel()
	h.newModel()
	sess := h.session()
	create := tinker.CreateModelRequest{SessionID: sess, BaseModel: testBase, Type: "create_model"}
	status, b := h.do(http.MethodPost, tinker.PathCreateModel, create)
	expectDetail(t, status, b, http.StatusBadRequest, "create_model: 2 models are alive, the server's limit of 2")
	retry := tinker.CreateModelRequest{SessionID: first, BaseModel: testBase, Type: "create_model"}
	if status, b := h.do(http.MethodPost, tinker.PathCreateModel, retry); status != http.StatusOK {
		t.Errorf("a retried create_model at the limit: %d %s", status, b)
	}
	h.post(tinker.PathSessions+first+"/finish", `{}`)
	h.post(tinker.PathCreateModel, create)
}

// TestSavedStatesLimit saves up to Config.MaxSavedStates, counting
// exports too: the next save fails the call with a user error naming the
// limit, and deleting a save makes room.
func TestSavedStatesLimit(t *testing.T) {
	h := newHarness(t, Config{MaxSavedStates: 2})
	_, id := h.newModel()
	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "a"}, &saved)
	var exported tinker.SaveWeightsExternalResponse
	h.call(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: id, Path: "b"}, &exported)
	rf := h.failure(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "c"})
	if rf.Category != "user" || !strings.Contains(rf.Message, "saving tinker://"+id+"/weights/c: 2 saves are kept, the server's limit of 2") {
		t.Errorf("failure %+v", rf)
	}
	if status, b := h.do(http.MethodDelete, tinker.PathTrainingRuns+id+"/checkpoints/weights/a", nil); status != http.StatusOK {
		t.Fatalf("delete: %d %s", status, b)
	}
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "c"}, &saved)
}

// TestSavedBytesLimit refuses a save that would take the saves beyond
// Config.MaxSavedBytes, leaving nothing of it on disk.
func TestSavedBytesLimit(t *testing.T) {
	h := newHarness(t, Config{MaxSavedBytes: 4096})
	_, id := h.newModel()
	rf := h.failure(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: "a"})
	if rf.Category != "user" || !strings.Contains(rf.Message, "and the saves kept 0, more than the server's limit of 4096 together") {
		t.Errorf("failure %+v", rf)
	}
	entries, err := os.ReadDir(filepath.Join(h.srv.cfg.StateDir, id, "weights"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s left in the state directory", e.Name())
	}
}

// TestUnloadModelFreesItsPlace unloads a model at Config.MaxModels: its
// future resolves to the model's id, a new model fits in its place, and
// later calls on the unloaded one, unload_model again included, get 404
// naming it.
func TestUnloadModelFreesItsPlace(t *testing.T) {
	h := newHarness(t, Config{MaxModels: 1})
	_, id := h.newModel()
	sess := h.session()
	create := tinker.CreateModelRequest{SessionID: sess, BaseModel: testBase, Type: "create_model"}
	status, b := h.do(http.MethodPost, tinker.PathCreateModel, create)
	expectDetail(t, status, b, http.StatusBadRequest, "the server's limit of 1")

	f := h.submit(tinker.PathUnloadModel, tinker.UnloadModelRequest{ModelID: id, Type: "unload_model"})
	if f.ModelID != id {
		t.Errorf("unload_model answered for model %q, want %q", f.ModelID, id)
	}
	var res tinker.UnloadModelResponse
	strict(t, h.wait(f.RequestID), &res)
	if res.ModelID != id || res.Type != "unload_model" {
		t.Errorf("unload_model's result %+v", res)
	}
	h.post(tinker.PathCreateModel, create)

	status, b = h.do(http.MethodPost, tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id})
	expectDetail(t, status, b, http.StatusNotFound, "model "+id+" was unloaded")
	status, b = h.do(http.MethodPost, tinker.PathUnloadModel, tinker.UnloadModelRequest{ModelID: id})
	expectDetail(t, status, b, http.StatusNotFound, "model "+id+" was unloaded")
	status, b = h.do(http.MethodPost, tinker.PathUnloadModel, tinker.UnloadModelRequest{ModelID: "nope"})
	expectDetail(t, status, b, http.StatusNotFound, "model nope not found")
}
