package checkpoint

import (
	"path/filepath"
	"slices"
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

// TestOpenByteTokenizerFile checks that a world model with the byte
// tokenizer's tokenizer.json opens as one without it always has: the
// native byte tokenizer, BOS first, EOS the only stop token, no chat.
func TestOpenByteTokenizerFile(t *testing.T) {
	cfg := model.Tiny(tokenizer.NewByteTokenizer().VocabSize())
	cfg.Layers = 1
	m, _ := model.New(cfg, 1)
	bare := filepath.Join(t.TempDir(), "bare")
	if err := hf.Save(bare, m, nil, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(t.TempDir(), "full")
	if err := hf.Save(full, m, hf.Config(m.Config, []int32{tokenizer.ByteBOS}, []int32{tokenizer.ByteEOS}), safetensors.F32); err != nil {
		t.Fatal(err)
	}
	if err := tokenizer.WriteByteTokenizer(full); err != nil {
		t.Fatal(err)
	}
	want, err := Open(bare, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(full, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Tokenizer.(*tokenizer.ByteTokenizer); !ok {
		t.Errorf("tokenizer %T, want the native *tokenizer.ByteTokenizer", got.Tokenizer)
	}
	if got.AddBOS != want.AddBOS || !slices.Equal(got.StopTokens, want.StopTokens) || (got.Chat == nil) != (want.Chat == nil) {
		t.Errorf("AddBOS %v stop %v chat %v; want %v %v %v", got.AddBOS, got.StopTokens, got.Chat != nil, want.AddBOS, want.StopTokens, want.Chat != nil)
	}
	for _, s := range []string{"Q:1+2\n", "<s>x</s>", "\xff"} {
		if a, b := got.Encode(s), want.Encode(s); !slices.Equal(a, b) {
			t.Errorf("Encode(%q) = %v, want %v", s, a, b)
		}
	}
	if !slices.Equal(got.HFConfig.BOSTokenIDs, []int32{tokenizer.ByteBOS}) || !slices.Equal(got.HFConfig.EOSTokenIDs, []int32{tokenizer.ByteEOS}) || got.Dir != full {
		t.Errorf("HFConfig bos %v eos %v, Dir %q", got.HFConfig.BOSTokenIDs, got.HFConfig.EOSTokenIDs, got.Dir)
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
