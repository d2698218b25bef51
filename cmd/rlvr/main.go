// Command rlvr post-trains language models with reinforcement learning from
// verifiable rewards. Run `rlvr help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"rlvr/engine/parallel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rlvr:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	var threads int
	root := &cobra.Command{
		Use:           "rlvr",
		Short:         "Post-train language models with reinforcement learning from verifiable rewards",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			parallel.SetThreads(threads)
		},
	}
	root.PersistentFlags().IntVar(&threads, "threads", 0, "goroutines the engine splits work across (0: one per CPU)")
	root.AddCommand(pretrainCmd(), generateCmd(), serveCmd(), evalCmd(), benchCmd())
	return root
}
