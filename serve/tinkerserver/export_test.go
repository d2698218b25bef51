package tinkerserver

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"

	"rlvr/api/tinker"
	"rlvr/backend/local"
	"rlvr/format/safetensors"
)

// TestExportAndDownload exports a LoRA model's adapters and a full model's
// weights (save_weights_external), lists the runs' checkpoints, and
// downloads each export through the URLs external_weights_urls hands out,
// without the API key, byte for byte what the server wrote: the adapters
// in Tinker's format, which loading them back into a learner accepts. An
// export encrypted to an age key decrypts to the plain one's bytes. A
// second export under the same name, recipients that are not age or SSH
// keys, a file the export lacks and a download token that was never
// issued are refused.
func TestExportAndDownload(t *testing.T) {
	const key = "export-key"
	h := newHarness(t, Config{APIKey: key})
	rank := 2
	var m tinker.CreateModelResponse
	strict(t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: h.session(), BaseModel: testBase,
		LoraConfig: tinker.LoraConfig{Rank: rank}}), &m)
	_, full := h.newModel()
	for _, tc := range []struct {
		id    string
		files []string
	}{
		{m.ModelID, []string{"adapter_config.json", "adapter_model.safetensors"}},
		{full, []string{"config.json", "model.safetensors"}},
	} {
		var res tinker.SaveWeightsExternalResponse
		h.call(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: tc.id, Path: "final"}, &res)
		if want := "tinker://" + tc.id + "/external_weights/final"; res.Path != want || res.SizeBytes <= 0 {
			t.Fatalf("save_weights_external: %+v, want path %s", res, want)
		}
		if rf := h.failure(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: tc.id, Path: "final"}); !strings.Contains(rf.Message, "exported already") {
			t.Errorf("a second export under one name: %+v", rf)
		}
		var list tinker.CheckpointsListResponse
		status, b := h.do(http.MethodGet, tinker.PathTrainingRuns+tc.id+"/checkpoints", nil)
		if status != http.StatusOK {
			t.Fatalf("checkpoints: %d %s", status, b)
		}
		strict(t, b, &list)
		if len(list.Checkpoints) != 1 || list.Checkpoints[0].CheckpointID != "external_weights/final" || list.Checkpoints[0].CheckpointType != "external" ||
			list.Checkpoints[0].TinkerPath != res.Path || *list.Checkpoints[0].SizeBytes != res.SizeBytes {
			t.Errorf("checkpoints: %+v", list)
		}
		var urls tinker.ExternalWeightsURLsResponse
		status, b = h.do(http.MethodGet, tinker.PathTrainingRuns+tc.id+"/checkpoints/external_weights/final/external_weights_urls", nil)
		if status != http.StatusOK {
			t.Fatalf("external_weights_urls: %d %s", status, b)
		}
		strict(t, b, &urls)
		dir := filepath.Join(h.srv.cfg.StateDir, tc.id, "external_weights", "final")
		for _, f := range tc.files {
			u, ok := urls.URLs[f]
			if !ok {
				t.Fatalf("no URL for %s in %v", f, urls.URLs)
			}
			resp, err := http.Get(u) // no API key: the URL is the capability
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
				t.Errorf("%s: status %d, %d bytes downloaded, %d on disk (%v)", f, resp.StatusCode, len(got), len(want), err)
			}
			if f == "adapter_model.safetensors" {
				st, err := safetensors.Open(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				_, ok := st.Tensor("base_model.model.model.unembed_tokens.lora_A.weight")
				n := len(st.Tensors())
				st.Close()
				if !ok || n == 0 {
					t.Errorf("the adapters hold %d tensors, the output head's %v", n, ok)
				}
			}
			other := u[:strings.LastIndex(u, "/")+1] + "optimizer.safetensors"
			if resp, err := http.Get(other); err != nil || resp.StatusCode != http.StatusNotFound {
				t.Errorf("a file the export lacks: %v %v", resp.Status, err)
			}
		}
		if tc.id == m.ModelID {
			cfg, ok, err := local.ReadLoRAConfig(dir)
			if err != nil || !ok || cfg.Rank != rank || !cfg.Attention || !cfg.MLP || !cfg.Unembed {
				t.Errorf("the exported adapters read back as %+v, %v, %v", cfg, ok, err)
			}
		}
	}
	// Encrypted to an age key: every file gets a .age suffix and decrypts
	// to the plain export's bytes.
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	var res tinker.SaveWeightsExternalResponse
	h.call(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: m.ModelID, Path: "secret",
		AgeEncryptionRecipients: []string{id.Recipient().String()}}, &res)
	var urls tinker.ExternalWeightsURLsResponse
	status, b := h.do(http.MethodGet, tinker.PathTrainingRuns+m.ModelID+"/checkpoints/external_weights/secret/external_weights_urls", nil)
	if status != http.StatusOK {
		t.Fatalf("external_weights_urls: %d %s", status, b)
	}
	strict(t, b, &urls)
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors"} {
		u, ok := urls.URLs[f+".age"]
		if !ok || len(urls.URLs) != 2 {
			t.Fatalf("encrypted export's URLs %v", urls.URLs)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		r, err := age.Decrypt(resp.Body, id)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, err := io.ReadAll(r)
		resp.Body.Close()
		want, _ := os.ReadFile(filepath.Join(h.srv.cfg.StateDir, m.ModelID, "external_weights", "final", f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s decrypts to %d bytes, the plain export has %d (%v)", f, len(got), len(want), err)
		}
	}
	for _, bad := range [][]string{{"age1notakey"}, {"ssh-rsa AAAA"}, slices.Repeat([]string{id.Recipient().String()}, 11)} {
		if rf := h.failure(tinker.PathSaveWeightsExternal, tinker.SaveWeightsExternalRequest{ModelID: full, Path: "bad",
			AgeEncryptionRecipients: bad}); !strings.Contains(rf.Message, "age_encryption_recipients") {
			t.Errorf("recipients %.40q: %+v", bad, rf)
		}
	}
	// Deleting: the export goes from the listing, its URLs and the disk;
	// a second delete and another kind are refused.
	ckpt := tinker.PathTrainingRuns + full + "/checkpoints/external_weights/final"
	if status, b := h.do(http.MethodDelete, ckpt, nil); status != http.StatusOK {
		t.Fatalf("DELETE %s: %d %s", ckpt, status, b)
	}
	status, b = h.do(http.MethodGet, tinker.PathTrainingRuns+full+"/checkpoints", nil)
	var list tinker.CheckpointsListResponse
	strict(t, b, &list)
	if status != http.StatusOK || len(list.Checkpoints) != 0 {
		t.Errorf("after the delete: %d %+v", status, list)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		want         string
	}{
		{http.MethodDelete, ckpt, 404, "no checkpoint tinker://" + full + "/external_weights/final"},
		{http.MethodGet, ckpt + "/external_weights_urls", 404, "no weights are exported"},
		{http.MethodGet, ckpt, 405, "takes DELETE"},
		{http.MethodDelete, tinker.PathTrainingRuns + full + "/checkpoints/sampler_weights/none", 404, "no checkpoint"},
		{http.MethodDelete, tinker.PathTrainingRuns + full + "/checkpoints/other/x", 404, "the kinds are"},
	} {
		status, b := h.do(tc.method, tc.path, nil)
		expectDetail(t, status, b, tc.status, tc.want)
	}
	status, b = h.do(http.MethodGet, tinker.PathTrainingRuns+full+"/checkpoints", nil, tinker.HeaderAPIKey, "")
	expectDetail(t, status, b, http.StatusUnauthorized, "API key")
	resp, err := http.Get(h.url + tinker.PathFiles + "00112233/adapter_config.json")
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("a token never issued: %v %v", resp.Status, err)
	}
}

// TestTrainingRunRecord: GET training_runs/<id> describes a model from the
// record create_model wrote, with the user's metadata (where the cookbook
// keeps its renderer's name), its LoRA rank and its newest saved state,
// and still does once the server that made it has stopped; an optimizer
// other than AdamW is refused at create_model.
func TestTrainingRunRecord(t *testing.T) {
	state := t.TempDir()
	h := newHarness(t, Config{StateDir: state})
	var m tinker.CreateModelResponse
	strict(t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: h.session(), BaseModel: testBase,
		LoraConfig: tinker.LoraConfig{Rank: 2}, UserMetadata: map[string]any{"renderer_name": "qwen3"}, OptimizerConfig: &tinker.OptimizerConfig{Type: "adamw"}}), &m)
	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: m.ModelID, Path: "step-1"}, &saved)
	check := func(h *harness) {
		t.Helper()
		status, b := h.do(http.MethodGet, tinker.PathTrainingRuns+m.ModelID, nil)
		if status != http.StatusOK {
			t.Fatalf("training_runs: %d %s", status, b)
		}
		var run tinker.TrainingRun
		strict(t, b, &run)
		if run.TrainingRunID != m.ModelID || run.BaseModel != testBase || !run.IsLoRA || run.LoRARank == nil || *run.LoRARank != 2 ||
			run.UserMetadata["renderer_name"] != "qwen3" || run.LastCheckpoint == nil || run.LastCheckpoint.TinkerPath != saved.Path || run.LastRequestTime.IsZero() {
			t.Errorf("training run %s", b)
		}
	}
	check(h)
	check(newHarness(t, Config{StateDir: state})) // another server over the same state
	status, b := h.do(http.MethodPost, tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: h.session(), BaseModel: testBase,
		OptimizerConfig: &tinker.OptimizerConfig{Type: "dimuon"}})
	expectDetail(t, status, b, http.StatusBadRequest, `optimizer_config.type "dimuon" is not offered`)
	status, b = h.do(http.MethodGet, tinker.PathTrainingRuns+"model_none", nil)
	expectDetail(t, status, b, http.StatusNotFound, "no training run model_none")
}

// TestFinishSession: the SDK's ServiceClient.close ends the session at
// once: its models stop, and a call on one says why; other session paths
// are refused by name.
func TestFinishSession(t *testing.T) {
	h := newHarness(t, Config{})
	sess, id := h.newModel()
	if status, b := h.do(http.MethodPost, tinker.PathSessions+sess+"/finish", `{"reason": {"type": "success"}, "detail": null}`); status != http.StatusOK {
		t.Fatalf("finish: %d %s", status, b)
	}
	status, b := h.do(http.MethodPost, tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 1e-3}})
	if status == http.StatusOK && !bytes.Contains(b, []byte("request_id")) || status != http.StatusOK && !bytes.Contains(b, []byte("finished by its client")) {
		t.Errorf("a call after finish: %d %s", status, b)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		want         string
	}{
		{http.MethodPost, tinker.PathSessions + sess + "/other", 404, "it answers GET sessions/<id> and POST sessions/<id>/finish"},
		{http.MethodGet, tinker.PathSessions + sess + "/finish", 405, "takes POST"},
		{http.MethodPost, tinker.PathSessions + "session_none/finish", 404, "session_none"},
	} {
		status, b := h.do(tc.method, tc.path, nil)
		expectDetail(t, status, b, tc.status, tc.want)
	}
}
