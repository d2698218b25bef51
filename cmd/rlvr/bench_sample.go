package main

import (
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"rlvr/bench"
	"rlvr/engine/model"
	"rlvr/format/llama2c"
	"rlvr/internal/flagcheck"
)

func benchSampleCmd() *cobra.Command {
	var (
		stories, runC string
		models, paths []string
		streams       []int
		maxTokens     int
		reps          int
		peak          float64
		asJSON        bool
	)
	names := []string{"stories260K"}
	for _, s := range bench.DecodeShapes(1) {
		names = append(names, s.Name)
	}
	cmd := &cobra.Command{
		Use:   "sample",
		Short: "Decoding tokens/s, GFLOP/s and share of peak by stream count, and the sampler–learner logprob gap",
		Long: `sample generates from a one-token prompt at temperature 1 with the KV-cache
sampler, all streams of a row in one batch, and reports tokens/s, the decoding
FLOP/s (model.DecodeFLOPs: the matrix products, head included, and attention
over the cache) and their share of the machine's peak, where the time goes by
op, and the largest difference between the sampler's logprobs and the
learner's on the same sequences. Models: llama2.c's stories260K (real
weights), and with random weights the built-in world's d128 model, the engine
benchmark's 4-layer d256 Llama and a 2-layer slice of Qwen2.5-0.5B at full
width (d 896, 14 heads, 2 KV heads, SwiGLU 4864, vocabulary 151,936).
--model measures a real model (a Hugging Face directory or a .gguf, computed
in float32) from its BOS token, every stream to --max-tokens.

--run-c times llama2.c's run.c (built from its repository: gcc -O3 -o run
run.c -lm) on stories260K in the same run, and reports rlvr's ratio to it.
bench/torch_decode_bench.py is the PyTorch reference on the same shapes.`,
		Example: `  rlvr bench sample
  rlvr bench sample --models llama-4L-d256 --streams 64 --max-tokens 256
  rlvr bench sample --models stories260K --run-c ../llama2.c/run
  rlvr bench sample --model ~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1.gguf --streams 1,8,64`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagcheck.Check
			c.IntIn("max-tokens", maxTokens, 1, 1<<14)
			c.IntIn("reps", reps, 1, 1<<10)
			c.FloatIn("peak", peak, 0, math.Inf(1), false)
			for _, n := range streams {
				c.IntIn("streams", n, 1, 1<<12)
			}
			for _, p := range paths {
				c.Error("model", localModels.Check(p))
			}
			if len(paths) > 0 && !cmd.Flags().Changed("models") {
				models = nil // only the models named by path
			}
			for _, m := range models {
				if !slices.Contains(names, m) {
					c.Add("models", "%q is not one of %s", m, strings.Join(names, ", "))
				}
			}
			storiesModel := slices.Contains(models, "stories260K")
			if storiesModel {
				c.File("stories", stories)
			}
			if runC != "" {
				c.File("run-c", runC)
				if !storiesModel { // run.c reads the stories checkpoint too
					c.File("stories", stories)
				}
			}
			if err := c.Err(); err != nil {
				return err
			}
			rep := bench.NewSampleReport(bench.MachinePeak(peak))
			if storiesModel {
				rep.StartModel()
				sm, err := llama2c.LoadModel(stories)
				if err != nil {
					return err
				}
				if err := bench.Sample(cmd.Context(), "stories260K", sm, llama2c.BOS, streams, min(maxTokens, sm.Config.MaxSeq-1), reps, rep); err != nil {
					return err
				}
			}
			for _, s := range bench.DecodeShapes(maxTokens + 1) {
				if !slices.Contains(models, s.Name) {
					continue
				}
				rep.StartModel()
				m, err := model.New(s.Config, 1)
				if err != nil {
					return err
				}
				if err := bench.Sample(cmd.Context(), s.Name, m, 0, streams, maxTokens, reps, rep); err != nil {
					return err
				}
			}
			for _, p := range paths {
				rep.StartModel()
				l, err := localModels.Open(p, "")
				if err != nil {
					return err
				}
				// A one-token prompt, as llama.cpp's llama-batched-bench -npp 1
				// gives: the BOS token, or token 0 for a model without one.
				bos, _ := l.Tokenizer.BOS()
				n := min(maxTokens, l.Model.Config.MaxSeq-1)
				if err := bench.Sample(cmd.Context(), l.Name, l.Model, bos, streams, n, reps, rep); err != nil {
					return err
				}
			}
			if runC != "" {
				tok := filepath.Join(filepath.Dir(stories), "tok512.bin")
				v, err := bench.RunC(cmd.Context(), runC, stories, tok, maxTokens+1, reps) // the BOS prompt, then maxTokens
				if err != nil {
					return err
				}
				rep.RunC = v
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&stories, "stories", "../shared/data/stories260K/stories260K.bin", "llama2.c stories260K checkpoint (tok512.bin beside it)")
	f.StringSliceVar(&paths, "model", nil, "a model with its weights (Hugging Face directory or .gguf), measured alone unless --models is given too; no stop token ends its streams")
	f.StringSliceVar(&models, "models", names, "models to measure: "+strings.Join(names, ", "))
	f.IntSliceVar(&streams, "streams", []int{1, 8, 64, 128}, "stream counts, each one batch")
	f.IntVar(&maxTokens, "max-tokens", 128, "tokens generated per stream (stories260K: at most its context)")
	f.IntVar(&reps, "reps", 3, "runs per measurement (the best is reported)")
	f.StringVar(&runC, "run-c", "", "llama2.c's run binary, timed on stories260K in the same run")
	f.Float64Var(&peak, "peak", 0, "machine peak in GFLOP/s (0: measured)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	pathFlags(cmd, "stories", "run-c")
	return cmd
}
