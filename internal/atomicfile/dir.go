package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// StageDir makes a new, empty directory beside dir, under a name no other
// process shares, to write dir's contents into before PublishDir moves it
// into place. Two processes staging the same dir never touch each
// other's files. A process killed while staging leaves its directory,
// named "." + base(dir) + ".tmp-*", behind.
func StageDir(dir string) (string, error) {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return "", err
	}
	// MkdirTemp makes it private; the published directory is not.
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}

// maxPublishTries bounds how often PublishDir replaces a directory that
// other processes keep publishing anew.
const maxPublishTries = 4

// PublishDir moves the complete directory staged (from StageDir) to dir
// by a rename, so that readers of dir see nothing or all of it. An empty
// dir is replaced. When dir exists with contents (another process
// published it first, or it was there before), existing decides: keep
// discards staged and leaves dir (PublishDir then reports kept); not
// keep replaces dir; an error is returned as it is. A nil existing
// replaces dir. A kept staged is removed; after an error it is left to
// the caller, to remove or to publish again.
func PublishDir(staged, dir string, existing func(dir string) (keep bool, err error)) (kept bool, err error) {
	defer func() {
		if kept {
			os.RemoveAll(staged)
		}
	}()
	dir = filepath.Clean(dir)
	for range maxPublishTries {
		err := rename(staged, dir)
		if err == nil {
			syncDir(filepath.Dir(dir))
			return false, nil
		}
		if !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return false, err
		}
		if existing != nil {
			keep, err := existing(dir)
			if err != nil || keep {
				return keep, err
			}
		}
		if err := removeDir(dir); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("atomicfile: %s was published anew by other processes %d times while this one replaced it", dir, maxPublishTries)
}

// removeDir removes dir by first renaming it aside, so that no reader
// ever sees it half removed. A dir another process removed already is no
// error.
func removeDir(dir string) error {
	aside, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".old-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(aside)
	if err := rename(dir, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// rename is rename(2), which replaces an empty directory in one step
// where os.Rename refuses any existing one.
func rename(from, to string) error {
	if err := syscall.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// syncDir makes a rename in dir durable, as far as the system allows.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// SameTree reports whether directories a and b hold the same regular
// files, by relative path, with the same bytes; any other kind of file in
// either makes them differ.
func SameTree(a, b string) (bool, error) {
	fa, err := treeFiles(a)
	if err != nil {
		return false, err
	}
	fb, err := treeFiles(b)
	if err != nil {
		return false, err
	}
	if len(fa) != len(fb) {
		return false, nil
	}
	for rel, size := range fa {
		if s, ok := fb[rel]; !ok || s != size || size < 0 {
			return false, nil
		}
	}
	for rel := range fa {
		same, err := sameFile(filepath.Join(a, rel), filepath.Join(b, rel))
		if err != nil || !same {
			return false, err
		}
	}
	return true, nil
}

// treeFiles maps the relative path of every regular file below root to
// its size; a file of another kind (a link, a device) is -1.
func treeFiles(root string) (map[string]int64, error) {
	files := map[string]int64{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files[rel] = -1
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			files[rel] = info.Size()
		}
		return nil
	})
	return files, err
}

// sameFile compares two regular files' bytes.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	bufA, bufB := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		if !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		endB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		switch {
		case errA != nil && !endA:
			return false, errA
		case errB != nil && !endB:
			return false, errB
		case endA || endB:
			return endA && endB, nil
		}
	}
}
