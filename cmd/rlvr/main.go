// Command rlvr post-trains language models with reinforcement learning from
// verifiable rewards. Run `rlvr help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync/atomic"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"rlvr/checkpoint"
	"rlvr/engine/parallel"
	"rlvr/internal/flagcheck"
	// Every guidance part and its paper's preset, for train and sft.
	_ "rlvr/method/part/all"
	"rlvr/task/world"
	"rlvr/train"
	"rlvr/worldmodel"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		if graceful.Load() {
			// A training command finishes its step and checkpoints; a
			// second signal quits at once.
			fmt.Fprintln(os.Stderr, "\nrlvr: finishing the current step and writing a checkpoint (interrupt again to quit now)")
			close(stopTraining)
			<-sig
		}
		cancel()
	}()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rlvr:", err)
		os.Exit(1)
	}
}

// graceful is set by the commands that stop at a step boundary on SIGINT
// or SIGTERM (closing stopTraining) instead of being cancelled.
var (
	graceful     atomic.Bool
	stopTraining = make(chan struct{})
)

func rootCmd() *cobra.Command {
	var (
		threads    int
		cpuProfile string
		profile    *os.File
	)
	root := &cobra.Command{
		Use:           "rlvr",
		Short:         "Post-train language models with reinforcement learning from verifiable rewards",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := emptyPaths(cmd.Flags()); err != nil {
				return err
			}
			var c flagcheck.Check
			c.IntIn("threads", threads, 0, flagcheck.MaxThreads)
			if err := c.Err(); err != nil {
				return err
			}
			parallel.SetThreads(threads)
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				profile = f
			}
			return nil
		},
		PersistentPostRunE: func(cmd *cobra.Command, args []string) error {
			if profile == nil {
				return nil
			}
			pprof.StopCPUProfile()
			return profile.Close()
		},
	}
	root.PersistentFlags().IntVar(&threads, "threads", 0, "goroutines the engine splits work across (0: one per CPU)")
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof reads it)")
	if err := root.MarkPersistentFlagFilename("cpuprofile"); err != nil {
		panic(err) // defined above
	}
	root.AddCommand(pretrainCmd(), sftCmd(), importCmd(), trainCmd(), generateCmd(), serveCmd(), evalCmd(), probeCmd(), reportCmd(), benchCmd(), initModelCmd(), expertsCmd())
	return root
}

// defaultModel is the built-in world's model that rlvr pretrain caches with
// its default settings.
func defaultModel() string { return worldModelPath(1) }

// worldModelPath is the cache directory of a world version's model ("" for
// no such version).
func worldModelPath(version int) string {
	cfg, err := train.WorldPretrain(version)
	if err != nil {
		return ""
	}
	return train.PretrainedPath(cfg)
}

// localModels are the models the commands open by path: checkpoints on
// disk, and the world's models, which a version whose model comes with
// rlvr installs into the cache on first use.
var localModels = checkpoint.Models{World: worldModelPath, Versions: world.Versions, Install: installWorldModel}

// installWorldModel makes world version v's model available in the
// cache: a version whose model comes with rlvr installs at once; another
// must be pretrained first, which this says how to do rather than start
// a long run unasked.
func installWorldModel(ctx context.Context, v int) error {
	if cfg, err := train.WorldPretrain(v); err == nil {
		if _, embedded := worldmodel.Lookup(train.ConfigHash(cfg)); !embedded {
			return fmt.Errorf("world version %d's model is not pretrained yet: run `rlvr pretrain --world %d` (about %d minutes on two cores)", v, v, train.PretrainMinutes(cfg))
		}
	}
	_, err := train.WorldModel(ctx, v, nil)
	return err
}

// newBar is the progress bar of a training command: on stderr, with the
// step count and an ETA, redrawn at most ten times a second.
func newBar(cmd *cobra.Command, steps int) *progressbar.ProgressBar {
	return progressbar.NewOptions(steps, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000), progressbar.OptionClearOnFinish())
}
