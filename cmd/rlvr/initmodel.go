package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"rlvr/checkpoint"
	"rlvr/format/hfconfig"
	"rlvr/internal/flagcheck"
)

// initModelCmd is `rlvr init-model`: a randomly initialised Hugging Face
// checkpoint of a named shape around a tokenizer.
func initModelCmd() *cobra.Command {
	var (
		tokDir, shapeName, out string
		seed                   uint64
		force                  bool
		over                   checkpoint.Shape // flag overrides
	)
	var shapes strings.Builder
	for _, s := range checkpoint.Shapes() {
		fmt.Fprintf(&shapes, "  %-14s %s\n", s.Name, s.Description)
	}
	cmd := &cobra.Command{
		Use:   "init-model",
		Short: "Write a randomly initialised model of a named shape around a tokenizer",
		Long: `init-model writes a complete Hugging Face model directory with random weights:
config.json, model.safetensors (float32) and a copy of the tokenizer's files.
The vocabulary is the tokenizer's (added tokens included) and bos_token_id and
eos_token_id come from its tokenizer_config.json, so the model opens, renders
chats and samples like a downloaded one of the same shape. The flags below
--shape override single dimensions of the shape.

Shapes:
` + shapes.String(),
		Example: `  rlvr init-model --tokenizer ../shared/data/tokenizers/qwen3 --shape qwen3-tiny --out /tmp/qwen3-tiny
  rlvr init-model --tokenizer ../shared/data/tokenizers/qwen3 --shape qwen3-0.6b --layers 4 --out /tmp/qwen3-4l`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			var fc flagcheck.Check
			if tokDir == "" {
				fc.Add("tokenizer", "is required")
			} else {
				fc.Dir("tokenizer", tokDir)
			}
			if out == "" {
				fc.Add("out", "is required")
			} else {
				fc.OutDir("out", out, force)
			}
			for _, o := range []struct {
				flag    string
				v       int
				min     int
				max     int
				changed bool
			}{
				{"dim", over.Dim, 1, hfconfig.MaxHiddenSize, f.Changed("dim")},
				{"layers", over.Layers, 1, hfconfig.MaxHiddenLayers, f.Changed("layers")},
				{"heads", over.Heads, 1, hfconfig.MaxAttentionHeads, f.Changed("heads")},
				{"kv-heads", over.KVHeads, 1, hfconfig.MaxAttentionHeads, f.Changed("kv-heads")},
				{"head-dim", over.HeadDim, 0, hfconfig.MaxHeadDim, f.Changed("head-dim")},
				{"hidden", over.Hidden, 1, hfconfig.MaxIntermediateSize, f.Changed("hidden")},
				{"max-seq", over.MaxSeq, 1, hfconfig.MaxPositionEmbeddings, f.Changed("max-seq")},
			} {
				if o.changed {
					fc.IntIn(o.flag, o.v, o.min, o.max)
				}
			}
			shape, err := checkpoint.LookupShape(shapeName)
			if err != nil {
				fc.Add("shape", "%q: unknown (known: %s)", shapeName, strings.Join(checkpoint.ShapeNames(), ", "))
			}
			if err := fc.Err(); err != nil {
				return err
			}
			for _, o := range []struct {
				flag string
				dst  *int
				src  int
			}{
				{"dim", &shape.Dim, over.Dim}, {"layers", &shape.Layers, over.Layers}, {"heads", &shape.Heads, over.Heads},
				{"kv-heads", &shape.KVHeads, over.KVHeads}, {"head-dim", &shape.HeadDim, over.HeadDim},
				{"hidden", &shape.Hidden, over.Hidden}, {"max-seq", &shape.MaxSeq, over.MaxSeq},
			} {
				if f.Changed(o.flag) {
					*o.dst = o.src
				}
			}
			// Outside Qwen3 the head size follows from dim and heads.
			if (f.Changed("dim") || f.Changed("heads")) && !f.Changed("head-dim") && shape.Architecture != hfconfig.Qwen3 {
				shape.HeadDim = 0
			}
			res, err := checkpoint.InitRandom(checkpoint.InitOptions{Tokenizer: tokDir, Shape: shape, Seed: seed, Out: out, Force: force})
			if err != nil {
				return err
			}
			c := res.Config
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %.2fM parameters (d_model %d, %d layers, %d heads / %d KV of %d, SwiGLU %d, vocab %d), seed %d\n",
				out, c.Architecture, float64(res.Params)/1e6, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads,
				c.NumKeyValueHeads, c.HeadDim, c.IntermediateSize, c.VocabSize, seed)
			fmt.Fprintf(cmd.OutOrStdout(), "bos_token_id %s, eos_token_id %s; copied %s\n", tokenIDs(c.BOSTokenIDs), tokenIDs(c.EOSTokenIDs), strings.Join(res.Copied, ", "))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokDir, "tokenizer", "", "directory holding tokenizer.json and tokenizer_config.json")
	f.StringVar(&shapeName, "shape", "qwen3-tiny", "named shape (see above)")
	f.StringVar(&out, "out", "", "directory to write; must not exist or be empty, unless --force")
	f.Uint64Var(&seed, "seed", 1, "initialization seed")
	f.BoolVar(&force, "force", false, "write into a non-empty directory, replacing its model files")
	f.IntVar(&over.Dim, "dim", 0, "override the shape's d_model (hidden_size)")
	f.IntVar(&over.Layers, "layers", 0, "override the number of layers")
	f.IntVar(&over.Heads, "heads", 0, "override the number of attention heads")
	f.IntVar(&over.KVHeads, "kv-heads", 0, "override the number of key/value heads")
	f.IntVar(&over.HeadDim, "head-dim", 0, "override the head size (0: dim/heads)")
	f.IntVar(&over.Hidden, "hidden", 0, "override the SwiGLU width (intermediate_size)")
	f.IntVar(&over.MaxSeq, "max-seq", 0, "override the context length (max_position_embeddings)")
	pathFlags(cmd, "tokenizer", "out")
	return cmd
}

// tokenIDs writes token ids as config.json does: null, a number or a list.
func tokenIDs(ids []int32) string {
	switch len(ids) {
	case 0:
		return "null"
	case 1:
		return fmt.Sprint(ids[0])
	}
	return fmt.Sprint(ids)
}
