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

	"rlvr/internal/atomicfile"
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

// PretrainedPath is the cache directory of the model cfg trains: a hash of
// everything that shapes the weights, so a changed knob trains anew.
func PretrainedPath(cfg PretrainConfig) string {
	cfg.Out, cfg.EvalProblems = "", 0
	b, _ := json.Marshal(cfg)
	h := sha256.Sum256(b)
	return filepath.Join(CacheDir(), "pretrain-"+hex.EncodeToString(h[:6]))
}

// ResultFile holds a cached run's PretrainResult beside its checkpoint.
const ResultFile = "pretrain.json"

// EnsurePretrained returns the directory of cfg's model, training it (with
// progress) and caching it first when it is not cached yet. The result is
// the training run's, or the cached one's.
func EnsurePretrained(ctx context.Context, cfg PretrainConfig, progress func(Progress)) (string, *PretrainResult, error) {
	dir := PretrainedPath(cfg)
	if b, err := os.ReadFile(filepath.Join(dir, ResultFile)); err == nil {
		var res PretrainResult
		if err := json.Unmarshal(b, &res); err != nil {
			return "", nil, fmt.Errorf("train: %s: %w", filepath.Join(dir, ResultFile), err)
		}
		res.Cached = true
		return dir, &res, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", nil, err
	}
	tmp, err := os.MkdirTemp(CacheDir(), ".pretrain-*")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	cfg.Out = tmp
	res, err := Pretrain(ctx, cfg, progress)
	if err != nil {
		return "", nil, err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", nil, err
	}
	// The result file marks the directory complete, so it is written last.
	if err := atomicfile.WriteBytes(filepath.Join(tmp, ResultFile), b); err != nil {
		return "", nil, err
	}
	os.RemoveAll(dir) // an interrupted earlier run may have left a partial copy
	if err := os.Rename(tmp, dir); err != nil {
		return "", nil, err
	}
	return dir, res, nil
}
