package main

import (
	"github.com/spf13/cobra"

	"rlvr/bench"
	"rlvr/engine/model"
	"rlvr/format/llama2c"
)

func benchSampleCmd() *cobra.Command {
	var (
		stories   string
		maxTokens int
		reps      int
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "sample",
		Short: "Sampling tokens/s (1, 8, 64 streams) and the sampler–learner logprob gap",
		Long: `sample generates from a one-token prompt at temperature 1 with the KV-cache
sampler, all streams of a row in one batch, on llama2.c's stories260K and on a
randomly initialized 4-layer d_model-256 Llama, and reports tokens/s and the
largest difference between the sampler's logprobs and the learner's on the
same sequences. Compare single-stream with llama2.c's run.c on the same
machine: ./run stories260K.bin -z tok512.bin -t 1.0 -n 256.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			c.file("stories", stories)
			c.intIn("max-tokens", maxTokens, 1, 1<<14)
			c.intIn("reps", reps, 1, 1<<10)
			if err := c.err(); err != nil {
				return err
			}
			rep := &bench.SampleReport{}
			streams := []int{1, 8, 64}
			sm, err := llama2c.LoadModel(stories)
			if err != nil {
				return err
			}
			if err := bench.Sample(cmd.Context(), "stories260K", sm, llama2c.BOS, streams, maxTokens, reps, rep); err != nil {
				return err
			}
			cfg := model.BenchConfig()
			cfg.MaxSeq = maxTokens + 1
			dm, err := model.New(cfg, 1)
			if err != nil {
				return err
			}
			if err := bench.Sample(cmd.Context(), "llama-4L-d256", dm, 0, streams, maxTokens, reps, rep); err != nil {
				return err
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&stories, "stories", "../shared/data/stories260K/stories260K.bin", "llama2.c stories260K checkpoint")
	f.IntVar(&maxTokens, "max-tokens", 256, "tokens generated per stream")
	f.IntVar(&reps, "reps", 3, "runs per measurement (the best is reported)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
