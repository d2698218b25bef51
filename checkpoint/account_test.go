package checkpoint_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/checkpoint/modeltest"
)

// TestOpenGGUFAccountsForEveryTensor opens a small llama-architecture
// GGUF as written, then with a tensor the model has no place for (a bias
// of a Llama without attention biases) and with a layer beyond its
// block_count: each is an error naming the tensor and the file, not a
// model that silently lacks it.
func TestOpenGGUFAccountsForEveryTensor(t *testing.T) {
	dir := t.TempDir()
	meta, ts := modeltest.TinyLlamaGGUF(2)
	path := filepath.Join(dir, "tiny.gguf")
	modeltest.WriteGGUF(t, path, meta, ts)
	l, err := checkpoint.Open(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if c := l.Model.Config; c.Layers != 2 || !c.TiedEmbeddings {
		t.Fatalf("config %+v", c)
	}

	bias := append(ts, modeltest.GGUFTensor{Name: "blk.1.attn_q.bias", Dims: []int{16}, Data: make([]float32, 16)})
	path = filepath.Join(dir, "bias.gguf")
	modeltest.WriteGGUF(t, path, meta, bias)
	_, err = checkpoint.Open(path, "")
	if want := `tensor "blk.1.attn_q.bias" (model.layers.1.self_attn.q_proj.bias) is not part of the model`; err == nil ||
		!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v, want one naming %s and saying %q", err, path, want)
	}

	oneBlock, _ := modeltest.TinyLlamaGGUF(1)
	path = filepath.Join(dir, "extra-layer.gguf")
	modeltest.WriteGGUF(t, path, oneBlock, ts)
	_, err = checkpoint.Open(path, "")
	if want := "beyond llama.block_count 1"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v, want one naming %s and saying %q", err, path, want)
	}
}

// TestOpenRefusesEOSOutsideTheVocabulary: an eos_token_id of
// generation_config.json beyond the vocabulary would never stop a
// generation; it is an error naming the file and the field.
func TestOpenRefusesEOSOutsideTheVocabulary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "byte")
	modeltest.Byte(t, dir, 32)
	gen := filepath.Join(dir, "generation_config.json")
	if err := os.WriteFile(gen, []byte(`{"eos_token_id": [2, 259]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := checkpoint.Open(dir, "")
	if want := "eos_token_id 259 is outside the model's vocabulary [0, 259)"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), gen) {
		t.Errorf("error %v, want one naming %s and saying %q", err, gen, want)
	}
}
