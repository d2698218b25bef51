package train

import (
	"context"
	"fmt"
	"os"

	"rlvr/task/world"
)

// WorldPretrain is the pretraining of a world version's model:
// DefaultPretrain (version 1) on that version's corpus.
func WorldPretrain(version int) (PretrainConfig, error) {
	cfg := DefaultPretrain()
	c, ok := world.CorpusVersion(version, cfg.Corpus.Levels)
	if !ok {
		return PretrainConfig{}, fmt.Errorf("train: no world version %d (%v)", version, world.Versions)
	}
	cfg.Corpus = c
	return cfg, nil
}

// WorldModel returns the directory of a world version's model, the
// starting point of every run that names no model, making it available in
// the cache first when it is not there yet (see EnsurePretrained): version
// 1's comes with rlvr, version 2's is pretrained on first use, which logf
// (nil: nothing) is told before it starts.
func WorldModel(ctx context.Context, version int, logf func(string, ...any)) (string, error) {
	cfg, err := WorldPretrain(version)
	if err != nil {
		return "", err
	}
	if dir := PretrainedPath(cfg); exists(dir) {
		return dir, nil
	}
	if version != 1 && logf != nil {
		logf("pretraining world version %d's model first (about 15 minutes on two cores; `rlvr pretrain --world %d` does it alone)", version, version)
	}
	dir, _, err := EnsurePretrained(ctx, cfg, nil)
	return dir, err
}

// startingModel is the directory of the model a run starts from: the
// config's, or its world version's, made available first.
func startingModel(ctx context.Context, cfg *RLConfig, logf func(string, ...any)) (string, error) {
	if cfg.Model != "" {
		return cfg.Model, nil
	}
	return WorldModel(ctx, cfg.Data.World, logf)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
