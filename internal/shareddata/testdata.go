// Package testdata locates the project's shared test data for tests.
//
// The data is not part of the repository: it lives in a folder named
// shared/data next to the repository (../shared/data from the module root),
// and tests read it in place. When it is missing, a test is skipped, or fails
// when the environment variable CI is "true".
package shareddata

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Path returns the absolute path of ../shared/data/rel relative to the
// module root, the nearest directory above the working directory that
// holds go.mod. rel uses forward slashes. If the path does not exist, Path
// calls t.Fatal when CI=true and t.Skip otherwise.
func Path(t testing.TB, rel string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("testdata: %v", err)
	}
	p := filepath.Join(filepath.Dir(root), "shared", "data", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdata: %v (CI=true requires the project's shared data folder, ../shared/data next to the repo)", err)
		}
		t.Skipf("testdata: %s is missing: the data comes from the project's shared data folder (../shared/data next to the repo)", p)
	}
	return p
}

// moduleRoot walks up from the working directory to the directory that
// contains go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}
