package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"rlvr/bench"
	"rlvr/engine/gemm"
	"rlvr/internal/flagcheck"
	"rlvr/serve"
)

func benchServeCmd() *cobra.Command {
	var (
		modelPath string
		load      bench.ServeLoad
		maxBatch  int
		rounds    int
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serving latency and throughput under a concurrent load: decoding loop against whole batches",
		Long: `serve serves --model on loopback twice — with the decoding loop that admits
requests into the running batch, and in whole batches (serve --whole-batches)
— and runs the same bounded load against each, back to back: --clients
clients, each sending its next streamed completion when its last one ends,
--requests in all, each at temperature 1 with its own seed and a max_tokens
drawn between --min-tokens and --max-tokens. It reports the time to the
first text and to the end of the stream (median and 95th percentile) and the
completion tokens per second. The draws of a request are the same in both
modes, so both do the same work. With --rounds above 1 the two modes
alternate, so that a change in the machine's load falls on both.`,
		Example: `  rlvr bench serve
  rlvr bench serve --model runs/smollm2 --clients 8 --requests 32 --max-tokens 64`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagcheck.Check
			c.IntIn("clients", load.Clients, 1, 1024)
			c.IntIn("requests", load.Requests, 1, 1<<16)
			c.IntIn("min-tokens", load.MinTokens, 1, 1<<14)
			c.IntIn("max-tokens", load.MaxTokens, max(load.MinTokens, 1), 1<<14)
			c.IntIn("max-batch", maxBatch, 1, serve.MaxBatchLimit)
			c.IntIn("rounds", rounds, 1, 100)
			if err := c.Err(); err != nil {
				return err
			}
			l, err := localModels.Open(modelPath, "")
			if err != nil {
				return err
			}
			if l.Chat != nil {
				load.Prompts = []string{"<|im_start|>user\nWhat is 17 + 25?<|im_end|>\n<|im_start|>assistant\n",
					"<|im_start|>user\nWrite a short story about a fox.<|im_end|>\n<|im_start|>assistant\n"}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "model %s, %s\n%d clients, %d requests of %d–%d new tokens, at most %d samples at once\n\n",
				l.Name, gemm.DetectCPU(), load.Clients, load.Requests, load.MinTokens, load.MaxTokens, maxBatch)
			fmt.Fprintf(out, "| server | first text p50 | p95 | done p50 | p95 | tokens/s |\n| --- | --- | --- | --- | --- | --- |\n")
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			for range rounds {
				for _, whole := range []bool{true, false} {
					cfg := serve.Config{MaxBatch: maxBatch, WholeBatches: whole, MaxQueue: load.Requests, Logger: quiet}
					r, err := bench.MeasureServe(cmd.Context(), l, cfg, load)
					if err != nil {
						return err
					}
					ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }
					fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %.0f |\n", r.Mode, ms(r.FirstP50), ms(r.FirstP95), ms(r.DoneP50), ms(r.DoneP95), r.TokensPerSec)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.IntVar(&load.Clients, "clients", 16, "concurrent clients")
	f.IntVar(&load.Requests, "requests", 128, "requests in all")
	f.IntVar(&load.MinTokens, "min-tokens", 8, "fewest max_tokens a request asks for")
	f.IntVar(&load.MaxTokens, "max-tokens", 128, "most max_tokens a request asks for")
	f.IntVar(&maxBatch, "max-batch", 64, "samples in flight at most (serve --max-batch)")
	f.IntVar(&rounds, "rounds", 1, "alternations of the two servers")
	load.Prompts = []string{"Q: What is 12 + 30?\nA:", "Q: Tom has 7 apples and eats 3. How many are left?\nA:", "Once upon a time", "Q: 8 * 9 = ?\nA:"}
	load.Seed = 1
	return cmd
}
