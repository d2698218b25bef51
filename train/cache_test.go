package train

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"rlvr/checkpoint"
	"rlvr/engine/optim"
	"rlvr/format/hfconfig"
	"rlvr/format/tokenizer"
	"rlvr/worldmodel"
)

// TestEmbeddedWorldModels fails when a world version's pretraining
// configuration no longer is the one its embedded model was trained from,
// or when the model of world version 1 or 2 is not embedded.
func TestEmbeddedWorldModels(t *testing.T) {
	for _, v := range []int{1, 2} {
		if !slices.Contains(worldmodel.Versions(), v) {
			t.Fatalf("world version %d's model is not embedded (versions %v)", v, worldmodel.Versions())
		}
	}
	for _, v := range worldmodel.Versions() {
		cfg, err := WorldPretrain(v)
		if err != nil {
			t.Fatalf("package worldmodel embeds world version %d: %v", v, err)
		}
		if got, want := ConfigHash(cfg), worldmodel.ConfigHash(v); got != want {
			t.Errorf("world version %d's pretraining hashes to %s, but its model embedded in package worldmodel was trained from %s:\n"+
				"regenerate it (see package worldmodel) and commit the new files", v, got, want)
		}
		if fsys, ok := worldmodel.Lookup(ConfigHash(cfg)); !ok || fsys == nil {
			t.Errorf("world version %d: Lookup of its hash found nothing", v)
		}
	}
	if cfg := DefaultPretrain(); ConfigHash(cfg) != worldmodel.ConfigHash(1) {
		t.Errorf("DefaultPretrain() is not world version 1's configuration")
	}
}

// TestEnsurePretrainedInstallsEmbedded checks that the default model comes
// out of the binary into the cache, ready to open, without training.
func TestEnsurePretrainedInstallsEmbedded(t *testing.T) {
	t.Setenv("RLVR_CACHE", t.TempDir())
	cfg := DefaultPretrain()
	trained := false
	dir, res, err := ensurePretrained(context.Background(), cfg, PretrainOptions{Progress: func(Progress) { trained = true }}, worldmodel.FS(1))
	if err != nil {
		t.Fatal(err)
	}
	if trained || !res.Cached || dir != PretrainedPath(cfg) || len(res.Eval) != len(cfg.Levels) {
		t.Fatalf("trained %v, cached %v, dir %s (want %s), %d levels", trained, res.Cached, dir, PretrainedPath(cfg), len(res.Eval))
	}
	for _, name := range worldmodel.Files {
		want, _ := fs.ReadFile(worldmodel.FS(1), name)
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if l.Model.NumParams() != res.Params {
		t.Errorf("the model has %d parameters, its result says %d", l.Model.NumParams(), res.Params)
	}
	if _, ok := l.Tokenizer.(*tokenizer.ByteTokenizer); !ok || !l.AddBOS {
		t.Errorf("tokenizer %T, AddBOS %v", l.Tokenizer, l.AddBOS)
	}
	// Then it is an ordinary cache entry.
	again, res2, err := ensurePretrained(context.Background(), cfg, PretrainOptions{}, fstest.MapFS{})
	if err != nil || again != dir || !res2.Cached {
		t.Fatalf("second call: %s, %+v, %v", again, res2, err)
	}
	if !res.Shipped || res2.Shipped {
		t.Errorf("shipped: installed %v, then from the cache %v", res.Shipped, res2.Shipped)
	}
}

func TestEnsurePretrainedRefusesCorruptEmbedded(t *testing.T) {
	t.Setenv("RLVR_CACHE", t.TempDir())
	bad := fstest.MapFS{}
	for _, name := range append(slices.Clone(worldmodel.Files), worldmodel.SumsFile) {
		data, err := fs.ReadFile(worldmodel.FS(1), name)
		if err != nil {
			t.Fatal(err)
		}
		bad[name] = &fstest.MapFile{Data: data}
	}
	weights := slices.Clone(bad["model.safetensors"].Data)
	weights[len(weights)-1] ^= 0xff
	bad["model.safetensors"].Data = weights
	cfg := DefaultPretrain()
	_, _, err := ensurePretrained(context.Background(), cfg, PretrainOptions{}, bad)
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("error %v, want one naming model.safetensors", err)
	}
	if _, err := os.Stat(PretrainedPath(cfg)); !os.IsNotExist(err) {
		t.Errorf("a cache directory was left behind: %v", err)
	}
}

// TestPretrainWritesCompleteDirectory checks that a trained model (another
// configuration than the embedded one) is a complete Hugging Face
// directory: the byte tokenizer's files and its BOS and EOS ids.
func TestPretrainWritesCompleteDirectory(t *testing.T) {
	t.Setenv("RLVR_CACHE", t.TempDir())
	cfg := tinyPretrain()
	dir, res, err := ensurePretrained(context.Background(), cfg, PretrainOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cached {
		t.Error("a model of another configuration came from the cache")
	}
	for name, want := range map[string][]byte{"tokenizer.json": tokenizer.ByteTokenizerJSON(), "tokenizer_config.json": tokenizer.ByteTokenizerConfigJSON()} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	hc, err := hfconfig.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hc.BOSTokenIDs, []int32{tokenizer.ByteBOS}) || !slices.Equal(hc.EOSTokenIDs, []int32{tokenizer.ByteEOS}) {
		t.Errorf("bos %v eos %v", hc.BOSTokenIDs, hc.EOSTokenIDs)
	}
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Tokenizer.(*tokenizer.ByteTokenizer); !ok || !slices.Equal(l.StopTokens, []int32{tokenizer.ByteEOS}) {
		t.Errorf("tokenizer %T, stop tokens %v", l.Tokenizer, l.StopTokens)
	}
}

// TestEnsurePretrainedConcurrently: callers at once, for the embedded
// model and for one trained now, all get the same cache entry, and only
// one of them trains; nothing is left beside the entries but the
// pretraining's lock.
func TestEnsurePretrainedConcurrently(t *testing.T) {
	t.Setenv("RLVR_CACHE", t.TempDir())
	tiny := tinyPretrain()
	for _, tc := range []struct {
		cfg      PretrainConfig
		embedded fs.FS
	}{{DefaultPretrain(), worldmodel.FS(1)}, {tiny, nil}} {
		var steps atomic.Int32
		var wg sync.WaitGroup
		dirs, errs := make([]string, 3), make([]error, 3)
		for i := range dirs {
			wg.Go(func() {
				opts := PretrainOptions{Progress: func(Progress) { steps.Add(1) }}
				dirs[i], _, errs[i] = ensurePretrained(context.Background(), tc.cfg, opts, tc.embedded)
			})
		}
		wg.Wait()
		for i := range dirs {
			if errs[i] != nil || dirs[i] != PretrainedPath(tc.cfg) {
				t.Fatalf("caller %d: %s, %v", i, dirs[i], errs[i])
			}
		}
		if want := int32(tc.cfg.Steps); tc.embedded == nil && steps.Load() != want {
			t.Errorf("%d steps trained, want one pretraining's %d", steps.Load(), want)
		}
		if _, err := checkpoint.Open(dirs[0], ""); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(CacheDir())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{filepath.Base(PretrainedPath(DefaultPretrain())), filepath.Base(PretrainedPath(tiny)), filepath.Base(PretrainedPath(tiny)) + ".lock"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("the cache holds %v, want %v", names, want)
	}
}

// tinyPretrain is a configuration other than the embedded models', that
// trains in moments.
func tinyPretrain() PretrainConfig {
	cfg := DefaultPretrain()
	cfg.Model.Dim, cfg.Model.Layers, cfg.Model.Hidden = 32, 1, 64
	cfg.Steps, cfg.BatchTokens, cfg.EvalProblems = 2, 256, 2
	cfg.Schedule = optim.Schedule{Kind: optim.Constant, PeakLR: 1e-3, TotalSteps: 2}
	return cfg
}
