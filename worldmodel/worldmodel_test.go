package worldmodel

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"rlvr/checkpoint"
	"rlvr/format/tokenizer"
)

func TestEmbeddedFilesMatchSums(t *testing.T) {
	if vs := Versions(); len(vs) == 0 || vs[0] != 1 {
		t.Fatalf("embedded versions %v, want 1 first", vs)
	}
	for _, v := range Versions() {
		fsys := FS(v)
		if err := Verify(fsys); err != nil {
			t.Fatalf("version %d: %v\nregenerate the model (see the package doc)", v, err)
		}
		sums, err := fs.ReadFile(fsys, SumsFile)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Sums(fsys)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sums, want) {
			t.Errorf("version %d: %s is not as Sums writes it:\n%s\nwant\n%s", v, SumsFile, sums, want)
		}
		h, err := ReadHash(fsys)
		if err != nil || h != ConfigHash(v) {
			t.Errorf("version %d: hash %q, %v; ConfigHash %q", v, h, err, ConfigHash(v))
		}
		if got, ok := Lookup(h); !ok || got == nil {
			t.Errorf("version %d: Lookup(%s) found nothing", v, h)
		}
	}
	if FS(0) != nil || ConfigHash(99) != "" {
		t.Error("a version with no embedded model has files or a hash")
	}
	if _, ok := Lookup("000000000000"); ok {
		t.Error("Lookup found a model for a hash no model has")
	}
}

func TestReadHash(t *testing.T) {
	for data, want := range map[string]string{
		"99cb24d58265\n": "",
		"99cb24d58265":   "",
		"99CB24D58265\n": "not twelve hexadecimal digits",
		"99cb24d5826\n":  "not twelve hexadecimal digits",
		"":               "not twelve hexadecimal digits",
	} {
		_, err := ReadHash(fstest.MapFS{HashFile: {Data: []byte(data)}})
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("ReadHash(%q): %v, want %q", data, err, want)
		}
	}
	if _, err := ReadHash(fstest.MapFS{}); err == nil || !strings.Contains(err.Error(), HashFile) {
		t.Errorf("no hash file: %v", err)
	}
}

func TestEmbeddedModelOpens(t *testing.T) {
	for _, v := range Versions() {
		dir := filepath.Join(t.TempDir(), "world")
		if err := Install(FS(v), dir); err != nil {
			t.Fatal(err)
		}
		for _, name := range Files {
			want, _ := fs.ReadFile(FS(v), name)
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("version %d: %s installed wrong: %v", v, name, err)
			}
		}
		l, err := checkpoint.Open(dir, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := l.Tokenizer.(*tokenizer.ByteTokenizer); !ok || !l.AddBOS || !slices.Equal(l.StopTokens, []int32{tokenizer.ByteEOS}) {
			t.Errorf("version %d: tokenizer %T, AddBOS %v, stop tokens %v: not the world's", v, l.Tokenizer, l.AddBOS, l.StopTokens)
		}
		if !slices.Equal(l.HFConfig.BOSTokenIDs, []int32{tokenizer.ByteBOS}) || !slices.Equal(l.HFConfig.EOSTokenIDs, []int32{tokenizer.ByteEOS}) {
			t.Errorf("version %d: config.json: bos %v eos %v", v, l.HFConfig.BOSTokenIDs, l.HFConfig.EOSTokenIDs)
		}
		if l.Model.Config.Vocab != tokenizer.NewByteTokenizer().VocabSize() {
			t.Errorf("version %d: vocab %d", v, l.Model.Config.Vocab)
		}
	}
}

// goodFS is a small model directory with a correct SHA256SUMS.
func goodFS(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	for _, name := range Files {
		m[name] = &fstest.MapFile{Data: []byte("contents of " + name)}
	}
	sums, err := Sums(m)
	if err != nil {
		t.Fatal(err)
	}
	m[SumsFile] = &fstest.MapFile{Data: sums}
	return m
}

func TestInstall(t *testing.T) {
	good := goodFS(t)
	sums := string(good[SumsFile].Data)
	with := func(f func(fstest.MapFS)) fstest.MapFS {
		m := fstest.MapFS{}
		for k, v := range good {
			c := *v
			m[k] = &c
		}
		f(m)
		return m
	}
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want string // "" for success
		// written are the files installed before the error.
		written []string
	}{
		{"good", good, "", Files},
		{"changed weights", with(func(m fstest.MapFS) { m["model.safetensors"].Data = []byte("other") }),
			"model.safetensors: SHA-256", []string{"config.json"}},
		{"changed result", with(func(m fstest.MapFS) { m["pretrain.json"].Data = []byte("{}") }),
			"pretrain.json: SHA-256", Files[:len(Files)-1]},
		{"missing file", with(func(m fstest.MapFS) { delete(m, "tokenizer.json") }), "tokenizer.json", []string{"config.json", "model.safetensors"}},
		{"no sums", with(func(m fstest.MapFS) { delete(m, SumsFile) }), SumsFile, nil},
		{"unlisted file", with(func(m fstest.MapFS) {
			m[SumsFile].Data = []byte(strings.Join(slices.DeleteFunc(strings.SplitAfter(sums, "\n"), func(l string) bool { return strings.HasSuffix(l, " config.json\n") }), ""))
		}), "does not list config.json", nil},
		{"extra file", with(func(m fstest.MapFS) {
			m[SumsFile].Data = []byte(sums + strings.Repeat("0", 64) + "  optimizer.safetensors\n")
		}), "lists 6 files", nil},
		{"listed twice", with(func(m fstest.MapFS) { m[SumsFile].Data = []byte(sums + strings.SplitAfter(sums, "\n")[0]) }), "listed twice", nil},
		{"bad line", with(func(m fstest.MapFS) { m[SumsFile].Data = []byte("xyz config.json\n" + sums) }), "SHA256SUMS:1", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			err := Install(c.fsys, dir)
			if c.want == "" && err != nil {
				t.Fatal(err)
			}
			if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if c.want != "" {
				if verr := Verify(c.fsys); verr == nil {
					t.Error("Verify found nothing wrong")
				}
			}
			for _, name := range Files {
				_, err := os.Stat(filepath.Join(dir, name))
				if want := slices.Contains(c.written, name); want != (err == nil) {
					t.Errorf("%s written: %v, want %v", name, err == nil, want)
				}
			}
		})
	}
}

// TestGenVets vets gen.go, which its build tag keeps out of every build
// and test: a generator that no longer compiles is found here, not an hour
// into regenerating a model.
func TestGenVets(t *testing.T) {
	out, err := exec.Command("go", "vet", "gen.go").CombinedOutput()
	if err != nil {
		t.Fatalf("go vet gen.go: %v\n%s", err, out)
	}
}
