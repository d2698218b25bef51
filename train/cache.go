package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"rlvr/internal/atomicfile"
	"rlvr/internal/lockfile"
	"rlvr/worldmodel"
)

// CacheDir is where rlvr keeps the models it trains for the built-in
// world: $RLVR_CACHE, else rlvr/ in the user's cache directory (e.g.
// ~/.cache/rlvr).
func CacheDir() string {
	if d := os.Getenv("RLVR_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rlvr")
	}
	return filepath.Join(os.TempDir(), "rlvr-cache")
}

// PretrainedPath is the cache directory of the model cfg trains:
// pretrain-<ConfigHash(cfg)> in CacheDir, so a changed knob trains anew.
func PretrainedPath(cfg PretrainConfig) string {
	return filepath.Join(CacheDir(), "pretrain-"+ConfigHash(cfg))
}

// ConfigHash is a short hash of everything in cfg that shapes the trained
// weights (not Out, nor EvalProblems): twelve hexadecimal digits.
func ConfigHash(cfg PretrainConfig) string {
	cfg.Out, cfg.EvalProblems = "", 0
	b, _ := json.Marshal(cfg) // plain data: it always marshals
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// ResultFile holds a cached run's PretrainResult beside its checkpoint.
const ResultFile = "pretrain.json"

// WriteResult writes res into dir as ResultFile, atomically.
func WriteResult(dir string, res *PretrainResult) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ResultFile), b); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// EnsurePretrained returns the directory of cfg's model, caching it first
// when it is not cached yet: the model embedded in the binary (package
// worldmodel) when cfg is a configuration one was trained from, otherwise
// a model trained now, with progress. The result is the training run's, or
// the cached or embedded one's (then Cached is set).
func EnsurePretrained(ctx context.Context, cfg PretrainConfig, progress func(Progress)) (string, *PretrainResult, error) {
	return EnsurePretrainedWith(ctx, cfg, PretrainOptions{Progress: progress})
}

// EnsurePretrainedWith is EnsurePretrained with options: a pretraining it
// starts can be stopped (opts.State is ignored: a stopped run keeps its
// state beside the cache directory, and the next call continues it).
func EnsurePretrainedWith(ctx context.Context, cfg PretrainConfig, opts PretrainOptions) (string, *PretrainResult, error) {
	embedded, _ := worldmodel.Lookup(ConfigHash(cfg))
	return ensurePretrained(ctx, cfg, opts, embedded)
}

// ensurePretrained is EnsurePretrained with the embedded model of cfg's
// configuration as an argument, nil when there is none.
func ensurePretrained(ctx context.Context, cfg PretrainConfig, opts PretrainOptions, embedded fs.FS) (string, *PretrainResult, error) {
	dir := PretrainedPath(cfg)
	if res, err := readResult(dir); err == nil {
		return dir, res, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", nil, err
	}
	var res *PretrainResult
	if embedded != nil {
		// Installed in a directory of this process's own: processes
		// installing at once each publish a whole copy, and the first
		// one's stays.
		tmp, err := atomicfile.StageDir(dir)
		if err != nil {
			return "", nil, err
		}
		defer os.RemoveAll(tmp)
		if err := worldmodel.Install(embedded, tmp); err != nil {
			return "", nil, err
		}
		if res, err = readResult(tmp); err != nil {
			return "", nil, err
		}
		res.Shipped = true
		return dir, res, commit(tmp, dir)
	}
	// A pretraining of its own, in a directory beside the cache entry that
	// outlives a stop, so the next call continues it. One process at a
	// time pretrains there; another waits, then finds the entry made.
	lock, err := lockfile.Wait(ctx, dir+".lock", time.Second, func(held *lockfile.HeldError) {
		if opts.Log != nil {
			opts.Log("waiting for the pretraining of %s that another process runs: %v", dir, held)
		}
	})
	if err != nil {
		return "", nil, fmt.Errorf("train: pretraining %s: %w", dir, err)
	}
	defer lock.Release()
	if res, err := readResult(dir); err == nil {
		return dir, res, nil
	}
	partial := dir + ".partial"
	if err := os.MkdirAll(partial, 0o755); err != nil {
		return "", nil, err
	}
	cfg.Out, opts.State = partial, partial
	res, err = PretrainWith(ctx, cfg, opts)
	if err != nil {
		return "", nil, err
	}
	// The result file marks the directory complete, so it is written last.
	if err := WriteResult(partial, res); err != nil {
		return "", nil, err
	}
	return dir, res, commit(partial, dir)
}

// commit moves a finished model directory to its cache entry, unless
// another process made the entry meanwhile; an entry without its result
// file is incomplete, and replaced.
func commit(tmp, dir string) error {
	_, err := atomicfile.PublishDir(tmp, dir, func(dir string) (bool, error) {
		_, err := readResult(dir)
		return err == nil, nil
	})
	return err
}

// readResult reads the ResultFile in dir, marked Cached.
func readResult(dir string) (*PretrainResult, error) {
	path := filepath.Join(dir, ResultFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res PretrainResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	res.Cached = true
	return &res, nil
}
