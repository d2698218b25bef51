package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/bench"
	"rlvr/engine/model"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure rlvr's engine on this machine",
	}
	cmd.AddCommand(benchEngineCmd(), benchSampleCmd(), benchServeCmd())
	return cmd
}

func benchEngineCmd() *cobra.Command {
	o := bench.EngineCommand{Model: model.BenchConfig()}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "GEMM GFLOP/s, training tokens/s, share of peak, per-op time and memory",
		Long:  benchEngineLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := o.Run()
			if err != nil {
				return err
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	bindBenchEngineFlags(cmd.Flags(), &o, &asJSON)
	return cmd
}

// benchEngineLong is rlvr bench engine's help.
const benchEngineLong = `engine times GEMM at 512³–2048³ and a forward+backward+AdamW step of a
Llama-style model (default: 4 layers, d_model 256, 4 heads, SwiGLU 688,
vocab 512, 8 sequences of 128 tokens — the shape
../shared/tools/torch_llama_bench.py measures in PyTorch), splits the
step's time by op, and reports the memory the step holds and the
process's peak resident memory. Every table names the processor, its
bf16 features and the kernel that ran the products.

bf16 on the CPU's matrix units (AVX512-BF16 or AMX, through oneDNN, which
scripts/setup.sh installs), against float32:

  rlvr bench engine --precision fp32 && rlvr bench engine --precision bf16

Qwen2.5-0.5B's shape at 1024 tokens, recomputing activations:

  rlvr bench engine --layers 24 --dim 896 --heads 14 --kv-heads 2 \
    --ffn 4864 --vocab 151936 --tied --qkv-bias --seq 1024 --batch 1 \
    --reps 1 --gemm=false --recompute`

// bindBenchEngineFlags binds rlvr bench engine's flags to o, and --json
// to asJSON; the shape's flags default to o.Model's.
func bindBenchEngineFlags(f *pflag.FlagSet, o *bench.EngineCommand, asJSON *bool) {
	cfg := &o.Model
	f.IntVar(&cfg.Layers, "layers", cfg.Layers, "decoder layers")
	f.IntVar(&cfg.Dim, "dim", cfg.Dim, "model width")
	f.IntVar(&cfg.Heads, "heads", cfg.Heads, "attention heads")
	f.IntVar(&cfg.KVHeads, "kv-heads", cfg.KVHeads, "key/value heads")
	f.IntVar(&cfg.Hidden, "ffn", cfg.Hidden, "SwiGLU hidden width")
	f.IntVar(&cfg.Vocab, "vocab", cfg.Vocab, "vocabulary size")
	f.IntVar(&cfg.MaxSeq, "seq", cfg.MaxSeq, "tokens per sequence")
	f.BoolVar(&cfg.TiedEmbeddings, "tied", false, "tie the output head to the embedding")
	f.BoolVar(&cfg.AttentionBias, "qkv-bias", false, "biases on the q, k and v projections (Qwen2)")
	f.IntVar(&o.Sequences, "batch", 8, "sequences per step")
	f.IntVar(&o.Reps, "reps", 10, "timed steps")
	f.BoolVar(&o.Recompute, "recompute", false, "recompute each block's activations in the backward instead of keeping them")
	f.BoolVar(&o.GEMM, "gemm", true, "time GEMM at 512³–2048³ first")
	f.StringVar(&o.Precision, "precision", "fp32", "fp32, or bf16: bf16 inputs to the matrix products, float32 accumulation (RLVR_BF16_KERNEL=auto|onednn|sbgemm|emulate|go chooses the kernel)")
	f.Float64Var(&o.Peak, "peak", 0, "machine peak in GFLOP/s (0: estimate from /proc/cpuinfo)")
	f.BoolVar(asJSON, "json", false, "print JSON")
}

// printReport writes a benchmark report as a table, or as JSON.
func printReport(cmd *cobra.Command, rep interface{ Table() string }, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	_, err := fmt.Fprint(cmd.OutOrStdout(), rep.Table())
	return err
}
