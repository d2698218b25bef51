package main

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"rlvr/bench"
	"rlvr/engine/model"
	"rlvr/internal/flagcheck"
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
	cfg := model.BenchConfig()
	var (
		seqs, reps                     int
		peak                           float64
		asJSON, recompute, gemmSection bool
		precision                      string
	)
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "GEMM GFLOP/s, training tokens/s, share of peak, per-op time and memory",
		Long: `engine times GEMM at 512³–2048³ and a forward+backward+AdamW step of a
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
    --reps 1 --gemm=false --recompute`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagcheck.Check
			for _, f := range []struct {
				flag string
				v    int
				max  int
			}{
				{"layers", cfg.Layers, 256}, {"dim", cfg.Dim, 1 << 14}, {"heads", cfg.Heads, 1 << 10}, {"kv-heads", cfg.KVHeads, 1 << 10},
				{"ffn", cfg.Hidden, 1 << 16}, {"vocab", cfg.Vocab, 1 << 20}, {"seq", cfg.MaxSeq, 1 << 16},
				{"batch", seqs, 1 << 12}, {"reps", reps, 1 << 16},
			} {
				c.IntIn(f.flag, f.v, 1, f.max)
			}
			c.FloatIn("peak", peak, 0, math.Inf(1), false)
			prec, err := model.ParsePrecision(precision)
			if err != nil {
				c.Add("precision", "%q: want fp32 or bf16", precision)
			}
			if c.Len() == 0 {
				switch {
				case cfg.Dim%cfg.Heads != 0:
					c.Add("heads", "%d does not divide --dim %d", cfg.Heads, cfg.Dim)
				case cfg.Heads%cfg.KVHeads != 0:
					c.Add("kv-heads", "%d does not divide --heads %d", cfg.KVHeads, cfg.Heads)
				case cfg.Dim/cfg.Heads%2 != 0:
					c.Add("heads", "%d: the head size --dim/--heads = %d must be even", cfg.Heads, cfg.Dim/cfg.Heads)
				}
				if n := float64(cfg.MaxSeq) * float64(seqs); n > maxBenchTokens {
					c.Add("batch", "%d × --seq %d tokens per step: more than %d", seqs, cfg.MaxSeq, maxBenchTokens)
				}
				if n := benchParams(cfg); n > maxBenchParams {
					c.Add("dim", "%d, --layers %d, --ffn %d and --vocab %d: %.3g parameters, more than %d", cfg.Dim, cfg.Layers, cfg.Hidden, cfg.Vocab, n, int64(maxBenchParams))
				}
			}
			if err := c.Err(); err != nil {
				return err
			}
			o := bench.EngineOptions{Sequences: seqs, SeqLen: cfg.MaxSeq, Reps: reps, Peak: bench.MachinePeak(peak), Recompute: recompute, Precision: prec}
			if gemmSection {
				o.GEMMSizes = []int{512, 1024, 2048}
			}
			rep, err := bench.Engine(cfg, o)
			if err != nil {
				return err
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Layers, "layers", cfg.Layers, "decoder layers")
	f.IntVar(&cfg.Dim, "dim", cfg.Dim, "model width")
	f.IntVar(&cfg.Heads, "heads", cfg.Heads, "attention heads")
	f.IntVar(&cfg.KVHeads, "kv-heads", cfg.KVHeads, "key/value heads")
	f.IntVar(&cfg.Hidden, "ffn", cfg.Hidden, "SwiGLU hidden width")
	f.IntVar(&cfg.Vocab, "vocab", cfg.Vocab, "vocabulary size")
	f.IntVar(&cfg.MaxSeq, "seq", cfg.MaxSeq, "tokens per sequence")
	f.BoolVar(&cfg.TiedEmbeddings, "tied", false, "tie the output head to the embedding")
	f.BoolVar(&cfg.AttentionBias, "qkv-bias", false, "biases on the q, k and v projections (Qwen2)")
	f.IntVar(&seqs, "batch", 8, "sequences per step")
	f.IntVar(&reps, "reps", 10, "timed steps")
	f.BoolVar(&recompute, "recompute", false, "recompute each block's activations in the backward instead of keeping them")
	f.BoolVar(&gemmSection, "gemm", true, "time GEMM at 512³–2048³ first")
	f.StringVar(&precision, "precision", "fp32", "fp32, or bf16: bf16 inputs to the matrix products, float32 accumulation (RLVR_BF16_KERNEL=auto|onednn|sbgemm|emulate|go chooses the kernel)")
	f.Float64Var(&peak, "peak", 0, "machine peak in GFLOP/s (0: estimate from /proc/cpuinfo)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
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

// Bounds on the benchmark model: the tokens of one step (--batch × --seq)
// and its parameters.
const (
	maxBenchTokens = 1 << 20
	maxBenchParams = 1 << 30
)

// benchParams approximates the parameters of a benchmark model: its
// embedding and head, and each layer's attention and MLP matrices.
func benchParams(c model.Config) float64 {
	D, hd := float64(c.Dim), float64(c.Dim/c.Heads)
	attn := D * hd * float64(2*c.Heads+2*c.KVHeads)
	return 2*float64(c.Vocab)*D + float64(c.Layers)*(attn+3*D*float64(c.Hidden))
}
