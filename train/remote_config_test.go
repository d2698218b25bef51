package train

import (
	"strings"
	"testing"

	"rlvr/method/meml"
)

// TestTinkerBackendRefusesLocalOnlyTerms: a config whose loss has a term
// no Tinker loss_fn expresses is refused when resolved, naming the term
// and its alternative, along with every other backend mistake.
func TestTinkerBackendRefusesLocalOnlyTerms(t *testing.T) {
	cfg := DefaultRL()
	cfg.Entropy, cfg.GradientCheckpointing = 0.01, true
	cfg.Parts = []string{meml.PartExpertPrompts, meml.PartMutualLearning}
	cfg.Sections.Set(&meml.MutualLearningConfig{Estimator: "exact"})
	cfg.Backend = &BackendConfig{Kind: BackendTinker, URL: "ftp://x", Reduction: "mean", LoraRank: -1, Timeout: "soon"}
	_, err := cfg.Resolve()
	for _, want := range []string{"entropy bonus needs full next-token distributions", "(entropy: 0)",
		"exact teacher KL", "(estimator: sequence)", `backend.url "ftp://x"`, `backend.reduction "mean"`,
		"backend.lora_rank = -1", `backend.timeout "soon"`, "(gradient_checkpointing: false)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	ok := DefaultRL()
	ok.Backend = &BackendConfig{Kind: BackendTinker, URL: "http://127.0.0.1:8000"}
	if _, err := ok.Resolve(); err != nil || ok.Backend.Reduction != "sum" || ok.Backend.APIKeyEnv != "TINKER_API_KEY" {
		t.Fatalf("defaults: %+v, %v", ok.Backend, err)
	}
	skyrl := DefaultRL()
	skyrl.Backend = &BackendConfig{Kind: BackendTinker, URL: "http://127.0.0.1:8000", Reduction: "datum-mean"}
	if _, err := skyrl.Resolve(); err == nil || !strings.Contains(err.Error(), "backend.lora_rank = 0") || !strings.Contains(err.Error(), "SkyRL tx's JAX backend") {
		t.Errorf("datum-mean with lora_rank 0: %v", err)
	}
	skyrl.Backend.LoraRank = 32
	if _, err := skyrl.Resolve(); err != nil {
		t.Errorf("datum-mean with lora_rank 32: %v", err)
	}
	local := DefaultRL()
	local.Backend = &BackendConfig{Kind: BackendLocal, URL: "http://x", LoraRank: -2, Retries: 3}
	_, err = local.Resolve()
	for _, want := range []string{"backend.lora_rank = -2", "backend.url is for kind tinker, not local", "backend.retries is for kind tinker"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("local backend: error %v does not mention %q", err, want)
		}
	}
	bad := DefaultRL()
	bad.Backend = &BackendConfig{Kind: "gpu"}
	if _, err := bad.Resolve(); err == nil || !strings.Contains(err.Error(), `backend.kind "gpu"`) {
		t.Fatalf("unknown kind: %v", err)
	}
}
