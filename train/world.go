package train

import (
	"context"
	"os"
)

// WorldModel returns the directory of the built-in world's model, the
// starting point of every run that names no model, making it available in
// the cache first when it is not there yet (see EnsurePretrained).
func WorldModel(ctx context.Context) (string, error) {
	cfg := DefaultPretrain()
	if dir := PretrainedPath(cfg); exists(dir) {
		return dir, nil
	}
	dir, _, err := EnsurePretrained(ctx, cfg, nil)
	return dir, err
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
