package train

import (
	"context"
	"fmt"
	"os"
	"rlvr/worldmodel"

	"rlvr/task/world"
)

// WorldPretrain is the pretraining of a world version's model:
// DefaultPretrain (version 1) on that version's corpus, for version 2
// four times as long (Version2Steps).
func WorldPretrain(version int) (PretrainConfig, error) {
	cfg := DefaultPretrain()
	c, ok := world.CorpusVersion(version, cfg.Corpus.Levels)
	if !ok {
		return PretrainConfig{}, fmt.Errorf("train: no world version %d (%v)", version, world.Versions)
	}
	cfg.Corpus = c
	if version == 2 {
		cfg.Steps, cfg.Schedule.TotalSteps = Version2Steps, Version2Steps
	}
	return cfg, nil
}

// Version2Steps are the pretraining steps of world version 2's model:
// its context pays only as far as it writes its corpus's policy without
// arithmetic errors of its own, and 4,000 steps leave a quarter of the
// steps the corpus never gets wrong wrong (docs/world.md).
const Version2Steps = 16000

// WorldModel returns the directory of a world version's model, the
// starting point of every run that names no model, making it available in
// the cache first when it is not there yet (see EnsurePretrained): from
// the binary when it comes with rlvr (package worldmodel), else
// pretrained on first use, which logf (nil: nothing) is told before it
// starts.
func WorldModel(ctx context.Context, version int, logf func(string, ...any)) (string, error) {
	cfg, err := WorldPretrain(version)
	if err != nil {
		return "", err
	}
	if dir := PretrainedPath(cfg); exists(dir) {
		return dir, nil
	}
	if _, shipped := worldmodel.Lookup(ConfigHash(cfg)); !shipped && logf != nil {
		logf("pretraining world version %d's model first (about %d minutes on two cores; `rlvr pretrain --world %d` does it alone)", version, PretrainMinutes(cfg), version)
	}
	dir, _, err := EnsurePretrainedWith(ctx, cfg, PretrainOptions{Log: logf})
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

// PretrainMinutes is about how long cfg pretrains on two quiet cores: the
// world's model runs about 250 steps a minute.
func PretrainMinutes(cfg PretrainConfig) int { return max(1, (cfg.Steps+125)/250) }
