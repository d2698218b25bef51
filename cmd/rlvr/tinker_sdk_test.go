package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"rlvr/format/tokenizer"
	"rlvr/serve"
)

// tinkerSDKPython is the python of the Tinker SDK's environment that
// scripts/tinker-sdk.sh sets up in rlvr's cache ($RLVR_CACHE, else rlvr in
// the user's cache directory). When it is missing the test is skipped
// with the command that sets it up, or fails when CI is "true" (CI runs
// the script first).
func tinkerSDKPython(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("RLVR_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(dir, "rlvr")
	}
	py := filepath.Join(cache, "tinker-sdk", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Tinker SDK's environment: %v (CI=true requires it: run scripts/tinker-sdk.sh)", err)
		}
		t.Skipf("the Tinker SDK's environment %s is missing: run scripts/tinker-sdk.sh to set it up", py)
	}
	return py
}

// matrixRow is one call of python/tinker_sdk_matrix.py's matrix.
type matrixRow struct {
	Call, Expect, Got, Detail string
}

// TestTinkerSDKMatrix runs python/tinker_sdk_matrix.py, the official
// Tinker SDK (pinned in python/tinker-sdk-requirements.txt) calling every
// public call of its ServiceClient, TrainingClient, SamplingClient and
// RestClient and the tinker CLI, against rlvr serve --tinker on loopback:
// each call is served, or refused with the reason the server gives, as the
// matrix expects. Only the custom losses may go unrun, and only for want
// of torch on the client.
func TestTinkerSDKMatrix(t *testing.T) {
	py := tinkerSDKPython(t) // before cliFixture moves RLVR_CACHE and the working directory
	script, err := filepath.Abs(filepath.Join("..", "..", "python", "tinker_sdk_matrix.py"))
	if err != nil {
		t.Fatal(err)
	}
	cliFixture(t)
	t.Setenv(serve.TokenEnv, "")
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny")
	saveByteModel(t, model)
	// A Hugging Face tokenizer beside the weights, for get_tokenizer.
	if err := tokenizer.WriteByteTokenizer(model); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The SDK's SamplingClient.get_tokenizer loads the base model's name
	// itself (a Hugging Face id, or a directory): the model is served
	// under its directory's path.
	base, done := startServe(t, ctx, []string{"serve", "--tinker", "--model", model, "--name", model, "--addr", "127.0.0.1:0",
		"--state", filepath.Join(dir, "state"), "--api-key", "tml-matrix", "--poll-timeout", "5s", "--max-models", "8"}, `serving \S+ over the Tinker API on (http://\S+)`)
	out := filepath.Join(dir, "out")
	args := []string{script, "--base-url", base, "--api-key", "tml-matrix", "--model", model, "--out", out}
	if doc := os.Getenv("RLVR_TINKER_MATRIX_DOC"); doc != "" {
		args = append(args, "--doc", doc) // its table, docs/scale-out.md's
	}
	// A bound, not a measure: the SDK retries some answers for minutes, and
	// a matrix that hangs should fail rather than hold the suite.
	pyCtx, stop := context.WithTimeout(ctx, 10*time.Minute)
	defer stop()
	cmd := exec.CommandContext(pyCtx, py, args...)
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "TINKER_TELEMETRY=0", "HOME="+dir, "PYTHONDONTWRITEBYTECODE=1")
	output, runErr := cmd.CombinedOutput()
	var matrix struct {
		SDKVersion string `json:"sdk_version"`
		Torch      bool
		Rows       []matrixRow
	}
	b, err := os.ReadFile(filepath.Join(out, "matrix.json"))
	if err == nil {
		err = json.Unmarshal(b, &matrix)
	}
	if err != nil {
		t.Fatalf("the matrix (%v) wrote no result (%v):\n%s", runErr, err, output)
	}
	notRun := map[string]bool{"TrainingClient.forward_backward_custom": true, "ServiceClient.create_custom_loss + forward_backward_custom(handle), run on the server": true}
	served, refused := 0, 0
	for _, r := range matrix.Rows {
		switch {
		case r.Got == r.Expect && r.Got == "served":
			served++
		case r.Got == r.Expect && r.Got == "refused":
			refused++
		case r.Got == "not run" && notRun[r.Call] && !matrix.Torch:
			t.Logf("%s: not run: %s", r.Call, r.Detail)
		default:
			t.Errorf("%s: expected %s, got %s: %s", r.Call, r.Expect, r.Got, r.Detail)
		}
	}
	// A matrix cut short fails too.
	if len(matrix.Rows) < 70 {
		t.Errorf("the matrix has %d rows, want every call's (70 or more)", len(matrix.Rows))
	}
	if matrix.SDKVersion != "0.38.0" {
		t.Errorf("SDK %s, want the pinned 0.38.0", matrix.SDKVersion)
	}
	t.Logf("SDK %s: %d calls served, %d refused as expected, of %d", matrix.SDKVersion, served, refused, len(matrix.Rows))
	if t.Failed() {
		t.Logf("the matrix's output:\n%s", output)
	}
	cancel()
	<-done
}
