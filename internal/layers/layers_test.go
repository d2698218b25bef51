package layers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// layers are rlvr's layers from the bottom, as doc.go lists them. A
// pattern is a package path relative to the module, or a directory
// followed by "/..." for it and every package below it.
var layers = []struct {
	name     string
	packages []string
}{
	{"engine", []string{"engine/..."}},
	{"helpers", []string{"internal/..."}},
	{"formats", []string{"format/...", "checkpoint/..."}},
	{"shared types", []string{"sample", "backend", "api/...", "rundir"}},
	{"backends", []string{"backend/local", "backend/remote", "client/openai"}},
	{"servers", []string{"serve/..."}},
	{"tasks and verifiers", []string{"task/...", "verify", "worldmodel"}},
	{"evaluation and experts", []string{"eval", "expert/..."}},
	{"methods", []string{"rollout", "method/..."}},
	{"train", []string{"train"}},
	{"reports", []string{"report"}},
	{"commands", []string{"cmd/...", "bench", "scripts/...", "configs"}},
}

// engineFree are the packages that depend on no engine package, directly
// or not.
var engineFree = []string{"sample", "backend", "api/...", "rundir", "rollout", "client/openai", "task/...", "verify", "report"}

// match reports whether the module-relative path p matches one of the
// patterns.
func match(p string, patterns []string) bool {
	for _, pat := range patterns {
		if dir, ok := strings.CutSuffix(pat, "/..."); ok && (p == dir || strings.HasPrefix(p, dir+"/")) || p == pat {
			return true
		}
	}
	return false
}

// layerOf returns the index of p's layer, or -1.
func layerOf(p string) int {
	for i, l := range layers {
		if match(p, l.packages) {
			return i
		}
	}
	return -1
}

// pkg is what go list says of one package: its path relative to the
// module, its own imports and all its dependencies within the module.
type pkg struct {
	path          string
	imports, deps []string
}

// modulePackages lists the module's packages with go list.
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	mod, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	path, root, _ := strings.Cut(strings.TrimSpace(string(mod)), " ")
	prefix := path + "/"
	statSources(t, root)
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", prefix+"...")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	within := func(paths []string) []string {
		var rel []string
		for _, p := range paths {
			if r, ok := strings.CutPrefix(p, prefix); ok {
				rel = append(rel, r)
			}
		}
		return rel
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			ImportPath    string
			Imports, Deps []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, pkg{strings.TrimPrefix(p.ImportPath, prefix), within(p.Imports), within(p.Deps)})
	}
	return pkgs
}

// statSources looks at every directory and Go file under root, for go
// test's cache: it keys a test's result on the files the test opened or
// looked at, and sees nothing of what go list reads.
func statSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "third_party"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(p, ".go"):
			_, err = os.Stat(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayers(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	deps := map[string][]string{}
	for _, p := range pkgs {
		deps[p.path] = p.deps
	}
	isEngine := func(p string) bool { return match(p, []string{"engine/..."}) }
	for _, p := range pkgs {
		lp := layerOf(p.path)
		if lp < 0 {
			t.Errorf("%s is in no layer: add it to the table here and to the list in doc.go", p.path)
			continue
		}
		for _, imp := range p.imports {
			if li := layerOf(imp); li > lp {
				t.Errorf("%s (layer %q) imports %s of the higher layer %q", p.path, layers[lp].name, imp, layers[li].name)
			}
		}
		if !match(p.path, engineFree) {
			continue
		}
		for _, imp := range p.imports {
			if isEngine(imp) {
				t.Errorf("%s imports %s: it must depend on no engine package", p.path, imp)
				continue
			}
			for _, d := range deps[imp] {
				if isEngine(d) {
					t.Errorf("%s imports %s, which depends on %s: %s must depend on no engine package", p.path, imp, d, p.path)
					break
				}
			}
		}
	}
}

// TestDocListsTheLayers checks that doc.go lists the layers of the table,
// in its order and with its packages, so that the two tell the same story.
func TestDocListsTheLayers(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	head := func(i int) string { return fmt.Sprintf("%d. %s (", i+1, layers[i].name) }
	pos := 0
	for i, l := range layers {
		k := strings.Index(text[pos:], head(i))
		if k < 0 {
			t.Fatalf("doc.go does not list %q as layer %d after the layers below it", l.name, i+1)
		}
		start, end := pos+k+len(head(i)), len(text)
		if i+1 < len(layers) {
			if n := strings.Index(text[start:], head(i+1)); n >= 0 {
				end = start + n
			}
		}
		for _, p := range l.packages {
			if !strings.Contains(text[start:end], p) {
				t.Errorf("doc.go does not name %s in layer %q", p, l.name)
			}
		}
		pos = start
	}
}
