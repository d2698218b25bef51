package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"rlvr/bench"
	"rlvr/engine/model"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure rlvr's engine on this machine",
	}
	cmd.AddCommand(benchEngineCmd())
	return cmd
}

func benchEngineCmd() *cobra.Command {
	cfg := model.BenchConfig()
	var (
		seqs, reps int
		peak       float64
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "GEMM GFLOP/s, training tokens/s, share of peak and per-op time",
		Long: `engine times GEMM at 512³–2048³ and a forward+backward+AdamW step of a
Llama-style model (default: 4 layers, d_model 256, 4 heads, SwiGLU 688,
vocab 512, 8 sequences of 128 tokens — the shape
../shared/tools/torch_llama_bench.py measures in PyTorch), and splits the
step's time by op.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := bench.Engine(cfg, seqs, cfg.MaxSeq, reps, bench.MachinePeak(peak), []int{512, 1024, 2048})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprint(cmd.OutOrStdout(), rep.Table())
			return nil
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
	f.IntVar(&seqs, "batch", 8, "sequences per step")
	f.IntVar(&reps, "reps", 10, "timed steps")
	f.Float64Var(&peak, "peak", 0, "machine peak in GFLOP/s (0: estimate from /proc/cpuinfo)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
