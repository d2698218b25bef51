package tinkerserver

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"testing"

	"rlvr/api/tinker"
)

// TestRESTListings drives the RestClient's listings and reads: training
// runs and every run's checkpoints, paged with a cursor, newest first; the
// sessions and what each holds; weights_info of a LoRA state, a copy for
// sampling and an export; publishing and unpublishing (409 when already
// so), the flag in the listing and gone with the checkpoint; and the
// saves' storage.
func TestRESTListings(t *testing.T) {
	h := newHarness(t, Config{})
	get := func(path string, out any) {
		t.Helper()
		strict(t, h.get(path), out)
	}
	sessA, full := h.newModel()
	var m tinker.CreateModelResponse
	strict(t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: sessA, ModelSeqID: 1, BaseModel: testBase,
		LoraConfig: tinker.LoraConfig{Rank: 2, TrainMLP: new(bool)}}), &m)
	lora := m.ModelID
	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: lora, Path: "state"}, &saved)
	state := saved.Path
	h.call(tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: lora, Path: "s"}, &saved)
	sampler := saved.Path
	var export tinker.SaveWeightsExternalResponse
	h.call(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: full, Path: "x"}, &export)
	sessB, other := h.newModel()

	// Training runs, newest first (lora's save is its last request), paged.
	var runs tinker.TrainingRunsResponse
	get(tinker.PathListTrainingRuns, &runs)
	var ids []string
	for _, r := range runs.TrainingRuns {
		ids = append(ids, r.TrainingRunID)
	}
	if runs.Cursor != (tinker.Cursor{Offset: 0, Limit: 20, TotalCount: 3}) || len(ids) != 3 || !slices.Contains(ids, full) || !slices.Contains(ids, lora) || !slices.Contains(ids, other) {
		t.Fatalf("training runs %v, cursor %+v", ids, runs.Cursor)
	}
	var second tinker.TrainingRunsResponse
	get(tinker.PathListTrainingRuns+"?limit=2&offset=1", &second)
	if second.Cursor != (tinker.Cursor{Offset: 1, Limit: 2, TotalCount: 3}) || len(second.TrainingRuns) != 2 || second.TrainingRuns[0].TrainingRunID != ids[1] {
		t.Fatalf("page from 1: %+v", second)
	}
	var beyond tinker.TrainingRunsResponse
	get(tinker.PathListTrainingRuns+"?offset=7", &beyond)
	if len(beyond.TrainingRuns) != 0 || beyond.Cursor.TotalCount != 3 {
		t.Fatalf("page beyond the end: %+v", beyond)
	}

	// Every run's checkpoints.
	var all tinker.CheckpointsListResponse
	get(tinker.PathCheckpoints, &all)
	var paths []string
	for _, c := range all.Checkpoints {
		paths = append(paths, c.TinkerPath)
	}
	slices.Sort(paths)
	want := []string{export.Path, sampler, state}
	slices.Sort(want)
	if !slices.Equal(paths, want) || all.Cursor == nil || all.Cursor.TotalCount != 3 {
		t.Fatalf("checkpoints %v (cursor %+v), want %v", paths, all.Cursor, want)
	}

	// Sessions and what they hold.
	var sessions tinker.ListSessionsResponse
	get(tinker.PathListSessions, &sessions)
	if len(sessions.Sessions) != 2 || !slices.Contains(sessions.Sessions, sessA) || !slices.Contains(sessions.Sessions, sessB) {
		t.Fatalf("sessions %v", sessions.Sessions)
	}
	var sa tinker.GetSessionResponse
	get(tinker.PathSessions+sessA, &sa)
	if !slices.Equal(sa.TrainingRunIDs, []string{full, lora}) || len(sa.SamplerIDs) != 0 {
		t.Fatalf("session %s: %+v", sessA, sa)
	}

	// weights_info.
	for _, tc := range []struct {
		path string
		want tinker.WeightsInfoResponse
	}{
		{state, tinker.WeightsInfoResponse{BaseModel: testBase, IsLoRA: true, LoRARank: ptr(2), TrainAttn: ptr(true), TrainMLP: ptr(false), TrainUnembed: ptr(true)}},
		{sampler, tinker.WeightsInfoResponse{BaseModel: testBase, IsLoRA: true, LoRARank: ptr(2)}},
		{export.Path, tinker.WeightsInfoResponse{BaseModel: testBase}},
	} {
		var got tinker.WeightsInfoResponse
		strict(t, h.post(tinker.PathWeightsInfo, map[string]string{"tinker_path": tc.path}), &got)
		if !sameInfo(got, tc.want) {
			t.Errorf("weights_info %s: %+v, want %+v", tc.path, got, tc.want)
		}
	}

	// Publishing.
	publish := tinker.PathTrainingRuns + lora + "/checkpoints/weights/state/publish"
	publishSampler := tinker.PathTrainingRuns + lora + "/checkpoints/sampler_weights/s/publish"
	public := func() map[string]bool {
		var l tinker.CheckpointsListResponse
		get(tinker.PathTrainingRuns+lora+"/checkpoints", &l)
		out := map[string]bool{}
		for _, c := range l.Checkpoints {
			out[c.CheckpointID] = c.Public
		}
		return out
	}
	for _, step := range []struct {
		method, path string
		status       int
		want         map[string]bool
	}{
		{http.MethodPost, publish, 200, map[string]bool{"weights/state": true, "sampler_weights/s": false}},
		{http.MethodPost, publish, 409, nil},
		{http.MethodPost, publishSampler, 200, map[string]bool{"weights/state": true, "sampler_weights/s": true}},
		{http.MethodDelete, publish, 200, map[string]bool{"weights/state": false, "sampler_weights/s": true}},
		{http.MethodDelete, publish, 409, nil},
		{http.MethodPut, publish, 405, nil},
		{http.MethodPost, tinker.PathTrainingRuns + lora + "/checkpoints/weights/none/publish", 404, nil},
	} {
		status, b := h.do(step.method, step.path, map[string]any{})
		if status != step.status {
			t.Fatalf("%s %s: status %d, want %d: %s", step.method, step.path, status, step.status, b)
		}
		if step.want != nil {
			if got := public(); got["weights/state"] != step.want["weights/state"] || got["sampler_weights/s"] != step.want["sampler_weights/s"] {
				t.Fatalf("after %s %s: public %v, want %v", step.method, step.path, got, step.want)
			}
		}
	}
	h.do(http.MethodPost, publish, map[string]any{})
	if status, b := h.do(http.MethodDelete, tinker.PathTrainingRuns+lora+"/checkpoints/weights/state", nil); status != 200 {
		t.Fatalf("delete: %d %s", status, b)
	}
	if _, err := os.Stat(publicFile(h.srv.savedDir(lora, "weights", "state"))); !os.IsNotExist(err) {
		t.Errorf("the deleted checkpoint's published flag is still on disk (%v)", err)
	}

	// Storage: the export alone is left on disk.
	var usage struct {
		Data []struct {
			CheckpointCount int   `json:"checkpoint_count"`
			SizeBytes       int64 `json:"size_bytes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(h.get(tinker.PathStorageUsage), &usage); err != nil || len(usage.Data) != 1 ||
		usage.Data[0].CheckpointCount != 1 || usage.Data[0].SizeBytes != export.SizeBytes {
		t.Fatalf("storage %+v (%v), want 1 save of %d bytes", usage, err, export.SizeBytes)
	}
}

func ptr[T any](v T) *T { return &v }

func sameInfo(a, b tinker.WeightsInfoResponse) bool {
	eq := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.BaseModel == b.BaseModel && a.IsLoRA == b.IsLoRA && (a.LoRARank == nil) == (b.LoRARank == nil) &&
		(a.LoRARank == nil || *a.LoRARank == *b.LoRARank) && eq(a.TrainAttn, b.TrainAttn) && eq(a.TrainMLP, b.TrainMLP) && eq(a.TrainUnembed, b.TrainUnembed)
}
