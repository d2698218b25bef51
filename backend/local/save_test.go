package local

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
	"rlvr/format/tokenizer"
	"rlvr/internal/shareddata"
)

// initModel writes a random model of the named shape around the tokenizer
// in tokDir.
func initModel(t *testing.T, tokDir, shape string) string {
	t.Helper()
	s, err := checkpoint.LookupShape(shape)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "src")
	if _, err := checkpoint.InitRandom(checkpoint.InitOptions{Tokenizer: tokDir, Shape: s, Seed: 5, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// saveAndCompare loads src with Load, saves it to a new directory and
// checks that checkpoint.Open sees the same model side by side: weights,
// tokenizer, chat template, BOS/EOS ids and stop tokens. It returns the new
// directory.
func saveAndCompare(t *testing.T, src string, texts []string) string {
	t.Helper()
	l, err := Load(src, optim.DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	if l.Source != src || l.HFConfig == nil {
		t.Fatalf("Load set Source %q, HFConfig %v", l.Source, l.HFConfig)
	}
	dst := filepath.Join(t.TempDir(), "saved")
	if err := l.Save(ctx, dst); err != nil {
		t.Fatal(err)
	}
	want, err := checkpoint.Open(src, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.Open(dst, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Model.Params, want.Model.Params) || !got.Model.Config.Equal(want.Model.Config) {
		t.Error("the weights or the architecture changed")
	}
	if g, w := *got.HFConfig, *want.HFConfig; g.Architecture != w.Architecture ||
		!slices.Equal(g.BOSTokenIDs, w.BOSTokenIDs) || !slices.Equal(g.EOSTokenIDs, w.EOSTokenIDs) || g.RopeTheta != w.RopeTheta {
		t.Errorf("config.json: got %+v, want %+v", g, w)
	}
	if !slices.Equal(got.StopTokens, want.StopTokens) || got.AddBOS != want.AddBOS {
		t.Errorf("stop tokens %v AddBOS %v, want %v %v", got.StopTokens, got.AddBOS, want.StopTokens, want.AddBOS)
	}
	if (got.Chat == nil) != (want.Chat == nil) {
		t.Fatalf("chat template present: %v, want %v", got.Chat != nil, want.Chat != nil)
	}
	if got.Chat != nil {
		msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "2+2?"}}
		g, err1 := got.Chat(msgs)
		w, err2 := want.Chat(msgs)
		if err1 != nil || err2 != nil || g != w {
			t.Errorf("chat prompt %q (%v), want %q (%v)", g, err1, w, err2)
		}
	}
	if gt, wt := got.Tokenizer.VocabSize(), want.Tokenizer.VocabSize(); gt != wt {
		t.Errorf("tokenizer vocabulary %d, want %d", gt, wt)
	}
	for _, s := range texts {
		if g, w := got.Encode(s), want.Encode(s); !slices.Equal(g, w) {
			t.Errorf("Encode(%q) = %v, want %v", s, g, w)
		}
	}
	for _, name := range checkpoint.TokenizerFiles {
		a, errA := os.ReadFile(filepath.Join(src, name))
		b, errB := os.ReadFile(filepath.Join(dst, name))
		if (errA == nil) != (errB == nil) || !bytes.Equal(a, b) {
			t.Errorf("%s: source %v, saved %v", name, errA, errB)
		}
	}
	return dst
}

func TestSaveKeepsTokenizerQwen3(t *testing.T) {
	src := initModel(t, shareddata.Path(t, "tokenizers/qwen3"), "qwen3-tiny")
	texts := []string{"<|im_start|>user\nHello, world!<|im_end|>", "  12+7=19\n", "héllo 🦙"}
	dst := saveAndCompare(t, src, texts)
	// A checkpoint of a checkpoint is complete too.
	saveAndCompare(t, dst, texts)
}

func TestSaveKeepsTokenizerFiles(t *testing.T) {
	tokDir := t.TempDir()
	if err := tokenizer.WriteByteTokenizer(tokDir); err != nil {
		t.Fatal(err)
	}
	src := initModel(t, tokDir, "llama-tiny")
	// Every kind of file a Hugging Face directory may carry beside the
	// tokenizer.
	for name, data := range map[string]string{
		"special_tokens_map.json": `{"bos_token": "<s>"}`, "generation_config.json": `{"bos_token_id": 256, "eos_token_id": 257}`,
		"chat_template.jinja": "{% for m in messages %}{{ m.content }}{% endfor %}", "LICENSE": "license text",
	} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	dst := saveAndCompare(t, src, []string{"<s>Q:1+2\n</s>", "\xff"})
	l, err := checkpoint.Open(dst, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Tokenizer.(*tokenizer.ByteTokenizer); !ok {
		t.Errorf("tokenizer %T, want the byte tokenizer", l.Tokenizer)
	}
	// Saving over the source directory keeps its files.
	learner, err := Load(src, optim.DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	if err := learner.Save(ctx, src); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(src, ""); err != nil {
		t.Fatal(err)
	}
}

// TestSaveAfterSourceDeleted: a learner opened from a checkpoint that is
// deleted after it saved another (a resumed run pruning old checkpoints)
// still saves complete directories.
func TestSaveAfterSourceDeleted(t *testing.T) {
	tokDir := t.TempDir()
	if err := tokenizer.WriteByteTokenizer(tokDir); err != nil {
		t.Fatal(err)
	}
	src := initModel(t, tokDir, "llama-tiny")
	s, err := Open(src, optim.DefaultAdamW(), false)
	if err != nil {
		t.Fatal(err)
	}
	// As a run saves: into a temporary directory, renamed when complete.
	runDir := t.TempDir()
	save := func(name string) string {
		tmp, dir := filepath.Join(runDir, name+".tmp"), filepath.Join(runDir, name)
		if err := s.Save(ctx, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	save("ckpt-1")
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	second := save("ckpt-2")
	l, err := checkpoint.Open(second, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Tokenizer.(*tokenizer.ByteTokenizer); !ok {
		t.Errorf("tokenizer %T, want the byte tokenizer of the source", l.Tokenizer)
	}
}

func TestSaveConfig(t *testing.T) {
	m, _ := model.New(tinyConfig(259), 1)
	other, _ := model.New(model.Config{Vocab: 259, Dim: 16, Layers: 1, Heads: 2, Hidden: 16, MaxSeq: 8}, 1)
	withIDs := hf.Config(m.Config, []int32{256}, []int32{257, 258})
	dirWith := func(cfg *hfconfig.Config, mm *model.Model) string {
		dir := t.TempDir()
		if err := hf.Save(dir, mm, cfg, safetensors.F32); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, c := range []struct {
		name     string
		hfConfig *hfconfig.Config
		source   string
		bos, eos []int32
		err      string
	}{
		{"derived", nil, "", nil, nil, ""},
		{"HFConfig", withIDs, "", []int32{256}, []int32{257, 258}, ""},
		{"HFConfig wins over Source", withIDs, dirWith(hf.Config(m.Config, []int32{1}, []int32{2}), m), []int32{256}, []int32{257, 258}, ""},
		{"Source's config.json", nil, dirWith(withIDs, m), []int32{256}, []int32{257, 258}, ""},
		{"Source without config.json", nil, t.TempDir(), nil, nil, ""},
		{"Source describes another model", nil, dirWith(nil, other), nil, nil, "config.json describes another model"},
		{"HFConfig describes another model", hf.Config(other.Config, nil, nil), "", nil, nil, "HFConfig describes another model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := NewLearner(m, optim.DefaultAdamW())
			if err != nil {
				t.Fatal(err)
			}
			l.HFConfig, l.Source = c.hfConfig, c.source
			dir := filepath.Join(t.TempDir(), "out")
			err = l.Save(ctx, dir)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			hc, err := hfconfig.Load(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(hc.BOSTokenIDs, c.bos) || !slices.Equal(hc.EOSTokenIDs, c.eos) {
				t.Errorf("bos %v eos %v, want %v %v", hc.BOSTokenIDs, hc.EOSTokenIDs, c.bos, c.eos)
			}
		})
	}
}
