package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/engine/sampler"
	"rlvr/format/hfconfig"
	"rlvr/format/tokenizer"
	"rlvr/internal/shareddata"
)

// byteTokenizerDir writes the byte tokenizer's files into a new directory.
func byteTokenizerDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := tokenizer.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustShape(t *testing.T, name string) Shape {
	t.Helper()
	s, err := LookupShape(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInitRandomQwen3(t *testing.T) {
	tokDir := shareddata.Path(t, "tokenizers/qwen3")
	out := filepath.Join(t.TempDir(), "qwen3-tiny")
	res, err := InitRandom(InitOptions{Tokenizer: tokDir, Shape: mustShape(t, "qwen3-tiny"), Seed: 7, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(out, "")
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := l.Tokenizer.(*tokenizer.Tokenizer)
	if !ok {
		t.Fatalf("tokenizer %T, want *tokenizer.Tokenizer", l.Tokenizer)
	}
	imEnd, _ := tok.TokenID("<|im_end|>")
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"architecture", l.HFConfig.Architecture, hfconfig.Qwen3},
		{"vocab", l.Model.Config.Vocab, tok.VocabSize()},
		{"vocab counts added tokens", tok.VocabSize() > 151643, true},
		{"dim", l.Model.Config.Dim, 64},
		{"layers", l.Model.Config.Layers, 2},
		{"heads", l.Model.Config.Heads, 4},
		{"kv heads", l.Model.Config.KVHeads, 2},
		{"hidden", l.Model.Config.Hidden, 128},
		{"qk norm", l.Model.Config.QKNorm, true},
		{"bos ids", len(l.HFConfig.BOSTokenIDs), 0}, // Qwen3's bos_token is null
		{"eos ids", slices.Equal(l.HFConfig.EOSTokenIDs, []int32{imEnd}), true},
		{"returned config", res.Config.VocabSize, l.HFConfig.VocabSize},
		{"returned params", res.Params, l.Model.NumParams()},
		{"copied LICENSE", slices.Contains(res.Copied, "LICENSE"), true},
		{"stop tokens", slices.Contains(l.StopTokens, imEnd), true},
		{"add bos", l.AddBOS, false},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "LICENSE"} {
		a, err1 := os.ReadFile(filepath.Join(tokDir, name))
		b, err2 := os.ReadFile(filepath.Join(out, name))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s not copied: %v, %v", name, err1, err2)
		}
	}
	if l.Chat == nil {
		t.Fatal("no chat template")
	}
	prompt, err := l.Chat([]tokenizer.Message{{Role: "user", Content: "What is 2+3?"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(prompt, "<|im_start|>user\nWhat is 2+3?<|im_end|>\n") || !strings.HasSuffix(prompt, "<|im_start|>assistant\n") {
		t.Fatalf("chat prompt %q", prompt)
	}
	ids := l.Encode(prompt)
	if ids[0] != mustID(t, tok, "<|im_start|>") {
		t.Fatalf("prompt ids %v do not start with <|im_start|>", ids[:3])
	}
	var toks []int32
	var lps []float32
	r := sampler.Request{Prompt: ids, MaxNew: 6, Temperature: 1, Seed: 3,
		Accept: func(_ int, tok int32, lp float32, _ bool) bool {
			toks, lps = append(toks, tok), append(lps, lp)
			return slices.Contains(l.StopTokens, tok)
		}}
	if err := sampler.New(l.Model).Sample(context.Background(), []sampler.Request{r}); err != nil {
		t.Fatal(err)
	}
	if len(toks) == 0 || len(toks) > 6 {
		t.Fatalf("%d tokens drawn", len(toks))
	}
	for i, id := range toks {
		if id < 0 || int(id) >= l.Model.Config.Vocab || lps[i] > 0 {
			t.Fatalf("token %d = %d with logprob %v", i, id, lps[i])
		}
	}
}

func mustID(t *testing.T, tok *tokenizer.Tokenizer, s string) int32 {
	t.Helper()
	id, ok := tok.TokenID(s)
	if !ok {
		t.Fatalf("no token %q", s)
	}
	return id
}

func TestInitRandomShapes(t *testing.T) {
	tokDir := byteTokenizerDir(t)
	for _, s := range Shapes() {
		if err := s.Validate(); err != nil {
			t.Errorf("registered shape: %v", err)
		}
		if !strings.HasSuffix(s.Name, "-tiny") {
			continue // the real shapes take gigabytes
		}
		t.Run(s.Name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m")
			if _, err := InitRandom(InitOptions{Tokenizer: tokDir, Shape: s, Seed: 1, Out: out}); err != nil {
				t.Fatal(err)
			}
			l, err := Open(out, "")
			if err != nil {
				t.Fatal(err)
			}
			if l.HFConfig.Architecture != s.Architecture || l.Model.Config.Vocab != 259 || l.Model.Config.TiedEmbeddings != s.TiedEmbeddings {
				t.Errorf("config %+v", l.HFConfig)
			}
			if !slices.Equal(l.HFConfig.BOSTokenIDs, []int32{tokenizer.ByteBOS}) || !slices.Equal(l.HFConfig.EOSTokenIDs, []int32{tokenizer.ByteEOS}) {
				t.Errorf("bos %v eos %v", l.HFConfig.BOSTokenIDs, l.HFConfig.EOSTokenIDs)
			}
			if _, ok := l.Tokenizer.(*tokenizer.ByteTokenizer); !ok || !l.AddBOS {
				t.Errorf("tokenizer %T, AddBOS %v", l.Tokenizer, l.AddBOS)
			}
		})
	}
}

func TestInitRandomSeed(t *testing.T) {
	tokDir := byteTokenizerDir(t)
	weights := func(seed uint64) []byte {
		out := filepath.Join(t.TempDir(), "m")
		if _, err := InitRandom(InitOptions{Tokenizer: tokDir, Shape: mustShape(t, "qwen3-tiny"), Seed: seed, Out: out}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := weights(1), weights(1), weights(2)
	if !bytes.Equal(a, b) {
		t.Error("the same seed gave different weights")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds gave the same weights")
	}
}

func TestInitRandomErrors(t *testing.T) {
	tokDir := byteTokenizerDir(t)
	noConfig := t.TempDir()
	if err := os.WriteFile(filepath.Join(noConfig, "tokenizer.json"), tokenizer.ByteTokenizerJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	badJSON := t.TempDir()
	for name, data := range map[string]string{"tokenizer.json": `{"model": 3}`, "tokenizer_config.json": `{}`} {
		if err := os.WriteFile(filepath.Join(badJSON, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tiny := mustShape(t, "qwen3-tiny")
	with := func(f func(*Shape)) Shape { s := tiny; f(&s); return s }
	for _, c := range []struct {
		name string
		opts InitOptions
		want string
	}{
		{"missing tokenizer dir", InitOptions{Tokenizer: filepath.Join(tokDir, "nope"), Shape: tiny}, "nope"},
		{"tokenizer is a file", InitOptions{Tokenizer: filepath.Join(tokDir, "tokenizer.json"), Shape: tiny}, "not a directory"},
		{"no tokenizer_config.json", InitOptions{Tokenizer: noConfig, Shape: tiny}, "tokenizer_config.json"},
		{"bad tokenizer.json", InitOptions{Tokenizer: badJSON, Shape: tiny}, "tokenizer.json: model"},
		{"no tokenizer given", InitOptions{Shape: tiny}, "no tokenizer directory"},
		{"heads do not divide dim", InitOptions{Tokenizer: tokDir, Shape: with(func(s *Shape) { s.Heads, s.KVHeads = 5, 1 })}, "heads 5 do not divide dim 64"},
		{"kv heads do not divide heads", InitOptions{Tokenizer: tokDir, Shape: with(func(s *Shape) { s.KVHeads = 3 })}, "kv heads 3 do not divide heads 4"},
		{"odd head dim", InitOptions{Tokenizer: tokDir, Shape: with(func(s *Shape) { s.HeadDim = 15 })}, "must be even"},
		{"zero layers", InitOptions{Tokenizer: tokDir, Shape: with(func(s *Shape) { s.Layers = 0 })}, "layers 0 must be positive"},
		{"head dim on llama", InitOptions{Tokenizer: tokDir, Shape: with(func(s *Shape) { s.Architecture, s.HeadDim = hfconfig.Llama, 32 })}, "only Qwen3"},
		{"unknown architecture", InitOptions{Tokenizer: tokDir, Shape: with(func(s *Shape) { s.Architecture = "GPT2LMHeadModel" })}, "GPT2LMHeadModel"},
		{"non-empty out", InitOptions{Tokenizer: tokDir, Shape: tiny, Out: full}, "not empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.opts.Out == "" {
				c.opts.Out = filepath.Join(t.TempDir(), "out")
			}
			_, err := InitRandom(c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := InitRandom(InitOptions{Tokenizer: tokDir, Shape: tiny}); err == nil || !strings.Contains(err.Error(), "no output directory") {
		t.Errorf("no output directory: %v", err)
	}
	if _, err := LookupShape("qwen9"); err == nil || !strings.Contains(err.Error(), "qwen3-tiny") || !strings.Contains(err.Error(), "qwen2.5-0.5b") {
		t.Errorf("unknown shape: %v, want the known ones listed", err)
	}
}

func TestInitRandomForce(t *testing.T) {
	tokDir := byteTokenizerDir(t)
	out := t.TempDir()
	stale := []string{"model.safetensors.index.json", "model-00001-of-00002.safetensors", "optimizer.safetensors", "chat_template.jinja"}
	for _, name := range append(stale, "notes.txt") {
		if err := os.WriteFile(filepath.Join(out, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := InitRandom(InitOptions{Tokenizer: tokDir, Shape: mustShape(t, "llama-tiny"), Out: out, Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		if _, err := os.Stat(filepath.Join(out, name)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "notes.txt")); err != nil {
		t.Errorf("an unrelated file was removed: %v", err)
	}
	if _, err := Open(out, ""); err != nil {
		t.Fatal(err)
	}
}

func TestCopyTokenizerFiles(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	files := map[string]string{"tokenizer.json": "a", "chat_template.jinja": "b", "generation_config.json": "c", "model.safetensors": "d", "config.json": "e"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	got, err := CopyTokenizerFiles(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tokenizer.json", "chat_template.jinja", "generation_config.json"}; !slices.Equal(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
	for name, data := range files {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if copied := slices.Contains(got, name); copied != (err == nil) || (copied && string(b) != data) {
			t.Errorf("%s: %q, %v", name, b, err)
		}
	}
	// A second copy replaces read-only-sourced files; a copy onto itself is a no-op.
	if _, err := CopyTokenizerFiles(src, dst); err != nil {
		t.Errorf("copy again: %v", err)
	}
	if got, err := CopyTokenizerFiles(src, src); err != nil || len(got) != 3 {
		t.Errorf("copy onto itself: %v, %v", got, err)
	}
	if _, err := CopyTokenizerFiles(filepath.Join(src, "missing"), dst); err == nil {
		t.Error("no error for a missing source")
	}
}
