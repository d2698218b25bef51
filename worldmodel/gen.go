//go:build ignore

// gen regenerates a world version's embedded model: it pretrains
// train.WorldPretrain(version) on a fixed number of threads, copies the
// model directory's files into vN, and rewrites its SHA256SUMS and
// CONFIG_HASH. `go generate ./worldmodel` runs it for version 1.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"path/filepath"

	"rlvr/engine/gemm"
	"rlvr/engine/parallel"
	"rlvr/internal/atomicfile"
	"rlvr/train"
	"rlvr/worldmodel"
)

func main() {
	threads := flag.Int("threads", 2, "threads the engine splits work across (the weights are deterministic for a thread count)")
	version := flag.Int("world", 1, "the world version whose model to pretrain")
	out := flag.String("out", ".", "directory of package worldmodel")
	flag.Parse()
	log.SetFlags(0)
	if err := run(*threads, *version, filepath.Join(*out, worldmodel.Dir(*version))); err != nil {
		log.Fatal(err)
	}
}

func run(threads, version int, out string) error {
	parallel.SetThreads(threads)
	cfg, err := train.WorldPretrain(version)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "rlvr-worldmodel-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cfg.Out = tmp
	log.Printf("pretraining world version %d's model, %d steps on %d threads (GEMM: %s)", version, cfg.Steps, threads, gemm.Backend())
	res, err := train.Pretrain(context.Background(), cfg, func(p train.Progress) {
		if p.Step%250 == 0 || p.Step == p.Steps {
			log.Printf("step %d/%d: loss %.4f", p.Step, p.Steps, p.Loss)
		}
	})
	if err != nil {
		return err
	}
	if err := train.WriteResult(tmp, res); err != nil {
		return err
	}
	// The version's directory appears only now: an empty one would stop
	// the package from building (go:embed refuses it) during the hour
	// of pretraining.
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range worldmodel.Files {
		data, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(filepath.Join(out, name), data); err != nil {
			return err
		}
	}
	sums, err := worldmodel.Sums(os.DirFS(out))
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(out, worldmodel.SumsFile), sums); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(out, worldmodel.HashFile), []byte(train.ConfigHash(cfg)+"\n")); err != nil {
		return err
	}
	log.Printf("wrote %s: %s", out, res.Table())
	return nil
}
