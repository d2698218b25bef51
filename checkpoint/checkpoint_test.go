package checkpoint

import (
	"path/filepath"
	"strings"
	"testing"

	"rlvr/engine/model"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/internal/shareddata"
)

func TestOpenLlama2C(t *testing.T) {
	l, err := Open(shareddata.Path(t, "stories260K/stories260K.bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	ids := l.Encode("Once upon a time")
	if ids[0] != 1 || len(ids) < 3 {
		t.Fatalf("ids %v: want BOS first", ids)
	}
	if got := l.Decode(ids); got != "Once upon a time" {
		t.Fatalf("decode %q", got)
	}
	// A continuation keeps its leading space.
	if got := l.Decode(ids[2:]); !strings.HasPrefix(got, " ") {
		t.Fatalf("continuation %q lost its leading space", got)
	}
}

func TestOpenWorldModel(t *testing.T) {
	cfg := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	cfg.Layers = 1
	m, _ := model.New(cfg, 1)
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := hf.Save(dir, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if ids := l.Encode("1+2"); len(ids) != 4 || ids[0] != tokenizer.ByteBOS {
		t.Fatalf("ids %v", ids)
	}
	if len(l.StopTokens) != 1 || l.StopTokens[0] != tokenizer.ByteEOS {
		t.Fatalf("stop tokens %v", l.StopTokens)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Fatal("no error for a missing path")
	}
	// A Hugging Face model whose vocabulary matches no tokenizer.
	m, _ := model.New(model.Config{Vocab: 7, Dim: 8, Layers: 1, Heads: 2, Hidden: 8, MaxSeq: 8}, 1)
	dir := t.TempDir()
	hf.Save(dir, m, nil, safetensors.F32)
	if _, err := Open(dir, ""); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("error %v, want one naming the missing tokenizer.json", err)
	}
}
