package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/bench"
)

func benchSampleCmd() *cobra.Command {
	o := bench.SampleCommand{Models: localModels, Precision: "fp32"}
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "sample",
		Short:   "Decoding tokens/s, GFLOP/s and share of peak by stream count, and the sampler–learner logprob gap",
		Long:    benchSampleLong,
		Example: benchSampleExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Given = cmd.Flags().Changed
			rep, err := o.Run(cmd.Context())
			if err != nil {
				return err
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	bindBenchSampleFlags(cmd.Flags(), &o, &asJSON)
	pathFlags(cmd, "stories", "run-c")
	return cmd
}

// benchSampleLong is rlvr bench sample's help.
const benchSampleLong = `sample generates from a one-token prompt at temperature 1 with the KV-cache
sampler, all streams of a row in one batch, and reports tokens/s, the decoding
FLOP/s (model.DecodeFLOPs: the matrix products, head included, and attention
over the cache) and their share of the machine's peak, where the time goes by
op, and the largest difference between the sampler's logprobs and the
learner's on the same sequences. Models: llama2.c's stories260K (real
weights), and with random weights the built-in world's d128 model, the engine
benchmark's 4-layer d256 Llama and a 2-layer slice of Qwen2.5-0.5B at full
width (d 896, 14 heads, 2 KV heads, SwiGLU 4864, vocabulary 151,936).
--model measures a real model (a Hugging Face directory or a .gguf) from its
BOS token, every stream to --max-tokens. --precision bf16 samples every model
with its weights packed in bf16 (the learner pass for the logprob gap runs
in bf16 too).

--run-c times llama2.c's run.c (built from its repository: gcc -O3 -o run
run.c -lm) on stories260K in the same run, and reports rlvr's ratio to it.
bench/torch_decode_bench.py is the PyTorch reference on the same shapes.`

// benchSampleExample is rlvr bench sample's examples.
const benchSampleExample = `  rlvr bench sample
  rlvr bench sample --models llama-4L-d256 --streams 64 --max-tokens 256
  rlvr bench sample --models stories260K --run-c ../llama2.c/run
  rlvr bench sample --model ~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1.gguf --streams 1,8,64`

// bindBenchSampleFlags binds rlvr bench sample's flags to o, and --json
// to asJSON.
func bindBenchSampleFlags(f *pflag.FlagSet, o *bench.SampleCommand, asJSON *bool) {
	names := bench.SampleModels()
	f.StringVar(&o.Stories, "stories", "../shared/data/stories260K/stories260K.bin", "llama2.c stories260K checkpoint (tok512.bin beside it)")
	f.StringSliceVar(&o.Paths, "model", nil, "a model with its weights (Hugging Face directory or .gguf), measured alone unless --models is given too; no stop token ends its streams")
	f.StringSliceVar(&o.Names, "models", names, "models to measure: "+strings.Join(names, ", "))
	f.IntSliceVar(&o.Streams, "streams", []int{1, 8, 64, 128}, "stream counts, each one batch")
	f.IntVar(&o.MaxTokens, "max-tokens", 128, "tokens generated per stream (stories260K: at most its context)")
	f.IntVar(&o.Reps, "reps", 3, "runs per measurement (the best is reported)")
	f.StringVar(&o.RunC, "run-c", "", "llama2.c's run binary, timed on stories260K in the same run")
	f.Float64Var(&o.Peak, "peak", 0, "machine peak in GFLOP/s (0: measured)")
	f.StringVar(&o.Precision, "precision", "fp32", "fp32; bf16: weights packed in bf16, bf16 inputs to the matrix products, float32 accumulation (RLVR_BF16_KERNEL chooses the kernel); int8: weights packed in int8 with a scale per output feature, float32 inputs and accumulation")
	f.BoolVar(asJSON, "json", false, "print JSON")
}
